use super::*;
use crate::model::gradcheck;
use crate::params::Group;

/// Two blocks (so the value residual is exercised), one head, and widths and ranks that are
/// not multiples of the SIMD lane count.
fn small_cfg() -> Config {
    Config {
        hidden: 64,
        layers: 2,
        intermediate: 48,
        decay_rank: 8,
        a_rank: 6,
        v_rank: 5,
        g_rank: 7,
    }
}

/// Moves every weight by uniform noise of `scale`: the initial weights are tiny (±0.02) and
/// many are equal (k_k, k_a, r_k, norms), which leaves most gradients too small for finite
/// differences to check; after spreading, every path carries signal.
fn spread(params: &mut ParamSet, seed: u64, scale: f32) {
    let mut rng = InitRng::new(seed);
    for v in params.data.iter_mut() {
        *v += (rng.next_f32() - 0.5) * 2.0 * scale;
    }
}

fn spread_net(seed: u64) -> (Rwkv7, ParamSet) {
    let (net, mut params) = Rwkv7::new_random(small_cfg(), seed).unwrap();
    spread(&mut params, seed ^ 0x5eed, 0.3);
    (net, params)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The slot of a state tensor, by name.
fn net_entry(net: &Rwkv7, name: &str) -> Slot {
    let entries = net.state_layout.layout.entries();
    entries.iter().find(|e| e.name == name).unwrap().slot
}

fn state_bits(s: &[f32]) -> Vec<u32> {
    bits(s)
}

/// −ln softmax(logits)[target], in f64 (tests are outside the determinism contract).
fn nll(logits: &[f32], target: u8) -> f64 {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &z| m.max(z as f64));
    let sum: f64 = logits.iter().map(|&z| (z as f64 - max).exp()).sum();
    sum.ln() - (logits[target as usize] as f64 - max)
}

