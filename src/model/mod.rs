//! The byte-level networks behind one interface, one file per model.
//!
//! A network is a function of its parameters: it keeps its layout (the [`Slot`]s of its tensors
//! in a [`ParamSet`]), its scratch buffers and caches derived from the parameters, while the
//! parameters themselves live in the `ParamSet` that the trainer owns. One forward step reads one
//! byte and gives the logits of the next; one backward step walks that forward step back.
//!
//! [`Slot`]: crate::params::Slot

/// Declares a network's training groups once, in their order: `GROUPS`, the names indexed by
/// [`crate::params::Group`], and a constant `NAME: Group` for each.
macro_rules! training_groups {
    ($($(#[$doc:meta])* $konst:ident = $name:literal),* $(,)?) => {
        /// Training groups, indexed by [`crate::params::Group`].
        pub const GROUPS: &[&str] = &[$($name),*];
        training_groups!(@index 0, $($(#[$doc])* $konst),*);
    };
    (@index $i:expr, $(#[$doc:meta])* $first:ident $(, $(#[$rdoc:meta])* $rest:ident)*) => {
        $(#[$doc])*
        const $first: $crate::params::Group = $i;
        training_groups!(@index $i + 1, $($(#[$rdoc])* $rest),*);
    };
    (@index $i:expr $(,)?) => {};
}

pub mod config;
pub mod context;
#[cfg(test)]
pub mod gradcheck;
pub mod layers;
pub mod layout;
pub mod mamba1;
pub mod rwkv7;

pub use config::{MAX_DIM, MAX_PARAMS, MAX_PRIOR, ModelConfig, ModelKind};

use anyhow::Result;

use crate::params::{ParamSet, Scope, TensorSource};

use self::layout::Layout;

/// Number of symbols: the networks are byte-level.
pub const VOCAB: usize = 256;

/// A flat `f32` buffer laid out by a [`Layout`]: what a state, a trace and a carry are.
pub trait Flat: From<Vec<f32>> + AsRef<[f32]> + AsMut<[f32]> {}
impl<T: From<Vec<f32>> + AsRef<[f32]> + AsMut<[f32]>> Flat for T {}

/// The layouts a network's buffers follow: the state (and its gradient, the carry) and one
/// step's trace.
pub struct Layouts<'a> {
    pub state: &'a Layout,
    pub trace: &'a Layout,
}

/// A recurrent byte model with exact gradients.
///
/// A network implements the steps (forward, backward, and optionally the same over a segment)
/// and says how its buffers are laid out ([`Network::layouts`]); the plumbing of states,
/// traces and carries is the default methods over those layouts.
pub trait Network {
    /// What carries from byte to byte (convolution window, SSM or WKV state, token shifts).
    type State: Clone + Flat;
    /// What backward needs from one forward step (activations and the state it started from).
    type Trace: Flat;
    /// The gradient with respect to a [`Self::State`], flowing from later bytes to earlier ones.
    type Carry: Flat;

    /// Names of the training groups, indexed by [`crate::params::Group`].
    fn groups(&self) -> &'static [&'static str];
    /// The layouts of the state (and carry) and of one step's trace.
    fn layouts(&self) -> Layouts<'_>;

    /// The zero state a stream starts from.
    fn new_state(&self) -> Self::State {
        self.layouts().state.zeros().into()
    }
    fn new_trace(&self) -> Self::Trace {
        self.layouts().trace.zeros().into()
    }
    /// A zero state gradient.
    fn new_carry(&self) -> Self::Carry {
        self.layouts().state.zeros().into()
    }
    fn clear_carry(&self, carry: &mut Self::Carry) {
        carry.as_mut().fill(0.0);
    }

    /// Reads `token`, advances `state` and returns the logits of the next byte. With `trace`,
    /// also records what [`Network::backward`] needs; the logits and state are bit-identical
    /// either way.
    fn forward(
        &mut self,
        params: &ParamSet,
        state: &mut Self::State,
        token: u8,
        trace: Option<&mut Self::Trace>,
    ) -> &[f32];

    /// Reads `token` and advances `state` exactly as [`Network::forward`] does, for replays
    /// whose predictions nobody reads: a network may skip the logits.
    fn advance(&mut self, params: &ParamSet, state: &mut Self::State, token: u8) {
        self.forward(params, state, token, None);
    }

    /// Walks one traced forward step back. `grad_logits` is the ascent direction of the
    /// log-likelihood with respect to the logits (`one_hot(target) − p`, times a weight).
    /// Adds the gradients of the parameters in `scope` into `grads` (laid out like `params`).
    /// With `carry`, reads it as the gradient with respect to the state this step produced,
    /// adds it in, and leaves in it the gradient with respect to the state the step started
    /// from; without, the step is treated as the only one (a one-step update).
    fn backward(
        &mut self,
        params: &ParamSet,
        trace: &Self::Trace,
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: Option<&mut Self::Carry>,
    );

    /// Reads `tokens` one after another as [`Network::advance`] does (the same bits), for
    /// replays of known bytes; a network may run them layer by layer over all steps at once.
    fn advance_steps(&mut self, params: &ParamSet, state: &mut Self::State, tokens: &[u8]) {
        for &t in tokens {
            self.advance(params, state, t);
        }
    }

    /// Walks the traced steps of a segment back, last first, with `carry` the gradient of the
    /// state after the last step (left as that of the state before the first). `grad_logits`
    /// holds one row of [`VOCAB`] per step. The bits of calling [`Network::backward`] for each
    /// step in turn, which is what this default does; a network may do it layer by layer over
    /// all steps at once, reading each weight once.
    fn backward_steps(
        &mut self,
        params: &ParamSet,
        traces: &[Self::Trace],
        grad_logits: &[f32],
        scope: Scope,
        grads: &mut [f32],
        carry: &mut Self::Carry,
    ) {
        for (j, trace) in traces.iter().enumerate().rev() {
            let g = &grad_logits[j * VOCAB..(j + 1) * VOCAB];
            self.backward(params, trace, g, scope, grads, Some(carry));
        }
    }

    /// Recomputes caches derived from the parameters after they changed.
    fn refresh(&mut self, params: &ParamSet);

    /// Rows of the sparse (embedding) tensors, in the order they were registered: the length
    /// of the optimizer's row flags ([`crate::train::optim::TouchedRows`]). The byte
    /// embedding's [`VOCAB`] rows come first.
    fn sparse_rows(&self) -> usize {
        VOCAB
    }

    /// Flags the rows of sparse tensors after the byte embedding that a traced step's gradient
    /// touches (the byte embedding's row is the token's, which the caller flags).
    fn mark_rows(&self, _trace: &Self::Trace, _touched: &mut [bool]) {}

    /// The recurrent state as named tensors (name, shape, values), for model files that resume
    /// a stream. [`Network::state_tensors_mut`] gives the same tensors in the same order.
    fn state_tensors<'s>(&self, state: &'s Self::State) -> Vec<StateTensor<&'s [f32]>> {
        state_tensors(self.layouts().state, state.as_ref())
    }
    fn state_tensors_mut<'s>(&self, state: &'s mut Self::State) -> Vec<StateTensor<&'s mut [f32]>> {
        state_tensors_mut(self.layouts().state, state.as_mut())
    }
}

/// How a network is made: its parameters' layout for a config (all zero), and the config that
/// a set of named tensors describes. Loaders fill the layout by name (src/modelfile.rs).
pub trait Build: Network + Sized {
    type Config;
    /// The sizes of the network whose tensors `src` holds, read off their shapes.
    fn infer(src: &dyn TensorSource) -> Result<Self::Config>;
    /// The network and its zero parameters, after checking the config.
    fn new(cfg: Self::Config) -> Result<(Self, ParamSet)>;
}

/// One tensor of a recurrent state.
pub struct StateTensor<D> {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: D,
}

/// The entries of a flat state as named tensors, in layout order.
pub fn state_tensors<'s>(layout: &Layout, state: &'s [f32]) -> Vec<StateTensor<&'s [f32]>> {
    layout
        .entries()
        .iter()
        .map(|e| StateTensor {
            name: e.name.clone(),
            shape: e.shape.clone(),
            data: e.slot.of(state),
        })
        .collect()
}

/// Mutable form of [`state_tensors`]: one disjoint slice per entry.
pub fn state_tensors_mut<'s>(
    layout: &Layout,
    state: &'s mut [f32],
) -> Vec<StateTensor<&'s mut [f32]>> {
    let mut rest = state;
    let mut out = Vec::with_capacity(layout.entries().len());
    for e in layout.entries() {
        let (data, tail) = std::mem::take(&mut rest).split_at_mut(e.slot.len);
        rest = tail;
        out.push(StateTensor {
            name: e.name.clone(),
            shape: e.shape.clone(),
            data,
        });
    }
    out
}
