//! Truncated backpropagation through time over segments of `window` bytes, for any [`Network`].
//!
//! While a segment is pending, every byte is coded with the distribution of the live forward
//! pass: the weights of the last update, run from the state the segment started in. The
//! decoder can compute exactly that. When the segment's last byte is known:
//!
//! 1. walk back through the segment chunk by chunk (chunks of `chunk` bytes, last first): the
//!    last chunk's traces were captured by the live pass; each earlier chunk is replayed from
//!    the state checkpoint taken when the live pass entered it, with the same weights, so its
//!    traces are bit-identical to the live pass's;
//! 2. backpropagate through each byte, last to first, carrying the state gradient across bytes
//!    and chunks, each byte's loss weighted `1/n` for the segment's `n` bytes (its mean; `n` is
//!    the window unless a schedule boundary cut the segment short);
//! 3. take one optimizer step;
//! 4. with [`LiveState::Rebuild`], rebuild the live state by running the segment's inputs
//!    again from its start state with the updated weights; with [`LiveState::Carry`], keep the
//!    state the live pass reached (computed with the old weights) and skip that second forward.
//!    The next segment starts there.
//!
//! Either way the replays of step 1 run from checkpoints the live pass took with the weights
//! it coded with, so they reproduce its traces bit for bit; under carry the segment's start
//! state is simply the state the previous segment's live pass left.
//!
//! Memory is `chunk` traces plus one state per chunk, whatever the window.

use anyhow::{Result, bail};

use crate::model::{Network, VOCAB};
use crate::params::{ParamSet, Scope, Slot};
use crate::train::logit_gradient;
use crate::train::optim::{Hyper, Optimizer};

/// Chunk length of TBPTT replays: traces of this many bytes are kept at once.
pub const CHUNK: usize = 64;

/// The chunk length a [`Tbptt`] uses for `window`: the requested `chunk`, but never longer than
/// the window.
pub fn chunk_len(window: usize, chunk: usize) -> usize {
    chunk.clamp(1, window.max(1))
}

/// The window of a segment that starts after `steps` optimizer steps when windows grow from
/// `first` to `max` (recipe keys `bptt0`, `grow`, `bptt`): a window of w bytes serves for
/// `grow + w − 1` steps, then the next is one byte longer (paq8px's LSTM grows 4 → 100 so, with
/// `grow` 12). `first` 0 means no growth: every window is `max`.
pub fn grown_window(first: usize, grow: usize, max: usize, steps: u64) -> usize {
    if first == 0 {
        return max;
    }
    let (mut w, mut left) = (first.min(max), steps);
    while w < max {
        let span = (grow + w - 1) as u64;
        if left < span {
            break;
        }
        left -= span;
        w += 1;
    }
    w
}

/// What the live state becomes after a segment's optimizer step (recipe key `state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LiveState {
    /// Run the segment again with the updated weights: the next segment starts from the state
    /// the new weights would have reached. One more forward pass per trained byte.
    #[default]
    Rebuild,
    /// Keep the state the live pass reached with the weights the segment was coded with.
    Carry,
}

impl LiveState {
    pub fn name(self) -> &'static str {
        match self {
            LiveState::Rebuild => "rebuild",
            LiveState::Carry => "carry",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "rebuild" => Ok(LiveState::Rebuild),
            "carry" => Ok(LiveState::Carry),
            other => bail!("unknown state '{other}' (states: rebuild, carry)"),
        }
    }
}

/// The segment being collected and the buffers to train on it.
pub struct Tbptt<N: Network> {
    /// The longest segment the buffers hold.
    window: usize,
    /// The length of the pending segment when complete (at most `window`).
    length: usize,
    chunk: usize,
    /// State before each chunk of the segment; `checkpoints[0]` is the segment's start state.
    checkpoints: Vec<N::State>,
    /// Per byte of the segment: the token fed to the network, the byte that came, and the
    /// probabilities it was coded with (`window × 256`).
    inputs: Vec<u8>,
    targets: Vec<u8>,
    /// The weight of each recorded byte's loss (1 but with `focus`).
    weights: Vec<f32>,
    probs: Vec<f32>,
    /// Traces of the current chunk, indexed by position within the chunk.
    traces: Vec<N::Trace>,
    carry: N::Carry,
    /// The gradient at the logits of each byte of the current chunk (`chunk × 256`).
    grad_logits: Vec<f32>,
    /// Flags of the sparse rows the segment's gradient touches ([`Network::sparse_rows`]).
    touched: Vec<bool>,
}

