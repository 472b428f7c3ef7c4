//! The parameter registry: every trainable tensor of a model lives in one flat `Vec<f32>`,
//! described by a table of (name, shape, group, offset).
//!
//! A model keeps [`Slot`]s (offset and length) into the buffer and reads its weights through
//! them; the gradient and the optimizer's moments are buffers of the same length that use the
//! same slots. So saving, loading, zeroing, SGD and Adam are each one loop over the table, a
//! training scope is a set of groups, and one tensor name means the same thing everywhere.

use anyhow::{Result, bail};

/// Where a tensor sits in the flat buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub offset: usize,
    pub len: usize,
}

impl Slot {
    /// The slot's elements in a buffer laid out by the same registry.
    #[inline(always)]
    pub fn of<'a>(&self, buf: &'a [f32]) -> &'a [f32] {
        &buf[self.offset..self.offset + self.len]
    }

    /// Mutable form of [`Slot::of`].
    #[inline(always)]
    pub fn of_mut<'a>(&self, buf: &'a mut [f32]) -> &'a mut [f32] {
        &mut buf[self.offset..self.offset + self.len]
    }

    /// Row `row` of a row-major matrix of `cols` columns stored in this slot.
    #[inline(always)]
    pub fn row(&self, row: usize, cols: usize) -> Slot {
        debug_assert!((row + 1) * cols <= self.len);
        Slot {
            offset: self.offset + row * cols,
            len: cols,
        }
    }
}

/// A training group: a model-specific index into its list of group names (see
/// [`crate::recipe::ModelKind::groups`]). At most 32 groups per model.
pub type Group = u8;

/// A set of groups, as trained by one training rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Scope(pub u32);

impl Scope {
    pub const NONE: Scope = Scope(0);
    pub const ALL: Scope = Scope(u32::MAX);

    #[inline(always)]
    pub fn has(self, group: Group) -> bool {
        self.0 & (1u32 << group) != 0
    }

    pub fn with(self, group: Group) -> Scope {
        Scope(self.0 | (1u32 << group))
    }

    /// Parses `a+b+c` (or `all`) against a model's group names.
    pub fn parse(text: &str, groups: &[&str]) -> Result<Scope> {
        let text = text.trim();
        if text == "all" {
            return Ok(Scope::all_of(groups));
        }
        let mut scope = Scope::NONE;
        for part in text.split('+') {
            let part = part.trim();
            match groups.iter().position(|g| *g == part) {
                Some(i) => scope = scope.with(i as Group),
                None => bail!(
                    "unknown training group '{part}' (groups of this model: {}, or all)",
                    groups.join(", ")
                ),
            }
        }
        Ok(scope)
    }

    /// The scope holding exactly the given groups.
    pub fn all_of(groups: &[&str]) -> Scope {
        Scope(if groups.len() >= 32 {
            u32::MAX
        } else {
            (1u32 << groups.len()) - 1
        })
    }

    /// Canonical text: group names in the model's order joined with `+`, or `all`.
    pub fn to_text(self, groups: &[&str]) -> String {
        if self == Scope::all_of(groups) {
            return "all".to_string();
        }
        let names: Vec<&str> = (0..groups.len())
            .filter(|&i| self.has(i as Group))
            .map(|i| groups[i])
            .collect();
        names.join("+")
    }
}

/// One named tensor of the registry.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// The tensor's key in model files (safetensors names of the reference layouts).
    pub name: String,
    pub shape: Vec<usize>,
    pub group: Group,
    pub slot: Slot,
    /// Rows of this tensor are looked up by input byte (an embedding): its gradient touches
    /// only the rows of the bytes that were seen, and optimizers update only those rows.
    pub sparse_rows: bool,
}

/// All trainable tensors of a model in one flat buffer.
#[derive(Clone, Debug, Default)]
pub struct ParamSet {
    pub data: Vec<f32>,
    pub tensors: Vec<TensorInfo>,
}

