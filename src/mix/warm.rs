//! Built-in warm starts for the stage's mixer (the key `mix:warm=N`): weights learned offline
//! by coding documents of the prior's corpus one after another, each mixer starting from the
//! weights the one before ended with, and averaged over the documents (docs/prior.md,
//! `scripts/warm-start.sh`), so that on a small input the mixer starts knowing whom to trust
//! instead of learning it from the components' starting weights. Counters, maps and network
//! still start fresh for each stream; only the mixer's weights carry over.
//!
//! A start fits one shape of mixer: its inputs with their starting weights, and its selectors
//! with their numbers of sets ([`Shape`]), as the stage's components declare them. A stage
//! whose mixer has those inputs first and those selectors first takes it: its further inputs
//! (the x86 operand tables) start at their own weights, and its further selectors (`mix:partial`,
//! the last component) at their own weights with a last-layer weight of 0; a stage of another
//! shape refuses the key (checked with the recipe). As for the network's priors, a
//! start's number is never reused, the build pins the SHA-256 of its bytes (checked by a test
//! and each time a stream starts from it), and the level form of a header covers that hash.
//!
//! Stored form (little-endian): `LMZW`, a format byte (1); the shape (`u16` inputs, their
//! starting weights as `i32`; `u8` selectors, their numbers of sets as `u32`); the last layer's
//! weights as `i32` (8 sets over one input per selector); then per selector a bitmap of the
//! sets that moved from their starting weights, and those sets' weights as `i16` at 8
//! fractional bits (the mixer keeps 16: the stored value shifted left by 8 is the start, the
//! same bits on every build). Sets never chosen while learning are left out and start as
//! declared: about half the weights.

use anyhow::{Context, Result, bail, ensure};
use sha2::{Digest, Sha256};

use super::component::Declare;
use super::mixer::Mixer2;
use crate::recipe::hex;

/// One warm start this build carries.
pub struct WarmStart {
    /// Its number in recipes (`mix:warm=N`): never reused for other weights.
    pub number: u32,
    /// Its name, for messages.
    pub name: &'static str,
    /// What it was learned on, in a few words.
    pub about: &'static str,
    bytes: &'static [u8],
    /// SHA-256 of `bytes`, pinned when the start was added.
    sha256: &'static str,
}

static STARTS: [WarmStart; 1] = [WarmStart {
    number: 1,
    name: "mixtext1",
    about: "every level's stage's mixer (144 inputs, 5,265 weight sets): the average of the weights \
        after each of 472 documents of 1-20 KB (2.5 MB) of the prior's corpus, coded one after \
        another at the default level (docs/prior.md)",
    bytes: include_bytes!("../../priors/mixtext1.lmzw"),
    sha256: "1da2e5041fbe88e18c7be592fe5c058e8cc4480db14737d796f688a7282ea283",
}];

/// Every warm start this build carries.
pub fn all() -> &'static [WarmStart] {
    &STARTS
}

/// The start of number `number` (not 0), if this build carries it.
pub fn by_number(number: u32) -> Option<&'static WarmStart> {
    STARTS.iter().find(|s| s.number == number)
}

/// The numbers of the starts this build carries, for messages.
pub fn numbers() -> String {
    let numbers: Vec<String> = STARTS.iter().map(|s| s.number.to_string()).collect();
    numbers.join(", ")
}

const MAGIC: &[u8; 4] = b"LMZW";
const FORMAT: u8 = 1;

/// A mixer's shape: per input its starting weight, per selector its number of sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub init: Vec<i32>,
    pub sets: Vec<usize>,
}

impl Shape {
    pub fn of(declared: &Declare) -> Self {
        Shape {
            init: declared.init.clone(),
            sets: declared.sets.clone(),
        }
    }
}

/// A mixer's weights: what a warm start holds, and what learning one carries from one
/// document to the next (16 fractional bits, as the mixer has them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MixerWeights {
    pub shape: Shape,
    /// Per selector, every set's weights, set after set.
    pub first: Vec<Vec<i32>>,
    /// The last layer's, set after set.
    pub last: Vec<i32>,
}

impl MixerWeights {
    /// The weights `mixer` has now; `shape` is what its stage declared.
    pub fn of(mixer: &Mixer2, shape: &Shape) -> Self {
        MixerWeights {
            shape: shape.clone(),
            first: mixer.first().iter().map(|m| m.weights()).collect(),
            last: mixer.last().weights(),
        }
    }

