//! The predictor: a network, its parameters, the output bias, the optimizer state and the
//! recipe's schedule, behind the calls the codec makes — the distribution of the next byte,
//! learning the byte that came — and saving the whole of it as a model file.
//!
//! The stream starts as if preceded by a 0 byte: the first distribution is the network's
//! prediction after reading 0 from the zero state (or from where a model file left off).
//!
//! **The schedule.** Byte `i` of the input is learned as the schedule's action for position `i`
//! says. The forward step that predicts byte `i` already depends on it (a trained byte needs a
//! traced step), so that step is taken lazily, when the distribution of byte `i` is asked for:
//! `learn(b)` trains on `b` and leaves `b` *pending*; `pdf()` feeds the pending byte. When the
//! action changes at a position, the old action's pending TBPTT segment is trained on as it
//! is (a shorter segment, its bytes' mean loss) before the new action starts, so no coded byte
//! goes untrained and both sides cut at the same byte. Neighbouring pieces with equal actions
//! are one run: their segments and strides continue across the boundary.
//!
//! **Saving and resuming** (src/resume.rs). After the last byte is learned nothing is pending
//! but the byte itself: a saved model holds the weights, the optimizer state, the state the
//! current segment started from, and the bytes to feed again to rebuild the segment, so a run
//! that starts from it computes what the saving run would have computed next, bit for bit —
//! provided the new run's first action equals the saved one.

use anyhow::{Context, Result, bail};

use crate::model::mamba1::{self, Mamba1};
use crate::model::rwkv7::{self, Rwkv7};
use crate::model::{Network, VOCAB};
use crate::modelfile::{ModelFile, Weights, WeightsError, load};
use crate::params::{Group, ParamSet, Slot};
use crate::recipe::schedule::Schedule;
use crate::recipe::{Action, Base, ModelConfig, Recipe, TrainSpec};
use crate::resume;
use crate::train::optim::{AdamSettings, Hyper, Optimizer};
use crate::train::tbptt::{self, Tbptt};
use crate::train::{logit_gradient, softmax_pdf};

/// What the codec needs from a model.
pub trait BytePredictor {
    /// The distribution of the next byte (256 probabilities summing to 1, each ≥ 1e-12).
    fn pdf(&mut self) -> &[f64];
    /// Learns the byte that came, as the schedule says.
    fn learn(&mut self, byte: u8);
    /// Learns the byte that came, which the coder spent `coded_bits` on: with `focus`, the
    /// byte's loss weighs by them ([`TrainSpec::loss_weight`]). The codec calls this one.
    fn learn_coded(&mut self, byte: u8, coded_bits: f64);
    /// The model as a model file that resumes here (call it after [`BytePredictor::learn`]).
    fn save(&self) -> Result<Vec<u8>>;
}

/// Name of the output bias tensor, added to every model's parameters in the group `bias`.
pub const OUTPUT_BIAS: &str = "output_bias";

