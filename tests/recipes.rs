//! The recipe language: every recipe prints to text that parses back to the same recipe, and no
//! text — valid, damaged or random — makes the parser panic.

use lmzip::mix::MixSpec;
use lmzip::model::{mamba1, rwkv7};
use lmzip::params::Scope;
use lmzip::recipe::{
    Action, AdamSettings, Base, Body, Curve, LiveState, LrMul, MAX_BETA, MAX_FOCUS, MAX_LRMUL,
    ModelConfig, ModelKind, OptimizerKind, PERCENT_ONE, Part, Pos, RateSchedule, Recipe, Rule,
    Span, TrainSpec,
};
use proptest::prelude::*;

fn config() -> impl Strategy<Value = ModelConfig> {
    prop_oneof![
        (
            1..64usize,
            1..4usize,
            1..128usize,
            1..17usize,
            1..9usize,
            1..9usize
        )
            .prop_map(|(hidden, layers, inner, state, conv, dt_rank)| {
                ModelConfig::Mamba1(mamba1::Config {
                    hidden,
                    layers,
                    inner,
                    state,
                    conv,
                    dt_rank,
                    ctx: 0,
                    prior: 0,
                })
            }),
        (
            1..4usize,
            1..3usize,
            1..300usize,
            1..40usize,
            1..40usize,
            1..40usize,
            1..40usize
        )
            .prop_map(
                |(heads, layers, intermediate, decay_rank, a_rank, v_rank, g_rank)| {
                    ModelConfig::Rwkv7(rwkv7::Config {
                        hidden: 64 * heads,
                        layers,
                        intermediate,
                        decay_rank,
                        a_rank,
                        v_rank,
                        g_rank,
                    })
                }
            ),
    ]
}

fn base() -> impl Strategy<Value = Base> {
    prop_oneof![
        (config(), any::<u64>()).prop_map(|(config, seed)| Base::Fresh { config, seed }),
        (
            config(),
            any::<[u8; 32]>(),
            proptest::option::of("\\PC{1,24}")
        )
            .prop_map(|(config, sha256, name)| Base::File {
                config,
                sha256,
                name
            }),
    ]
}

/// f32 bit patterns from `lo` to `hi` (both non-negative).
fn between(lo: f32, hi: f32) -> impl Strategy<Value = f32> {
    (lo.to_bits()..=hi.to_bits()).prop_map(f32::from_bits)
}

/// Adam's constants and the rate schedule, over their whole ranges.
fn adam_and_rate() -> impl Strategy<Value = (AdamSettings, RateSchedule)> {
    (
        (between(0.0, MAX_BETA), between(0.0, MAX_BETA)),
        between(1e-30, 1.0),
        any::<bool>(),
        0u32..=1 << 30,
        between(0.0, 1.0),
        between(0.0, 4.0),
        between(0.0, 1.0),
        curve(),
    )
        .prop_map(
            |((beta1, beta2), eps, warm, warmup, decay, power, floor, curve)| {
                let adam = AdamSettings {
                    beta1,
                    beta2,
                    eps,
                    beta2_warmup: warm,
                };
                let rate = RateSchedule {
                    warmup,
                    decay,
                    power,
                    floor,
                    curve,
                };
                (adam, rate)
            },
        )
}

/// No curve, or up to eight points: steps increasing anywhere in u32, factors from 0 to 10.
fn curve() -> impl Strategy<Value = Curve> {
    prop_oneof![
        Just(Curve::FLAT),
        proptest::collection::btree_set(any::<u32>(), 1..=8).prop_flat_map(|steps| {
            let n = steps.len();
            proptest::collection::vec(between(0.0, 10.0), n..=n).prop_map(move |factors| {
                let points: Vec<(u32, f32)> = steps.iter().copied().zip(factors).collect();
                // Factors all 1 read back as no curve.
                match points.iter().all(|&(_, f)| f == 1.0) {
                    true => Curve::FLAT,
                    false => Curve::through(&points).unwrap(),
                }
            })
        }),
    ]
}