    /// Sets `mixer`'s weights to these (the shapes must fit: see [`check_shape`]): each set's
    /// first inputs; the mixer's further inputs keep their starting weights, and its further
    /// selectors start at last-layer weight 0, as [`load`] has them.
    pub fn apply_to(&self, mixer: &mut Mixer2) {
        let inputs = self.shape.init.len();
        for (m, w) in mixer.first_mut().iter_mut().zip(&self.first) {
            for (set, theirs) in w.chunks(inputs).enumerate() {
                m.set_mut(set)[..inputs].copy_from_slice(theirs);
            }
        }
        let last = mixer.last_mut();
        let k = self.last.len() / last.sets();
        for (set, theirs) in self.last.chunks(k).enumerate() {
            let weights = last.set_mut(set);
            weights[..k].copy_from_slice(theirs);
            weights[k..].fill(0);
        }
    }

    /// The stored form (module docs): moved sets only, at 8 fractional bits.
    pub fn to_bytes(&self) -> Vec<u8> {
        let Shape { init, sets } = &self.shape;
        let mut out = MAGIC.to_vec();
        out.push(FORMAT);
        out.extend((init.len() as u16).to_le_bytes());
        init.iter().for_each(|w| out.extend(w.to_le_bytes()));
        out.push(sets.len() as u8);
        sets.iter()
            .for_each(|&s| out.extend((s as u32).to_le_bytes()));
        self.last.iter().for_each(|w| out.extend(w.to_le_bytes()));
        for (weights, &n) in self.first.iter().zip(sets) {
            let moved: Vec<bool> = weights.chunks(init.len()).map(|set| set != init).collect();
            let mut bitmap = vec![0u8; n.div_ceil(8)];
            for (s, _) in moved.iter().enumerate().filter(|(_, m)| **m) {
                bitmap[s / 8] |= 1 << (s % 8);
            }
            out.extend(&bitmap);
            for (set, _) in weights.chunks(init.len()).zip(&moved).filter(|(_, m)| **m) {
                for &w in set {
                    let q = ((w + 128) >> 8).clamp(i16::MIN as i32, i16::MAX as i32) as i16;
                    out.extend(q.to_le_bytes());
                }
            }
        }
        out
    }

    /// Reads the stored form; an error for bytes that are not one.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let shape = shape_of(bytes)?;
        let mut mixer = Mixer2::new(shape.init.len(), &shape.sets, 0, &shape.init);
        load(bytes, &mut mixer, &shape)?;
        Ok(MixerWeights::of(&mixer, &shape))
    }
}

/// Sets the weights of `mixer`, of shape `ours`, from the stored form `bytes`, read straight
/// into the mixer's sets (no copy of the 3 MB of weights beside them): each stored set's first
/// inputs; the sets the form leaves out, and any further inputs, keep what the mixer has (its
/// starting weights). The last layer weighs the outputs of any further selectors at 0, so
/// that their sets start unheard and earn their weight. An error, before any weight is set,
/// when the shapes do not fit ([`check_shape`]); one while reading leaves the mixer partly
/// set.
fn load(bytes: &[u8], mixer: &mut Mixer2, ours: &Shape) -> Result<()> {
    let mut r = Reader(bytes);
    let theirs = read_shape(&mut r)?;
    check_shape(&theirs, ours)?;
    let inputs = theirs.init.len();
    let selectors = theirs.sets.len();
    let last = mixer.last_mut();
    for set in 0..last.sets() {
        let weights = last.set_mut(set);
        for w in &mut weights[..selectors] {
            *w = i32::from_le_bytes(r.array()?);
        }
        weights[selectors..].fill(0);
    }
    for (m, &n) in mixer.first_mut().iter_mut().zip(&theirs.sets) {
        let bitmap = r.take(n.div_ceil(8))?;
        // Sets that did not move keep their starting weights, given when first chosen.
        for s in (0..n).filter(|s| bitmap[s / 8] >> (s % 8) & 1 == 1) {
            for w in &mut m.set_mut(s)[..inputs] {
                *w = (i16::from_le_bytes(r.array()?) as i32) << 8;
            }
        }
    }
    ensure!(r.0.is_empty(), "{} bytes after the warm start", r.0.len());
    Ok(())
}

