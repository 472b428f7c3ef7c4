//! Test support for any [`Network`]: losses computed the slow, obvious way, and the analytic
//! gradients of `backward` compared with central finite differences of those losses.
//!
//! Gradients from `backward` are ascent directions of the log-likelihood, so they are compared
//! with `−dLoss/dθ`.

use crate::model::{Network, VOCAB};
use crate::params::{ParamSet, Scope};

/// `−ln softmax(logits)[target]` in f64 (tests only; not under the determinism contract).
pub fn nll(logits: &[f32], target: u8) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let sum: f64 = logits.iter().map(|&z| (z as f64 - max).exp()).sum();
    -((logits[target as usize] as f64 - max) - sum.ln())
}

/// Softmax probabilities as f32 (what the trainer feeds backward).
pub fn probs(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let e: Vec<f64> = logits.iter().map(|&z| (z as f64 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|&x| (x / sum) as f32).collect()
}

fn grad_logits(logits: &[f32], target: u8, scale: f32) -> Vec<f32> {
    let mut g = vec![0.0; VOCAB];
    crate::train::logit_gradient(&probs(logits), target, scale, &mut g);
    g
}

/// The names and shapes of a state's tensors, in order.
pub fn state_names<N: Network>(net: &N, state: &N::State) -> Vec<(String, Vec<usize>)> {
    let tensors = net.state_tensors(state).into_iter();
    tensors.map(|t| (t.name, t.shape)).collect()
}

/// Mean loss of a segment of `(input, target)` steps from `start`.
pub fn segment_loss<N: Network>(
    net: &mut N,
    params: &ParamSet,
    start: &N::State,
    steps: &[(u8, u8)],
) -> f64 {
    let mut state = start.clone();
    let total: f64 = steps
        .iter()
        .map(|&(input, target)| nll(net.forward(params, &mut state, input, None), target))
        .sum();
    total / steps.len() as f64
}

/// Analytic gradient of the mean log-likelihood of a segment, through the state (with carry),
/// as TBPTT computes it.
pub fn segment_grads<N: Network>(
    net: &mut N,
    params: &ParamSet,
    start: &N::State,
    steps: &[(u8, u8)],
) -> Vec<f32> {
    let mut state = start.clone();
    let mut traces: Vec<N::Trace> = Vec::new();
    let mut gls = Vec::new();
    let scale = 1.0 / steps.len() as f32;
    for &(input, target) in steps {
        let mut tr = net.new_trace();
        let logits = net.forward(params, &mut state, input, Some(&mut tr));
        gls.push(grad_logits(logits, target, scale));
        traces.push(tr);
    }
    let mut grads = params.zeros_like();
    let mut carry = net.new_carry();
    for j in (0..steps.len()).rev() {
        net.backward(
            params,
            &traces[j],
            &gls[j],
            Scope::ALL,
            &mut grads,
            Some(&mut carry),
        );
    }
    grads
}

/// Analytic one-step gradient of the last step's log-likelihood from `start` (no carry).
pub fn one_step_grads<N: Network>(
    net: &mut N,
    params: &ParamSet,
    start: &N::State,
    step: (u8, u8),
) -> Vec<f32> {
    let mut state = start.clone();
    let mut tr = net.new_trace();
    let logits = net.forward(params, &mut state, step.0, Some(&mut tr));
    let gl = grad_logits(logits, step.1, 1.0);
    let mut grads = params.zeros_like();
    net.backward(params, &tr, &gl, Scope::ALL, &mut grads, None);
    grads
}

/// Compares `analytic[name][index]` with `−dLoss/dθ` by central differences of `loss`.
/// The network's derived caches are refreshed after every perturbation.
pub fn check_probe<N: Network>(
    net: &mut N,
    params: &ParamSet,
    analytic: &[f32],
    name: &str,
    index: usize,
    mut loss: impl FnMut(&mut N, &ParamSet) -> f64,
) {
    let info = params
        .find(name)
        .unwrap_or_else(|| panic!("no tensor named {name}"));
    assert!(index < info.slot.len, "{name}[{index}] is out of range");
    let at = info.slot.offset + index;
    // f32 forward passes carry ~1e-7 relative noise: a wide step keeps it far below the
    // gradients, and the losses are smooth enough that the O(eps²) error stays small.
    let eps = 1e-2f32;
    let mut p = params.clone();
    p.data[at] = params.data[at] + eps;
    net.refresh(&p);
    let plus = loss(net, &p);
    p.data[at] = params.data[at] - eps;
    net.refresh(&p);
    let minus = loss(net, &p);
    net.refresh(params);
    let numeric = -((plus - minus) / (2.0 * eps as f64)) as f32;
    let got = analytic[at];
    // Finite differences of f32 passes are good to a few 1e-6 here.
    let tol = 1e-5 + 0.02 * got.abs().max(numeric.abs());
    assert!(
        (got - numeric).abs() <= tol,
        "{name}[{index}]: analytic {got} vs numeric {numeric} (tolerance {tol})"
    );
}

/// The gradient is not trivially zero where a probe sits (so a check can fail).
pub fn assert_nonzero(analytic: &[f32], params: &ParamSet, name: &str) {
    let slot = params.find(name).expect("tensor exists").slot;
    assert!(
        slot.of(analytic).iter().any(|&g| g != 0.0),
        "gradient of {name} is all zero"
    );
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Reads `text[..warm]`, records a traced segment of the next `steps` bytes (each predicting
/// the one after it), then walks it back for each scope twice — with
/// [`Network::backward_steps`] (layer by layer over all steps) and with [`Network::backward`]
/// step after step, from the same non-zero carry — and asserts the same bits: the parameter
/// gradients and the carried state gradient.
pub fn assert_backward_steps_equal<N: Network>(
    net: &mut N,
    params: &ParamSet,
    (text, warm, steps): (&[u8], usize, usize),
    scopes: &[Scope],
) {
    let mut state = net.new_state();
    for &t in &text[..warm] {
        net.forward(params, &mut state, t, None);
    }
    let (mut traces, mut gls) = (Vec::new(), Vec::new());
    for j in warm..warm + steps {
        let mut tr = net.new_trace();
        let logits = net.forward(params, &mut state, text[j], Some(&mut tr));
        gls.extend(grad_logits(logits, text[j + 1], 0.25));
        traces.push(tr);
    }
    for &scope in scopes {
        let mut carry_one = net.new_carry();
        for (i, c) in carry_one.as_mut().iter_mut().enumerate() {
            *c = (i % 97) as f32 * 1e-3;
        }
        let mut carry_steps = N::Carry::from(carry_one.as_ref().to_vec());
        let (mut grads_one, mut grads_steps) = (params.zeros_like(), params.zeros_like());
        for (j, tr) in traces.iter().enumerate().rev() {
            let g = &gls[j * VOCAB..(j + 1) * VOCAB];
            net.backward(params, tr, g, scope, &mut grads_one, Some(&mut carry_one));
        }
        let out = (scope, &mut grads_steps[..]);
        net.backward_steps(params, &traces, &gls, out.0, out.1, &mut carry_steps);
        assert_eq!(bits(&grads_one), bits(&grads_steps), "{scope:?}");
        assert_eq!(
            bits(carry_one.as_ref()),
            bits(carry_steps.as_ref()),
            "{scope:?}"
        );
        assert!(grads_steps.iter().any(|&x| x != 0.0), "{scope:?}");
    }
}

/// Replaying known bytes with [`Network::advance_steps`] (layer by layer over all steps) leaves
/// the state bit for bit where [`Network::advance`] byte after byte leaves it, for each length
/// of `text` in `lens` (lengths past [`crate::model::layers::MAX_STEPS`] cross the replay's
/// internal batches).
pub fn assert_replay_equals_advance<N: Network>(
    net: &mut N,
    params: &ParamSet,
    text: &[u8],
    lens: &[usize],
) {
    for &len in lens {
        let (mut one, mut many) = (net.new_state(), net.new_state());
        for &t in &text[..len] {
            net.advance(params, &mut one, t);
        }
        net.advance_steps(params, &mut many, &text[..len]);
        assert_eq!(bits(one.as_ref()), bits(many.as_ref()), "{len} bytes");
        assert!(many.as_ref().iter().any(|&x| x != 0.0));
    }
}
