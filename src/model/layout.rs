//! Flat buffers described by a table of named shapes: a network's recurrent state and one
//! byte's trace are each declared once as such a table, which both counts their floats (for the
//! memory estimate) and allocates them, and hands out the [`Slot`] of every entry.
//!
//! A flat buffer lets state checkpoints and gradients be plain copies.
//!
//! **One declaration, read three ways.** A layout is written once, as a function that calls
//! `add(name, shape)` for each entry, in buffer order, and builds a struct of whatever `add`
//! returns (a struct generic over its field type `T`):
//!
//! - with [`register`]: `T` = [`Slot`], and the entries are appended to a [`Layout`], which
//!   counts the floats (the memory estimate) and allocates the buffer;
//! - with [`carve`] over a buffer of that layout: `T` = `&[f32]`, the entries' values;
//! - with [`carve_mut`]: `T` = `&mut [f32]`, the entries as disjoint mutable slices, so that a
//!   layer can read some entries of a trace while it writes others.
//!
//! Carving walks the buffer in the order of the calls, as [`Layout::add`] does, so the three
//! readings cannot disagree. A network's state and trace are [`Blocks`]: the step's own
//! entries, then one run of entries per block.

use std::ops::Range;

use crate::params::Slot;

/// One named entry of a [`Layout`].
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub shape: Vec<usize>,
    pub slot: Slot,
}

/// Entries laid out one after another in a flat `f32` buffer, in the order they were added.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    entries: Vec<Entry>,
    len: usize,
}

impl Layout {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an entry of `shape` and returns its slot.
    pub fn add(&mut self, name: impl Into<String>, shape: &[usize]) -> Slot {
        let len = shape.iter().product();
        let slot = Slot {
            offset: self.len,
            len,
        };
        self.len += len;
        self.entries.push(Entry {
            name: name.into(),
            shape: shape.to_vec(),
            slot,
        });
        slot
    }

    /// Floats of a buffer with this layout.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A zero buffer with this layout.
    pub fn zeros(&self) -> Vec<f32> {
        vec![0.0; self.len]
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

/// `add` for a [`Layout`]: registers each entry as `{prefix}{name}`.
pub fn register<'l>(
    layout: &'l mut Layout,
    prefix: &'l str,
) -> impl FnMut(&str, &[usize]) -> Slot + 'l {
    move |name, shape| layout.add(format!("{prefix}{name}"), shape)
}

/// `add` over `buf`: hands out the next `shape`-sized piece of it.
pub fn carve<'a>(buf: &'a [f32]) -> impl FnMut(&str, &[usize]) -> &'a [f32] {
    let mut rest = buf;
    move |_, shape| {
        let (head, tail) = rest.split_at(shape.iter().product());
        rest = tail;
        head
    }
}

/// `add` over `buf`, mutably: hands out the next `shape`-sized piece of it.
pub fn carve_mut<'a>(buf: &'a mut [f32]) -> impl FnMut(&str, &[usize]) -> &'a mut [f32] {
    let mut rest = buf;
    move |_, shape| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(shape.iter().product());
        rest = tail;
        head
    }
}

/// A flat buffer of a network: the entries of the whole step (`..top`), then one run of
/// entries per block (named `layers.{l}.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Blocks {
    pub layout: Layout,
    /// Floats of the step's own entries, which come first.
    pub top: usize,
    /// Each block's range of the buffer.
    pub layers: Vec<Range<usize>>,
}

impl Blocks {
    /// Lays out `top`'s entries, then `layer`'s for each block, prefixed `layers.{l}.`.
    pub fn new(
        layers: usize,
        top: impl FnOnce(&mut Layout),
        mut layer: impl FnMut(&mut Layout, &str, usize),
    ) -> Self {
        let mut layout = Layout::new();
        top(&mut layout);
        let top = layout.len();
        let layers = (0..layers)
            .map(|l| {
                let start = layout.len();
                layer(&mut layout, &format!("layers.{l}."), l);
                start..layout.len()
            })
            .collect();
        Blocks {
            layout,
            top,
            layers,
        }
    }

    /// Block `l`'s range within the part after the step's own entries.
    pub fn after_top(&self, l: usize) -> Range<usize> {
        self.layers[l].start - self.top..self.layers[l].end - self.top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_tile_the_buffer_in_order() {
        let mut l = Layout::new();
        let a = l.add("a", &[2, 3]);
        let b = l.add("b", &[4]);
        let empty = l.add("none", &[0, 5]);
        assert_eq!((a.offset, a.len), (0, 6));
        assert_eq!((b.offset, b.len), (6, 4));
        assert_eq!((empty.offset, empty.len), (10, 0));
        assert_eq!(l.len(), 10);
        assert_eq!(l.zeros().len(), 10);
        assert_eq!(l.entries()[1].name, "b");
        assert_eq!(l.entries()[0].shape, vec![2, 3]);
    }

    struct Pair<T> {
        a: T,
        b: T,
    }

    fn pair<T>(add: &mut impl FnMut(&str, &[usize]) -> T) -> Pair<T> {
        Pair {
            a: add("a", &[2]),
            b: add("b", &[1, 3]),
        }
    }

    #[test]
    fn the_three_readings_agree() {
        let mut layout = Layout::new();
        let slots = pair(&mut register(&mut layout, "x."));
        assert_eq!(layout.len(), 5);
        assert_eq!(layout.entries()[1].name, "x.b");
        assert_eq!(layout.entries()[1].shape, vec![1, 3]);
        let mut buf = vec![0.0, 1.0, 2.0, 3.0, 4.0];
        let view = pair(&mut carve_mut(&mut buf));
        view.b[0] = 9.0;
        view.a[1] = 8.0;
        let view = pair(&mut carve(&buf));
        assert_eq!(view.a, &[0.0, 8.0]);
        assert_eq!(view.b, slots.b.of(&buf));
        assert_eq!(view.b, &[9.0, 3.0, 4.0]);
    }
}
