//! Flat buffers described by a table of named shapes: a network's recurrent state and one
//! byte's trace are each declared once as such a table, which both counts their floats (for the
//! memory estimate) and allocates them, and hands out the [`Slot`] of every entry.
//!
//! A flat buffer keeps a segment's traces in one contiguous `[time, trace]` block and lets
//! state checkpoints and gradients be plain copies.

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
}
