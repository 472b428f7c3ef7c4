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

/// Declares a group of named tensors that live side by side in a flat buffer, once: the macro
/// makes the struct of their [`Slot`]s with a `register` function that adds them to a
/// [`Layout`] (so the same list allocates and counts), and two views that split a buffer into
/// one slice per tensor (`view` to read, `view_mut` to write several at once).
///
/// ```ignore
/// flat_group! {
///     /// One block's trace.
///     pub struct LayerTraceSlots, view LayerTrace, view_mut LayerTraceMut, dims (h, i) {
///         h_in: [h],
///         xz: [2 * i],
///     }
/// }
/// ```
#[macro_export]
macro_rules! flat_group {
    (
        $(#[$doc:meta])*
        $vis:vis struct $Slots:ident, view $View:ident, view_mut $ViewMut:ident,
        dims ($($dim:ident),*) {
            $( $(#[$fdoc:meta])* $field:ident : [$($shape:expr),*] ),* $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        $vis struct $Slots {
            $( $(#[$fdoc])* pub $field: $crate::params::Slot, )*
        }

        /// Read-only view of one group in a flat buffer.
        #[allow(dead_code)]
        $vis struct $View<'a> {
            $( pub $field: &'a [f32], )*
        }

        /// Writable view of one group in a flat buffer: one disjoint slice per tensor.
        #[allow(dead_code)]
        $vis struct $ViewMut<'a> {
            $( pub $field: &'a mut [f32], )*
        }

        #[allow(dead_code)]
        impl $Slots {
            /// Adds the group's tensors to `layout`, names prefixed by `prefix`.
            #[allow(clippy::too_many_arguments, unused_variables)]
            pub fn register(
                layout: &mut $crate::model::layout::Layout,
                prefix: &str,
                $($dim: usize),*
            ) -> Self {
                Self {
                    $( $field: layout.add(
                        format!("{prefix}{}", stringify!($field)),
                        &[$($shape),*],
                    ), )*
                }
            }

            /// The whole group as one slot (its tensors are contiguous, in declaration order).
            fn span(&self) -> $crate::params::Slot {
                let slots = [$(self.$field),*];
                let first = slots[0];
                let len = slots.iter().map(|s| s.len).sum();
                $crate::params::Slot { offset: first.offset, len }
            }

            pub fn view<'a>(&self, buf: &'a [f32]) -> $View<'a> {
                let rest = self.span().of(buf);
                $( let ($field, rest) = rest.split_at(self.$field.len); )*
                let _ = rest;
                $View { $($field),* }
            }

            pub fn view_mut<'a>(&self, buf: &'a mut [f32]) -> $ViewMut<'a> {
                let rest = self.span().of_mut(buf);
                $( let ($field, rest) = rest.split_at_mut(self.$field.len); )*
                let _ = rest;
                $ViewMut { $($field),* }
            }
        }
    };
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
