//! The settings of the mixing stage (recipe item `mix:`): [`MixSpec`], its keys ([`KEYS`]) as
//! the recipe's parser and printer read them, and the memory each setting costs.

use anyhow::{Result, bail};

use super::mixer::Mixer2;

/// The settings of the stage, as the recipe's `mix:` item gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixSpec {
    /// Context statistics of the last 0..=N bytes (N + 1 tables); 0 for none.
    pub orders: u32,
    /// A table for the current word (letters), for text.
    pub word: bool,
    /// Sparse contexts, for binary data: bytes 2 and 4 back alone, bytes 2–3, and bytes 1
    /// and 3 (records and instructions of 2 and 4 bytes).
    pub sparse: bool,
    /// The match model's window, log2 of bytes; 0 for no match model.
    pub matcher: u32,
    /// The two SSE maps after the mixer.
    pub sse: bool,
    /// Counters per context table above order 1, log2.
    pub table: u32,
    /// The stage sized for its input, as the first builds that sized it wrote it (0: not;
    /// files keep it, new ones get `cap`): `table` and `match` capped at this log2 size, and
    /// the other large maps with them ([`MixSpec::sized`]).
    pub fit: u32,
    /// The stage sized for its input, second form (0: not; src/fit.rs chooses it, and writes
    /// it rather than `fit` since it was added): like `fit`, the largest tables at `2^cap`
    /// counters, but each family of tables, map and window sized apart ([`Part::offset`]),
    /// for about a fifth less memory than `fit` at the same value. `fit` and `cap` are not
    /// given together.
    pub cap: u32,
    /// The mixer's learning rate (1/16384 units, see [`super::mixer`]).
    pub rate: u32,
    /// Per context table, a learned map from (count, whether the context was deterministic so
    /// far, probability) to a probability: a third mixer input that says how far to trust a
    /// counter of that history.
    pub conf: bool,
    /// A table for the previous word with the current one, for text.
    pub pword: bool,
    /// A fifth weight-set selector of the mixer: the last byte and the bit position (how
    /// much to trust each input depends on what came just before, e.g. in a word or after it).
    pub select: bool,
    /// The record model, for tables and binaries: 0 none; 1 two tables by the byte one record
    /// above (with the byte to the left, and with the byte two records above and the column);
    /// 2 a third table by the bytes one record above under the two latest record lengths (or,
    /// with one length, the three bytes above), for data whose rows change length or that has
    /// two periods at once (tables of several dimensions).
    pub record: u32,
    // The third round's components, each a bit of the key `ext` (bit value in brackets).
    /// (1) Two more maps at the end of the SSE chain, by the last two bytes (hashed) and by the
    /// match state, whose points learn by interpolation.
    pub fin: bool,
    /// (2) Two more word contexts for text: the current word with the two words before it, and
    /// the word before with the last two bytes.
    pub words: bool,
    /// (4) The mixer's rate starts higher and decays to `rate` (small inputs learn faster).
    pub decay: bool,
    /// (8) The network's prediction refined by two maps (by the bits so far, and by the last
    /// byte) as two more mixer inputs.
    pub nmap: bool,
    /// (16) Context tables above order 1 are two-way (a context finds its counter in one of two
    /// slots, and a new one evicts the less used).
    pub ways: bool,
    /// (32) Indirect contexts: the bytes that followed the last one, two and three bytes the
    /// last times they came round, as contexts of four more tables (src/mix/indirect.rs).
    pub indirect: bool,
    /// (64) Line and column contexts: the byte above, the column, the indentation
    /// (src/mix/columns.rs).
    pub columns: bool,
    /// (128) A weight-set selector by the byte two back and the bit position.
    pub second: bool,
    /// (256) The run model: per context of the last 1–6 bytes, the byte that followed it and
    /// how many times in a row (src/mix/runs.rs).
    pub runs: bool,
    /// (512) Every counter keeps the last two bits of its context, and its confidence map
    /// reads them with its count (what came lately, beside the average).
    pub recent: bool,
    /// (1024) More sparse and word-aligned contexts, for binaries (src/mix/orders.rs).
    pub sparse2: bool,
    /// (2048) Bracket and quote nesting, for source code and structured text
    /// (src/mix/nesting.rs).
    pub nest: bool,
    /// (4096) Text contexts: words with case, skips, numbers, gaps, sentence, column, markup,
    /// the word that followed the last word (src/mix/text.rs).
    pub text: bool,
    /// The x86 transform of the input (src/transform/x86.rs): call and jump displacements
    /// made absolute before the network and the stage see the bytes, undone after decoding;
    /// and with it two context tables of the stage for the operands (src/mix/x86code.rs).
    /// A key of the stage's item so that a header names it in a few bytes (`mix:x86=1`);
    /// lmzip chooses it by detection.
    pub x86: bool,
    /// With the transform, the instruction contexts of src/mix/x86ops.rs, and RIP-relative
    /// displacements made absolute too, by a walk over instruction lengths (`mix:x86=2`).
    pub x86_ops: bool,
    /// Where in the member the x86 transform applies: bytes `x86from..x86to` (`x86to` 0: to
    /// the end); an ELF executable's code segments when detection found them.
    pub x86_from: u32,
    pub x86_to: u32,
    /// The mixer's starting weights (0: every set starts at the components' starting weights;
    /// N: the built-in warm start of number N, learned offline on text and code, src/mix/warm.rs).
    /// For a stage whose mixer begins with the inputs and selectors the start was learned for
    /// (src/mix/warm.rs, `check_shape`); lmzip leaves it out for inputs that do not look like
    /// text, as the network's prior.
    pub warm: u32,
    /// Each weight set of the mixer learns faster while it is young: its rate starts eight
    /// times `rate` and decays with its own updates (src/mix/mixer.rs), in place of the
    /// global decay of `ext` 4. In the levels from numerics 8.
    pub young: bool,
    /// The match model follows its match past a miss ([`super::matcher::FOLLOW_MISSES`]),
    /// and, near bytes that text does not have, two tables count by the byte it expects
    /// ([`super::expected`]); the history after the last three bytes is then sized a quarter
    /// as large from `cap` 19 ([`Part::After3`]), which pays for them. In the levels from
    /// numerics 10.
    pub follow: bool,
    /// The counters of a context's nibble share one cache line
    /// ([`super::counters::CounterTable::in_lines`]): two reads from memory per byte and table
    /// instead of eight, for about the same bytes. In the levels from numerics 11.
    pub nibble: bool,
    /// The mixer's last layer settles at three eighths of `rate`
    /// ([`super::mixer::Mixer2::with_settled_last`]).
    /// In the levels from numerics 12.
    pub settle: bool,
    /// Under `cap` from 19 on (inputs over 64 KiB), memory moves from the tables for binaries
    /// (record, sparse, order-2 and second sparse contexts, a half each) to the text tables
    /// (eight times as large) ([`Part::offset`]). In the levels from numerics 13.
    pub split: bool,
    /// The delta model: per column of found records, the steps from the bytes above
    /// ([`super::deltas`]). In the levels from numerics 14.
    pub delta: bool,
    /// The strings of binary data are text to the text contexts and their selector (a NUL that
    /// ends a printable string, [`super::text::ends_string`], does not break text, which
    /// resumes 16 bytes after a byte it does not have, not 256: [`super::text::TextClock`]),
    /// and that NUL ends a line for the text and column contexts. In the levels from numerics
    /// 15.
    pub strings: bool,
    /// The counters have a long memory: past 16 updates each slows them as eight would, to a
    /// moving average of about 136 bits ([`super::counters::CounterTable::long_memory`]). In
    /// the levels from numerics 17.
    pub long: bool,
    /// A selector by the last byte and the bits of this byte so far
    /// ([`super::base::LastBytePartial`]). At levels 4–9 from numerics 17.
    pub partial: bool,
    /// The stage's probability goes to the coder in 16 bits rather than 12, in the same range
    /// (1/4096 to 4095/4096): the SSE maps' outputs keep the 16 bits of their points
    /// ([`super::sse::Sse::refine`]). In the levels from numerics 18.
    pub fine: bool,
}

