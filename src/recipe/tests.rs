//! Tests of the recipe: the language (parsing, editing, printing, errors that point at the
//! bad part) and the checks of a whole recipe (limits, working memory, schedules).

use super::*;
use crate::params::Scope;
use crate::train::optim::AdamSettings;
use crate::train::rate::{Curve, RateSchedule};

#[test]
fn the_mix_item_parses_prints_and_edits() {
    let plain = mamba().edit("mix:off", None).unwrap();
    assert_eq!(plain.mix, None);
    assert!(!plain.to_text().contains("mix"));
    let r = plain.edit("mix:orders=3", None).unwrap();
    assert_eq!(
        r.mix,
        Some(MixSpec {
            orders: 3,
            ..MixSpec::DEFAULT
        })
    );
    let text = r.to_text();
    assert!(
        text.contains(" mix:orders=3,word=1,sparse=1,match=22,sse=1,table=22,rate=3,conf=1,pword=1,select=1,record=2,ext=8191,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,fine=1 0..:"),
        "{text}"
    );
    assert_eq!(Recipe::parse(&text).unwrap(), r);
    // Edits keep the stage unless they name it; its keys edit the stage in force.
    assert_eq!(r.edit("0..:infer", None).unwrap().mix, r.mix);
    let rate = r.edit("mix:rate=5", None).unwrap().mix.unwrap();
    assert_eq!((rate.orders, rate.rate), (3, 5));
    assert_eq!(r.edit("mix:off", None).unwrap().mix, None);
    assert_eq!(
        plain.edit("mix:", None).unwrap().mix,
        Some(MixSpec::DEFAULT)
    );
    for (bad, needle) in [
        ("mix:order=3", "mix has no key 'order'"),
        ("mix:orders=9", "orders 9 is out of range"),
        ("mix:word=2", "0 or 1"),
        ("mix:rate=x", "whole number"),
        ("mix:table=25", "out of range"),
        ("mix:match=5", "out of range"),
        ("mix:ext=8192", "mix ext 8192 is out of range"),
        ("mix:young=2", "mix young is 0 or 1"),
        ("0..:infer mix:", "before the rules"),
        ("mix: mix:", "a second mix:"),
        ("mix: cfg:hidden=8", "the base comes before mix:"),
        ("mix:table=24,match=28,orders=8", "the mixing stage needs"),
    ] {
        let err = plain.edit(bad, None).unwrap_err().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
    // A stored recipe gives every key but those added later (see `MixKey::implicit`), and
    // has no mix: item when there is no stage.
    let partial = text.replace(",rate=3", "");
    let err = Recipe::parse(&partial).unwrap_err().to_string();
    assert!(err.contains("gives every key"), "{err}");
    let base_end = text.find(" mix:").unwrap();
    let off = format!(
        "{} mix:off{}",
        &text[..base_end],
        &text[text.find(" 0..").unwrap()..]
    );
    assert!(Recipe::parse(&off).is_err());
}

/// Level 6's seeded recipe: three blocks of the model's default width, the full stage.
fn mamba() -> Recipe {
    crate::levels::seeded_recipe(ModelKind::Mamba1, 6)
}

#[test]
fn canonical_text_of_a_level_recipe() {
    let r = mamba();
    assert_eq!(
        r.to_text(),
        "mamba1 cfg:hidden=128,layers=3,intermediate=256,state=16,conv=8,dt_rank=8,ctx=14,seed=0 \
         mix:orders=6,word=1,sparse=1,match=22,sse=1,table=23,rate=3,conf=1,pword=1,select=1,record=2,ext=8191,warm=1,young=1,follow=1,nibble=1,settle=1,split=1,delta=1,strings=1,long=1,partial=1,fine=1 \
         0..:train(scope=all,opt=adam,lr=0.0007,stride=16,bptt=16,clip=0,state=carry,b1=0,b2=0.9995,\
         eps=1e-6,b2warm=1,decay=0.0004,floor=0.3,bptt0=4,lrmul=embed*4+head*4+bias*4,\
         focus=1)"
    );
    assert_eq!(Recipe::parse(&r.to_text()).unwrap(), r);
}

#[test]
fn fragments_edit_the_template() {
    let r = mamba()
        .edit(
            "cfg:hidden=32,seed=9 mix:off 0..64K:train(opt=sgd, lr=0.05) 64K..90%:infer \
             90%..:repeat(1K:train(bptt=8,stride=16,scope=head+bias),3K:infer)",
            None,
        )
        .unwrap();
    let ModelConfig::Mamba1(c) = r.config() else {
        panic!()
    };
    assert_eq!((c.hidden, c.inner, c.layers), (32, 64, 3));
    assert_eq!(
        r.to_text(),
        "mamba1 cfg:hidden=32,layers=3,intermediate=64,state=16,conv=8,dt_rank=8,ctx=14,seed=9 \
         0..64K:train(scope=all,opt=sgd,lr=0.05,stride=1,bptt=1,clip=0) 64K..90%:infer \
         90%..:repeat(1K:train(scope=head+bias,opt=adam,lr=0.002,stride=16,bptt=8,clip=0),\
         3K:infer)"
    );
    // From a level, keys left out come from the level's training; a template without any
    // takes the defaults of a bare train.
    let from_level = mamba().edit_from_level("0..:train(opt=sgd)", None).unwrap();
    assert!(
        from_level.to_text().ends_with(
            "0..:train(scope=all,opt=sgd,lr=0.0007,stride=16,bptt=16,clip=0,state=carry,b1=0,\
                        b2=0.9995,eps=1e-6,b2warm=1,decay=0.0004,floor=0.3,bptt0=4,\
                        lrmul=embed*4+head*4+bias*4,focus=1)"
        ),
        "{}",
        from_level.to_text()
    );
    let bare = mamba()
        .edit("0..:infer", None)
        .unwrap()
        .edit_from_level("0..:train(lr=0.01)", None)
        .unwrap();
    assert!(
        bare.to_text()
            .ends_with(" 0..:train(scope=all,opt=adam,lr=0.01,stride=1,bptt=1,clip=0)"),
        "{}",
        bare.to_text()
    );
    // A window given alone keeps segments contiguous, or keeps the template's gaps.
    let gappy = mamba().edit("0..:train(bptt=4,stride=64)", None).unwrap();
    let edited = gappy.edit_from_level("0..:train(bptt=8)", None).unwrap();
    assert!(
        edited.to_text().ends_with("stride=64,bptt=8,clip=0)"),
        "{}",
        edited.to_text()
    );
    assert_eq!(Recipe::parse(&r.to_text()).unwrap(), r);
    // Rules alone keep the base; a base alone keeps the schedule.
    let rules = mamba().edit("..:infer", None).unwrap();
    assert_eq!(rules.base, mamba().base);
    let base = mamba().edit("cfg:layers=1", None).unwrap();
    assert_eq!(base.schedule, mamba().schedule);
}

#[test]
fn errors_point_at_the_bad_part() {
    for (text, bad, needle) in [
        ("cfg:hiden=64", "hiden", "no size 'hiden'"),
        ("0..:train(lr=fast)", "fast", "lr is a decimal"),
        ("0..:train(lr=inf)", "inf", "lr is a decimal"),
        // Bounds are checked on the whole action, and the error points at the value.
        (
            "0..:train(bptt=8,stride=4)",
            "4",
            "stride 4 is out of range (8..",
        ),
        ("0..:train(lr=-1)", "-1", "lr -1 is out of range"),
        (
            "0..:train(bptt=0)",
            "0",
            "bptt 0 is out of range (1..=4096)",
        ),
        ("0..:train(clip=-2)", "-2", "clip -2 must be"),
        ("0..:train(bptt=x)", "x", "bptt is a whole number"),
        ("0..:train(bptt=5000)", "5000", "bptt 5000 is out of range"),
        ("mix:orders=9,rate=5", "9", "mix orders 9 is out of range"),
        ("mix:orders=6,table=8", "8", "mix table 8 is out of range"),
        (
            "cfg:hidden=0,layers=2",
            "0",
            "mamba1 hidden = 0 is out of range",
        ),
        ("0..:train(scope=embed+brain)", "embed+brain", "brain"),
        ("0..:trian", "trian", "expected an action"),
        ("100..50:infer", "100..50", "empty"),
        ("0..150%:infer", "150%", "beyond 100%"),
        ("0..:infer cfg:layers=1", "cfg:layers=1", "before the rules"),
        ("rwkv7 0..:infer", "rwkv7", "the model is mamba1"),
        ("0..:train(lr=0.1,lr=0.2)", "lr", "twice"),
        ("0..:repeat(0:infer)", "0", "above 0"),
        ("0..:infer)", ")", "unexpected"),
        (
            "cfg:hidden=99999999",
            "99999999",
            "hidden = 99999999 is out of range",
        ),
        // A size the text does not write points at the whole base.
        (
            "cfg:hidden=9000",
            "cfg:hidden=9000",
            "mamba1 intermediate = 18000 is out of range",
        ),
    ] {
        let err = mamba().edit(text, None).unwrap_err();
        let shown = &err.text[err.at..err.at + err.len];
        assert_eq!(shown, bad, "{text}: {err}");
        assert!(err.message.contains(needle), "{text}: {err}");
    }
    let err = mamba().edit("cfg:hiden=64", None).unwrap_err().to_string();
    assert!(err.contains("    cfg:hiden=64\n        ^^^^^"), "{err}");
}

#[test]
fn the_train_key_table_gives_defaults_order_and_messages() {
    for kind in ModelKind::ALL {
        let t = TrainSpec::defaults(kind);
        let groups = crate::train::trained_groups(kind);
        let expected = TrainSpec {
            scope: Scope::all_of(groups),
            optimizer: OptimizerKind::Adam,
            lr: 0.002,
            stride: 1,
            bptt: 1,
            clip: 0.0,
            state: LiveState::Rebuild,
            adam: AdamSettings::DEFAULT,
            rate: RateSchedule::NONE,
            bptt0: 0,
            grow: 12,
            lrmul: LrMul::ONE,
            focus: 0.0,
        };
        assert_eq!(t, expected);
        t.validate(kind).unwrap();
        let text = t.to_text(kind);
        assert_eq!(text, "scope=all,opt=adam,lr=0.002,stride=1,bptt=1,clip=0");
    }
    let err = mamba().edit("0..:train(bppt=8)", None).unwrap_err();
    assert_eq!(
        err.message,
        "train has no key 'bppt' (keys: scope, opt, lr, stride, bptt, clip, state, b1, b2, eps, \
         b2warm, warmup, decay, power, floor, curve, bptt0, grow, lrmul, focus)"
    );
    let stored = mamba().to_text().replace(",lr=0.0007", "");
    let err = Recipe::parse(&stored).unwrap_err();
    assert_eq!(
        err.message,
        "a stored recipe gives every train key; missing: lr"
    );
}

#[test]
fn optimizer_and_rate_keys_read_print_and_keep_old_texts() {
    let r = mamba()
        .edit(
            "0..:train(bptt=16,b1=0,b2=0.9995,eps=1e-6,b2warm=1,warmup=100,decay=4e-4,\
             power=0.75,floor=0.3,bptt0=4,grow=20)",
            None,
        )
        .unwrap();
    let Some(Action::Train(t)) = r.actions().next().cloned() else {
        panic!("a train action")
    };
    let adam = AdamSettings {
        beta1: 0.0,
        beta2: 0.9995,
        eps: 1e-6,
        beta2_warmup: true,
    };
    let rate = RateSchedule {
        warmup: 100,
        decay: 4e-4,
        power: 0.75,
        floor: 0.3,
        curve: Curve::FLAT,
    };
    assert_eq!((t.adam, t.rate, t.bptt0, t.grow), (adam, rate, 4, 20));
    let text = r.to_text();
    assert!(
        text.ends_with(
            ",clip=0,b1=0,b2=0.9995,eps=1e-6,b2warm=1,warmup=100,decay=0.0004,power=0.75,\
             floor=0.3,bptt0=4,grow=20)"
        ),
        "{text}"
    );
    let back = Recipe::parse(&text).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.to_text(), text);
    // At their implicit values the keys are left out, so old texts print as they did.
    let plain = mamba()
        .edit(
            "0..:train(lr=0.0005,bptt=16,b1=0.9,b2=0.999,eps=0.00000001,b2warm=0,warmup=0,\
             decay=0,power=0.5,floor=0)",
            None,
        )
        .unwrap();
    // The default level's rule before these keys existed.
    let old_default = mamba().edit("0..:train(lr=0.0005,bptt=16)", None).unwrap();
    assert_eq!(plain, old_default);
    assert!(
        plain.to_text().ends_with(",bptt=16,clip=0)"),
        "{}",
        plain.to_text()
    );
}

