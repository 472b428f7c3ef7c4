//! Context families of the last bytes ([`super::tables::Family`]): the orders (the last 0..=N
//! bytes, `mix:orders`) and the sparse contexts (`mix:sparse`, for binary data).

use std::io;

use super::component::Shared;
use super::counters::hash;
use super::spec::{MixSpec, SMALL_TABLE_BITS, SPARSE};
use super::tables::Family;

/// Orders 0 to N: the last `order` bytes (`mix:orders=N`; none for 0). Orders 0 and 1 fit
/// tables of [`SMALL_TABLE_BITS`].
pub struct Orders {
    orders: u32,
}

impl Family for Orders {
    fn wanted(spec: &MixSpec) -> bool {
        spec.orders > 0
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        (0..=spec.orders)
            .map(|order| match order <= 1 {
                true => SMALL_TABLE_BITS,
                false => spec.table,
            })
            .collect()
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(Orders {
            orders: spec.orders,
        })
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        for order in 0..=self.orders {
            let mask = if order >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * order)) - 1
            };
            out[order as usize] = hash(s.history & mask, order + 1);
        }
    }
}

/// The sparse contexts ([`SPARSE`]): bytes 2 and 4 back alone, bytes 2–3, and bytes 1 and 3.
pub struct Sparse;

impl Family for Sparse {
    fn wanted(spec: &MixSpec) -> bool {
        spec.sparse
    }

    fn table_bits(spec: &MixSpec) -> Vec<u32> {
        (0..SPARSE.len())
            .map(|i| if i < 2 { SMALL_TABLE_BITS } else { spec.table })
            .collect()
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(Sparse)
    }

    fn contexts(&self, s: &Shared, out: &mut [u32]) {
        for (i, mask) in SPARSE.iter().enumerate() {
            out[i] = hash(s.history & mask, 0x100 + i as u32);
        }
    }
}