/// What `cap` sizes apart ([`MixSpec::part_bits`]): each family of tables, map or window
/// gets `2^(cap + offset)` entries at most ([`Part::offset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Orders 3 and up and the word tables: `cap`.
    Table,
    /// The order-2 table (fewer contexts than it has slots on small inputs).
    Order2,
    /// The two sparse tables of `table` counters.
    Sparse,
    /// The record model's tables.
    Record,
    /// The tables of a quarter of `table`: indirect, columns, nesting, the run model.
    Quarter,
    /// The second sparse tables (`ext` 1024).
    Sparse2,
    /// The maps by the last byte (SSE order 1, the network's map).
    Map1,
    /// The SSE map by the last two bytes.
    Map2,
    /// The text tables (`ext` 4096): a sixteenth of `cap` over 1 MiB, a 32nd up to it (at a
    /// quarter they took 0.5% less on book1 than at a sixteenth, for 6 MiB more at 1 MiB, over
    /// the 96 MiB goal); with `split`, a quarter from `cap` 19 on, paid for by the binary
    /// families.
    Text,
    /// The match model's window.
    Match,
    /// The indirect history by the last three bytes.
    After3,
    /// The tables by the match model's expected byte (`follow`).
    Expected,
}

impl Part {
    /// Log2 of the part's size against `cap`. Measured on inputs of 21 KB to 1 MB of text,
    /// code and binaries (docs/experiments.md, "Memory to fit the input, second form"): the
    /// maps by the last byte fill on binaries (every byte value comes round) and cost nothing
    /// at a quarter of `fit`'s size; the record, sparse and order-2 tables hold fewer contexts
    /// than the high orders. From `cap` 19 on (inputs over 64 KiB) the budget is looser and
    /// the record tables, the match window, the history and the SSE map by two bytes keep
    /// more; the text tables from `cap` 21 (inputs over 1 MiB). The last two since numerics 6,
    /// which made room for the text tables within the memory goals. With `follow` (numerics
    /// 10) the history by three bytes is a quarter as large from `cap` 19: 1.3 MiB less at
    /// 1 MiB, where the history held three times the contexts the input had (enwik6 +4 bytes,
    /// obj2 +24), for the expected-byte tables and the memory goals. With `split` (numerics
    /// 13), from `cap` 19 on: at 1 MiB the text tables at a quarter of `cap` took enwik6 0.2%
    /// and book1 0.5% below a 32nd for 5 MiB more, and halving the record, sparse, order-2 and
    /// second sparse tables freed 12 MiB for nothing on text and 0.24% more on obj2 (each alone
    /// cost it nothing; the rest went to the network's context tables,
    /// [`crate::fit::context_bits`]; docs/experiments.md, "Memory where it pays"). With `delta`
    /// (numerics 14) the second sparse tables are an eighth at every `cap`: the delta model's
    /// memory (160 KB at 64 KiB, most of it mixer weights) had to fit within 32 MiB, and halving these tables
    /// cost 0.03% on 21 binaries and code of 5–64 KB (the delta model took 0.4–54% off them).
    pub fn offset(self, cap: u32, follow: bool, split: bool, delta: bool) -> i32 {
        let large = cap >= 19;
        match self {
            Part::Table => 0,
            Part::Text if split && large => -2,
            Part::Order2 | Part::Sparse | Part::Record if split && large => -2,
            Part::Sparse2 if delta || (split && large) => -3,
            Part::Order2 | Part::Sparse => -1,
            Part::Record if large => -1,
            Part::Record => -2,
            Part::Quarter | Part::Sparse2 => -2,
            // Up to 1 MiB (`cap` 20) a 32nd: the memory goals (1 MiB within 96 MiB); enwik6
            // lost 0.03% and book1 0.09% against a 16th.
            Part::Text if cap > 20 => -4,
            Part::Text => -5,
            Part::Map1 => -6,
            Part::Map2 if large => -4,
            Part::Map2 => -5,
            Part::After3 if follow => -2,
            Part::Expected => -5,
            Part::Match | Part::After3 if large => 0,
            Part::Match | Part::After3 => -1,
        }
    }
}

