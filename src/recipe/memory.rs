//! The working memory a recipe's predictor needs, counted from the recipe alone, so that a
//! header asking for too much is refused before anything is allocated.

use crate::model::VOCAB;
use crate::recipe::{Action, Base, OptimizerKind, Recipe, TrainSpec};
use crate::train::tbptt;

/// The floats the predictor of `recipe` holds at most, counted from its sizes alone (nothing is
/// built): parameters and gradients, Adam's moments, the network's traces and the states the
/// training actions keep. Vector-sized scratch (logits, one layer's buffers) is left out;
/// Mamba-1's cache of its `A` matrices adds less than one more copy of the parameters.
///
/// A schedule holds several actions, and the predictor keeps what they need side by side: the
/// optimizer's moments once any action steps Adam (kept across rules), the one-step trace once
/// any action takes one-step updates, and one TBPTT segment's buffers at a time (a new window
/// drops the old segment before it allocates its own). So the moments and the one-step trace
/// are counted if any action needs them, and the segment as the largest window's.
///
/// [`Recipe::validate`] refuses a recipe whose estimate exceeds what this build accepts, and
/// header parsing validates, so a header cannot make the decoder allocate more than that.
pub fn working_floats(recipe: &Recipe) -> usize {
    let config = recipe.config();
    let (params, trace, state) = (
        config.param_count(),
        config.trace_floats(),
        config.state_floats(),
    );
    let params = params + VOCAB; // the output bias
    let specs: Vec<&TrainSpec> = recipe
        .actions()
        .filter_map(|a| match a {
            Action::Train(t) => Some(t),
            Action::Infer => None,
        })
        .collect();
    // A model file may carry both moments to resume from, whatever the schedule's
    // optimizers; a fresh run keeps the first only where some rule has β1 ≠ 0.
    let adam = specs.iter().any(|t| t.optimizer == OptimizerKind::Adam);
    let moments = match recipe.base {
        Base::File { .. } => 2,
        _ if adam => 1 + recipe.keeps_first_moment() as usize,
        _ => 0,
    };
    // The network's own scratch trace and the live state exist whatever the schedule.
    let mut traces = 1usize;
    let states = 1usize;
    if specs.iter().any(|t| t.bptt == 1) {
        traces += 1;
    }
    let segment = specs
        .iter()
        .filter(|t| t.bptt > 1)
        .map(|t| segment_floats(t.bptt, trace, state))
        .max()
        .unwrap_or(0);
    // The network keeps the gradient buffers of its largest chunk walked back at once, and
    // those of its replays.
    let step_grads = specs
        .iter()
        .filter(|t| t.bptt > 1)
        .map(|t| {
            let chunk = tbptt::chunk_len(t.bptt, tbptt::CHUNK);
            config.step_grad_floats(chunk) + config.replay_floats()
        })
        .max()
        .unwrap_or(0);
    // A built-in prior stays expanded (f32) for the process's life once a stream used it.
    let prior = crate::prior::by_number(config.prior()).map_or(0, |p| p.floats());
    params
        .saturating_mul(2 + moments)
        .saturating_add(prior)
        .saturating_add(traces.saturating_mul(trace))
        .saturating_add(states.saturating_mul(state))
        .saturating_add(segment)
        .saturating_add(step_grads)
}

/// The floats of one TBPTT segment of `window` bytes (src/train/tbptt.rs): a chunk of traces,
/// a checkpoint per chunk, the state being replayed and the carried gradient (a state's size),
/// the probabilities each byte of the segment was coded with, and the gradient at the logits
/// of each byte of a chunk.
fn segment_floats(window: usize, trace: usize, state: usize) -> usize {
    let chunk = tbptt::chunk_len(window, tbptt::CHUNK);
    let states = window.div_ceil(chunk) + 2;
    chunk
        .saturating_mul(trace + VOCAB)
        .saturating_add(states.saturating_mul(state))
        .saturating_add(window.saturating_mul(VOCAB))
}
