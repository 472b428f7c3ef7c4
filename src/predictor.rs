//! The predictor: a network, its parameters, the output bias, an optimizer and a training mode,
//! behind the two calls the codec makes — the distribution of the next byte, and learning the
//! byte that came.
//!
//! The stream starts as if preceded by a 0 byte: the first distribution is the network's
//! prediction after reading 0 from the zero state.

use anyhow::Result;

use crate::model::mamba1::Mamba1;
use crate::model::rwkv7::Rwkv7;
use crate::model::{Network, VOCAB};
use crate::params::{Group, ParamSet, Scope, Slot};
use crate::recipe::{ModelConfig, OptimizerKind, Recipe};
use crate::train::optim::{Optimizer, TouchedRows};
use crate::train::tbptt::Tbptt;
use crate::train::{logit_gradient, softmax_pdf};

/// What the codec needs from a model.
pub trait BytePredictor {
    /// The distribution of the next byte (256 probabilities summing to 1, each ≥ 1e-12).
    fn pdf(&self) -> &[f64];
    /// Learns the byte that came (as the recipe's training policy says) and predicts the next.
    fn learn(&mut self, byte: u8);
}

/// Name of the output bias tensor, added to every model's parameters in the group `bias`.
pub const OUTPUT_BIAS: &str = "output_bias";

/// Chunk length of TBPTT replays: traces of this many bytes are kept at once.
const TBPTT_CHUNK: usize = 64;

/// Builds the predictor a recipe describes, with freshly initialised weights.
pub fn build(recipe: &Recipe) -> Result<Box<dyn BytePredictor>> {
    recipe.validate()?;
    Ok(match &recipe.model {
        ModelConfig::Mamba1(cfg) => {
            let (net, params) = Mamba1::new_random(cfg.clone(), recipe.seed)?;
            Box::new(Predictor::new(net, params, recipe))
        }
        ModelConfig::Rwkv7(cfg) => {
            let (net, params) = Rwkv7::new_random(cfg.clone(), recipe.seed)?;
            Box::new(Predictor::new(net, params, recipe))
        }
    })
}

/// How the weights follow the data.
enum Mode<N: Network> {
    /// The weights never change.
    Infer,
    /// A one-step update after every byte, through the trace of the forward step that predicted
    /// it (gradients stop at the state that step started from).
    OneStep { trace: N::Trace },
    /// Truncated BPTT over segments.
    Tbptt(Box<Tbptt<N>>),
}

/// A network with its training machinery.
pub struct Predictor<N: Network> {
    net: N,
    params: ParamSet,
    state: N::State,
    bias: Slot,
    bias_group: Group,
    scope: Scope,
    optimizer: Optimizer,
    grads: Vec<f32>,
    grad_logits: Vec<f32>,
    probs: Vec<f32>,
    pdf: Vec<f64>,
    /// The token whose forward step produced `pdf`.
    last_input: u8,
    mode: Mode<N>,
}

impl<N: Network> Predictor<N> {
    /// Wraps a network and its parameters; adds the output bias to the parameters.
    pub fn new(mut net: N, mut params: ParamSet, recipe: &Recipe) -> Self {
        let groups = net.groups();
        let bias_group = groups
            .iter()
            .position(|g| *g == "bias")
            .expect("every model has a bias group") as Group;
        let bias = match params.find(OUTPUT_BIAS) {
            Some(t) => t.slot,
            None => params.add(OUTPUT_BIAS, &[VOCAB], bias_group),
        };
        let t = &recipe.training;
        let optimizer = Optimizer::new(t.optimizer, t.lr, t.clip, &params);
        let mode = if t.optimizer == OptimizerKind::None || t.scope == Scope::NONE {
            Mode::Infer
        } else if t.bptt <= 1 {
            Mode::OneStep {
                trace: net.new_trace(),
            }
        } else {
            Mode::Tbptt(Box::new(Tbptt::new(&net, t.bptt, TBPTT_CHUNK)))
        };
        net.refresh(&params);
        let mut p = Predictor {
            state: net.new_state(),
            grads: params.zeros_like(),
            net,
            params,
            bias,
            bias_group,
            scope: t.scope,
            optimizer,
            grad_logits: vec![0.0; VOCAB],
            probs: vec![0.0; VOCAB],
            pdf: vec![0.0; VOCAB],
            last_input: 0,
            mode,
        };
        p.forward(0);
        p
    }

    /// Runs the network on `token` (traced where the mode needs it) and sets the next pdf.
    fn forward(&mut self, token: u8) {
        let logits = match &mut self.mode {
            Mode::Infer => self.net.forward(&self.params, &mut self.state, token, None),
            Mode::OneStep { trace } => {
                self.net
                    .forward(&self.params, &mut self.state, token, Some(trace))
            }
            Mode::Tbptt(seg) => seg.forward(&mut self.net, &self.params, &mut self.state, token),
        };
        softmax_pdf(logits, self.bias.of(&self.params.data), &mut self.pdf);
        self.last_input = token;
    }

    /// The output bias's slot when the scope trains it.
    fn trained_bias(&self) -> Option<Slot> {
        self.scope.has(self.bias_group).then_some(self.bias)
    }
}

impl<N: Network> BytePredictor for Predictor<N> {
    fn pdf(&self) -> &[f64] {
        &self.pdf
    }

    fn learn(&mut self, byte: u8) {
        let bias = self.trained_bias();
        match &mut self.mode {
            Mode::Infer => {}
            Mode::OneStep { trace } => {
                for (q, &p) in self.probs.iter_mut().zip(&self.pdf) {
                    *q = p as f32;
                }
                logit_gradient(&self.probs, byte, 1.0, &mut self.grad_logits);
                if let Some(slot) = bias {
                    crate::kernels::add_assign(slot.of_mut(&mut self.grads), &self.grad_logits);
                }
                self.net.backward(
                    &self.params,
                    trace,
                    &self.grad_logits,
                    self.scope,
                    &mut self.grads,
                    None,
                );
                let mut touched: TouchedRows = [false; 256];
                touched[self.last_input as usize] = true;
                self.optimizer
                    .step(&mut self.params, &mut self.grads, self.scope, &touched);
                self.net.refresh(&self.params);
            }
            Mode::Tbptt(seg) => {
                if seg.record(byte, &self.pdf) {
                    seg.update(
                        &mut self.net,
                        &mut self.params,
                        &mut self.state,
                        &mut self.grads,
                        &mut self.optimizer,
                        self.scope,
                        bias,
                    );
                }
            }
        }
        self.forward(byte);
    }
}