/// Most memory the stage may take in this build: a header asking for more is refused before
/// anything is allocated.
pub const MAX_MIX_BYTES: usize = 1 << 30;
pub const MAX_ORDERS: u32 = 8;
pub const TABLE_BITS: std::ops::RangeInclusive<u32> = 12..=24;
pub const MATCH_BITS: std::ops::RangeInclusive<u32> = 12..=28;
pub const RATE: std::ops::RangeInclusive<u32> = 1..=64;
/// Values of the keys `fit` and `cap` besides 0 (the SSE map they shrink keeps at least 2^12
/// contexts).
pub const FIT_BITS: std::ops::RangeInclusive<u32> = 16..=28;
/// Counters of the order-0 and order-1 tables, log2 (a byte and a partial byte fit in 16 bits).
pub(super) const SMALL_TABLE_BITS: u32 = 16;

/// One key of the recipe's `mix:` item (docs/recipes.md, "The mixing stage"): its name, how
/// it reads and sets its whole-number value, and the values it takes. The recipe's parser,
/// printer and error messages and [`MixSpec::validate`] all follow [`KEYS`].
pub struct MixKey {
    pub name: &'static str,
    pub get: fn(&MixSpec) -> u32,
    /// Sets a value that `check` accepted.
    pub set: fn(&mut MixSpec, u32),
    /// The values the key takes; the message names the key.
    pub check: fn(u32) -> Result<(), String>,
    /// For a key added after files were first written: the value that means "off, as
    /// before the key existed". A stored recipe may leave such a key out (it then takes this
    /// value), and the printed recipe leaves it out when it has this value, so the headers of
    /// earlier files read and print as they were.
    pub implicit: Option<u32>,
}

