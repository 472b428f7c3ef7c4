//! The list of the stage's components, in the order of the mixer's inputs and selectors: a new
//! component is a line here (see docs/architecture.md, "How to add a stage component"). The
//! order of these lines is part of the format (the mixer's weights are indexed by position):
//! none of them moves. A new component that every existing file's settings leave out (a new
//! key with an implicit value off) pushes nothing for those files, so its line may go
//! anywhere; by habit, at the end.

use std::io;

use super::base::{Base, LastByte, LastBytePartial, SecondByte};
use super::columns::Columns;
use super::component::{Component, Declare, Push, Shared, components};
use super::deltas::Deltas;
use super::expected::Expected;
use super::indirect::Indirect;
use super::matcher::MatchModel;
use super::nesting::Nesting;
use super::netmaps::NetMaps;
use super::orders::{Orders, Sparse, Sparse2};
use super::record::RecordTables;
use super::runs::Runs;
use super::spec::MixSpec;
use super::tables::Tables;
use super::text::{Text, TextSelect};
use super::words::{PrevWord, TwoWords, Word};
use super::x86code::X86Code;
use super::x86ops::{X86Ops, X86Select};

components! {
    /// The bias, the network, and the four base selectors.
    base: Base,
    /// Counters by the last 0..=N bytes (`orders`).
    orders: Tables<Orders>,
    /// Counters by the current word (`word`).
    word: Tables<Word>,
    /// Counters by sparse contexts (`sparse`).
    sparse: Tables<Sparse>,
    /// Counters by the previous word with the current one (`pword`).
    prev_word: Tables<PrevWord>,
    /// The record model and its counters (`record`).
    record: Tables<RecordTables>,
    /// Counters by two words back (`ext` 2).
    two_words: Tables<TwoWords>,
    /// The network refined by two maps (`ext` 8).
    net_maps: NetMaps,
    /// The match model (`match`).
    matcher: MatchModel,
    /// The selector by the last byte (`select`).
    last_byte: LastByte,
    /// Counters by indirect contexts (`ext` 32).
    indirect: Tables<Indirect>,
    /// Counters by line and column contexts (`ext` 64).
    columns: Tables<Columns>,
    /// The selector by the byte two back (`ext` 128).
    second_byte: SecondByte,
    /// The run model (`ext` 256).
    runs: Runs,
    /// More sparse and aligned contexts (`ext` 1024).
    sparse2: Tables<Sparse2>,
    /// Bracket and quote nesting (`ext` 2048).
    nest: Tables<Nesting>,
    /// Text contexts (`ext` 4096).
    text: Tables<Text>,
    /// The selector for text (`ext` 4096).
    text_select: TextSelect,
    /// Operand contexts of x86 code (`x86`).
    x86_code: Tables<X86Code>,
    /// Instruction contexts of x86 code (`x86` 2).
    x86_ops: Tables<X86Ops>,
    /// The selector by the place in an x86 instruction (`x86` 2).
    x86_select: X86Select,
    /// Counters by the byte the match model expects (`follow`).
    expected: Tables<Expected>,
    /// Steps from the byte above in records (`delta`).
    deltas: Deltas,
    /// The selector by the last byte and the bits so far (`partial`): after every selector a
    /// warm start knows ([`super::warm::check_shape`]).
    partial: LastBytePartial,
}
