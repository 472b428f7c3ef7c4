//! One training step over B streams and T bytes: each stream runs the network forward over its
//! next T bytes (traced), then the segment backward over them at once
//! ([`Network::backward_steps`]: matrix-matrix over the T steps).
//!
//! The streams fall into [`GROUPS`] fixed groups (contiguous runs of streams), each with one
//! gradient buffer that its streams add into in stream order; the threads take whole groups,
//! and the groups' gradients are then summed in group order ([`sum_into_first`]). So the
//! step's bits depend on B and T but not on the number of threads. One buffer per stream would
//! do too, but B buffers of the whole network do not stay in cache: at B = 8 the summing and
//! the backward's misses cost a fifth of the time.

use crate::model::{Network, VOCAB};
use crate::params::{ParamSet, Scope};
use crate::train::softmax_pdf;

/// Gradient groups: the most threads a step uses (this machine has two cores).
pub const GROUPS: usize = 2;

/// One gradient buffer and the streams that add into it.
pub struct Group<N: Network> {
    pub streams: Vec<Stream<N>>,
    /// The group's gradient of the current step, laid out like the parameters; zero between
    /// steps.
    pub grads: Vec<f32>,
    /// The sparse rows this step's gradient touches ([`Network::sparse_rows`]).
    pub touched: Vec<bool>,
}

impl<N: Network> Group<N> {
    pub fn new(net: &N, params: &ParamSet, streams: Vec<Stream<N>>) -> Self {
        Group {
            streams,
            grads: params.zeros_like(),
            touched: vec![false; net.sparse_rows()],
        }
    }
}

/// One stream: a place in the data and the network's state there.
pub struct Stream<N: Network> {
    /// Index of the next byte to predict in the data (wraps to 0 at the end).
    pub next: usize,
    /// The byte fed to the network before predicting `data[next]` (0 at a stream's start, as
    /// a compressed stream starts).
    pub token: u8,
    pub state: N::State,
    /// Bits the network spent on this step's bytes (before its update).
    pub bits: f64,
}

impl<N: Network> Stream<N> {
    pub fn new(net: &N, start: usize) -> Self {
        Stream {
            next: start,
            token: 0,
            state: net.new_state(),
            bits: 0.0,
        }
    }
}

/// What one thread needs besides the streams it trains: its own network (scratch buffers and
/// caches) and the buffers of one segment.
pub struct Worker<N: Network> {
    pub net: N,
    traces: Vec<N::Trace>,
    carry: N::Carry,
    grad_logits: Vec<f32>,
    pdf: Vec<f64>,
    zero_bias: Vec<f32>,
}

impl<N: Network> Worker<N> {
    pub fn new(net: N, bptt: usize) -> Self {
        Worker {
            traces: (0..bptt).map(|_| net.new_trace()).collect(),
            carry: net.new_carry(),
            grad_logits: vec![0.0; bptt * VOCAB],
            pdf: vec![0.0; VOCAB],
            zero_bias: vec![0.0; VOCAB],
            net,
        }
    }

    /// Trains `stream` on its next `traces.len()` bytes of `data`: the forward over them from
    /// its state (which it then keeps: truncated BPTT, the state computed with the weights of
    /// the step), the segment's backward with each byte's loss weighted `scale`, added into
    /// `grads`, the rows it touches flagged in `touched`.
    pub fn segment(
        &mut self,
        params: &ParamSet,
        stream: &mut Stream<N>,
        (grads, touched): (&mut [f32], &mut [bool]),
        data: &[u8],
        scale: f32,
    ) {
        let steps = self.traces.len();
        stream.bits = 0.0;
        for t in 0..steps {
            let target = data[stream.next];
            let input = stream.token;
            let logits =
                self.net
                    .forward(params, &mut stream.state, input, Some(&mut self.traces[t]));
            // The distribution the coder would use (no output bias: the prior has none).
            softmax_pdf(logits, &self.zero_bias, &mut self.pdf);
            stream.bits -= self.pdf[target as usize].log2();
            // The ascent direction of ln p(target): (one_hot − p) · scale.
            let g = &mut self.grad_logits[t * VOCAB..(t + 1) * VOCAB];
            for (i, (o, &p)) in g.iter_mut().zip(&self.pdf).enumerate() {
                let hot = if i == target as usize { 1.0 } else { 0.0 };
                *o = (hot - p as f32) * scale;
            }
            self.net.mark_rows(&self.traces[t], touched);
            touched[input as usize] = true;
            stream.token = target;
            stream.next = if stream.next + 1 == data.len() {
                0
            } else {
                stream.next + 1
            };
        }
        self.net.clear_carry(&mut self.carry);
        self.net.backward_steps(
            params,
            &self.traces,
            &self.grad_logits,
            Scope::ALL,
            grads,
            &mut self.carry,
        );
    }