/// A [`MixKey`] that switches a part on (1) or off (0), stored in the bool field `$field`;
/// `$implicit` as [`MixKey::implicit`].
macro_rules! flag_key {
    ($name:literal, $field:ident, $implicit:expr) => {
        MixKey {
            name: $name,
            get: |m| m.$field as u32,
            set: |m, v| m.$field = v != 0,
            check: |v| flag(v, $name),
            implicit: $implicit,
        }
    };
}

/// The keys of `mix:` in canonical order.
pub static KEYS: [MixKey; 28] = [
    MixKey {
        name: "orders",
        get: |m| m.orders,
        set: |m, v| m.orders = v,
        check: |v| match v <= MAX_ORDERS {
            true => Ok(()),
            false => Err(format!("mix orders {v} is out of range (0..={MAX_ORDERS})")),
        },
        implicit: None,
    },
    flag_key!("word", word, None),
    flag_key!("sparse", sparse, None),
    MixKey {
        name: "match",
        get: |m| m.matcher,
        set: |m, v| m.matcher = v,
        check: |v| match v == 0 || MATCH_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix match {v} is out of range (0 for none, or {}..={}, log2 of the window)",
                MATCH_BITS.start(),
                MATCH_BITS.end()
            )),
        },
        implicit: None,
    },
    flag_key!("sse", sse, None),
    MixKey {
        name: "table",
        get: |m| m.table,
        set: |m, v| m.table = v,
        check: |v| match TABLE_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix table {v} is out of range ({}..={}, log2 of counters)",
                TABLE_BITS.start(),
                TABLE_BITS.end()
            )),
        },
        implicit: None,
    },
    MixKey {
        name: "fit",
        get: |m| m.fit,
        set: |m, v| m.fit = v,
        check: |v| match v == 0 || FIT_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix fit {v} is out of range (0 for none, or {}..={}, log2 of the largest table)",
                FIT_BITS.start(),
                FIT_BITS.end()
            )),
        },
        implicit: Some(0),
    },
    MixKey {
        name: "rate",
        get: |m| m.rate,
        set: |m, v| m.rate = v,
        check: |v| match RATE.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix rate {v} is out of range ({}..={})",
                RATE.start(),
                RATE.end()
            )),
        },
        implicit: None,
    },
    flag_key!("conf", conf, Some(0)),
    flag_key!("pword", pword, Some(0)),
    flag_key!("select", select, Some(0)),
    MixKey {
        name: "record",
        get: |m| m.record,
        set: |m, v| m.record = v,
        check: |v| match v {
            0..=2 => Ok(()),
            _ => Err("mix record is 0, 1 or 2".into()),
        },
        implicit: Some(0),
    },
    MixKey {
        name: "ext",
        get: |m| {
            m.fin as u32
                | (m.words as u32) << 1
                | (m.decay as u32) << 2
                | (m.nmap as u32) << 3
                | (m.ways as u32) << 4
                | (m.indirect as u32) << 5
                | (m.columns as u32) << 6
                | (m.second as u32) << 7
                | (m.runs as u32) << 8
                | (m.recent as u32) << 9
                | (m.sparse2 as u32) << 10
                | (m.nest as u32) << 11
                | (m.text as u32) << 12
        },
        set: |m, v| {
            m.fin = v & EXT_FIN != 0;
            m.words = v & EXT_WORDS != 0;
            m.decay = v & EXT_DECAY != 0;
            m.nmap = v & EXT_NMAP != 0;
            m.ways = v & EXT_WAYS != 0;
            m.indirect = v & EXT_IND != 0;
            m.columns = v & EXT_COLUMNS != 0;
            m.second = v & EXT_SECOND != 0;
            m.runs = v & EXT_RUNS != 0;
            m.recent = v & EXT_RECENT != 0;
            m.sparse2 = v & EXT_SPARSE2 != 0;
            m.nest = v & EXT_NEST != 0;
            m.text = v & EXT_TEXT != 0;
        },
        check: |v| match v <= EXT_ALL {
            true => Ok(()),
            false => Err(format!(
                "mix ext {v} is out of range (0..={EXT_ALL}: a sum of fin 1, words 2, decay 4, \
                 nmap 8, ways 16, ind 32, columns 64, second 128, runs 256, recent 512, sparse2 1024, nest 2048, text 4096)"
            )),
        },
        implicit: Some(0),
    },
    MixKey {
        name: "cap",
        get: |m| m.cap,
        set: |m, v| m.cap = v,
        check: |v| match v == 0 || FIT_BITS.contains(&v) {
            true => Ok(()),
            false => Err(format!(
                "mix cap {v} is out of range (0 for none, or {}..={}, log2 of the largest table)",
                FIT_BITS.start(),
                FIT_BITS.end()
            )),
        },
        implicit: Some(0),
    },
    MixKey {
        name: "x86",
        get: |m| m.x86 as u32 + m.x86_ops as u32,
        set: |m, v| (m.x86, m.x86_ops) = (v != 0, v >= 2),
        check: |v| match v <= 2 {
            true => Ok(()),
            false => Err(format!(
                "mix x86 {v} is not a transform this build knows (0: none, 1: the x86 call and \
                 jump transform, 2: the transform with RIP-relative displacements, and \
                 instruction contexts)"
            )),
        },
        implicit: Some(0),
    },
    MixKey {
        name: "x86from",
        get: |m| m.x86_from,
        set: |m, v| m.x86_from = v,
        check: |_| Ok(()),
        implicit: Some(0),
    },
    MixKey {
        name: "x86to",
        get: |m| m.x86_to,
        set: |m, v| m.x86_to = v,
        check: |_| Ok(()),
        implicit: Some(0),
    },
    MixKey {
        name: "warm",
        get: |m| m.warm,
        set: |m, v| m.warm = v,
        check: |v| match v == 0 || super::warm::by_number(v).is_some() {
            true => Ok(()),
            false => Err(format!(
                "mix warm {v} is a warm start this build does not carry (0: none; it carries: \
                 {}); a newer lmzip may",
                super::warm::numbers()
            )),
        },
        implicit: Some(0),
    },
    flag_key!("young", young, Some(0)),
    flag_key!("follow", follow, Some(0)),
    flag_key!("nibble", nibble, Some(0)),
    flag_key!("settle", settle, Some(0)),
    flag_key!("split", split, Some(0)),
    flag_key!("delta", delta, Some(0)),
    flag_key!("strings", strings, Some(0)),
    flag_key!("long", long, Some(0)),
    flag_key!("partial", partial, Some(0)),
    flag_key!("fine", fine, Some(0)),
];

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static MixKey> {
    KEYS.iter().find(|k| k.name == name)
}