/// Builds the predictor a recipe describes: fresh seeded weights, or the model file `weights`
/// (which must be the one the recipe names). The recipe's positions must be in bytes.
pub fn build(recipe: &Recipe, weights: Option<&Weights>) -> Result<Box<dyn BytePredictor>> {
    recipe.validate()?;
    let schedule = Schedule::new(&recipe.schedule)
        .context("the recipe's positions in percent are not resolved to bytes")?;
    Ok(match &recipe.base {
        Base::Fresh { config, seed } => match config {
            ModelConfig::Mamba1(cfg) => {
                let (net, mut params) = Mamba1::new_random(cfg.clone(), *seed)?;
                if cfg.prior != 0 {
                    // The prior holds the output bias too.
                    params.add(OUTPUT_BIAS, &[VOCAB], mamba1::GROUPS.len() as Group);
                    crate::prior::start_from(config, &mut params)?;
                }
                Box::new(Predictor::new(net, params, recipe, schedule, None)?)
            }
            ModelConfig::Rwkv7(cfg) => {
                let (net, params) = Rwkv7::new_random(cfg.clone(), *seed)?;
                Box::new(Predictor::new(net, params, recipe, schedule, None)?)
            }
        },
        Base::File {
            config,
            sha256,
            name,
        } => {
            let w = weights.ok_or_else(|| WeightsError::Missing {
                sha256: *sha256,
                name: name.clone(),
            })?;
            if w.sha256 != *sha256 {
                return Err(WeightsError::Wrong {
                    expected: *sha256,
                    name: name.clone(),
                    actual: w.sha256,
                }
                .into());
            }
            let file = w.file.native()?;
            if file.config()? != *config {
                bail!("the model file's sizes differ from the recipe's");
            }
            match config {
                ModelConfig::Mamba1(_) => {
                    let bias = [(OUTPUT_BIAS, &[VOCAB][..], mamba1::GROUPS.len() as Group)];
                    let (net, params) = load::<Mamba1>(&file, &bias)?;
                    Box::new(Predictor::new(net, params, recipe, schedule, Some(&file))?)
                }
                ModelConfig::Rwkv7(_) => {
                    let bias = [(OUTPUT_BIAS, &[VOCAB][..], rwkv7::GROUPS.len() as Group)];
                    let (net, params) = load::<Rwkv7>(&file, &bias)?;
                    Box::new(Predictor::new(net, params, recipe, schedule, Some(&file))?)
                }
            }
        }
    })
}

/// What the forward step of the byte being predicted prepared for learning it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prepared {
    /// Nothing: the byte is only predicted.
    Infer,
    /// A one-step update through the step's trace.
    OneStep,
    /// The byte joins the pending TBPTT segment.
    Segment,
}

/// How a learned byte's loss is weighed.
#[derive(Clone, Copy, Debug)]
enum Weighing {
    /// By the bits the coder spent on it, where known ([`TrainSpec::loss_weight`]).
    Coded(Option<f64>),
    /// As a model file saved it for a byte to learn again.
    Saved(f32),
}

impl Weighing {
    fn of(self, spec: &TrainSpec) -> f32 {
        match self {
            Weighing::Coded(bits) => spec.loss_weight(bits),
            Weighing::Saved(w) => w,
        }
    }
}

/// The action in force and how far into its run the stream is.
struct Run {
    action: Action,
    /// Bytes learned in this run (stride and segment positions count from its start).
    phase: u64,
    /// Position where the schedule's current piece ends.
    end: u64,
}

/// A network with its training machinery.
pub struct Predictor<N: Network> {
    net: N,
    params: ParamSet,
    state: N::State,
    bias: Slot,
    bias_group: Group,
    optimizer: Optimizer,
    recipe: Recipe,
    schedule: Schedule,
    run: Run,
    /// Bytes of this input learned so far: the position of the next byte.
    position: u64,
    /// Bytes learned before this run (from the model file).
    position_before: u64,
    /// The byte to feed before the next prediction.
    pending: Option<u8>,
    /// What the last forward step prepared.
    step: Prepared,
    /// The token whose forward step produced `pdf`.
    last_input: u8,
    trace: Option<N::Trace>,
    /// The optimizer's flags of touched sparse rows ([`Network::sparse_rows`]), all false
    /// between updates.
    touched: Vec<bool>,
    segment: Option<Box<Tbptt<N>>>,
    grads: Vec<f32>,
    grad_logits: Vec<f32>,
    probs: Vec<f32>,
    pdf: Vec<f64>,
}