#[test]
fn windows_grow_only_below_bptt_and_with_contiguous_segments() {
    let spec = |bptt, stride, bptt0| TrainSpec {
        bptt,
        stride,
        bptt0,
        grow: 12,
        ..TrainSpec::defaults(ModelKind::Mamba1)
    };
    let growing = spec(16, 16, 4);
    assert!(growing.grows());
    assert_eq!([growing.window_at(0), growing.window_at(15)], [4, 5]);
    assert_eq!(growing.window_at(1_000_000), 16);
    for fixed in [
        spec(16, 32, 4),
        spec(16, 16, 16),
        spec(8, 8, 20),
        spec(16, 16, 0),
    ] {
        assert!(!fixed.grows());
        assert_eq!(fixed.window_at(0), fixed.bptt);
        fixed.validate(ModelKind::Mamba1).unwrap();
    }
}

#[test]
fn optimizer_and_rate_keys_out_of_range_are_named() {
    for (text, message) in [
        ("b1=1", "b1 1 is out of range (0..=0.99999)"),
        ("b2=-0.1", "b2 -0.1 is out of range (0..=0.99999)"),
        ("eps=0", "eps 0e0 is out of range (1e-30..=1)"),
        ("b2warm=2", "b2warm is 0 or 1"),
        ("warmup=-1", "warmup is a whole number"),
        (
            "warmup=2000000000",
            "warmup 2000000000 is out of range (0..=1073741824)",
        ),
        ("decay=2", "decay 2 is out of range (0..=1)"),
        ("power=5", "power 5 is out of range (0..=4)"),
        ("floor=1.5", "floor 1.5 is out of range (0..=1)"),
        ("grow=2000000", "grow 2000000 is out of range (0..=1048576)"),
        ("bptt=8,bptt0=5000", "bptt0 5000 is out of range (0..=4096)"),
    ] {
        let recipe = format!("0..:train({text})");
        let err = mamba().edit(&recipe, None).unwrap_err();
        assert_eq!(err.message, message, "{recipe}");
        let value = text.rsplit('=').next().unwrap();
        assert_eq!(&recipe[err.at..err.at + err.len], value, "{recipe}");
    }
}