/// The key names in canonical order, joined by `sep`.
pub fn key_names(sep: &str) -> String {
    let names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    names.join(sep)
}

/// The bits of the key `ext`, one per component of the third round (each a field of
/// [`MixSpec`]): one key, so that a header names them in a few bytes.
pub const EXT_FIN: u32 = 1;
pub const EXT_WORDS: u32 = 2;
pub const EXT_DECAY: u32 = 4;
pub const EXT_NMAP: u32 = 8;
pub const EXT_WAYS: u32 = 16;
pub const EXT_IND: u32 = 32;
pub const EXT_COLUMNS: u32 = 64;
pub const EXT_SECOND: u32 = 128;
pub const EXT_RUNS: u32 = 256;
pub const EXT_RECENT: u32 = 512;
pub const EXT_SPARSE2: u32 = 1024;
pub const EXT_NEST: u32 = 2048;
pub const EXT_TEXT: u32 = 4096;
pub const EXT_ALL: u32 = 8191;

/// A 0/1 switch.
fn flag(v: u32, key: &str) -> Result<(), String> {
    match v {
        0 | 1 => Ok(()),
        _ => Err(format!("mix {key} is 0 or 1")),
    }
}

impl MixSpec {
    /// Where the x86 transform applies, and whether to RIP-relative displacements too
    /// (`x86=2`), when it does.
    pub fn x86_region(&self) -> Option<crate::transform::x86::Region> {
        self.x86.then_some(crate::transform::x86::Region {
            start: self.x86_from,
            end: self.x86_to,
            relative: self.x86_ops,
        })
    }