fn action(groups: usize) -> impl Strategy<Value = Action> {
    let settings = prop_oneof![
        Just((AdamSettings::DEFAULT, RateSchedule::NONE)),
        adam_and_rate()
    ];
    // Growing windows: the first window and `grow`.
    let growth = prop_oneof![Just((0, 12)), (0usize..=4096, 0usize..=1 << 20)];
    // Learning-rate multipliers: none, or any factor from 0 to the bound on some groups.
    let lrmul = prop_oneof![
        Just(LrMul::ONE),
        proptest::collection::vec(
            proptest::option::of(between(0.0, MAX_LRMUL)),
            groups..=groups
        )
        .prop_map(|factors| {
            let mut mul = LrMul::ONE;
            for (g, x) in factors.into_iter().enumerate() {
                mul.0[g] = x.unwrap_or(1.0);
            }
            mul
        }),
    ];
    // Losses weighed by the coded bits: off, or every f32 bit pattern up to the bound.
    let focus = prop_oneof![
        Just(0.0f32),
        (1u32..=MAX_FOCUS.to_bits()).prop_map(f32::from_bits)
    ];
    let train = (
        1u32..(1 << groups),
        any::<bool>(),
        // Every f32 bit pattern from 0 to 10, and from 0 to about 1e38.
        (0u32..=10f32.to_bits()).prop_map(f32::from_bits),
        (0u32..0x7e00_0000).prop_map(f32::from_bits),
        1usize..=4096,
        0usize..100_000,
        any::<bool>(),
        settings,
        growth,
        (lrmul, focus),
    )
        .prop_map(
            |(
                scope,
                adam,
                lr,
                clip,
                bptt,
                gap,
                carry,
                (settings, rate),
                (first, grow),
                (lrmul, focus),
            )| {
                // Any first window: with gaps or at bptt and above it has no effect, but is kept.
                let bptt0 = first;
                Action::Train(TrainSpec {
                    scope: Scope(scope),
                    optimizer: if adam {
                        OptimizerKind::Adam
                    } else {
                        OptimizerKind::Sgd
                    },
                    lr,
                    stride: bptt + gap,
                    bptt,
                    clip,
                    state: if carry {
                        LiveState::Carry
                    } else {
                        LiveState::Rebuild
                    },
                    adam: settings,
                    rate,
                    bptt0,
                    grow,
                    lrmul,
                    focus,
                })
            },
        );
    prop_oneof![Just(Action::Infer), train]
}

fn pos() -> impl Strategy<Value = Pos> {
    prop_oneof![
        (0u64..1 << 40).prop_map(Pos::Bytes),
        (0u32..=PERCENT_ONE).prop_map(Pos::Percent),
        // Exact multiples of the units print with them.
        (0u64..5000, 0u32..4).prop_map(|(n, u)| Pos::Bytes(n << (10 * u))),
    ]
}

fn rule(groups: usize) -> impl Strategy<Value = Rule> {
    let span = (pos(), prop_oneof![pos(), Just(Pos::End)])
        .prop_map(|(start, end)| Span { start, end })
        .prop_filter("a valid span", |s| s.validate().is_ok());
    let body = prop_oneof![
        action(groups).prop_map(Body::Action),
        proptest::collection::vec(
            (1u64..1 << 30, action(groups)).prop_map(|(len, action)| Part { len, action }),
            1..5
        )
        .prop_map(Body::Repeat),
    ];
    (span, body).prop_map(|(span, body)| Rule { span, body })
}

/// Mixing stages within the limits (or none), with the later keys on or off.
fn mix() -> impl Strategy<Value = Option<MixSpec>> {
    let first = (
        0u32..=8,
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0u32), 12u32..=24],
        any::<bool>(),
        12u32..=20,
        1u32..=64,
    );
    let later = (any::<bool>(), any::<bool>(), any::<bool>(), 0u32..=2);
    // The stage's size for its input: none, `fit` or `cap` (never both).
    let sized = prop_oneof![
        Just((0u32, 0u32)),
        (16u32..=28).prop_map(|v| (v, 0)),
        (16u32..=28).prop_map(|v| (0, v)),
    ];
    // The x86 transform: off, on everywhere, or on a range; with the instruction contexts
    // (`x86=2`) or without.
    let x86 = prop_oneof![
        Just((false, false, 0u32, 0u32)),
        any::<bool>().prop_map(|ops| (true, ops, 0, 0)),
        (0u32..1 << 24, 1u32..1 << 24, any::<bool>()).prop_map(|(from, len, ops)| (
            true,
            ops,
            from,
            from + len
        )),
        (1u32..1 << 24, any::<bool>()).prop_map(|(from, ops)| (true, ops, from, 0)),
    ];
    // `ext` and, as its bits 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576,
    // 2097152 and 4194304, the keys `young`, `follow`, `nibble`, `settle`, `split`, `delta`,
    // `strings`, `long`, `partial` and `fine`.
    let third = (0u32..=8388607, sized, x86);
    proptest::option::of((first, later, third).prop_map(
        |(
            (orders, word, sparse, matcher, sse, table, rate),
            (conf, pword, select, record),
            (ext, (fit, cap), (x86, x86_ops, x86_from, x86_to)),
        )| {
            MixSpec {
                orders,
                word,
                sparse,
                matcher,
                sse,
                table,
                fit,
                cap,
                rate,
                conf,
                pword,
                select,
                record,
                fin: ext & 1 != 0,
                words: ext & 2 != 0,
                decay: ext & 4 != 0,
                nmap: ext & 8 != 0,
                ways: ext & 16 != 0,
                indirect: ext & 32 != 0,
                columns: ext & 64 != 0,
                second: ext & 128 != 0,
                runs: ext & 256 != 0,
                recent: ext & 512 != 0,
                sparse2: ext & 1024 != 0,
                nest: ext & 2048 != 0,
                text: ext & 4096 != 0,
                x86,
                x86_ops,
                x86_from,
                x86_to,
                // A warm start fits one shape of stage, which random stages seldom have: the
                // levels' recipes print and parse it (tests/warm.rs, golden files).
                warm: 0,
                young: ext & 8192 != 0,
                follow: ext & 16384 != 0,
                nibble: ext & 32768 != 0,
                settle: ext & 65536 != 0,
                split: ext & 131072 != 0,
                delta: ext & 262144 != 0,
                strings: ext & 524288 != 0,
                long: ext & 1048576 != 0,
                partial: ext & 2097152 != 0,
                fine: ext & 4194304 != 0,
            }
        },
    ))
}

