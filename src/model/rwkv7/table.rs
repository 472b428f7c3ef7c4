//! One declaration per flat-buffer layout, read three ways. A layout is written once, as a
//! function that calls `add(name, shape)` for each entry, in buffer order, and builds a struct
//! of whatever `add` returns (a struct generic over its field type `T`):
//!
//! - with [`register`]: `T` = [`Slot`], and the entries are appended to a [`Layout`], which
//!   counts the floats (the memory estimate) and allocates the buffer;
//! - with [`carve`] over a buffer of that layout: `T` = `&[f32]`, the entries' values;
//! - with [`carve_mut`]: `T` = `&mut [f32]`, the entries as disjoint mutable slices, so that a
//!   layer can read some entries of a trace while it writes others.
//!
//! Carving walks the buffer in the order of the calls, as [`Layout::add`] does, so the three
//! readings cannot disagree. Nothing here depends on the network: both models could use it.

use crate::model::layout::Layout;
use crate::params::Slot;

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

#[cfg(test)]
mod tests {
    use super::*;

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