impl<N: Network> Predictor<N> {
    /// Wraps a network and its parameters (adding the output bias if they lack it), and
    /// restores the resume data of `file` if given.
    pub fn new(
        mut net: N,
        mut params: ParamSet,
        recipe: &Recipe,
        schedule: Schedule,
        file: Option<&ModelFile>,
    ) -> Result<Self> {
        // The output bias is the trainer's own group, after the network's.
        let bias_group = net.groups().len() as Group;
        let bias = match params.find(OUTPUT_BIAS) {
            Some(t) => t.slot,
            None => params.add(OUTPUT_BIAS, &[VOCAB], bias_group),
        };
        // The table grew tensor by tensor, which may have left the buffer up to twice its
        // length; the limits count the parameters at their size ([`crate::recipe::working_floats`]).
        params.data.shrink_to_fit();
        net.refresh(&params);
        let mut p = Predictor {
            state: net.new_state(),
            grads: params.zeros_like(),
            touched: vec![false; net.sparse_rows()],
            net,
            params,
            bias,
            bias_group,
            optimizer: Optimizer::keeping_first_moment(recipe.keeps_first_moment()),
            recipe: recipe.clone(),
            schedule,
            run: Run {
                action: Action::Infer,
                phase: 0,
                end: 0,
            },
            position: 0,
            position_before: 0,
            pending: Some(0),
            step: Prepared::Infer,
            last_input: 0,
            trace: None,
            segment: None,
            grad_logits: vec![0.0; VOCAB],
            probs: vec![0.0; VOCAB],
            pdf: vec![0.0; VOCAB],
        };
        if let Some(file) = file {
            p.resume(file)
                .context("cannot resume from the model file")?;
        }
        Ok(p)
    }

    /// Restores the optimizer, the state and the run a model file saved, and replays the
    /// pending segment (src/resume.rs).
    fn resume(&mut self, file: &ModelFile) -> Result<()> {
        let r = resume::read(
            file,
            self.recipe.kind(),
            &self.params,
            &self.net,
            &mut self.state,
        )?;
        // The running products of Adam's βs take the saved action's constants (those of a
        // bare train when it only inferred).
        let adam = match &r.action {
            Action::Train(t) => t.adam,
            Action::Infer => AdamSettings::DEFAULT,
        };
        self.optimizer.restore(r.moments, r.adam_steps, &adam);
        self.position_before = r.position;
        let relearn = (r.replay.len() - 1) as u64;
        let start = r
            .phase
            .checked_sub(relearn)
            .context("replay longer than the run")?;
        // The bytes to learn again are a segment that the saving run had not finished.
        if relearn > 0 {
            let ok = match &r.action {
                Action::Train(t) => {
                    // Grown windows start wherever the last one ended.
                    let aligned = t.grows() || start % t.stride as u64 == 0;
                    t.bptt > 1 && aligned && relearn < t.bptt as u64
                }
                Action::Infer => false,
            };
            if !ok {
                bail!("the bytes to learn again are not a pending segment of the saved action");
            }
        }
        self.run = Run {
            action: r.action,
            phase: start,
            end: 0,
        };
        self.pending = Some(r.replay[0]);
        for (&b, &w) in r.replay[1..].iter().zip(&r.replay_weights) {
            self.forward_pending();
            self.train(b, Weighing::Saved(w));
            self.pending = Some(b);
        }
        Ok(())
    }

    /// Moves to the schedule's piece at `pos` if the current one has ended; a different action
    /// ends the run (training on its pending segment) and starts a new one.
    fn enter(&mut self, pos: u64) {
        if pos < self.run.end {
            return;
        }
        let piece = self.schedule.piece_at(pos);
        if *piece.action == self.run.action {
            self.run.end = piece.end;
            return;
        }
        let action = piece.action.clone();
        let end = piece.end;
        self.finish_segment();
        self.run = Run {
            action,
            phase: 0,
            end,
        };
    }

    /// Trains on the pending TBPTT segment, complete or not, with the action in force.
    fn finish_segment(&mut self) {
        let Action::Train(spec) = &self.run.action else {
            return;
        };
        if let Some(seg) = &mut self.segment
            && seg.pending() > 0
        {
            let bias = spec.scope.has(self.bias_group).then_some(self.bias);
            seg.update(
                &mut self.net,
                &mut self.params,
                &mut self.state,
                &mut self.grads,
                &mut self.optimizer,
                &hyper(spec),
                spec.scope,
                bias,
                spec.state,
            );
        }
    }