impl ParamSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a zero tensor and returns its slot.
    pub fn add(&mut self, name: impl Into<String>, shape: &[usize], group: Group) -> Slot {
        self.add_tensor(name.into(), shape, group, false)
    }

    /// Appends a zero embedding-like tensor whose rows are updated sparsely.
    pub fn add_sparse_rows(
        &mut self,
        name: impl Into<String>,
        shape: &[usize],
        group: Group,
    ) -> Slot {
        self.add_tensor(name.into(), shape, group, true)
    }

    fn add_tensor(
        &mut self,
        name: String,
        shape: &[usize],
        group: Group,
        sparse_rows: bool,
    ) -> Slot {
        debug_assert!(self.find(&name).is_none(), "duplicate tensor {name}");
        let len = shape.iter().product();
        let slot = Slot {
            offset: self.data.len(),
            len,
        };
        self.data.resize(self.data.len() + len, 0.0);
        self.tensors.push(TensorInfo {
            name,
            shape: shape.to_vec(),
            group,
            slot,
            sparse_rows,
        });
        slot
    }

    pub fn find(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    #[inline(always)]
    pub fn get(&self, slot: Slot) -> &[f32] {
        slot.of(&self.data)
    }

    #[inline(always)]
    pub fn get_mut(&mut self, slot: Slot) -> &mut [f32] {
        slot.of_mut(&mut self.data)
    }

    /// Number of scalar parameters.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// A zero buffer laid out like this one (gradients, moments).
    pub fn zeros_like(&self) -> Vec<f32> {
        vec![0.0; self.data.len()]
    }
}

/// Named tensors to read a network's sizes and weights from, as model files provide them: the
/// seam that keeps file formats out of the models. A model infers its sizes through it; the
/// loader that fills a [`ParamSet`] by name lives with the file format.
pub trait TensorSource {
    /// The shape of tensor `name`, if the source has it.
    fn tensor_shape(&self, name: &str) -> Option<&[usize]>;

    /// The shape of a tensor, or an error naming it.
    fn shape(&self, name: &str) -> Result<&[usize]> {
        match self.tensor_shape(name) {
            Some(shape) => Ok(shape),
            None => bail!("model file lacks tensor {name}"),
        }
    }

    /// Dimension `axis` of a tensor of the given rank.
    fn dim(&self, name: &str, rank: usize, axis: usize) -> Result<usize> {
        let shape = self.shape(name)?;
        if shape.len() != rank {
            bail!("tensor {name} has shape {shape:?}, expected rank {rank}");
        }
        Ok(shape[axis])
    }

    /// Number of blocks: the count of consecutive `prefix{N}suffix` tensors from N = 0.
    fn count_layers(&self, prefix: &str, suffix: &str) -> usize {
        (0..)
            .take_while(|n| self.tensor_shape(&format!("{prefix}{n}{suffix}")).is_some())
            .count()
    }
}

/// The seeded generator of the reference models' random initialisation: a 64-bit LCG (Knuth's
/// MMIX constants) whose high 32 bits give uniform floats. Kept exactly so that a seed means the
/// same initial weights as in the reference system.
pub struct InitRng {
    state: u64,
}

impl InitRng {
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub fn next_u32(&mut self) -> u32 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.state >> 32) as u32
    }

    /// Uniform in [0, 1].
    pub fn next_f32(&mut self) -> f32 {
        self.next_u32() as f32 * (1.0 / u32::MAX as f32)
    }

    /// Fills with uniform values in [-scale, scale].
    pub fn fill_uniform(&mut self, out: &mut [f32], scale: f32) {
        for v in out {
            *v = (self.next_f32() - 0.5) * 2.0 * scale;
        }
    }

    /// Fills with uniform values in [center - scale, center + scale].
    pub fn fill_centered(&mut self, out: &mut [f32], center: f32, scale: f32) {
        for v in out {
            *v = center + (self.next_f32() - 0.5) * 2.0 * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_tile_the_buffer_in_order() {
        let mut p = ParamSet::new();
        let a = p.add("a", &[2, 3], 0);
        let b = p.add_sparse_rows("b", &[4], 1);
        assert_eq!((a.offset, a.len, b.offset, b.len), (0, 6, 6, 4));
        assert_eq!(p.len(), 10);
        p.get_mut(b)[1] = 5.0;
        assert_eq!(p.data[7], 5.0);
        assert_eq!(a.row(1, 3), Slot { offset: 3, len: 3 });
        assert!(p.find("b").unwrap().sparse_rows);
    }

    #[test]
    fn scope_text_round_trips() {
        let groups = ["embed", "norm", "head", "bias"];
        let s = Scope::parse("head+embed", &groups).unwrap();
        assert!(s.has(0) && s.has(2) && !s.has(1));
        assert_eq!(s.to_text(&groups), "embed+head");
        assert_eq!(
            Scope::parse("all", &groups).unwrap().to_text(&groups),
            "all"
        );
        let err = Scope::parse("embed+bogus", &groups)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }
}
