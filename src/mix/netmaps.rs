//! The network's prediction refined by two maps, by the bits of the byte so far and by those
//! and the last byte (`mix:nmap=1`, `ext` 8): how far the network's probabilities are off in a
//! small context, as two more mixer inputs.

use std::io;

use super::apm::Apm;
use super::component::{Component, Declare, Push, Shared};
use super::logistic::{self, stretch};
use super::spec::MixSpec;

pub struct NetMaps {
    order0: Apm,
    order1: Apm,
}

impl NetMaps {
    pub fn new() -> Self {
        NetMaps {
            order0: Apm::new(256, 6),
            order1: Apm::new(1 << 16, 6),
        }
    }

    pub fn bytes() -> usize {
        Apm::bytes(256) + Apm::bytes(1 << 16)
    }

    /// The two inputs for the network's stretched prediction `net`.
    pub(super) fn inputs(&mut self, net: i32, c0: usize, c1: usize) -> [i32; 2] {
        let p = logistic::squash(net);
        [
            stretch(self.order0.refine(p, c0)),
            stretch(self.order1.refine(p, c1 << 8 | c0)),
        ]
    }

    pub(super) fn learn(&mut self, bit: u32) {
        self.order0.update_both(bit);
        self.order1.update_both(bit);
    }
}

impl Default for NetMaps {
    fn default() -> Self {
        Self::new()
    }
}

impl Component for NetMaps {
    fn wanted(spec: &MixSpec) -> bool {
        spec.nmap
    }

    fn declare(_spec: &MixSpec, d: &mut Declare) {
        d.inputs(2);
        d.memory(NetMaps::bytes());
    }

    fn new(_spec: &MixSpec) -> io::Result<Self> {
        Ok(NetMaps::new())
    }

    #[inline]
    fn predict(&mut self, s: &Shared, m: &mut Push) {
        let [a, b] = self.inputs(s.net, s.c0 as usize, s.c1() as usize);
        m.add(a);
        m.add(b);
    }

    #[inline]
    fn prefetch(&self, s: &Shared, c0: u32) {
        self.order1.prefetch((s.c1() as usize) << 8 | c0 as usize);
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
        let mut maps = NetMaps::new();
        // The network says 0.9 where the bit is 1 only half the time after 'q'.
        let net = stretch(3686);
        let before = maps.inputs(net, 1, b'q' as usize);
        for t in 0..400 {
            maps.inputs(net, 1, b'q' as usize);
            maps.learn(t & 1);
        }
        let after = maps.inputs(net, 1, b'q' as usize);
        assert!(before[1] > stretch(3500), "{before:?}");
        assert!(after[1].abs() < stretch(2600), "{after:?}");
        assert!(after[0].abs() < before[0], "{before:?} {after:?}");
    }
}