#[test]
fn schedule_bounds_are_shared_by_the_parser_and_validate() {
    let part = "1K:infer,";
    let many_parts = format!("0..:repeat({}1:infer)", part.repeat(MAX_PARTS));
    let err = mamba().edit(&many_parts, None).unwrap_err();
    assert_eq!(err.at, many_parts.rfind("1:infer").unwrap(), "{err}");
    assert_eq!(err.message, "a repeat has 1 to 64 parts");
    let zero = "0..:repeat(4:infer,0K:infer)";
    let err = mamba().edit(zero, None).unwrap_err();
    assert_eq!(&zero[err.at..err.at + err.len], "0K", "{err}");
    let long = format!("0..:repeat({}:infer,1:infer)", u64::MAX);
    let err = mamba().edit(&long, None).unwrap_err();
    assert_eq!(&long[err.at..], &long[4..], "{err}");
    assert_eq!(err.message, "the repeat's cycle is too long");
    let many_rules = vec!["0..1:infer"; MAX_RULES + 1].join(" ");
    let err = mamba().edit(&many_rules, None).unwrap_err();
    assert_eq!(err.at, many_rules.len() - "0..1:infer".len(), "{err}");
    assert_eq!(err.message, "the schedule has more than 256 rules");
    // A recipe made in code meets the same checks, with the rule named.
    let mut r = mamba();
    r.schedule[0].body = Body::Repeat(vec![Part {
        len: 0,
        action: Action::Infer,
    }]);
    let err = format!("{:#}", r.validate().unwrap_err());
    assert_eq!(
        err,
        "rule 1: a repeat part's length is a number of bytes above 0"
    );
    r.schedule = vec![r.schedule[0].clone(); MAX_RULES + 1];
    let err = r.validate().unwrap_err().to_string();
    assert_eq!(err, "the schedule has more than 256 rules");
}

