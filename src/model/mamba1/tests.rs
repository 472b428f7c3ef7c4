//! Tests of the Mamba-1 network: sizes, determinism, gradients against finite differences.

use super::*;
use crate::model::gradcheck::{self, check_probe};

fn small() -> Config {
    Config {
        hidden: 16,
        layers: 2,
        inner: 24,
        state: 4,
        conv: 3,
        dt_rank: 4,
        ctx: 0,
        prior: 0,
    }
}

/// `small()` reading context inputs too (three tables of 256 rows).
fn small_ctx() -> Config {
    Config { ctx: 8, ..small() }
}

/// A small network whose weights are pushed away from their tidy initial values, so that
/// every gradient is clearly non-zero and a wrong term shows.
fn busy_net() -> (Mamba1, ParamSet) {
    busy(small())
}

fn busy(cfg: Config) -> (Mamba1, ParamSet) {
    let (mut net, mut params) = Mamba1::new_random(cfg, 7).unwrap();
    let mut rng = InitRng::new(99);
    for t in &params.tensors {
        // Projections large enough that the SSM input, B, C and Δ are of order one.
        let spread = if t.name.contains("proj") { 1.5 } else { 0.5 };
        for v in t.slot.of_mut(&mut params.data) {
            *v += (rng.next_f32() - 0.5) * spread;
        }
    }
    net.refresh(&params);
    (net, params)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The state's tensors keep the names and shapes that model files resuming a stream use.
#[test]
fn state_tensors_are_named_per_layer() {
    let (net, _) = Mamba1::new_random(small(), 1).unwrap();
    let mut state = net.new_state();
    let names = gradcheck::state_names(&net, &state);
    assert_eq!(
        names,
        [
            ("layers.0.conv".to_string(), vec![24, 2]),
            ("layers.0.ssm".to_string(), vec![24, 4]),
            ("layers.1.conv".to_string(), vec![24, 2]),
            ("layers.1.ssm".to_string(), vec![24, 4]),
        ]
    );
    for (n, t) in net.state_tensors_mut(&mut state).into_iter().enumerate() {
        t.data.fill(n as f32);
    }
    assert_eq!(state[24 * 2], 1.0);
    assert_eq!(state[24 * 6], 2.0);
}

/// The sizes the recipe's limits are computed from are the sizes the network allocates.
#[test]
fn registry_state_and_trace_match_their_size_formulas() {
    let odd = Config {
        hidden: 5,
        layers: 3,
        inner: 7,
        state: 2,
        conv: 5,
        dt_rank: 3,
        ctx: 0,
        prior: 0,
    };
    for cfg in [Config::default(), small(), odd, small_ctx()] {
        let (net, params) = Mamba1::new_random(cfg.clone(), 1).unwrap();
        assert_eq!(params.len(), cfg.param_count(), "{cfg:?}");
        assert_eq!(net.new_state().len(), cfg.state_floats(), "{cfg:?}");
        assert_eq!(net.new_trace().len(), cfg.trace_floats(), "{cfg:?}");
        // Per block: conv window, SSM state; per byte, the SSM's three [I, S] tensors
        // and the block's vectors, plus the token and two [H] vectors.
        let (h, i, s, k, r) = (cfg.hidden, cfg.inner, cfg.state, cfg.conv, cfg.dt_rank);
        // With context inputs, the history in the state and the rows in the trace.
        let (history, rows) = match cfg.ctx {
            0 => (0, 0),
            _ => (context::HISTORY, context::TABLES),
        };
        assert_eq!(
            cfg.state_floats(),
            history + cfg.layers * (i * (k - 1) + i * s)
        );
        let layer = 2 * h + 11 * i + i * (k - 1) + (r + 2 * s) + 3 * i * s;
        assert_eq!(cfg.trace_floats(), cfg.layers * layer + 2 * h + 1 + rows);
    }
}

fn logits_bits(
    net: &mut Mamba1,
    params: &ParamSet,
    state: &mut Vec<f32>,
    t: u8,
    tr: Option<&mut Vec<f32>>,
) -> Vec<u32> {
    net.forward(params, state, t, tr)
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

#[test]
fn config_default_validates_and_bad_sizes_are_refused() {
    Config::default().validate().unwrap();
    let mut c = small();
    c.state = 0;
    assert!(c.validate().is_err());
    c = small();
    c.hidden = crate::model::MAX_DIM + 1;
    assert!(c.validate().is_err());
}

#[test]
fn forward_is_deterministic_and_traced_equals_untraced() {
    let (mut net, params) = busy_net();
    let (mut s1, mut s2, mut s3) = (net.new_state(), net.new_state(), net.new_state());
    let mut s4 = net.new_state();
    let mut tr = net.new_trace();
    for &t in b"deterministic mamba, traced or not" {
        let a = logits_bits(&mut net, &params, &mut s1, t, None);
        let b = logits_bits(&mut net, &params, &mut s2, t, None);
        let c = logits_bits(&mut net, &params, &mut s3, t, Some(&mut tr));
        net.advance(&params, &mut s4, t);
        assert_eq!(a, b);
        assert_eq!(a, c);
    }
    for s in [&s3, &s4] {
        assert_eq!(bits(&s1), bits(s));
    }
}

/// One probe per tensor kind, in both layers, including the token's embedding row.
fn probes(token: u8) -> Vec<(String, usize)> {
    let mut v = vec![
        (
            "model.embeddings.weight".to_string(),
            token as usize * 16 + 5,
        ),
        ("model.norm.weight".to_string(), 3),
        ("lm_head.weight".to_string(), 98 * 16 + 7),
    ];
    for l in 0..2 {
        let m = format!("model.layers.{l}.mixer");
        v.push((format!("model.layers.{l}.norm.weight"), 9));
        for (t, i) in [
            ("in_proj.weight", 13),
            ("in_proj.weight", 24 * 16 + 40), // a z (gate) row
            ("in_proj.bias", 5),
            ("conv1d.weight", 4),
            ("conv1d.weight", 8), // the oldest tap
            ("conv1d.bias", 2),
            ("x_proj.weight", 11),         // δ row
            ("x_proj.weight", 4 * 24 + 3), // B row
            ("x_proj.weight", 8 * 24 + 6), // C row
            ("dt_proj.weight", 6),
            ("dt_proj.bias", 1),
            ("A_log", 11),
            ("D", 7),
            ("out_proj.weight", 17),
            ("out_proj.bias", 3),
        ] {
            v.push((format!("{m}.{t}"), i));
        }
    }
    v
}

/// Probes of the context embeddings: one entry of each row that `steps`' last input reads.
fn context_probes(steps: &[(u8, u8)]) -> Vec<(String, usize)> {
    let inputs = small_ctx().context().unwrap();
    let mut history = [0.0; context::HISTORY];
    let mut rows = [0; context::TABLES];
    for &(token, _) in steps {
        rows = inputs.rows_of(&mut history, token);
    }
    let name = CONTEXT_EMBED.to_string();
    rows.iter().map(|&r| (name.clone(), r * 16 + 3)).collect()
}

#[test]
fn context_inputs_start_as_the_network_without_them() {
    let (mut plain, p0) = Mamba1::new_random(small(), 3).unwrap();
    let (mut ctx, p1) = Mamba1::new_random(small_ctx(), 3).unwrap();
    let (mut s0, mut s1) = (plain.new_state(), ctx.new_state());
    for &t in b"zero rows add nothing" {
        let a = logits_bits(&mut plain, &p0, &mut s0, t, None);
        let b = logits_bits(&mut ctx, &p1, &mut s1, t, None);
        assert_eq!(a, b);
    }
}

#[test]
fn context_gradients_match_finite_differences() {
    let (mut net, params) = busy(small_ctx());
    let start = net.new_state();
    let steps = [(b'x', b'y'), (b'y', b'z'), (b'z', b'x'), (b'x', b'y')];
    let analytic = gradcheck::segment_grads(&mut net, &params, &start, &steps);
    let mut all = probes(b'x');
    all.extend(context_probes(&steps));
    for (name, index) in all {
        check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
            gradcheck::segment_loss(n, p, &start, &steps)
        });
    }
    // One step, from a state whose history is not zero.
    let mut start = net.new_state();
    for &t in b"ab" {
        net.forward(&params, &mut start, t, None);
    }
    let step = (b'c', b'd');
    let analytic = gradcheck::one_step_grads(&mut net, &params, &start, step);
    let probes = context_probes(&[(b'a', 0), (b'b', 0), step]);
    gradcheck::assert_nonzero(&analytic, &params, CONTEXT_EMBED);
    for (name, index) in probes {
        check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
            gradcheck::segment_loss(n, p, &start, &[step])
        });
    }
}