    /// The stage as levels 5–9 use it, and as `mix:` gives it: every component measured to
    /// pay across text, source and binaries (docs/experiments.md, "The mixing stage"), with the mixer's
    /// rate that suits that many inputs.
    pub const DEFAULT: MixSpec = MixSpec {
        orders: 6,
        word: true,
        sparse: true,
        matcher: 22,
        sse: true,
        table: 22,
        fit: 0,
        cap: 0,
        rate: 3,
        conf: true,
        pword: true,
        select: true,
        record: 2,
        fin: true,
        words: true,
        decay: true,
        nmap: true,
        ways: true,
        indirect: true,
        columns: true,
        second: true,
        runs: true,
        recent: true,
        sparse2: true,
        nest: true,
        // In the levels from numerics 6 (files of 5 and older read without it).
        text: true,
        // Chosen per input by detection (src/transform/x86.rs).
        x86: false,
        x86_ops: false,
        x86_from: 0,
        x86_to: 0,
        // The default level (src/levels.rs) names its start.
        warm: 0,
        // In the levels from numerics 8 (files of 7 and older read without it).
        young: true,
        // In the levels from numerics 10 (files of 9 and older read without it).
        follow: true,
        // In the levels from numerics 11 (files of 10 and older read without it).
        nibble: true,
        // In the levels from numerics 12 (files of 11 and older read without it).
        settle: true,
        // In the levels from numerics 13 (files of 12 and older read without it).
        split: true,
        // In the levels from numerics 14 (files of 13 and older read without it).
        delta: true,
        // In the levels from numerics 15 (files of 14 and older read without it).
        strings: true,
        // In the levels from numerics 17 (files of 16 and older read without it).
        long: true,
        // Levels 4–9 name it (src/levels.rs).
        partial: false,
        // In the levels from numerics 18 (files of 17 and older read without it).
        fine: true,
    };

    /// `self` with every key that has an implicit value ([`MixKey::implicit`]) set to it: the
    /// stage of a stored recipe that leaves those keys out.
    pub fn with_implicit_keys(mut self) -> Self {
        for key in &KEYS {
            if let Some(v) = key.implicit {
                (key.set)(&mut self, v);
            }
        }
        self
    }

    /// Checks every key ([`KEYS`]) and the memory the stage needs.
    pub fn validate(&self) -> Result<()> {
        for key in &KEYS {
            if let Err(message) = (key.check)((key.get)(self)) {
                bail!(message);
            }
        }
        if self.x86_ops && !self.x86 {
            bail!("mix: the x86 instruction contexts come with the x86 transform (x86=2)");
        }
        if !self.x86 && (self.x86_from != 0 || self.x86_to != 0) {
            bail!("mix x86from and x86to say where the x86 transform applies: they need x86=1");
        }
        if self.x86_to != 0 && self.x86_to <= self.x86_from {
            bail!("mix x86to must be after x86from (or 0, the end of the input)");
        }
        if self.fit > 0 && self.cap > 0 {
            bail!("mix fit and cap are two ways to size the stage: give one of them");
        }
        let bytes = self.bytes();
        if bytes > MAX_MIX_BYTES {
            bail!(
                "the mixing stage needs about {} MiB; this build accepts at most {} MiB",
                bytes >> 20,
                MAX_MIX_BYTES >> 20
            );
        }
        if let Some(start) = super::warm::by_number(self.warm) {
            start.check_shape(&self.declare())?;
        }
        Ok(())
    }