#[test]
fn complete_recipes_must_give_every_key() {
    let full = mamba().to_text();
    for (from, to) in [
        (",seed=0", ""),
        ("dt_rank=8,", ""),
        (",clip=0", ""),
        ("mamba1 ", ""),
        ("mamba1", "gpt9"),
    ] {
        let bad = full.replacen(from, to, 1);
        assert!(Recipe::parse(&bad).is_err(), "{bad}");
    }
}

#[test]
fn model_file_bases_print_their_hash_and_name() {
    let file = Base::File {
        config: ModelConfig::default_for(ModelKind::Rwkv7),
        sha256: [0xab; 32],
        name: Some("my model, v2.safetensors".into()),
    };
    let r = crate::levels::default_recipe(ModelKind::Rwkv7)
        .edit("file:whatever.st 0..:train(lr=0.001)", Some(&file))
        .unwrap();
    let text = r.to_text();
    assert!(
        text.starts_with(&format!(
            "rwkv7 file:sha256={},name=my%20model%2C%20v2.safetensors,hidden=128",
            "ab".repeat(32)
        )),
        "{text}"
    );
    assert_eq!(Recipe::parse(&text).unwrap(), r);
    assert_eq!(file_path("file:a/b.st 0..:infer"), Some("a/b.st"));
    assert_eq!(file_path(&text), None);
    // The hash form must match the given file.
    let other = Base::File {
        config: ModelConfig::default_for(ModelKind::Rwkv7),
        sha256: [0xcd; 32],
        name: None,
    };
    assert!(
        crate::levels::default_recipe(ModelKind::Rwkv7)
            .edit(&text, Some(&other))
            .is_err()
    );
}