/// The bytes of a stored form, read front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        ensure!(self.0.len() >= n, "the warm start ends early");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
}

/// Reads just the shape of a stored form (cheap: for checking recipes).
fn shape_of(bytes: &[u8]) -> Result<Shape> {
    read_shape(&mut Reader(bytes))
}

/// The stored form's magic, format and shape.
fn read_shape(r: &mut Reader) -> Result<Shape> {
    ensure!(r.take(4)? == MAGIC, "not a warm start (no LMZW)");
    let format = r.take(1)?[0];
    ensure!(
        format == FORMAT,
        "a warm start of format {format}, not {FORMAT}"
    );
    let inputs = u16::from_le_bytes(r.array()?) as usize;
    let init = (0..inputs)
        .map(|_| Ok(i32::from_le_bytes(r.array()?)))
        .collect::<Result<Vec<_>>>()?;
    let selectors = r.take(1)?[0] as usize;
    let sets = (0..selectors)
        .map(|_| Ok(u32::from_le_bytes(r.array()?) as usize))
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        inputs > 0 && sets.iter().all(|&s| s > 0 && s <= 1 << 16),
        "a warm start with no inputs or an empty or oversized selector"
    );
    Ok(Shape { init, sets })
}

impl WarmStart {
    /// The pinned SHA-256 of the start's bytes, in hex.
    pub fn sha256(&self) -> &'static str {
        self.sha256
    }

    /// The SHA-256 of the bytes this build carries (a test compares it with the pinned one).
    pub fn actual_sha256(&self) -> String {
        hex(Sha256::digest(self.bytes).as_slice())
    }

    /// The start's weights, checked against the pinned hash.
    pub fn weights(&self) -> Result<MixerWeights> {
        self.check_sha256()?;
        MixerWeights::from_bytes(self.bytes)
            .with_context(|| format!("built-in warm start {}", self.name))
    }

    fn check_sha256(&self) -> Result<()> {
        let actual = self.actual_sha256();
        if actual != self.sha256 {
            bail!(
                "built-in warm start {} is damaged: SHA-256 {actual}, expected {}",
                self.name,
                self.sha256
            );
        }
        Ok(())
    }

    /// Sets `mixer`'s weights (of a stage whose mixer has shape `ours`) from this start,
    /// checked against the pinned hash and the shape first.
    pub fn load_into(&self, mixer: &mut Mixer2, ours: &Shape) -> Result<()> {
        self.check_sha256()?;
        let loaded = load(self.bytes, mixer, ours)
            .with_context(|| format!("built-in warm start {}", self.name));
        crate::pages::release(self.bytes);
        loaded
    }

    /// Whether a stage that declares `declared` can start from this: the start's inputs first,
    /// with the same starting weights, and the start's selectors first.
    pub fn check_shape(&self, declared: &Declare) -> Result<()> {
        let shape =
            shape_of(self.bytes).with_context(|| format!("built-in warm start {}", self.name))?;
        check_shape(&shape, &Shape::of(declared))
            .map_err(|e| anyhow::anyhow!("mix warm {}: {e}", self.number))
    }
}

/// `spec` without its warm start when the start does not fit its stage (a level's stage with
/// other components): as a level's prior is left out of a network of other sizes.
pub fn keep_if_it_fits(spec: &mut super::MixSpec) {
    if let Some(start) = by_number(spec.warm)
        && start.check_shape(&spec.declare()).is_err()
    {
        spec.warm = 0;
    }
}

/// The stage for machine code (`x86=2`) has other mixer inputs than a warm start was learned
/// for, so the two do not go together: where the start was asked for by name (`named`), the
/// stage falls back to the transform's (`x86=1`), which fits it; otherwise the start, a
/// level's, is left out, as it is for detected code (it loses on executables).
pub fn settle_with_x86(spec: &mut super::MixSpec, named: bool) {
    if spec.x86_ops && spec.warm != 0 {
        match named {
            true => spec.x86_ops = false,
            false => spec.warm = 0,
        }
    }
}

