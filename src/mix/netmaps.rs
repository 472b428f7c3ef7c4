//! The network's prediction refined by two maps, by the bits of the byte so far and by those
//! and the last byte (`mix:nmap=1`, `ext` 8): how far the network's probabilities are off in a
//! small context, as two more mixer inputs.

use std::io;

use super::apm::Apm;
use super::component::{Component, Declare, Push, Shared};
use super::logistic::{self, stretch};
use super::spec::MixSpec;
use super::sse::{order1_bits, order1_context};

pub struct NetMaps {
    order0: Apm,
    order1: Apm,
    /// Log2 contexts of `order1` (under `mix:fit` or `mix:cap`, fewer: src/mix/sse.rs).
    order1_bits: u32,
}

impl NetMaps {
    pub fn new(spec: &MixSpec) -> Self {
        NetMaps {
            order0: Apm::new(256, 6),
            order1: Apm::new(1 << order1_bits(spec), 6),
            order1_bits: order1_bits(spec),
        }
    }

    pub fn bytes(spec: &MixSpec) -> usize {
        Apm::bytes(256) + Apm::bytes(1 << order1_bits(spec))
    }

    /// The two inputs for the network's stretched prediction `net`.
    pub(super) fn inputs(&mut self, net: i32, c0: usize, c1: u32) -> [i32; 2] {
        let p = logistic::squash(net);
        let cx = order1_context(c1, c0, self.order1_bits);
        [
            stretch(self.order0.refine(p, c0)),
            stretch(self.order1.refine(p, cx)),
        ]
    }

    pub(super) fn learn(&mut self, bit: u32) {
        self.order0.update_both(bit);
        self.order1.update_both(bit);
    }
}

impl Component for NetMaps {
    fn wanted(spec: &MixSpec) -> bool {
        spec.nmap
    }

    fn declare(spec: &MixSpec, d: &mut Declare) {
        d.inputs(2);
        d.memory(NetMaps::bytes(spec));
    }

    fn new(spec: &MixSpec) -> io::Result<Self> {
        Ok(NetMaps::new(spec))
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        let [a, b] = self.inputs(s.net, s.c0 as usize, s.c1());
        m.add(a);
        m.add(b);
    }

    #[inline]
    fn prefetch(&self, s: &Shared, c0: u32) {
        let cx = order1_context(s.c1(), c0 as usize, self.order1_bits);
        self.order1.prefetch(cx);
    }

    #[inline]
    fn update(&mut self, _s: &Shared, bit: u32) {
        self.learn(bit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_maps_learn_a_biased_network() {
        let mut maps = NetMaps::new(&MixSpec::DEFAULT);
        // The network says 0.9 where the bit is 1 only half the time after 'q'.
        let net = stretch(3686);
        let before = maps.inputs(net, 1, b'q' as u32);
        for t in 0..400 {
            maps.inputs(net, 1, b'q' as u32);
            maps.learn(t & 1);
        }
        let after = maps.inputs(net, 1, b'q' as u32);
        assert!(before[1] > stretch(3500), "{before:?}");
        assert!(after[1].abs() < stretch(2600), "{after:?}");
        assert!(after[0].abs() < before[0], "{before:?} {after:?}");
    }
}