#[test]
fn percent_positions_resolve_by_rounding_down() {
    let r = crate::levels::default_recipe(ModelKind::Mamba1)
        .edit("0..50%:train() 50%..99.5%:infer", None)
        .unwrap();
    assert!(!r.is_resolved());
    assert_eq!(r.resolve(None), Err(UnresolvedPercent));
    let resolved = r.resolve(Some(1001)).unwrap();
    assert!(resolved.is_resolved());
    assert_eq!(resolved.schedule[0].span.end, Pos::Bytes(500));
    assert_eq!(resolved.schedule[1].span.start, Pos::Bytes(500));
    assert_eq!(resolved.schedule[1].span.end, Pos::Bytes(995));
}

#[test]
fn stride_below_bptt_and_empty_scope_are_refused() {
    let kind = ModelKind::Mamba1;
    let mut t = TrainSpec::defaults(kind);
    t.bptt = 8;
    t.stride = 4;
    assert!(t.validate(kind).is_err());
    t.stride = 8;
    t.validate(kind).unwrap();
    t.scope = Scope::NONE;
    assert!(t.validate(kind).is_err());
}

/// The default recipe edited by `text` (sizes, schedule).
fn edited(kind: ModelKind, text: &str) -> Recipe {
    crate::levels::default_recipe(kind)
        .edit(text, None)
        .unwrap()
}

/// The limits leave the defaults far behind and stop what would need gigabytes.
#[test]
fn size_limits_are_far_above_the_defaults() {
    for kind in ModelKind::ALL {
        let longest = format!("0..:train(bptt={MAX_BPTT},stride={MAX_BPTT})");
        let r = edited(kind, &longest);
        r.validate().unwrap();
        assert!(working_floats(&r) * 4 < MAX_WORKING_BYTES / 16, "{kind:?}");
    }
    let mut wide = crate::levels::default_recipe(ModelKind::Mamba1);
    if let Base::Fresh { config, .. } = &mut wide.base {
        config.set_size(Some(4096), Some(4));
    }
    let err = wide.validate().unwrap_err().to_string();
    assert!(
        err.contains("parameters") && err.contains("at most"),
        "{err}"
    );
}