/// Whether weights of shape `theirs` fit a mixer of shape `ours`: `theirs`' selectors first
/// among `ours` (a selector added after them, as `mix:partial`, starts unheard: [`load`]), and
/// `theirs`' inputs first among `ours`. Until numerics 17 the selectors had to be the same;
/// no stage without `partial` has the start's selectors and more (the stage for x86
/// instructions has its own selectors in place of the text selector), so every such stage
/// fits as it did: `no_stage_without_partial_fits_otherwise_than_before` holds it.
pub fn check_shape(theirs: &Shape, ours: &Shape) -> Result<()> {
    if !ours.sets.starts_with(&theirs.sets) || !ours.init.starts_with(&theirs.init) {
        bail!(
            "the warm start is for a stage whose mixer begins with {} inputs and has {} weight sets; this \
             stage's has {} and {} (the built-in start fits the stage of every level, with or without the x86 transform, \
             but not the stage for x86 instructions)",
            theirs.init.len(),
            theirs.sets.iter().sum::<usize>(),
            ours.init.len(),
            ours.sets.iter().sum::<usize>()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MixerWeights {
        let shape = Shape {
            init: vec![6144, -300, 65536],
            sets: vec![3, 9],
        };
        let mut first: Vec<Vec<i32>> = shape.sets.iter().map(|&n| shape.init.repeat(n)).collect();
        // Set 1 of the first selector and set 8 of the second moved (multiples of 256, so
        // that the stored form keeps them exactly).
        first[0][3..6].copy_from_slice(&[256 * 7, -256 * 40, 0]);
        first[1][24..27].copy_from_slice(&[64 << 16, -(64 << 16), 256]);
        MixerWeights {
            shape,
            first,
            last: (0..16).map(|i| i * 1000 - 5000).collect(),
        }
    }

    #[test]
    fn the_stored_form_round_trips_moved_sets_and_leaves_out_the_others() {
        let w = sample();
        let bytes = w.to_bytes();
        assert_eq!(MixerWeights::from_bytes(&bytes).unwrap(), w);
        // Two moved sets of three inputs as i16: 12 bytes of weights.
        let header = 4 + 1 + 2 + 3 * 4 + 1 + 2 * 4 + 16 * 4;
        assert_eq!(bytes.len(), header + 1 + 2 + 12);
        assert_eq!(shape_of(&bytes).unwrap(), w.shape);
    }

    #[test]
    fn weights_round_to_eight_fractional_bits() {
        let mut w = sample();
        w.first[0][3] = 256 * 7 + 127;
        w.first[0][4] = 256 * 7 + 128;
        let back = MixerWeights::from_bytes(&w.to_bytes()).unwrap();
        assert_eq!(back.first[0][3], 256 * 7);
        assert_eq!(back.first[0][4], 256 * 8);
    }

    #[test]
    fn damaged_stored_forms_are_refused_without_panicking() {
        let bytes = sample().to_bytes();
        for cut in 0..bytes.len() {
            assert!(
                MixerWeights::from_bytes(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(MixerWeights::from_bytes(&longer).is_err());
        let mut other = bytes;
        other[0] = b'X';
        assert!(MixerWeights::from_bytes(&other).is_err());
    }

    #[test]
    fn other_shapes_are_refused() {
        let w = sample();
        let mut other = w.shape.clone();
        other.init[1] += 1;
        assert!(check_shape(&w.shape, &other).is_err());
        let mut other = w.shape.clone();
        other.sets[0] += 1;
        assert!(check_shape(&w.shape, &other).is_err());
        let mut fewer = w.shape.clone();
        fewer.init.pop();
        assert!(check_shape(&w.shape, &fewer).is_err());
        assert!(check_shape(&w.shape, &w.shape.clone()).is_ok());
    }

    /// A mixer with more inputs after the start's takes the start's weights for its first
    /// inputs; the others keep their starting weights.
    #[test]
    fn a_mixer_with_further_inputs_takes_the_start_for_its_first() {
        let w = sample();
        let mut wider = w.shape.clone();
        wider.init.push(999);
        check_shape(&w.shape, &wider).unwrap();
        let mut mixer = Mixer2::new(wider.init.len(), &wider.sets, 3, &wider.init);
        w.apply_to(&mut mixer);
        let got = MixerWeights::of(&mixer, &wider);
        for (k, sets) in got.first.iter().enumerate() {
            for (s, set) in sets.chunks(4).enumerate() {
                assert_eq!(
                    set[..3],
                    w.first[k][s * 3..s * 3 + 3],
                    "selector {k} set {s}"
                );
                assert_eq!(set[3], 999);
            }
        }
        assert_eq!(got.last, w.last);
    }

    /// A mixer with a selector after the start's takes the start for the start's selectors;
    /// the further one keeps its starting weights in the first layer and is weighed 0 in the
    /// last, read from the stored form as from the weights.
    #[test]
    fn a_mixer_with_a_further_selector_takes_the_start_for_the_others() {
        let w = sample();
        let mut more = w.shape.clone();
        more.sets.push(5);
        check_shape(&w.shape, &more).unwrap();
        // Not before the start's: a selector in front of them does not fit.
        let mut first = w.shape.clone();
        first.sets.insert(0, 5);
        assert!(check_shape(&w.shape, &first).is_err());
        let stored = w.to_bytes();
        for from_bytes in [false, true] {
            let mut mixer = Mixer2::new(more.init.len(), &more.sets, 3, &more.init);
            match from_bytes {
                true => load(&stored, &mut mixer, &more).unwrap(),
                false => w.apply_to(&mut mixer),
            }
            let got = MixerWeights::of(&mixer, &more);
            assert_eq!(got.first[..2], w.first[..], "{from_bytes}");
            assert_eq!(got.first[2], more.init.repeat(5), "{from_bytes}");
            for (set, (ours, theirs)) in got.last.chunks(3).zip(w.last.chunks(2)).enumerate() {
                assert_eq!(
                    ours,
                    [theirs[0], theirs[1], 0],
                    "{from_bytes} last set {set}"
                );
            }
        }
    }

    /// The relaxed fit ([`check_shape`]: the start's selectors first) accepts only the stages
    /// the strict one of numerics 16 and older accepted (the same selectors), unless they have
    /// `mix:partial`: every level and seeded recipe of every numerics version, with and without
    /// the x86 transform and instruction contexts, and with edits of the stage.
    #[test]
    fn no_stage_without_partial_fits_otherwise_than_before() {
        use crate::levels::stored_base;
        use crate::recipe::ModelKind;
        let edits: [fn(&mut super::super::MixSpec); 4] = [
            |_| {},
            |m| m.orders = 4,
            |m| m.second = false,
            |m| m.text = false,
        ];
        let (mut partial_fits, mut fits, mut refused) = (0, 0, 0);
        for start in all() {
            let theirs = shape_of(start.bytes).unwrap();
            for numerics in crate::format::OLDEST_NUMERICS_VERSION..=crate::format::NUMERICS_VERSION
            {
                for kind in ModelKind::ALL {
                    for number in 1..=u8::MAX {
                        let Some(mix) = stored_base(numerics, kind, number).and_then(|r| r.mix)
                        else {
                            continue;
                        };
                        for (x86, edit) in (0..=2).flat_map(|x| edits.iter().map(move |e| (x, e))) {
                            let mut spec = mix;
                            (super::super::spec::key("x86").unwrap().set)(&mut spec, x86);
                            edit(&mut spec);
                            let ours = Shape::of(&spec.declare());
                            let strict =
                                theirs.sets == ours.sets && ours.init.starts_with(&theirs.init);
                            let relaxed = check_shape(&theirs, &ours).is_ok();
                            match spec.partial {
                                false => {
                                    assert_eq!(strict, relaxed, "{numerics} {number} {spec:?}");
                                    fits += strict as usize;
                                    refused += !strict as usize;
                                }
                                true => partial_fits += relaxed as usize,
                            }
                        }
                    }
                }
            }
        }
        // Both answers come up, and the levels that have the selector take the start.
        assert!(
            fits > 0 && refused > 0 && partial_fits > 0,
            "{fits} {refused} {partial_fits}"
        );
    }

    #[test]
    fn every_built_in_start_has_its_pinned_bytes_and_reads() {
        for start in all() {
            assert_eq!(start.actual_sha256(), start.sha256(), "{}", start.name);
            let w = start.weights().unwrap();
            assert_eq!(w.first.len(), w.shape.sets.len());
            // It learned something: some set moved.
            assert!(
                w.first
                    .iter()
                    .any(|sets| sets.chunks(w.shape.init.len()).any(|s| s != w.shape.init))
            );
        }
    }
}