    /// Feeds the pending byte (traced as the run needs) and sets the next distribution.
    fn forward_pending(&mut self) {
        let Some(token) = self.pending.take() else {
            return;
        };
        self.step = match &self.run.action {
            Action::Train(t) if t.trains(self.run.phase) => {
                if t.bptt == 1 {
                    Prepared::OneStep
                } else {
                    Prepared::Segment
                }
            }
            _ => Prepared::Infer,
        };
        let logits = match self.step {
            Prepared::Infer => self.net.forward(&self.params, &mut self.state, token, None),
            Prepared::OneStep => {
                let net = &mut self.net;
                let trace = self.trace.get_or_insert_with(|| net.new_trace());
                net.forward(&self.params, &mut self.state, token, Some(trace))
            }
            Prepared::Segment => {
                let (window, length) = match &self.run.action {
                    Action::Train(t) => (t.bptt, t.window_at(self.optimizer.steps())),
                    Action::Infer => (1, 1),
                };
                // A new window needs new buffers; the old segment was trained on when its run
                // ended, so nothing is lost.
                if self.segment.as_ref().is_some_and(|s| s.window() != window) {
                    self.segment = None;
                }
                let net = &self.net;
                let seg = self
                    .segment
                    .get_or_insert_with(|| Box::new(Tbptt::new(net, window, tbptt::CHUNK)));
                if seg.start().is_none() {
                    seg.set_length(length);
                }
                seg.forward(&mut self.net, &self.params, &mut self.state, token)
            }
        };
        softmax_pdf(logits, self.bias.of(&self.params.data), &mut self.pdf);
        self.last_input = token;
    }

    /// Learns `byte` as the last forward step prepared, with its loss weighed as `weighing`
    /// says, and counts it in the run.
    fn train(&mut self, byte: u8, weighing: Weighing) {
        let spec = match &self.run.action {
            Action::Train(t) => *t,
            Action::Infer => {
                self.run.phase += 1;
                return;
            }
        };
        let bias = spec.scope.has(self.bias_group).then_some(self.bias);
        match self.step {
            Prepared::Infer => {}
            Prepared::OneStep => {
                // Set by the forward step that prepared this one.
                let Some(trace) = &self.trace else {
                    self.run.phase += 1;
                    return;
                };
                for (q, &p) in self.probs.iter_mut().zip(&self.pdf) {
                    *q = p as f32;
                }
                let weight = weighing.of(&spec);
                logit_gradient(&self.probs, byte, weight, &mut self.grad_logits);
                if let Some(slot) = bias {
                    crate::kernels::add_assign(slot.of_mut(&mut self.grads), &self.grad_logits);
                }
                self.net.backward(
                    &self.params,
                    trace,
                    &self.grad_logits,
                    spec.scope,
                    &mut self.grads,
                    None,
                );
                let touched = &mut self.touched;
                touched[self.last_input as usize] = true;
                self.net.mark_rows(trace, touched);
                self.optimizer.step(
                    &mut self.params,
                    &mut self.grads,
                    &hyper(&spec),
                    spec.scope,
                    touched,
                );
                touched.fill(false);
                self.net.refresh(&self.params);
            }
            Prepared::Segment => {
                if let Some(seg) = &mut self.segment
                    && seg.record(byte, &self.pdf, weighing.of(&spec))
                {
                    seg.update(
                        &mut self.net,
                        &mut self.params,
                        &mut self.state,
                        &mut self.grads,
                        &mut self.optimizer,
                        &hyper(&spec),
                        spec.scope,
                        bias,
                        spec.state,
                    );
                }
            }
        }
        // Learned: the next forward step prepares afresh.
        self.step = Prepared::Infer;
        self.run.phase += 1;
    }
}

impl<N: Network> Predictor<N> {
    fn learn_at(&mut self, byte: u8, coded_bits: Option<f64>) {
        if self.pending.is_some() {
            self.pdf();
        }
        self.train(byte, Weighing::Coded(coded_bits));
        self.position += 1;
        self.pending = Some(byte);
    }
}

fn hyper(spec: &TrainSpec) -> Hyper {
    Hyper {
        kind: spec.optimizer,
        lr: spec.lr,
        clip: spec.clip,
        adam: spec.adam,
        rate: spec.rate,
        lrmul: spec.lrmul,
    }
}

impl<N: Network> BytePredictor for Predictor<N> {
    fn pdf(&mut self) -> &[f64] {
        if self.pending.is_some() {
            self.enter(self.position);
            self.forward_pending();
        }
        &self.pdf
    }