/// Few parameters, but a TBPTT window whose 64 traces of a wide SSM state each weigh as
/// much as the model: refused whichever rule of the schedule asks for it.
#[test]
fn working_memory_counts_every_action_of_the_schedule() {
    let deep_state = "cfg:hidden=1,layers=1,intermediate=16384,state=256,conv=64,dt_rank=1,seed=0";
    let kind = ModelKind::Mamba1;
    edited(kind, &format!("{deep_state} 0..:infer"))
        .validate()
        .unwrap();
    edited(kind, &format!("{deep_state} 0..:train(opt=sgd,bptt=1)"))
        .validate()
        .unwrap();
    let long = format!("train(opt=sgd,bptt={MAX_BPTT},stride={MAX_BPTT})");
    for schedule in [
        format!("0..:{long}"),
        format!("0..1000:infer 1000..:{long}"),
        format!("0..:repeat(100:infer,{MAX_BPTT}:{long})"),
    ] {
        // The same schedule on a small model passes; on this one, it is refused.
        let r = Recipe {
            schedule: edited(kind, &format!("cfg:hidden=16 {schedule}")).schedule,
            ..edited(kind, &format!("{deep_state} 0..:infer"))
        };
        let err = r.validate().unwrap_err().to_string();
        assert!(err.contains("working memory"), "{schedule}: {err}");
        let err = crate::levels::default_recipe(kind)
            .edit(&format!("{deep_state} {schedule}"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("working memory"), "{schedule}: {err}");
    }

    // What rules keep side by side is summed (moments once any rule steps Adam, the
    // one-step trace once any rule takes one-step updates); segments, one at a time, count
    // as the largest.
    let floats = |rules: &str| working_floats(&edited(kind, &format!("cfg:hidden=64 {rules}")));
    let infer = floats("0..:infer");
    let sgd1 = floats("0..:train(opt=sgd,bptt=1)");
    let adam1 = floats("0..:train(opt=adam,bptt=1)");
    let sgd8 = floats("0..:train(opt=sgd,bptt=8,stride=8)");
    let sgd64 = floats("0..:train(opt=sgd,bptt=64,stride=64)");
    assert!(infer < sgd1 && sgd1 < adam1 && sgd8 < sgd64);
    assert_eq!(
        floats("0..10:train(opt=sgd,bptt=1) 10..:train(opt=adam,bptt=8,stride=8)"),
        adam1 + (sgd8 - infer),
    );
    assert_eq!(
        floats("0..10:train(opt=sgd,bptt=64,stride=64) 10..:train(opt=sgd,bptt=8,stride=8)"),
        sgd64,
    );
}

#[test]
fn trained_phases_follow_stride_and_window() {
    let mut t = TrainSpec::defaults(ModelKind::Mamba1);
    t.stride = 3;
    let one: Vec<bool> = (0..7).map(|p| t.trains(p)).collect();
    assert_eq!(one, [true, false, false, true, false, false, true]);
    t.bptt = 2;
    t.stride = 5;
    let seg: Vec<bool> = (0..7).map(|p| t.trains(p)).collect();
    assert_eq!(seg, [true, true, false, false, false, true, true]);
}

#[test]
fn the_state_key_is_printed_only_when_it_carries() {
    let carry = mamba()
        .edit("0..:train(bptt=16,state=carry)", None)
        .unwrap();
    let Some(Action::Train(t)) = carry.actions().next() else {
        panic!()
    };
    assert_eq!(t.state, LiveState::Carry);
    let text = carry.to_text();
    assert!(
        text.ends_with(
            "0..:train(scope=all,opt=adam,lr=0.002,stride=16,bptt=16,clip=0,state=carry)"
        ),
        "{text}"
    );
    assert_eq!(Recipe::parse(&text).unwrap(), carry);
    // A stored recipe without the key (every file written before it) means rebuild, and an
    // explicit rebuild prints as such a recipe.
    let rebuild = mamba()
        .edit("0..:train(bptt=16,state=rebuild)", None)
        .unwrap();
    let old = rebuild.to_text();
    assert!(!old.contains("state=rebuild"), "{old}");
    assert_eq!(Recipe::parse(&old).unwrap(), rebuild);
    assert_eq!(
        Recipe::parse(&old.replace("clip=0)", "clip=0,state=rebuild)")).unwrap(),
        rebuild
    );
    let err = mamba().edit("0..:train(state=keep)", None).unwrap_err();
    assert_eq!(&err.text[err.at..err.at + err.len], "keep");
    assert!(err.message.contains("rebuild, carry"), "{err}");
}

#[test]
fn lrmul_reads_prints_in_group_order_and_keeps_old_texts() {
    for (kind, groups) in [
        (ModelKind::Mamba1, "embed*3+head*2+bias*2.5"),
        (ModelKind::Rwkv7, "embed*3+attn*0.5+head*2+bias*2.5"),
    ] {
        // Written in any order, printed in the model's group order; a factor of 1 is left out.
        let reversed: Vec<&str> = groups.split('+').rev().collect();
        let written = format!("0..:train(lrmul={}+ffn_norm*1)", reversed.join("+"));
        let written = match kind {
            ModelKind::Mamba1 => written.replace("ffn_norm", "layer_norm"),
            ModelKind::Rwkv7 => written,
        };
        let r = crate::levels::default_recipe(kind)
            .edit(&written, None)
            .unwrap();
        let Some(Action::Train(t)) = r.actions().next().cloned() else {
            panic!("a train action")
        };
        let names = crate::train::trained_groups(kind);
        let at = |name: &str| {
            t.lrmul
                .of(names.iter().position(|g| *g == name).unwrap() as u8)
        };
        assert_eq!((at("embed"), at("head"), at("bias")), (3.0, 2.0, 2.5));
        assert_eq!(at(names[1]), 1.0);
        let text = r.to_text();
        assert!(text.contains(&format!(",lrmul={groups})")), "{text}");
        let back = Recipe::parse(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.to_text(), text);

        // Without the key, with `lrmul=1` or with every factor 1: the recipe of old texts.
        // (As --recipe edits a level: keys left out take the level's values.)
        let level = crate::levels::default_recipe(kind);
        for same in ["0..:train(lrmul=1)", "0..:train(lrmul=head*1+bias*1)"] {
            let r = level.edit_from_level(same, None).unwrap();
            assert_eq!(r, level, "{same}");
            assert_eq!(r.to_text(), level.to_text());
            assert!(!r.to_text().contains("lrmul"));
        }
        let head = level
            .edit_from_level("0..:train(lrmul=head*2)", None)
            .unwrap();
        assert_eq!(
            head.to_text(),
            level
                .to_text()
                .replace(",bptt0=4,focus=1)", ",bptt0=4,lrmul=head*2,focus=1)")
        );
    }
}

#[test]
fn curve_reads_prints_stores_and_keeps_old_texts() {
    let level = crate::levels::default_recipe(ModelKind::Mamba1);
    let r = level
        .edit_from_level("0..:train(curve=0*2+5000*1.0+20000*0.25)", None)
        .unwrap();
    let Some(Action::Train(t)) = r.actions().next().cloned() else {
        panic!("a train action")
    };
    let points: Vec<(u32, f32)> = t.rate.curve.points().collect();
    assert_eq!(points, [(0, 2.0), (5000, 1.0), (20000, 0.25)]);
    let text = r.to_text();
    assert!(
        text.contains(",floor=0.43,curve=0*2+5000*1+20000*0.25,bptt0=4,focus=1)"),
        "{text}"
    );
    let back = Recipe::parse(&text).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.to_text(), text);
    // `curve=1`, or points all at 1, is no curve: the level's own text, with no `curve` in it.
    for flat in ["1", "0*1", "10*1+500*1"] {
        let same = level
            .edit_from_level(&format!("0..:train(curve={flat})"), None)
            .unwrap();
        assert_eq!(same, level, "{flat}");
        assert!(!same.to_text().contains("curve"));
    }
}