#[test]
fn one_step_gradients_match_finite_differences() {
    let (mut net, params) = busy_net();
    // A prefix gives a non-zero convolution window and SSM state, held fixed by the
    // one-step update.
    let mut start = net.new_state();
    for &t in b"ab" {
        net.forward(&params, &mut start, t, None);
    }
    let step = (b'c', b'd');
    let analytic = gradcheck::one_step_grads(&mut net, &params, &start, step);
    for (name, index) in probes(step.0) {
        gradcheck::assert_nonzero(&analytic, &params, &name);
        check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
            gradcheck::segment_loss(n, p, &start, &[step])
        });
    }
}

#[test]
fn segment_gradients_through_the_state_match_finite_differences() {
    let (mut net, params) = busy_net();
    let start = net.new_state();
    let steps = [(b'x', b'y'), (b'y', b'z'), (b'z', b'x'), (b'x', b'y')];
    let analytic = gradcheck::segment_grads(&mut net, &params, &start, &steps);
    for (name, index) in probes(b'x') {
        check_probe(&mut net, &params, &analytic, &name, index, |n, p| {
            gradcheck::segment_loss(n, p, &start, &steps)
        });
    }
}

#[test]
fn one_sgd_tbptt_step_lowers_the_segment_loss() {
    use crate::recipe::OptimizerKind;
    use crate::train::optim::{Hyper, Optimizer};
    let (mut net, mut params) = busy_net();
    let start = net.new_state();
    let steps = [(0u8, 1u8), (1, 2), (2, 3), (3, 4)];
    let before = gradcheck::segment_loss(&mut net, &params, &start, &steps);
    let mut grads = gradcheck::segment_grads(&mut net, &params, &start, &steps);
    let sgd = Hyper::plain(OptimizerKind::Sgd, 0.05, 0.0);
    Optimizer::new().step(&mut params, &mut grads, &sgd, Scope::ALL, &[true; 256]);
    net.refresh(&params);
    let after = gradcheck::segment_loss(&mut net, &params, &start, &steps);
    assert!(after < before, "loss went from {before} to {after}");
}