    /// What the components of this stage add to the mixer: its inputs, selectors and memory
    /// (see [`super::component::Declare`]).
    pub fn declare(&self) -> super::Declare {
        super::parts::declare(&self.sized())
    }

    /// The settings the stage is built with: under `fit`, `table` and `match` capped at
    /// `2^fit` (the SSE maps read `fit` themselves); under `cap`, `match` capped (each family
    /// reads [`MixSpec::part_bits`] for its tables); without either, `self`. Under `x86=2`
    /// the families for text and source (words, word pairs, lines and columns, nesting, the
    /// text contexts and their selector) sit out: on machine code they took 6.5 MiB of a
    /// 64 KiB input's 35 MiB and a tenth of its time, for 0.1% of its bytes.
    pub fn sized(&self) -> MixSpec {
        let text = !self.x86_ops;
        MixSpec {
            table: self.fit_cap(self.table, 0),
            matcher: self.part_bits(Part::Match, self.matcher, 0),
            word: self.word && text,
            pword: self.pword && text,
            words: self.words && text,
            columns: self.columns && text,
            nest: self.nest && text,
            text: self.text && text,
            ..*self
        }
    }

    /// A log2 size `bits` under `fit`: at most `fit − below` (`below` < 16, the least `fit`);
    /// without `fit`, `bits`.
    pub fn fit_cap(&self, bits: u32, below: u32) -> u32 {
        match self.fit {
            0 => bits,
            fit => bits.min(fit - below),
        }
    }

    /// The log2 size of `part`'s tables or map, whose size without `fit` or `cap` is `bits`:
    /// under `fit`, as [`MixSpec::fit_cap`] with `fit_below`; under `cap`, at most `cap` plus
    /// the part's offset ([`Part::offset`]), at least 12.
    pub fn part_bits(&self, part: Part, bits: u32, fit_below: u32) -> u32 {
        match self.cap {
            0 => self.fit_cap(bits, fit_below),
            cap => bits.min(
                (cap as i32 + part.offset(cap, self.follow, self.split, self.delta)).max(12) as u32,
            ),
        }
    }

    /// Log2 size of the fifth round's tables (indirect, columns, runs): a quarter of `table`,
    /// at least the smallest table.
    pub fn quarter_table(&self) -> u32 {
        self.table.saturating_sub(2).max(*TABLE_BITS.start())
    }

    /// Contexts of each table's confidence map.
    pub fn conf_contexts(&self) -> usize {
        match self.recent {
            true => CONF_CONTEXTS * 4,
            false => CONF_CONTEXTS,
        }
    }

    /// Bytes of the context tables: most of the stage, held in memory maps of their own
    /// (src/mix/slots.rs) rather than on the heap.
    pub fn table_bytes(&self) -> usize {
        self.declare().table_bytes
    }

    /// Bytes of memory the stage takes (within a few kilobytes).
    pub fn bytes(&self) -> usize {
        let d = self.declare();
        let sse = if self.sse {
            super::sse::Sse::bytes(self)
        } else {
            0
        };
        d.bytes + sse + Mixer2::bytes(d.init.len(), &d.sets, self.young)
    }
}

/// The bytes of the history (newest in the low byte) each sparse context reads: one byte
/// alone first (tables of [`SMALL_TABLE_BITS`]), then pairs.
pub(super) const SPARSE: [u64; 4] = [0xff00, 0xff00_0000, 0xff_ff00, 0xff_00ff];

/// Contexts of each counter's confidence map: count 0..=15 × deterministic so far (× the last
/// two bits with `ext` 512, [`MixSpec::conf_contexts`]).
pub(super) const CONF_CONTEXTS: usize = 32;