#[test]
fn curve_errors_name_the_problem_and_point_at_the_value() {
    for (value, message) in [
        ("0*2+0*1", "curve steps must increase (0 after 0)"),
        ("9*2+3*1", "curve steps must increase (3 after 9)"),
        (
            "0*10.5",
            "curve point 0*10.5: the factor is out of range (0..=10)",
        ),
        (
            "0*-1",
            "curve point 0*-1: the factor is out of range (0..=10)",
        ),
        (
            "2",
            "curve is STEP*FACTOR points joined by + (like 0*2+5000*1), steps increasing, or 1",
        ),
        (
            "1*1+2*1+3*1+4*1+5*1+6*1+7*1+8*1+9*1",
            "a curve has at most 8 points",
        ),
    ] {
        let err = crate::levels::default_recipe(ModelKind::Mamba1)
            .edit_from_level(&format!("0..:train(curve={value})"), None)
            .unwrap_err();
        assert_eq!(err.message, message, "{value}");
        assert_eq!(&err.text[err.at..err.at + err.len], value);
    }
}

#[test]
fn lrmul_errors_name_the_problem_and_point_at_the_value() {
    let groups = "embed, layer_norm, mixer_conv, mixer_ssm, mixer_proj, head, bias";
    for (value, message) in [
        (
            "hed*2",
            format!("unknown training group 'hed' in lrmul (groups of this model: {groups})"),
        ),
        (
            "all*2",
            format!("unknown training group 'all' in lrmul (groups of this model: {groups})"),
        ),
        ("head*2+head*3", "lrmul names 'head' twice".into()),
        (
            "head",
            "lrmul is GROUP*FACTOR terms joined by + (like head*2+bias*2), or 1".into(),
        ),
        (
            "2",
            "lrmul is GROUP*FACTOR terms joined by + (like head*2+bias*2), or 1".into(),
        ),
        (
            "head*2+",
            "lrmul is GROUP*FACTOR terms joined by + (like head*2+bias*2), or 1".into(),
        ),
        (
            "head*x",
            "the factor of an lrmul group is a decimal number (like 0.002 or 2e-3)".into(),
        ),
        (
            "head*inf",
            "the factor of an lrmul group is a decimal number (like 0.002 or 2e-3)".into(),
        ),
        (
            "head*1e39",
            "the factor of an lrmul group is a decimal number (like 0.002 or 2e-3)".into(),
        ),
        (
            "head*101",
            "lrmul head*101 is out of range (0..=100)".into(),
        ),
        ("bias*-2", "lrmul bias*-2 is out of range (0..=100)".into()),
    ] {
        let recipe = format!("0..:train(lrmul={value})");
        let err = mamba().edit(&recipe, None).unwrap_err();
        assert_eq!(err.message, message, "{recipe}");
        assert_eq!(&recipe[err.at..err.at + err.len], value, "{recipe}");
    }
    // rwkv7's groups are its own.
    let rwkv = crate::levels::default_recipe(ModelKind::Rwkv7);
    let err = rwkv.edit("0..:train(lrmul=mixer_ssm*2)", None).unwrap_err();
    assert!(err.message.contains("attn, ffn, head, bias"), "{err}");
    rwkv.edit("0..:train(lrmul=ffn*2)", None).unwrap();

    // A factor of 0 and -0 read as the same; the bounds themselves pass.
    let zero = mamba()
        .edit("0..:train(lrmul=head*0+bias*100)", None)
        .unwrap();
    let minus = mamba()
        .edit("0..:train(lrmul=head*-0+bias*100)", None)
        .unwrap();
    assert_eq!(zero.to_text(), minus.to_text());
    assert!(zero.to_text().contains(",lrmul=head*0+bias*100)"));

    // A stored recipe (a header) with a bad value is refused, never a panic.
    let stored = zero.to_text();
    Recipe::parse(&stored).unwrap();
    for bad in [
        "head*100.5",
        "head*NaN",
        "head*",
        "*2",
        "head*2*2",
        "nothing*2",
        "head*2++bias*2",
    ] {
        let text = stored.replace("head*0+bias*100", bad);
        assert!(Recipe::parse(&text).is_err(), "{text}");
    }

    // Specs built in code: factors out of range, and factors for groups the model lacks.
    let kind = ModelKind::Mamba1;
    let mut t = TrainSpec::defaults(kind);
    t.lrmul.0[5] = f32::NAN;
    assert!(t.validate(kind).is_err());
    t.lrmul = LrMul::ONE;
    t.lrmul.0[7] = 2.0;
    let err = t.validate(kind).unwrap_err().to_string();
    assert_eq!(err, "lrmul sets groups that mamba1 does not have");
    // Every model's groups fit the table.
    for kind in ModelKind::ALL {
        assert!(crate::train::trained_groups(kind).len() <= crate::train::optim::MAX_GROUPS);
    }
}