    /// Bits per byte of the network alone over `data`, forward only, from the zero state and
    /// the token 0 (as a compressed stream starts).
    pub fn evaluate(&mut self, params: &ParamSet, data: &[u8]) -> f64 {
        if data.is_empty() {
            return 0.0;
        }
        let mut state = self.net.new_state();
        let mut token = 0u8;
        let mut bits = 0.0;
        for &b in data {
            let logits = self.net.forward(params, &mut state, token, None);
            softmax_pdf(logits, &self.zero_bias, &mut self.pdf);
            bits -= self.pdf[b as usize].log2();
            token = b;
        }
        bits / data.len() as f64
    }
}

/// Runs one segment on every stream of every group: the groups cut into as many contiguous
/// runs as there are workers, one thread per run (the first on the calling thread).
pub fn run_segments<N: Network + Send>(
    workers: &mut [Worker<N>],
    groups: &mut [Group<N>],
    params: &ParamSet,
    data: &[u8],
    scale: f32,
) where
    N::State: Send,
    N::Trace: Send,
    N::Carry: Send,
{
    let threads = workers.len().min(groups.len()).max(1);
    let per = groups.len().div_ceil(threads);
    let mut runs = groups.chunks_mut(per);
    let mut workers = workers.iter_mut();
    let (Some(first_run), Some(first_worker)) = (runs.next(), workers.next()) else {
        return;
    };
    let train = |worker: &mut Worker<N>, run: &mut [Group<N>]| {
        for g in run {
            for s in &mut g.streams {
                worker.segment(params, s, (&mut g.grads, &mut g.touched), data, scale);
            }
        }
    };
    std::thread::scope(|scope| {
        for (worker, run) in workers.zip(runs) {
            scope.spawn(move || train(worker, run));
        }
        train(first_worker, first_run);
    });
}

/// Sums the groups' gradients into the first group's buffer, in group order, over what any
/// of them touched (every dense tensor, and the sparse rows flagged in any group), leaving the
/// other buffers zero; the flags of the union are left in the first group's `touched`, the
/// others cleared.
pub fn sum_into_first<N: Network>(params: &ParamSet, groups: &mut [Group<N>]) {
    let Some((first, rest)) = groups.split_first_mut() else {
        return;
    };
    for g in rest.iter() {
        for (u, &t) in first.touched.iter_mut().zip(&g.touched) {
            *u |= t;
        }
    }
    for g in rest.iter_mut() {
        for range in touched_ranges(params, &first.touched) {
            let (to, from) = (&mut first.grads[range.clone()], &mut g.grads[range]);
            for (a, b) in to.iter_mut().zip(from.iter_mut()) {
                *a += *b;
                *b = 0.0;
            }
        }
        g.touched.fill(false);
    }
}

/// The index ranges of the parameters a step with these row flags can have a gradient for:
/// every dense tensor whole, and the flagged rows of sparse ones.
fn touched_ranges<'a>(
    params: &'a ParamSet,
    touched: &'a [bool],
) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
    let mut first_row = 0;
    params.tensors.iter().flat_map(move |t| {
        let (rows, cols) = if t.sparse_rows {
            (t.shape[0], t.slot.len / t.shape[0].max(1))
        } else {
            (1, t.slot.len)
        };
        let flags = if t.sparse_rows {
            first_row += rows;
            touched.get(first_row - rows..first_row).unwrap_or(&[])
        } else {
            &[]
        };
        let sparse = t.sparse_rows;
        let offset = t.slot.offset;
        (0..rows)
            .filter(move |&r| !sparse || flags.get(r).copied().unwrap_or(false))
            .map(move |r| offset + r * cols..offset + (r + 1) * cols)
    })
}