fn recipe() -> impl Strategy<Value = Recipe> {
    (base(), mix()).prop_flat_map(|(base, mix)| {
        let groups = lmzip::train::trained_groups(base.config().kind()).len();
        proptest::collection::vec(rule(groups), 0..6).prop_map(move |schedule| Recipe {
            base: base.clone(),
            mix,
            schedule,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn printing_then_parsing_gives_the_same_recipe(r in recipe()) {
        prop_assume!(r.validate().is_ok());
        let text = r.to_text();
        let back = Recipe::parse(&text);
        prop_assert_eq!(back.as_ref(), Ok(&r), "{}", text);
        prop_assert_eq!(back.unwrap().to_text(), text);
    }

    #[test]
    fn damaged_recipes_never_panic(r in recipe(), at in any::<prop::sample::Index>(),
                                   junk in "\\PC{0,3}", cut in any::<bool>()) {
        let mut text = r.to_text();
        let mut i = at.index(text.len() + 1);
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        if cut {
            text.truncate(i);
        } else {
            text.insert_str(i, &junk);
        }
        let _ = Recipe::parse(&text);
        let _ = lmzip::levels::default_recipe(ModelKind::Mamba1).edit(&text, None);
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,60}") {
        let _ = Recipe::parse(&text);
        for kind in ModelKind::ALL {
            if let Err(e) = lmzip::levels::default_recipe(kind).edit(&text, None) {
                // The pointer stays inside the text.
                prop_assert!(e.at <= text.len());
                let _ = e.to_string();
            }
        }
    }

    #[test]
    fn grammar_shaped_text_never_panics(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("0"), Just(".."), Just(":"), Just("train"), Just("("), Just(")"),
                Just(","), Just("lr="), Just("bptt="), Just("stride="), Just("%"), Just("K"),
                Just("repeat("), Just("infer"), Just(" "), Just("cfg:"), Just("file:"),
                Just("sha256="), Just("hidden="), Just("9"), Just("1.5"), Just("scope=all"),
            ],
            0..24,
        )
    ) {
        let text: String = parts.concat();
        let _ = Recipe::parse(&text);
        let _ = lmzip::levels::default_recipe(ModelKind::Rwkv7).edit(&text, None);
    }
}

#[test]
fn valid_recipes_parse() {
    let m = lmzip::levels::default_recipe(ModelKind::Mamba1);
    for text in [
        "",
        "mamba1",
        "cfg:",
        "cfg:seed=7",
        "..:infer",
        "0..:train",
        "0..:train()",
        "0..:train( lr = 0.001 , bptt = 16 )",
        "0..1M:train(opt=sgd,lr=1e-2) 1M..:infer",
        "0..12.5%:infer 12.5%..:train(scope=embed+head+bias,clip=0.5)",
        "64K..:repeat(4K:train(bptt=32),12K:infer)",
        "mamba1 cfg:hidden=32,intermediate=48,state=8,conv=3,dt_rank=2 0..:train",
    ] {
        let r = m.edit(text, None).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(Recipe::parse(&r.to_text()).unwrap(), r, "{text}");
    }
}

#[test]
fn invalid_recipes_are_refused_with_a_pointer() {
    let m = lmzip::levels::default_recipe(ModelKind::Mamba1);
    for (text, points_at) in [
        ("0..:train(lr=-1)", "train(lr=-1)"),
        ("0..:train(opt=lbfgs)", "lbfgs"),
        ("0..:train(momentum=0.9)", "momentum"),
        ("0..:train(bptt=0)", "0"),
        ("0..:train(bptt=5000)", "5000"),
        ("0..:train(scope=)", ")"),
        ("5..5:infer", "5..5"),
        ("50%..10%:infer", "50%..10%"),
        ("0..1.5:infer", "1.5"),
        ("0..12.34567%:infer", "12.34567%"),
        ("0..:infer 0..:infer cfg:", "cfg:"),
        ("cfg:hidden=8 cfg:layers=1", "cfg:layers=1"),
        ("mamba1 mamba1", "mamba1"),
        ("0..:train(lr=0.1", ""),
        ("file:", ""),
    ] {
        let err = m.edit(text, None).unwrap_err();
        let shown = &err.text[err.at..(err.at + err.len).min(err.text.len())];
        if !points_at.is_empty() {
            assert!(
                shown.contains(points_at) || points_at.contains(shown) && !shown.is_empty(),
                "{text}: points at '{shown}': {err}"
            );
        }
    }
}