#[test]
fn focus_reads_prints_and_weighs_by_the_coded_bits() {
    let focused = mamba().edit("0..:train(focus=1.5)", None).unwrap();
    assert!(
        focused.to_text().contains(",focus=1.5)"),
        "{}",
        focused.to_text()
    );
    let off = mamba().edit("0..:train(focus=-0)", None).unwrap();
    assert!(!off.to_text().contains("focus"), "{}", off.to_text());
    for bad in ["-1", "65", "inf", "x"] {
        let err = mamba()
            .edit(&format!("0..:train(focus={bad})"), None)
            .unwrap_err();
        assert!(err.message.contains("focus"), "{bad}: {}", err.message);
    }
    let spec = |focus: f32| TrainSpec {
        focus,
        ..TrainSpec::defaults(ModelKind::Mamba1)
    };
    // Full weight from `focus` bits on, proportional below, never under the floor.
    assert_eq!(spec(1.0).loss_weight(Some(3.0)), 1.0);
    assert_eq!(spec(1.0).loss_weight(Some(0.5)), 0.5);
    assert_eq!(spec(2.0).loss_weight(Some(0.5)), 0.25);
    assert_eq!(spec(1.0).loss_weight(Some(0.01)), FOCUS_FLOOR as f32);
    assert_eq!(spec(1.0).loss_weight(None), 1.0);
    assert_eq!(spec(0.0).loss_weight(Some(0.01)), 1.0);
}

/// A text gives rules of its own when it has a schedule, whatever else it edits; one that does
/// not parse gives none.
#[test]
fn a_text_names_rules_when_it_has_a_schedule() {
    for text in [
        "0..:infer",
        "0..:train(lr=0.003)",
        "cfg:hidden=32 mix:table=16 0..50%:train 50%..:infer",
        "mamba1 0..:repeat(4K:train,12K:infer)",
    ] {
        assert!(names_rules(text), "{text}");
    }
    for text in [
        "",
        "cfg:hidden=32",
        "mix:table=16",
        "rwkv7 cfg:layers=2",
        "0..:frobnicate",
    ] {
        assert!(!names_rules(text), "{text}");
    }
}