/// Walking a segment back layer by layer over all steps gives the bits of walking it back step
/// by step: the parameter gradients and the carried state gradient, for every kind of scope.
#[test]
fn backward_over_steps_equals_step_by_step() {
    let (mut net, params) = busy_net();
    let scopes = [
        Scope::ALL,
        Scope::NONE.with(MIXER_SSM).with(EMBED),
        Scope::NONE.with(MIXER_CONV).with(LAYER_NORM),
        Scope::NONE.with(HEAD),
    ];
    let text = b"layer by layer, the same bits";
    gradcheck::assert_backward_steps_equal(&mut net, &params, (text, 3, 7), &scopes);
    let (mut net, params) = busy(small_ctx());
    gradcheck::assert_backward_steps_equal(&mut net, &params, (text, 3, 7), &scopes);
}

/// Replaying known bytes layer by layer leaves the state bit for bit where byte-by-byte
/// advances leave it, also across the replay's internal batches.
#[test]
fn replay_over_steps_equals_byte_by_byte() {
    let (mut net, params) = busy_net();
    let text: Vec<u8> = (0..150u32).map(|i| (i * 37 % 251) as u8).collect();
    gradcheck::assert_replay_equals_advance(&mut net, &params, &text, &[1, 7, 64, 65, 150]);
    let (mut net, params) = busy(small_ctx());
    gradcheck::assert_replay_equals_advance(&mut net, &params, &text, &[1, 7, 64, 65, 150]);
}