/// `(one_hot(target) − p) · scale`: the ascent direction of `scale · ln p(target)`.
fn grad_logits(logits: &[f32], target: u8, scale: f32) -> Vec<f32> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &z| m.max(z as f64));
    let e: Vec<f64> = logits.iter().map(|&z| (z as f64 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter()
        .enumerate()
        .map(|(i, &ei)| ((if i == target as usize { 1.0 } else { 0.0 }) - ei / sum) as f32 * scale)
        .collect()
}

fn run(net: &mut Rwkv7, params: &ParamSet, bytes: &[u8]) -> Vec<f32> {
    let mut state = net.new_state();
    for &b in bytes {
        net.forward(params, &mut state, b, None);
    }
    state
}

/// Mean over the segment of −ln p(target), run from `start` (each pair is input, target).
fn segment_loss(net: &mut Rwkv7, params: &ParamSet, start: &[f32], seg: &[(u8, u8)]) -> f64 {
    let mut state = start.to_vec();
    let mut loss = 0.0f64;
    for &(input, target) in seg {
        loss += nll(net.forward(params, &mut state, input, None), target);
    }
    loss / seg.len() as f64
}

/// The analytic ascent gradient of the segment's mean log-likelihood: TBPTT with a carry
/// across the segment (returned: dL/d(start state)), or, for a single step, the one-step
/// update without a carry.
fn segment_grads(
    net: &mut Rwkv7,
    params: &ParamSet,
    start: &[f32],
    seg: &[(u8, u8)],
    scope: Scope,
    with_carry: bool,
) -> (Vec<f32>, Vec<f32>) {
    assert!(with_carry || seg.len() == 1);
    let mut state = start.to_vec();
    let mut traces = Vec::new();
    let mut gls = Vec::new();
    for &(input, target) in seg {
        let mut tr = net.new_trace();
        let logits = net.forward(params, &mut state, input, Some(&mut tr));
        gls.push(grad_logits(logits, target, 1.0 / seg.len() as f32));
        traces.push(tr);
    }
    let mut grads = params.zeros_like();
    let mut carry = net.new_carry();
    for j in (0..seg.len()).rev() {
        let c = with_carry.then_some(&mut carry);
        net.backward(params, &traces[j], &gls[j], scope, &mut grads, c);
    }
    (grads, carry)
}

/// Finite-difference derivative of the segment loss along `dir` in the parameters of `slot`,
/// as an ascent direction. Richardson extrapolation of central differences at steps `h` and
/// `h/2` cancels the `h²` error term, which allows a step large enough that f32 rounding in
/// the forward pass (about 1e-7 of the loss) stays far below the gradients checked.
fn numeric_grad(
    net: &mut Rwkv7,
    params: &mut ParamSet,
    start: &[f32],
    seg: &[(u8, u8)],
    slot: Slot,
    dir: &[f32],
) -> f64 {
    let base = slot.of(&params.data).to_vec();
    let mut loss_at = |t: f32| {
        for ((p, &b), &d) in slot.of_mut(&mut params.data).iter_mut().zip(&base).zip(dir) {
            *p = b + t * d;
        }
        segment_loss(net, params, start, seg)
    };
    let h = 2e-2f32;
    let central = |plus: f64, minus: f64, step: f32| -(plus - minus) / (2.0 * step as f64);
    let d_h = central(loss_at(h), loss_at(-h), h);
    let d_half = central(loss_at(h / 2.0), loss_at(-h / 2.0), h / 2.0);
    slot.of_mut(&mut params.data).copy_from_slice(&base);
    (4.0 * d_half - d_h) / 3.0
}

fn close(analytic: f64, numeric: f64) -> bool {
    let scale = analytic.abs().max(numeric.abs());
    (analytic - numeric).abs() <= 1e-2 * scale + 1e-4
}

/// Checks every tensor (so every group) against finite differences: the derivative along
/// the tensor's own analytic gradient (which must not vanish), the element with the
/// largest gradient, and one more fixed element.
fn check_every_tensor(
    net: &mut Rwkv7,
    params: &mut ParamSet,
    start: &[f32],
    seg: &[(u8, u8)],
    grads: &[f32],
) {
    let tensors = params.tensors.clone();
    let mut groups_seen = [false; 8];
    for t in &tensors {
        let g = t.slot.of(grads);
        let norm = g
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum::<f64>()
            .sqrt();
        assert!(
            norm > 1e-3,
            "{}: gradient norm {norm} is too small to test",
            t.name
        );
        groups_seen[t.group as usize] = true;
        let unit: Vec<f32> = g.iter().map(|&v| (v as f64 / norm) as f32).collect();
        let along = numeric_grad(net, params, start, seg, t.slot, &unit);
        assert!(
            close(norm, along),
            "{}: |g| = {norm} but the loss moves by {along} along g",
            t.name
        );

        let imax = (0..g.len())
            .max_by(|&i, &j| g[i].abs().total_cmp(&g[j].abs()))
            .unwrap();
        for idx in [imax, t.slot.len * 7 / 13] {
            let mut one_hot = vec![0.0f32; g.len()];
            one_hot[idx] = 1.0;
            let numeric = numeric_grad(net, params, start, seg, t.slot, &one_hot);
            assert!(
                close(g[idx] as f64, numeric),
                "{}[{idx}]: analytic {} vs numeric {numeric}",
                t.name,
                g[idx]
            );
        }
    }
    // Every group but the output bias (which the network does not own) was probed.
    assert_eq!(
        groups_seen,
        [true, true, true, true, true, true, true, false]
    );
}

const TEXT: &[u8] = b"lmzip: the quick brown fox";

#[test]
fn config_validation() {
    let cfg = Config::default();
    cfg.validate().unwrap();
    assert_eq!(cfg.heads(), 2);
    assert!(small_cfg().validate().is_ok());
    let bad = [
        Config {
            hidden: 96,
            ..small_cfg()
        },
        Config {
            hidden: 0,
            ..small_cfg()
        },
        Config {
            hidden: 1 << 15,
            ..small_cfg()
        },
        Config {
            layers: 0,
            ..small_cfg()
        },
        Config {
            layers: 65,
            ..small_cfg()
        },
        Config {
            intermediate: 0,
            ..small_cfg()
        },
        Config {
            decay_rank: 0,
            ..small_cfg()
        },
        Config {
            a_rank: 0,
            ..small_cfg()
        },
        Config {
            v_rank: 0,
            ..small_cfg()
        },
        Config {
            g_rank: 0,
            ..small_cfg()
        },
    ];
    for cfg in bad {
        assert!(cfg.validate().is_err(), "{cfg:?} should be rejected");
        assert!(Rwkv7::new_random(cfg, 1).is_err());
    }
}

/// The configurations whose size estimates are checked against what the network allocates:
/// the default, a small one, and one block (no value-residual path).
fn size_cases() -> [Config; 3] {
    [
        Config::default(),
        small_cfg(),
        Config {
            layers: 1,
            ..small_cfg()
        },
    ]
}

/// The sizes the recipe's limits are computed from are the sizes the network allocates.
#[test]
fn state_and_trace_match_their_size_estimates() {
    for cfg in size_cases() {
        let (net, _) = Rwkv7::new_random(cfg.clone(), 3).unwrap();
        assert_eq!(net.new_state().len(), cfg.state_floats(), "{cfg:?}");
        assert_eq!(net.new_carry().len(), cfg.state_floats(), "{cfg:?}");
        assert_eq!(net.new_trace().len(), cfg.trace_floats(), "{cfg:?}");
    }
    // The default network's sizes, worked out by hand: per block the two shifts and the WKV
    // state; the trace adds the token, four `[C]` vectors of the step, and per block 28 `[C]`
    // vectors, the low-rank hiddens, two `[H]` and two `[F]` vectors and the WKV state (and
    // in blocks after the first the value-residual path's hidden and mix).
    let cfg = Config::default();
    let (c, h) = (128, 2);
    assert_eq!(cfg.state_floats(), 2 * (2 * c + h * N * N));
    let layer = 28 * c + (16 + 16 + 32) + 2 * h + h * N * N + 2 * 512;
    assert_eq!(cfg.trace_floats(), 1 + 4 * c + 2 * layer + (16 + c));
}

/// The state's tensor names and shapes are keys of saved model files.
#[test]
fn state_tensors_keep_their_names_and_shapes() {
    let (net, _) = Rwkv7::new_random(small_cfg(), 3).unwrap();
    let mut state = net.new_state();
    let names = gradcheck::state_names(&net, &state);
    let want: Vec<(String, Vec<usize>)> = (0..2)
        .flat_map(|l| {
            [
                (format!("layers.{l}.att_prev"), vec![64]),
                (format!("layers.{l}.wkv"), vec![1, N, N]),
                (format!("layers.{l}.ffn_prev"), vec![64]),
            ]
        })
        .collect();
    assert_eq!(names, want);
    // The mutable view gives the same tensors, tiling the buffer in order.
    for (k, t) in net.state_tensors_mut(&mut state).into_iter().enumerate() {
        assert_eq!((&t.name, &t.shape), (&want[k].0, &want[k].1));
        t.data.fill(k as f32 + 1.0);
    }
    let mut at = 0;
    for t in net.state_tensors(&state) {
        let k = want.iter().position(|w| w.0 == t.name).unwrap();
        assert_eq!(t.data, &state[at..at + t.data.len()]);
        assert!(t.data.iter().all(|&v| v == k as f32 + 1.0), "{}", t.name);
        at += t.data.len();
    }
    assert_eq!(at, state.len());
}

#[test]
fn registry_matches_param_count_and_layout() {
    for cfg in size_cases() {
        let (_, params) = Rwkv7::new_random(cfg.clone(), 3).unwrap();
        assert_eq!(params.len(), cfg.param_count(), "{cfg:?}");
    }
    let (_, params) = Rwkv7::new_random(small_cfg(), 3).unwrap();
    assert!(
        params
            .find("model.layers.0.attn.v_lora.lora.0.weight")
            .is_none()
    );
    assert_eq!(
        params
            .find("model.layers.1.attn.v_lora.lora.0.weight")
            .unwrap()
            .shape,
        vec![5, 64]
    );
    assert_eq!(
        params
            .find("model.layers.1.attn.w_lora.lora.2.weight")
            .unwrap()
            .shape,
        vec![64, 8]
    );
    assert_eq!(
        params.find("model.layers.1.ffn.key.weight").unwrap().shape,
        vec![48, 64]
    );
    assert!(params.find("model.layers.1.pre_norm.weight").is_none());
    assert!(params.find("model.embeddings.weight").unwrap().sparse_rows);
    assert_eq!(params.find("model.norm.bias").unwrap().group, HEAD);
}

#[test]
fn init_follows_the_seeded_draw_order() {
    let cfg = small_cfg();
    let (c, vc) = (cfg.hidden, VOCAB * cfg.hidden);
    let (_, params) = Rwkv7::new_random(cfg.clone(), 42).unwrap();
    let (_, again) = Rwkv7::new_random(cfg.clone(), 42).unwrap();
    let (_, other) = Rwkv7::new_random(cfg.clone(), 43).unwrap();
    assert_eq!(bits(&params.data), bits(&again.data));
    assert_ne!(bits(&params.data), bits(&other.data));

    // The k-th uniform draw of the generator, as the initialisation scales it.
    let draw = |k: usize, centre: f32| {
        let mut rng = InitRng::new(42);
        let mut v = [0.0f32];
        for _ in 0..k {
            rng.fill_uniform(&mut v, 0.02);
        }
        rng.fill_centered(&mut v, centre, 0.02);
        v[0]
    };
    let first = |name: &str| params.get(params.find(name).unwrap().slot)[0];
    assert_eq!(first("model.embeddings.weight"), draw(0, 0.0));
    assert_eq!(first("lm_head.weight"), draw(vc, 0.0));
    assert_eq!(
        first("model.layers.0.attn.r_proj.weight"),
        draw(2 * vc, 0.0)
    );
    assert_eq!(
        first("model.layers.0.attn.k_proj.weight"),
        draw(2 * vc + c * c, 0.0)
    );
    // Layer 0 draws r, k, v, o, w1, w2, a1, a2, g1, g2 (no value-residual path), then the mixes.
    let l0 = 4 * c * c + 2 * 8 * c + 2 * 6 * c + 2 * 7 * c;
    assert_eq!(first("model.layers.0.attn.x_r"), draw(2 * vc + l0, 0.5));
    let l0_all = l0 + 7 * c + 2 * 48 * c;
    let l1_v1 = 2 * vc + l0_all + 4 * c * c + 2 * 8 * c + 2 * 6 * c;
    assert_eq!(
        first("model.layers.1.attn.v_lora.lora.0.weight"),
        draw(l1_v1, 0.0)
    );

    let all = |name: &str, pred: &dyn Fn(f32) -> bool| {
        params
            .get(params.find(name).unwrap().slot)
            .iter()
            .all(|&v| pred(v))
    };
    assert!(all("model.layers.1.attn.x_g", &|v| (0.48..=0.52).contains(&v)));
    assert!(all("model.layers.0.ffn.x_k", &|v| (0.48..=0.52).contains(&v)));
    for name in ["k_k", "k_a", "r_k", "g_norm.weight"] {
        assert!(all(&format!("model.layers.1.attn.{name}"), &|v| v == 1.0));
    }
    for name in [
        "w_lora.lora.2.bias",
        "a_lora.lora.2.bias",
        "v_lora.lora.2.bias",
        "g_norm.bias",
    ] {
        assert!(all(&format!("model.layers.1.attn.{name}"), &|v| v == 0.0));
    }
    assert!(all("model.layers.0.pre_norm.weight", &|v| v == 1.0));
}

#[test]
fn forward_is_deterministic() {
    let (mut a, params) = Rwkv7::new_random(Config::default(), 7).unwrap();
    let (mut b, params_b) = Rwkv7::new_random(Config::default(), 7).unwrap();
    let (mut sa, mut sb) = (a.new_state(), b.new_state());
    for &t in TEXT {
        let la = bits(a.forward(&params, &mut sa, t, None));
        let lb = bits(b.forward(&params_b, &mut sb, t, None));
        assert_eq!(la, lb);
    }
    assert_eq!(state_bits(&sa), state_bits(&sb));
    // The state moved: the test compares something.
    let wkv = net_entry(&a, "layers.1.wkv");
    assert!(wkv.of(&sa).iter().any(|&v| v != 0.0));
}

#[test]
fn traced_untraced_and_advance_steps_are_identical() {
    let (mut net, params) = spread_net(11);
    let mut traced = net.new_state();
    let mut plain = net.new_state();
    let mut advanced = net.new_state();
    let mut tr = net.new_trace();
    for &t in TEXT {
        let lt = bits(net.forward(&params, &mut traced, t, Some(&mut tr)));
        let lp = bits(net.forward(&params, &mut plain, t, None));
        assert_eq!(lt, lp, "logits differ at byte {t}");
        assert_eq!(state_bits(&traced), state_bits(&plain));
        net.advance(&params, &mut advanced, t);
        assert_eq!(state_bits(&advanced), state_bits(&plain));
    }
}

#[test]
fn one_step_gradients_match_finite_differences() {
    let (mut net, mut params) = spread_net(21);
    // Start from a state built by earlier bytes, held fixed: a one-step update treats the
    // state the step started from as a constant.
    let start = run(&mut net, &params, b"abracadab");
    let seg = [(b'r', b'a')];
    let (grads, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, false);
    check_every_tensor(&mut net, &mut params, &start, &seg, &grads);
}

#[test]
fn tbptt_gradients_match_finite_differences() {
    let (mut net, mut params) = spread_net(31);
    let start = run(&mut net, &params, b"hello ");
    let seg = [(b'w', b'o'), (b'o', b'r'), (b'r', b'l'), (b'l', b'd')];
    let (grads, carry) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
    check_every_tensor(&mut net, &mut params, &start, &seg, &grads);

    // The carry left by the first byte is dL/d(start state): check its largest entries.
    // Every tensor of the state, in every block: att_prev, wkv, ffn_prev.
    let entries = net.state_layout.layout.entries().to_vec();
    assert_eq!(entries.len(), 3 * net.cfg.layers);
    for e in &entries {
        let g = e.slot.of(&carry);
        let (imax, gmax) = g.iter().enumerate().fold((0, 0.0f32), |(bi, bv), (i, &v)| {
            if v.abs() > bv { (i, v.abs()) } else { (bi, bv) }
        });
        assert!(gmax > 1e-3, "{}: carry vanishes", e.name);
        let mut shifted = |d: f32| {
            let mut s = start.clone();
            e.slot.of_mut(&mut s)[imax] += d;
            segment_loss(&mut net, &params, &s, &seg)
        };
        let h = 2e-2f32;
        let d_h = -(shifted(h) - shifted(-h)) / (2.0 * h as f64);
        let d_half = -(shifted(h / 2.0) - shifted(-h / 2.0)) / h as f64;
        let numeric = (4.0 * d_half - d_h) / 3.0;
        assert!(
            close(g[imax] as f64, numeric),
            "carry {}[{imax}]: analytic {} vs numeric {numeric}",
            e.name,
            g[imax]
        );
    }
}

#[test]
fn scope_limits_which_gradients_are_written() {
    let (mut net, params) = spread_net(41);
    let start = run(&mut net, &params, b"scope");
    let seg = [(b' ', b't'), (b't', b'e')];
    let (all, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
    for group in 0..GROUPS.len() as Group {
        let (only, _) = segment_grads(
            &mut net,
            &params,
            &start,
            &seg,
            Scope::NONE.with(group),
            true,
        );
        for t in &params.tensors {
            let got = t.slot.of(&only);
            if t.group == group {
                assert_eq!(
                    bits(got),
                    bits(t.slot.of(&all)),
                    "{} in its own scope",
                    t.name
                );
            } else {
                assert!(
                    got.iter().all(|&v| v == 0.0),
                    "{} written outside its scope",
                    t.name
                );
            }
        }
    }
}

#[test]
fn sgd_tbptt_step_lowers_the_segment_loss() {
    let (mut net, mut params) = Rwkv7::new_random(small_cfg(), 51).unwrap();
    let start = run(&mut net, &params, b"the cat sat on ");
    let seg = [(b't', b'h'), (b'h', b'e'), (b'e', b' '), (b' ', b'm')];
    let before = segment_loss(&mut net, &params, &start, &seg);
    let (grads, _) = segment_grads(&mut net, &params, &start, &seg, Scope::ALL, true);
    let lr = 1e-2f32;
    let norm_sq: f64 = grads.iter().map(|&g| (g as f64) * (g as f64)).sum();
    for (p, &g) in params.data.iter_mut().zip(&grads) {
        *p += lr * g;
    }
    net.refresh(&params);
    let after = segment_loss(&mut net, &params, &start, &seg);
    // To first order the loss falls by lr·‖g‖² along the ascent direction of ln p.
    let predicted = lr as f64 * norm_sq;
    assert!(
        before - after > 0.5 * predicted && before - after < 1.5 * predicted,
        "before {before} after {after} predicted drop {predicted}"
    );
}

/// Walking a segment back layer by layer over all steps gives the bits of walking it back step
/// by step (each step through the per-step kernels): the parameter gradients and the carried
/// state gradient, for every kind of scope, over a segment longer than the batched kernels'
/// blocks of steps.
#[test]
fn backward_over_steps_equals_step_by_step() {
    let (mut net, params) = spread_net(51);
    let scopes = [
        Scope::ALL,
        Scope::NONE.with(ATTN).with(EMBED),
        Scope::NONE.with(FFN).with(ATTN_NORM).with(PRE_NORM),
        Scope::NONE.with(FFN_NORM),
        Scope::NONE.with(HEAD),
    ];
    let text: Vec<u8> = (0..90u32).map(|i| (i * 37 % 251) as u8).collect();
    for steps in [1, 2, 7, 70] {
        gradcheck::assert_backward_steps_equal(&mut net, &params, (&text, 5, steps), &scopes);
    }
}

/// Replaying known bytes layer by layer leaves the state bit for bit where byte-by-byte
/// advances leave it, also across the replay's internal batches.
#[test]
fn replay_over_steps_equals_byte_by_byte() {
    let (mut net, params) = spread_net(61);
    let text: Vec<u8> = (0..150u32).map(|i| (i * 37 % 251) as u8).collect();
    gradcheck::assert_replay_equals_advance(&mut net, &params, &text, &[1, 7, 64, 65, 150]);
}