impl<N: Network> Tbptt<N> {
    pub fn new(net: &N, window: usize, chunk: usize) -> Self {
        let chunk = chunk_len(window, chunk);
        Self {
            window,
            length: window,
            chunk,
            checkpoints: Vec::with_capacity(window.div_ceil(chunk)),
            inputs: Vec::with_capacity(window),
            targets: Vec::with_capacity(window),
            weights: Vec::with_capacity(window),
            probs: Vec::with_capacity(window * VOCAB),
            traces: (0..chunk).map(|_| net.new_trace()).collect(),
            carry: net.new_carry(),
            grad_logits: vec![0.0; chunk * VOCAB],
            touched: vec![false; net.sparse_rows()],
        }
    }

    /// The live forward pass for the segment's next byte: checkpoints the state on entering a
    /// chunk and records the step's trace.
    pub fn forward<'n>(
        &mut self,
        net: &'n mut N,
        params: &ParamSet,
        state: &mut N::State,
        token: u8,
    ) -> &'n [f32] {
        let pos = self.inputs.len();
        if pos.is_multiple_of(self.chunk) {
            self.checkpoints.push(state.clone());
        }
        self.inputs.push(token);
        net.forward(
            params,
            state,
            token,
            Some(&mut self.traces[pos % self.chunk]),
        )
    }

    /// The longest segment the buffers hold.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Sets the length of the next segment (at most [`Tbptt::window`]); only between segments.
    pub fn set_length(&mut self, length: usize) {
        debug_assert!(self.inputs.is_empty(), "between segments");
        self.length = length.clamp(1, self.window);
    }

    /// Bytes recorded in the pending segment.
    pub fn pending(&self) -> usize {
        self.targets.len()
    }

    /// The state the pending segment started from, and the tokens fed so far (one more than
    /// the bytes recorded while a forward step waits for its byte).
    pub fn start(&self) -> Option<(&N::State, &[u8])> {
        self.checkpoints
            .first()
            .map(|s| (s, self.inputs.as_slice()))
    }

    /// The weights of the recorded bytes' losses.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Records the byte that came after the last [`Tbptt::forward`], the probabilities it
    /// was coded with and the weight of its loss; returns true when the segment is complete.
    pub fn record(&mut self, target: u8, pdf: &[f64], weight: f32) -> bool {
        self.targets.push(target);
        self.weights.push(weight);
        self.probs.extend(pdf.iter().map(|&p| p as f32));
        self.targets.len() == self.length
    }

    /// Trains on the recorded segment (steps 1–4 above) and leaves in `state` the live state
    /// the next segment starts from, as `live` says: `state` must be the state the live pass
    /// reached. Called when the segment is complete, or earlier when a schedule boundary ends it
    /// (then it is shorter). Every fed token must have its byte recorded. `bias` is the output
    /// bias's slot when it is trained.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        net: &mut N,
        params: &mut ParamSet,
        state: &mut N::State,
        grads: &mut [f32],
        optimizer: &mut Optimizer,
        hyper: &Hyper,
        scope: Scope,
        bias: Option<Slot>,
        live: LiveState,
    ) {
        let n = self.targets.len();
        debug_assert_eq!(n, self.inputs.len(), "every fed token has its byte");
        if n == 0 {
            return;
        }
        let scale = 1.0 / n as f32;
        net.clear_carry(&mut self.carry);
        let chunks = n.div_ceil(self.chunk);
        for k in (0..chunks).rev() {
            let (lo, hi) = (k * self.chunk, ((k + 1) * self.chunk).min(n));
            if k + 1 < chunks {
                let mut replay = self.checkpoints[k].clone();
                for j in lo..hi {
                    net.forward(
                        params,
                        &mut replay,
                        self.inputs[j],
                        Some(&mut self.traces[j - lo]),
                    );
                }
            }
            let steps = hi - lo;
            for tr in &self.traces[..steps] {
                net.mark_rows(tr, &mut self.touched);
            }
            for j in (lo..hi).rev() {
                let probs = &self.probs[j * VOCAB..(j + 1) * VOCAB];
                let g = &mut self.grad_logits[(j - lo) * VOCAB..(j - lo + 1) * VOCAB];
                // A weight of 1 leaves `scale` as it is, bit for bit.
                logit_gradient(probs, self.targets[j], scale * self.weights[j], g);
                if let Some(slot) = bias {
                    crate::kernels::add_assign(slot.of_mut(grads), g);
                }
            }
            net.backward_steps(
                params,
                &self.traces[..steps],
                &self.grad_logits[..steps * VOCAB],
                scope,
                grads,
                &mut self.carry,
            );
        }
        for &t in &self.inputs {
            self.touched[t as usize] = true;
        }
        optimizer.step(params, grads, hyper, scope, &self.touched);
        self.touched.fill(false);
        net.refresh(params);

        if live == LiveState::Rebuild {
            *state = self.checkpoints.swap_remove(0);
            net.advance_steps(params, state, &self.inputs);
        }
        self.checkpoints.clear();
        self.inputs.clear();
        self.targets.clear();
        self.weights.clear();
        self.probs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gradcheck;
    use crate::model::mamba1::{Config, Mamba1};
    use crate::recipe::OptimizerKind;
    use crate::train::softmax_pdf;

    fn net() -> (Mamba1, ParamSet) {
        let cfg = Config {
            hidden: 16,
            layers: 2,
            inner: 24,
            state: 4,
            conv: 3,
            dt_rank: 4,
            ctx: 0,
            prior: 0,
        };
        Mamba1::new_random(cfg, 5).unwrap()
    }

    fn sgd() -> Hyper {
        Hyper::plain(OptimizerKind::Sgd, 1.0, 0.0)
    }

    /// Codes `text` (each byte predicting the next) through the driver in segments of `window`
    /// with SGD at lr 1, training the last segment however short; returns the parameters after
    /// each update and the live state at the end.
    fn drive(
        chunk: usize,
        window: usize,
        text: &[u8],
        live: LiveState,
    ) -> (Vec<ParamSet>, <Mamba1 as Network>::State) {
        let (mut net, mut params) = net();
        let mut seg = Tbptt::new(&net, window, chunk);
        let mut state = net.new_state();
        let mut grads = params.zeros_like();
        let mut opt = Optimizer::new();
        let zero_bias = vec![0.0f32; VOCAB];
        let mut pdf = vec![0.0f64; VOCAB];
        let mut after = Vec::new();
        for (j, pair) in text.windows(2).enumerate() {
            let logits = seg.forward(&mut net, &params, &mut state, pair[0]);
            softmax_pdf(logits, &zero_bias, &mut pdf);
            let full = seg.record(pair[1], &pdf, 1.0);
            assert_eq!(full, (j + 1) % window == 0);
            if full || j + 2 == text.len() {
                seg.update(
                    &mut net,
                    &mut params,
                    &mut state,
                    &mut grads,
                    &mut opt,
                    &sgd(),
                    Scope::ALL,
                    None,
                    live,
                );
                after.push(params.clone());
            }
        }
        (after, state)
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn delta(after: &ParamSet, before: &ParamSet) -> Vec<f32> {
        after
            .data
            .iter()
            .zip(&before.data)
            .map(|(a, b)| a - b)
            .collect()
    }

    /// Runs one segment through the driver and returns the parameter change (with SGD at lr 1,
    /// the gradient the driver applied) and the logits that follow the rebuilt state.
    fn driver_step(chunk: usize, text: &[u8]) -> (Vec<f32>, Vec<u32>) {
        let (after, mut state) = drive(chunk, text.len() - 1, text, LiveState::Rebuild);
        let (mut net, before) = net();
        let state_bits = logits_bits(&mut net, &after[0], &mut state);
        (delta(&after[0], &before), state_bits)
    }

    fn logits_bits(
        net: &mut Mamba1,
        params: &ParamSet,
        state: &mut <Mamba1 as Network>::State,
    ) -> Vec<u32> {
        net.forward(params, state, b'.', None)
            .iter()
            .map(|x| x.to_bits())
            .collect()
    }

    #[test]
    fn windows_grow_by_one_after_grow_plus_length_minus_one_steps() {
        let w = |steps| grown_window(4, 12, 100, steps);
        // 4 serves 15 steps, 5 serves 16, 6 serves 17, ...
        assert_eq!(
            [w(0), w(14), w(15), w(30), w(31), w(48)],
            [4, 4, 5, 5, 6, 7]
        );
        // Σ (11 + w) for w in 4..100 = 6000 steps to reach the maximum.
        assert_eq!((w(5999), w(6000), w(u64::MAX)), (99, 100, 100));
        assert_eq!(grown_window(0, 12, 16, 0), 16, "no growth");
        assert_eq!(grown_window(32, 12, 16, 0), 16, "never above the maximum");
        // With grow 0 a window of w serves w − 1 steps (so 1 none).
        assert_eq!(grown_window(1, 0, 4, 0), 2);
        assert_eq!(grown_window(1, 0, 4, 1), 3);
    }

    #[test]
    fn chunked_replay_gives_the_same_step_as_one_chunk() {
        let text = b"segment!";
        let (one, state_one) = driver_step(64, text);
        let (chunked, state_chunked) = driver_step(3, text);
        assert_eq!(bits(&one), bits(&chunked));
        assert_eq!(state_one, state_chunked);
    }

    #[test]
    fn the_driver_applies_the_segment_gradient() {
        let text = b"abcabd";
        let (delta, _) = driver_step(2, text);
        let (mut net, params) = net();
        let steps: Vec<(u8, u8)> = text.windows(2).map(|w| (w[0], w[1])).collect();
        let start = net.new_state();
        let want = gradcheck::segment_grads(&mut net, &params, &start, &steps);
        let scale = want.iter().fold(0.0f32, |m, g| m.max(g.abs()));
        assert!(scale > 0.0);
        for (i, (d, g)) in delta.iter().zip(&want).enumerate() {
            assert!(
                (d - g).abs() <= 1e-3 * scale,
                "parameter {i}: applied {d}, gradient {g}"
            );
        }
    }

    /// The state the network reaches over `tokens` from the zero state with `params`.
    fn run_from_zero(params: &ParamSet, tokens: &[u8]) -> Vec<f32> {
        let (mut net, _) = net();
        net.refresh(params);
        let mut state = net.new_state();
        net.advance_steps(params, &mut state, tokens);
        state
    }

    #[test]
    fn carry_keeps_the_live_state_and_rebuild_recomputes_it() {
        let text = b"carry on!";
        let inputs = &text[..text.len() - 1];
        let (_, before) = net();
        for live in [LiveState::Rebuild, LiveState::Carry] {
            let (after, state) = drive(64, inputs.len(), text, live);
            let weights = match live {
                LiveState::Rebuild => &after[0],
                LiveState::Carry => &before,
            };
            assert_eq!(
                bits(&state),
                bits(&run_from_zero(weights, inputs)),
                "{live:?}"
            );
        }
        // The first step does not depend on the mode; the states after it differ.
        let (rebuilt, rebuilt_state) = drive(64, inputs.len(), text, LiveState::Rebuild);
        let (carried, carried_state) = drive(64, inputs.len(), text, LiveState::Carry);
        assert_eq!(bits(&rebuilt[0].data), bits(&carried[0].data));
        assert_ne!(bits(&rebuilt_state), bits(&carried_state));
    }

    #[test]
    fn chunked_replay_under_carry_is_exact_across_segments() {
        let text = b"the state carried over segments";
        for live in [LiveState::Rebuild, LiveState::Carry] {
            let (one, state_one) = drive(64, 7, text, live);
            let (chunked, state_chunked) = drive(3, 7, text, live);
            assert_eq!(one.len(), 5);
            for (a, b) in one.iter().zip(&chunked) {
                assert_eq!(bits(&a.data), bits(&b.data), "{live:?}");
            }
            assert_eq!(bits(&state_one), bits(&state_chunked), "{live:?}");
        }
        let (rebuilt, _) = drive(64, 7, text, LiveState::Rebuild);
        let (carried, _) = drive(64, 7, text, LiveState::Carry);
        assert_ne!(bits(&rebuilt[1].data), bits(&carried[1].data));
    }

    #[test]
    fn under_carry_the_next_segment_trains_from_the_carried_state() {
        let text = b"abcabdabcab";
        let window = 5;
        let (after, _) = drive(2, window, text, LiveState::Carry);
        let (mut net, before) = net();
        // The second segment started where the first segment's live pass (old weights) ended.
        let start = run_from_zero(&before, &text[..window]);
        net.refresh(&after[0]);
        let steps: Vec<(u8, u8)> = text[window..].windows(2).map(|w| (w[0], w[1])).collect();
        let want = gradcheck::segment_grads(&mut net, &after[0], &start, &steps);
        let got = delta(&after[1], &after[0]);
        let scale = want.iter().fold(0.0f32, |m, g| m.max(g.abs()));
        assert!(scale > 0.0);
        for (i, (d, g)) in got.iter().zip(&want).enumerate() {
            assert!(
                (d - g).abs() <= 1e-3 * scale,
                "parameter {i}: applied {d}, gradient {g}"
            );
        }
    }
}