    fn learn(&mut self, byte: u8) {
        self.learn_at(byte, None);
    }

    fn learn_coded(&mut self, byte: u8, coded_bits: f64) {
        self.learn_at(byte, Some(coded_bits));
    }

    fn save(&self) -> Result<Vec<u8>> {
        let Some(next) = self.pending else {
            bail!("a model is saved after a byte is learned, not between prediction and byte");
        };
        // A pending segment is saved as its start state and its bytes, to be replayed.
        let (state, mut replay) = match self.segment.as_ref().and_then(|s| {
            let (start, inputs) = s.start()?;
            (s.pending() > 0).then_some((start, inputs.to_vec()))
        }) {
            Some((start, inputs)) => (start, inputs),
            None => (&self.state, Vec::new()),
        };
        replay.push(next);
        let replay_weights = match &self.segment {
            Some(s) if replay.len() > 1 => s.weights(),
            _ => &[],
        };
        let moments = self.optimizer.moments();
        resume::save(&resume::Saved {
            kind: self.recipe.kind(),
            recipe: &self.recipe,
            params: &self.params,
            moments,
            adam_steps: self.optimizer.steps(),
            position: self.position_before.saturating_add(self.position),
            net: &self.net,
            state,
            action: &self.run.action,
            phase: self.run.phase,
            replay,
            replay_weights,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::ModelKind;

    fn tiny(rules: &str) -> Recipe {
        crate::levels::default_recipe(ModelKind::Mamba1)
            .edit(&format!("cfg:hidden=16,layers=1 {rules}"), None)
            .unwrap()
    }

    fn run(p: &mut dyn BytePredictor, text: &[u8]) -> Vec<u64> {
        text.iter()
            .map(|&b| {
                let bits = p.pdf()[b as usize].to_bits();
                p.learn(b);
                bits
            })
            .collect()
    }

    const TEXT: &[u8] = b"the model learns each byte as it comes, and the coder spends few bits";

    #[test]
    fn equal_neighbouring_actions_are_one_run() {
        let one = tiny("0..:train(bptt=4)");
        let split = tiny("0..10:train(bptt=4) 10..:train(bptt=4)");
        let a = run(build(&one, None).unwrap().as_mut(), TEXT);
        let b = run(build(&split, None).unwrap().as_mut(), TEXT);
        assert_eq!(a, b);
        // A different action at 10 cuts the segment there: bytes 8 and 9 are trained on before
        // byte 10 is predicted.
        let cut = tiny("0..10:train(bptt=4) 10..:train(bptt=4,lr=0.0021)");
        let c = run(build(&cut, None).unwrap().as_mut(), TEXT);
        assert_eq!(a[..10], c[..10], "bytes before the cut are predicted alike");
        assert_ne!(a[10], c[10]);
    }

    #[test]
    fn a_carried_state_changes_the_predictions_after_the_first_segment() {
        let rebuild = run(
            build(&tiny("0..:train(bptt=4)"), None).unwrap().as_mut(),
            TEXT,
        );
        let carry = tiny("0..:train(bptt=4,state=carry)");
        let c = run(build(&carry, None).unwrap().as_mut(), TEXT);
        // Bytes 0..4 are the first segment, predicted before any update; after it, the same
        // weights run from another state.
        assert_eq!(rebuild[..4], c[..4]);
        assert_ne!(rebuild[4], c[4]);
    }

    #[test]
    fn infer_spans_do_not_move_the_weights() {
        let all_infer = tiny("0..:infer");
        let p = build(&all_infer, None).unwrap();
        let mut q = build(&tiny("0..:infer"), None).unwrap();
        run(q.as_mut(), TEXT);
        // The same weights after the text: the saved tensors differ only in state and position.
        let a = ModelFile::from_bytes(&p.save().unwrap()).unwrap();
        let b = ModelFile::from_bytes(&q.save().unwrap()).unwrap();
        for (name, t) in &a.tensors {
            if !name.starts_with("lmzip.state.") {
                assert_eq!(t, &b.tensors[name], "{name}");
            }
        }
    }
}
