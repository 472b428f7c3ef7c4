//! Training: the optimizers ([`optim`]), the truncated-BPTT driver ([`tbptt`]), and the two
//! pieces every training mode shares — the coder's distribution and the gradient at the logits.

pub mod offline;
pub mod optim;
pub mod rate;
pub mod tbptt;

use std::sync::LazyLock;

use crate::kernels::exp64::exp_f64_in_place;
use crate::model::{ModelKind, VOCAB};

/// The training group of the output bias, which the trainer adds after the network's groups.
pub const BIAS_GROUP: &str = "bias";

/// Every group a training scope can name for a model: the network's, then [`BIAS_GROUP`].
/// Scope bits index this list.
pub fn trained_groups(kind: ModelKind) -> &'static [&'static str] {
    fn with_bias(kind: ModelKind) -> Vec<&'static str> {
        let mut groups = kind.groups().to_vec();
        groups.push(BIAS_GROUP);
        groups
    }
    static MAMBA1: LazyLock<Vec<&'static str>> = LazyLock::new(|| with_bias(ModelKind::Mamba1));
    static RWKV7: LazyLock<Vec<&'static str>> = LazyLock::new(|| with_bias(ModelKind::Rwkv7));
    match kind {
        ModelKind::Mamba1 => &MAMBA1,
        ModelKind::Rwkv7 => &RWKV7,
    }
}

/// Smallest probability any byte gets, so every byte stays codable and `ln p` finite.
pub const PDF_FLOOR: f64 = 1e-12;

/// `pdf = softmax(logits + bias)` in f64: the maximum is subtracted, exponentials are summed in
/// index order, and every probability is floored at [`PDF_FLOOR`] and renormalised.
pub fn softmax_pdf(logits: &[f32], bias: &[f32], pdf: &mut [f64]) {
    debug_assert!(logits.len() == VOCAB && bias.len() == VOCAB && pdf.len() == VOCAB);
    let mut max = f64::NEG_INFINITY;
    for (p, (&z, &b)) in pdf.iter_mut().zip(logits.iter().zip(bias)) {
        *p = z as f64 + b as f64;
        if *p > max {
            max = *p;
        }
    }
    for p in pdf.iter_mut() {
        *p -= max;
    }
    exp_f64_in_place(pdf);
    let mut sum = 0.0;
    for p in pdf.iter() {
        sum += *p;
    }
    let mut floored_sum = 0.0;
    for p in pdf.iter_mut() {
        *p /= sum;
        // Written so that NaN is floored too.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(*p >= PDF_FLOOR) {
            *p = PDF_FLOOR;
        }
        floored_sum += *p;
    }
    for p in pdf.iter_mut() {
        *p /= floored_sum;
    }
}

/// The ascent direction of `ln p(target)` with respect to the logits, times `scale`:
/// `(one_hot(target) − p) · scale`, from the probabilities the coder used.
pub fn logit_gradient(probs: &[f32], target: u8, scale: f32, out: &mut [f32]) {
    for (i, (o, &p)) in out.iter_mut().zip(probs).enumerate() {
        let hot = if i == target as usize { 1.0 } else { 0.0 };
        *o = (hot - p) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_is_normalised_floored_and_ordered() {
        let mut logits = vec![0.0f32; VOCAB];
        logits[3] = 2.0;
        logits[9] = -200.0;
        let mut bias = vec![0.0f32; VOCAB];
        bias[4] = 2.0;
        let mut pdf = vec![0.0; VOCAB];
        softmax_pdf(&logits, &bias, &mut pdf);
        assert!((pdf.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(pdf[3], pdf[4]);
        assert!(pdf[3] > pdf[0] && pdf[9] >= PDF_FLOOR * 0.99);
        let probs: Vec<f32> = pdf.iter().map(|&p| p as f32).collect();
        let mut g = vec![0.0; VOCAB];
        logit_gradient(&probs, 3, 0.5, &mut g);
        assert!(g[3] > 0.0 && g[0] < 0.0);
        assert!((g.iter().map(|&x| x as f64).sum::<f64>()).abs() < 1e-6);
    }
}
