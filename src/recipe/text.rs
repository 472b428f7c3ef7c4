//! The recipe language (docs/recipes.md): parsing, with errors that point at the bad part, and
//! the canonical printing that headers store.
//!
//! ```text
//! recipe := item (' ' item)*              kind first, then the base, then rules
//! kind   := mamba1 | rwkv7
//! base   := cfg:[KEY=N,...]               fresh seeded model (sizes and seed)
//!         | file:PATH                     a model file (PATH runs to the next space)
//!         | file:sha256=HEX[,name=N][,KEY=N...]   canonical form of a model-file base
//! rule   := [POS]..[POS]:body             start defaults to 0, end to the end of the input
//! POS    := INT[K|M|G] | DEC%             bytes (K = 1024) or percent of the input
//! body   := action | repeat(LEN:action,...)
//! action := infer | train[(KEY=VALUE,...)]  keys: scope opt lr stride bptt clip state
//! ```
//!
//! The same parser reads complete recipes (headers: every key must be given, nothing comes from
//! defaults that a later build might change) and fragments that edit a template (the command
//! line: left-out parts come from the level's recipe, left-out `train` keys from documented
//! defaults).

use std::fmt;

use super::{
    Action, Base, Body, LiveState, MAX_BPTT, MAX_DIM, MAX_PARTS, MAX_RULES, ModelConfig, ModelKind,
    OptimizerKind, PERCENT_ONE, Part, Pos, Recipe, Rule, Span, TrainSpec, hex,
};
use crate::params::Scope;

/// A recipe that does not parse, with the place of the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeError {
    pub text: String,
    /// Byte offset and length of the bad part.
    pub at: usize,
    pub len: usize,
    pub message: String,
}

impl fmt::Display for RecipeError {
    /// `message`, then the recipe with the bad part underlined.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let col = self.text[..self.at.min(self.text.len())].chars().count();
        let width = self
            .text
            .get(self.at..self.at + self.len)
            .map_or(1, |s| s.chars().count().max(1));
        write!(
            f,
            "{} (in the recipe at column {}):\n    {}\n    {}{}",
            self.message,
            col + 1,
            self.text,
            " ".repeat(col),
            "^".repeat(width)
        )
    }
}

impl std::error::Error for RecipeError {}

/// Where a part of the text is: offset and length.
type Loc = (usize, usize);

/// A base as written.
enum BaseItem {
    /// `cfg:` keys (sizes) and the seed.
    Cfg {
        sizes: Vec<(&'static str, usize)>,
        seed: Option<u64>,
    },
    /// `file:PATH` (the caller loads the file: [`file_path`]).
    Path,
    /// `file:sha256=...`.
    File {
        sha256: [u8; 32],
        name: Option<String>,
        sizes: Vec<(&'static str, usize)>,
    },
}

/// A parsed text before it is completed into a [`Recipe`].
struct Fragment {
    kind: Option<(ModelKind, Loc)>,
    base: Option<(BaseItem, Loc)>,
    rules: Option<Vec<Rule>>,
}

/// The model a text names in its first word, if it does.
pub fn declared_kind(text: &str) -> Option<ModelKind> {
    ModelKind::parse(text.split_whitespace().next()?).ok()
}

/// The path of a `file:PATH` base, if the text has one (the caller loads the file, then
/// completes the recipe with it).
pub fn file_path(text: &str) -> Option<&str> {
    text.split_whitespace()
        .take(2)
        .find_map(|w| w.strip_prefix("file:"))
        .filter(|rest| !rest.is_empty() && !rest.starts_with("sha256="))
}

/// Parses a complete recipe (every key given), as headers store it.
pub fn parse_complete(text: &str) -> Result<Recipe, RecipeError> {
    let p = Parser::new(text, true);
    let Some(kind) = declared_kind(text) else {
        let (at, len) = p.first_word();
        return Err(p.error(
            at,
            len,
            "a recipe starts with its model: mamba1 or rwkv7".into(),
        ));
    };
    let frag = p.parse(kind)?;
    let (base, loc) = frag.base.ok_or_else(|| {
        p.error(
            text.len(),
            0,
            "the recipe has no base (cfg:... or file:...)".into(),
        )
    })?;
    let base = match base {
        BaseItem::Cfg { sizes, seed } => {
            let seed = seed.ok_or_else(|| p.error(loc.0, loc.1, "cfg: lacks the seed".into()))?;
            let config = p.full_config(kind, &sizes, loc)?;
            Base::Fresh { config, seed }
        }
        BaseItem::File {
            sha256,
            name,
            sizes,
        } => Base::File {
            config: p.full_config(kind, &sizes, loc)?,
            sha256,
            name,
        },
        BaseItem::Path => {
            return Err(p.error(
                loc.0,
                loc.1,
                "a stored recipe names its model file by hash (file:sha256=...)".into(),
            ));
        }
    };
    let recipe = Recipe {
        base,
        schedule: frag.rules.unwrap_or_default(),
    };
    p.check(&recipe)?;
    Ok(recipe)
}

impl Recipe {
    /// Applies a recipe text onto this recipe (the level's): a base in the text replaces the
    /// base (`cfg:` keys edit this recipe's sizes; keys left out keep their values), rules
    /// replace the schedule, and `train` keys left out take their defaults
    /// ([`TrainSpec::defaults`]). `file` is the loaded model file's base when the text (or the
    /// caller) names one.
    pub fn edit(&self, text: &str, file: Option<&Base>) -> Result<Recipe, RecipeError> {
        let kind = file.map_or(self.kind(), |b| b.config().kind());
        let p = Parser::new(text, false);
        let frag = p.parse(declared_kind(text).unwrap_or(kind))?;
        if let Some((named, loc)) = frag.kind
            && named != kind
        {
            return Err(p.error(
                loc.0,
                loc.1,
                format!(
                    "the recipe names {}, but the model is {}",
                    named.name(),
                    kind.name()
                ),
            ));
        }
        let base = match frag.base {
            None => match file {
                Some(f) => f.clone(),
                None => self.base.clone(),
            },
            Some((item, loc)) => {
                let fail = |m: String| p.error(loc.0, loc.1, m);
                match (item, file) {
                    (BaseItem::Cfg { .. }, Some(_)) => {
                        return Err(fail(
                            "cfg: makes a fresh model, but a model file is given too".into(),
                        ));
                    }
                    (BaseItem::Cfg { sizes, seed }, None) => {
                        let (mut config, old_seed) = match &self.base {
                            Base::Fresh { config, seed } => (config.clone(), *seed),
                            Base::File { .. } => (ModelConfig::default_for(kind), 0),
                        };
                        config.apply_keys(&sizes).map_err(|e| fail(e.to_string()))?;
                        config.validate().map_err(|e| fail(e.to_string()))?;
                        Base::Fresh {
                            config,
                            seed: seed.unwrap_or(old_seed),
                        }
                    }
                    (BaseItem::Path, Some(f)) => f.clone(),
                    (BaseItem::File { sha256, .. }, Some(f)) => {
                        if f.sha256() != Some(sha256) {
                            return Err(fail(format!(
                                "the recipe names the model file with SHA-256 {}, but the given \
                                 file's is {}",
                                hex(&sha256),
                                f.sha256().map_or(String::new(), |h| hex(&h))
                            )));
                        }
                        f.clone()
                    }
                    (BaseItem::Path | BaseItem::File { .. }, None) => {
                        return Err(fail("this model file is not loaded".into()));
                    }
                }
            }
        };
        let recipe = Recipe {
            base,
            schedule: frag.rules.unwrap_or_else(|| self.schedule.clone()),
        };
        p.check(&recipe)?;
        Ok(recipe)
    }
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

/// The canonical text of a recipe: every key, in a fixed order, numbers in their shortest exact
/// form. Parsing it gives the recipe back.
pub fn print(recipe: &Recipe) -> String {
    let kind = recipe.kind();
    let mut out = String::from(kind.name());
    out.push(' ');
    let sizes = |config: &ModelConfig| -> String {
        config
            .keys()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    match &recipe.base {
        Base::Fresh { config, seed } => {
            out += &format!("cfg:{},seed={seed}", sizes(config));
        }
        Base::File {
            config,
            sha256,
            name,
        } => {
            out += &format!("file:sha256={}", hex(sha256));
            if let Some(name) = name.as_deref().filter(|n| !n.is_empty()) {
                out += &format!(",name={}", encode_name(name));
            }
            out += &format!(",{}", sizes(config));
        }
    }
    for rule in &recipe.schedule {
        out.push(' ');
        out += &print_rule(rule, kind);
    }
    out
}

fn print_rule(rule: &Rule, kind: ModelKind) -> String {
    let end = match rule.span.end {
        Pos::End => String::new(),
        p => print_pos(p),
    };
    let body = match &rule.body {
        Body::Action(a) => print_action(a, kind),
        Body::Repeat(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| format!("{}:{}", print_bytes(p.len), print_action(&p.action, kind)))
                .collect();
            format!("repeat({})", parts.join(","))
        }
    };
    format!("{}..{end}:{body}", print_pos(rule.span.start))
}

/// The canonical text of an action. `state` is printed only when it is not `rebuild`, so the
/// recipes of files written before the key existed print as they always did.
pub fn print_action(action: &Action, kind: ModelKind) -> String {
    match action {
        Action::Infer => "infer".into(),
        Action::Train(t) => {
            let state = match t.state {
                LiveState::Rebuild => String::new(),
                other => format!(",state={}", other.name()),
            };
            format!(
                "train(scope={},opt={},lr={},stride={},bptt={},clip={}{state})",
                t.scope.to_text(crate::train::trained_groups(kind)),
                t.optimizer.name(),
                // f32 Display is the shortest decimal that parses back to the same f32.
                t.lr,
                t.stride,
                t.bptt,
                t.clip
            )
        }
    }
}

fn print_pos(p: Pos) -> String {
    match p {
        Pos::Bytes(b) => print_bytes(b),
        Pos::Percent(ppm) => {
            let whole = ppm / (PERCENT_ONE / 100);
            let frac = ppm % (PERCENT_ONE / 100);
            if frac == 0 {
                format!("{whole}%")
            } else {
                let digits = format!("{frac:04}");
                format!("{whole}.{}%", digits.trim_end_matches('0'))
            }
        }
        Pos::End => String::new(),
    }
}

/// Bytes with the largest binary unit that divides them exactly.
fn print_bytes(b: u64) -> String {
    for (unit, size) in [('G', 1u64 << 30), ('M', 1 << 20), ('K', 1 << 10)] {
        if b != 0 && b.is_multiple_of(size) {
            return format!("{}{unit}", b / size);
        }
    }
    b.to_string()
}

/// Characters a model file's name keeps as they are; others are written `%XX` (UTF-8 bytes).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn encode_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if name_char(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out += &format!("%{b:02X}");
            }
        }
    }
    out
}

fn decode_name(text: &str) -> Option<String> {
    let mut bytes = Vec::new();
    let mut it = text.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hi = (it.next()? as char).to_digit(16)?;
            let lo = (it.next()? as char).to_digit(16)?;
            bytes.push((hi * 16 + lo) as u8);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

struct Parser<'a> {
    text: &'a str,
    /// Complete recipes must give every key.
    strict: bool,
}

/// A cursor over the text.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn at_end_of_item(&self) -> bool {
        self.peek().is_none_or(|c| c.is_ascii_whitespace())
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.text[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// The longest run of characters satisfying `ok` from here.
    fn take_while(&mut self, ok: impl Fn(u8) -> bool) -> (&'a str, Loc) {
        let start = self.pos;
        while self.peek().is_some_and(&ok) {
            self.pos += 1;
        }
        (&self.text[start..self.pos], (start, self.pos - start))
    }

    /// A key or value: letters, digits and `_ . + - %`.
    fn word(&mut self) -> (&'a str, Loc) {
        self.take_while(|c| c.is_ascii_alphanumeric() || b"_.+-%".contains(&c))
    }
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, strict: bool) -> Self {
        Parser { text, strict }
    }

    fn error(&self, at: usize, len: usize, message: String) -> RecipeError {
        RecipeError {
            text: self.text.to_string(),
            at,
            len,
            message,
        }
    }

    fn first_word(&self) -> Loc {
        let start = self.text.len() - self.text.trim_start().len();
        let len = self.text[start..]
            .find(char::is_whitespace)
            .unwrap_or(self.text.len() - start);
        (start, len)
    }

    /// Parses the items of the text for a model of kind `kind`.
    fn parse(&self, kind: ModelKind) -> Result<Fragment, RecipeError> {
        let mut frag = Fragment {
            kind: None,
            base: None,
            rules: None,
        };
        let mut c = Cursor {
            text: self.text,
            pos: 0,
        };
        let mut items = 0usize;
        loop {
            c.skip_spaces();
            if c.peek().is_none() {
                break;
            }
            let start = c.pos;
            let rest = &self.text[start..];
            let first = rest
                .split(|ch: char| ch.is_whitespace())
                .next()
                .unwrap_or("");
            if let Ok(named) = ModelKind::parse(first) {
                if items > 0 {
                    return Err(self.error(
                        start,
                        first.len(),
                        "the model is named first, before the base and the rules".into(),
                    ));
                }
                c.pos += first.len();
                frag.kind = Some((named, (start, first.len())));
            } else if rest.starts_with("cfg:") || rest.starts_with("file:") {
                if frag.base.is_some() {
                    return Err(self.error(start, first.len(), "a second base".into()));
                }
                if frag.rules.is_some() {
                    return Err(self.error(
                        start,
                        first.len(),
                        "the base comes before the rules".into(),
                    ));
                }
                let item = self.base(&mut c, kind)?;
                frag.base = Some((item, (start, c.pos - start)));
            } else {
                let rule = self.rule(&mut c, kind)?;
                let rules = frag.rules.get_or_insert_with(Vec::new);
                if rules.len() == MAX_RULES {
                    return Err(self.error(start, 1, format!("more than {MAX_RULES} rules")));
                }
                rules.push(rule);
            }
            if !c.at_end_of_item() {
                let (_, (at, len)) = c.take_while(|ch| !ch.is_ascii_whitespace());
                return Err(self.error(at, len, "unexpected text".into()));
            }
            items += 1;
        }
        Ok(frag)
    }

    fn base(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<BaseItem, RecipeError> {
        if c.eat("file:") {
            if !c.text[c.pos..].starts_with("sha256=") {
                let (path, (at, _)) = c.take_while(|ch| !ch.is_ascii_whitespace());
                if path.is_empty() {
                    return Err(self.error(at, 0, "file: needs a path".into()));
                }
                return Ok(BaseItem::Path);
            }
            let mut sha256 = None;
            let mut name = None;
            let mut sizes = Vec::new();
            self.key_values(c, false, |p, key, value, vloc| {
                match key {
                    "sha256" => {
                        sha256 = Some(parse_sha(value).ok_or_else(|| {
                            p.error(vloc.0, vloc.1, "a SHA-256 is 64 hexadecimal digits".into())
                        })?)
                    }
                    "name" => {
                        name = Some(decode_name(value).ok_or_else(|| {
                            p.error(vloc.0, vloc.1, "a bad %-escape in the name".into())
                        })?)
                    }
                    _ => sizes.push(p.size(kind, key, value, vloc)?),
                }
                Ok(())
            })?;
            let sha256 =
                sha256.ok_or_else(|| self.error(c.pos, 1, "file: lacks sha256=".into()))?;
            return Ok(BaseItem::File {
                sha256,
                name,
                sizes,
            });
        }
        // The caller saw "cfg:" here.
        c.eat("cfg:");
        let mut sizes = Vec::new();
        let mut seed = None;
        if !c.at_end_of_item() {
            self.key_values(c, false, |p, key, value, vloc| {
                if key == "seed" {
                    seed = Some(value.parse::<u64>().map_err(|_| {
                        p.error(vloc.0, vloc.1, "the seed is a whole number".into())
                    })?);
                } else {
                    sizes.push(p.size(kind, key, value, vloc)?);
                }
                Ok(())
            })?;
        }
        Ok(BaseItem::Cfg { sizes, seed })
    }

    /// One size of the model: `key=N` with a key the model has.
    fn size(
        &self,
        kind: ModelKind,
        key: &str,
        value: &str,
        vloc: Loc,
    ) -> Result<(&'static str, usize), RecipeError> {
        let names = ModelConfig::key_names(kind);
        let Some(&name) = names.iter().find(|k| **k == key) else {
            let at = vloc.0 - key.len() - 1;
            return Err(self.error(
                at,
                key.len(),
                format!(
                    "{} has no size '{key}' (sizes: {}, and seed)",
                    kind.name(),
                    names.join(", ")
                ),
            ));
        };
        match value.parse::<usize>() {
            Ok(v) if (1..=MAX_DIM).contains(&v) => Ok((name, v)),
            _ => Err(self.error(
                vloc.0,
                vloc.1,
                format!("{key} is a whole number from 1 to {MAX_DIM}"),
            )),
        }
    }

    /// `key=value,key=value...` up to the end of the item or a `)`; each pair is handed to
    /// `each` with the value's location. Repeated keys are refused.
    fn key_values(
        &self,
        c: &mut Cursor<'a>,
        in_parens: bool,
        mut each: impl FnMut(&Self, &'a str, &'a str, Loc) -> Result<(), RecipeError>,
    ) -> Result<(), RecipeError> {
        let mut seen: Vec<&str> = Vec::new();
        loop {
            if in_parens {
                c.skip_spaces();
            }
            let (key, kloc) = c.word();
            if key.is_empty() {
                return Err(self.error(kloc.0, 1, "expected key=value".into()));
            }
            if in_parens {
                c.skip_spaces();
            }
            if !c.eat("=") {
                return Err(self.error(kloc.0, kloc.1, format!("'{key}' needs =value")));
            }
            if in_parens {
                c.skip_spaces();
            }
            let (value, vloc) = c.word();
            if value.is_empty() {
                return Err(self.error(vloc.0, 1, format!("'{key}' needs a value")));
            }
            if seen.contains(&key) {
                return Err(self.error(kloc.0, kloc.1, format!("'{key}' is given twice")));
            }
            seen.push(key);
            each(self, key, value, vloc)?;
            if in_parens {
                c.skip_spaces();
            }
            if !c.eat(",") {
                return Ok(());
            }
        }
    }

    fn rule(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<Rule, RecipeError> {
        let start_at = c.pos;
        let start = if c.text[c.pos..].starts_with("..") {
            Pos::Bytes(0)
        } else {
            self.pos(c)?
        };
        if !c.eat("..") {
            return Err(self.error(
                c.pos,
                1,
                "expected a rule, start..end:action (or a base, cfg:... or file:...)".into(),
            ));
        }
        let end = if c.peek() == Some(b':') {
            Pos::End
        } else {
            self.pos(c)?
        };
        let span = Span { start, end };
        span.validate()
            .map_err(|e| self.error(start_at, c.pos - start_at, e.to_string()))?;
        if !c.eat(":") {
            return Err(self.error(c.pos, 1, "expected ':' and an action after the span".into()));
        }
        let body_at = c.pos;
        let body = if c.eat("repeat(") {
            let mut parts = Vec::new();
            loop {
                c.skip_spaces();
                let len_at = c.pos;
                let len = match self.pos(c)? {
                    Pos::Bytes(n) if n > 0 => n,
                    _ => {
                        return Err(self.error(
                            len_at,
                            c.pos - len_at,
                            "a repeat part's length is a number of bytes above 0".into(),
                        ));
                    }
                };
                if !c.eat(":") {
                    return Err(self.error(
                        c.pos,
                        1,
                        "expected ':' after the part's length".into(),
                    ));
                }
                parts.push(Part {
                    len,
                    action: self.action(c, kind)?,
                });
                if parts.len() > MAX_PARTS {
                    return Err(self.error(len_at, 1, format!("more than {MAX_PARTS} parts")));
                }
                c.skip_spaces();
                if c.eat(")") {
                    break;
                }
                if !c.eat(",") {
                    return Err(self.error(c.pos, 1, "expected ',' or ')'".into()));
                }
            }
            if parts
                .iter()
                .try_fold(0u64, |sum, p| sum.checked_add(p.len))
                .is_none()
            {
                return Err(self.error(body_at, c.pos - body_at, "the cycle is too long".into()));
            }
            Body::Repeat(parts)
        } else {
            Body::Action(self.action(c, kind)?)
        };
        Ok(Rule { span, body })
    }

    /// A position: `INT[K|M|G]` bytes or `DEC%`.
    fn pos(&self, c: &mut Cursor<'a>) -> Result<Pos, RecipeError> {
        let at = c.pos;
        let (int, _) = c.take_while(|ch| ch.is_ascii_digit());
        let mut frac = "";
        if c.peek() == Some(b'.')
            && c.text
                .as_bytes()
                .get(c.pos + 1)
                .is_some_and(u8::is_ascii_digit)
        {
            c.pos += 1;
            frac = c.take_while(|ch| ch.is_ascii_digit()).0;
        }
        let bad = |c: &Cursor<'_>, m: &str| self.error(at, (c.pos - at).max(1), m.to_string());
        if int.is_empty() {
            return Err(bad(
                c,
                "expected a position: bytes (like 4096 or 64K) or percent (50%)",
            ));
        }
        if c.eat("%") {
            if frac.len() > 4 {
                return Err(bad(c, "percent positions have at most 4 decimals"));
            }
            let whole: u64 = int.parse().map_err(|_| bad(c, "percent out of range"))?;
            let frac_ppm: u64 = format!("{frac:0<4}").parse().unwrap_or(0);
            let ppm = whole
                .checked_mul(10_000)
                .and_then(|w| w.checked_add(frac_ppm))
                .filter(|&p| p <= PERCENT_ONE as u64)
                .ok_or_else(|| bad(c, "a position beyond 100% is not in the input"))?;
            return Ok(Pos::Percent(ppm as u32));
        }
        if !frac.is_empty() {
            return Err(bad(c, "byte positions are whole numbers"));
        }
        let unit = match c.peek() {
            Some(b'K') => 1u64 << 10,
            Some(b'M') => 1 << 20,
            Some(b'G') => 1 << 30,
            _ => 1,
        };
        if unit > 1 {
            c.pos += 1;
        }
        int.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .map(Pos::Bytes)
            .ok_or_else(|| bad(c, "position out of range"))
    }

    fn action(&self, c: &mut Cursor<'a>, kind: ModelKind) -> Result<Action, RecipeError> {
        let at = c.pos;
        let (word, loc) = c.take_while(|ch| ch.is_ascii_alphabetic());
        match word {
            "infer" => Ok(Action::Infer),
            "train" => {
                let spec = self.train_spec(c, kind, at)?;
                Ok(Action::Train(spec))
            }
            _ => Err(self.error(
                loc.0,
                loc.1.max(1),
                "expected an action: infer, train(...) or repeat(...)".into(),
            )),
        }
    }

    /// `(key=value,...)` after `train`; `at` is where `train` starts.
    fn train_spec(
        &self,
        c: &mut Cursor<'a>,
        kind: ModelKind,
        at: usize,
    ) -> Result<TrainSpec, RecipeError> {
        let mut spec = TrainSpec::defaults(kind);
        let mut stride = None;
        let mut given: Vec<&str> = Vec::new();
        if c.eat("(") {
            c.skip_spaces();
            if !c.eat(")") {
                self.key_values(c, true, |p, key, value, vloc| {
                    let bad = |m: String| p.error(vloc.0, vloc.1, m);
                    match key {
                        "scope" => {
                            spec.scope = Scope::parse(value, crate::train::trained_groups(kind))
                                .map_err(|e| bad(e.to_string()))?
                        }
                        "opt" => {
                            spec.optimizer =
                                OptimizerKind::parse(value).map_err(|e| bad(e.to_string()))?
                        }
                        "lr" => spec.lr = p.decimal(value, vloc, "lr")?,
                        "clip" => spec.clip = p.decimal(value, vloc, "clip")?,
                        "state" => {
                            spec.state = LiveState::parse(value).map_err(|e| bad(e.to_string()))?
                        }
                        "bptt" => {
                            spec.bptt = value
                                .parse::<usize>()
                                .ok()
                                .filter(|w| (1..=MAX_BPTT).contains(w))
                                .ok_or_else(|| {
                                    bad(format!("bptt is a whole number from 1 to {MAX_BPTT}"))
                                })?
                        }
                        "stride" => {
                            stride =
                                Some(
                                    value.parse::<usize>().ok().filter(|&s| s >= 1).ok_or_else(
                                        || bad("stride is a whole number >= 1".into()),
                                    )?,
                                )
                        }
                        _ => {
                            return Err(p.error(
                                vloc.0 - key.len() - 1,
                                key.len(),
                                format!(
                                    "train has no key '{key}' (keys: scope, opt, lr, stride, \
                                     bptt, clip, state)"
                                ),
                            ));
                        }
                    }
                    given.push(key);
                    Ok(())
                })?;
                if !c.eat(")") {
                    return Err(self.error(c.pos, 1, "expected ',' or ')'".into()));
                }
            }
        }
        let loc = (at, c.pos - at);
        // A stored recipe gives every key but `state`, which files written before it existed
        // leave out: absent, it means `rebuild`, what those files were coded with.
        if self.strict {
            let missing: Vec<&str> = ["scope", "opt", "lr", "stride", "bptt", "clip"]
                .into_iter()
                .filter(|k| !given.contains(k))
                .collect();
            if !missing.is_empty() {
                return Err(self.error(
                    loc.0,
                    loc.1,
                    format!(
                        "a stored recipe gives every train key; missing: {}",
                        missing.join(", ")
                    ),
                ));
            }
        }
        // Contiguous segments unless a stride says otherwise.
        spec.stride = stride.unwrap_or(spec.bptt);
        spec.validate(kind)
            .map_err(|e| self.error(loc.0, loc.1, e.to_string()))?;
        Ok(spec)
    }

    /// A finite decimal (`0.001`, `1e-3`) as an f32.
    fn decimal(&self, value: &str, vloc: Loc, key: &str) -> Result<f32, RecipeError> {
        // f32's parser also takes "inf" and "NaN": only digits, dots, signs and exponents pass.
        let plain = value
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b));
        match value.parse::<f32>() {
            Ok(x) if plain && x.is_finite() => Ok(x),
            _ => Err(self.error(
                vloc.0,
                vloc.1,
                format!("{key} is a decimal number (like 0.002 or 2e-3)"),
            )),
        }
    }

    /// The full configuration of a complete recipe: every size given, none twice.
    fn full_config(
        &self,
        kind: ModelKind,
        sizes: &[(&'static str, usize)],
        loc: Loc,
    ) -> Result<ModelConfig, RecipeError> {
        let names = ModelConfig::key_names(kind);
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !sizes.iter().any(|(k, _)| k == n))
            .collect();
        if !missing.is_empty() {
            return Err(self.error(
                loc.0,
                loc.1,
                format!(
                    "a stored recipe gives every size; missing: {}",
                    missing.join(", ")
                ),
            ));
        }
        let mut config = ModelConfig::default_for(kind);
        for &(k, v) in sizes {
            config.set_key(k, v);
        }
        config
            .validate()
            .map_err(|e| self.error(loc.0, loc.1, e.to_string()))?;
        Ok(config)
    }

    /// The last check of a whole recipe (what the parts could not see alone).
    fn check(&self, recipe: &Recipe) -> Result<(), RecipeError> {
        recipe
            .validate()
            .map_err(|e| self.error(0, self.text.len(), format!("{e:#}")))
    }
}

fn parse_sha(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mamba() -> Recipe {
        crate::levels::default_recipe(ModelKind::Mamba1)
    }

    #[test]
    fn canonical_text_of_the_default_recipe() {
        let r = mamba();
        assert_eq!(
            r.to_text(),
            "mamba1 cfg:hidden=128,layers=3,intermediate=256,state=16,conv=4,dt_rank=8,seed=0 \
             0..:train(scope=all,opt=adam,lr=0.0005,stride=16,bptt=16,clip=0)"
        );
        assert_eq!(Recipe::parse(&r.to_text()).unwrap(), r);
    }

    #[test]
    fn fragments_edit_the_template() {
        let r = mamba()
            .edit(
                "cfg:hidden=32,seed=9 0..64K:train(opt=sgd, lr=0.05) 64K..90%:infer \
                 90%..:repeat(1K:train(bptt=8,stride=16,scope=head+bias),3K:infer)",
                None,
            )
            .unwrap();
        let ModelConfig::Mamba1(c) = r.config() else {
            panic!()
        };
        assert_eq!((c.hidden, c.inner, c.layers), (32, 64, 3));
        assert_eq!(
            r.to_text(),
            "mamba1 cfg:hidden=32,layers=3,intermediate=64,state=16,conv=4,dt_rank=8,seed=9 \
             0..64K:train(scope=all,opt=sgd,lr=0.05,stride=1,bptt=1,clip=0) 64K..90%:infer \
             90%..:repeat(1K:train(scope=head+bias,opt=adam,lr=0.002,stride=16,bptt=8,clip=0),\
             3K:infer)"
        );
        assert_eq!(Recipe::parse(&r.to_text()).unwrap(), r);
        // Rules alone keep the base; a base alone keeps the schedule.
        let rules = mamba().edit("..:infer", None).unwrap();
        assert_eq!(rules.base, mamba().base);
        let base = mamba().edit("cfg:layers=1", None).unwrap();
        assert_eq!(base.schedule, mamba().schedule);
    }

    #[test]
    fn errors_point_at_the_bad_part() {
        for (text, bad, needle) in [
            ("cfg:hiden=64", "hiden", "no size 'hiden'"),
            ("0..:train(lr=fast)", "fast", "lr is a decimal"),
            ("0..:train(lr=inf)", "inf", "lr is a decimal"),
            (
                "0..:train(bptt=8,stride=4)",
                "train(bptt=8,stride=4)",
                "stride",
            ),
            ("0..:train(scope=embed+brain)", "embed+brain", "brain"),
            ("0..:trian", "trian", "expected an action"),
            ("100..50:infer", "100..50", "empty"),
            ("0..150%:infer", "150%", "beyond 100%"),
            ("0..:infer cfg:layers=1", "cfg:layers=1", "before the rules"),
            ("rwkv7 0..:infer", "rwkv7", "the model is mamba1"),
            ("0..:train(lr=0.1,lr=0.2)", "lr", "twice"),
            ("0..:repeat(0:infer)", "0", "above 0"),
            ("0..:infer)", ")", "unexpected"),
            ("cfg:hidden=99999999", "99999999", "from 1 to"),
        ] {
            let err = mamba().edit(text, None).unwrap_err();
            let shown = &err.text[err.at..err.at + err.len];
            assert_eq!(shown, bad, "{text}: {err}");
            assert!(err.message.contains(needle), "{text}: {err}");
        }
        let err = mamba().edit("cfg:hiden=64", None).unwrap_err().to_string();
        assert!(err.contains("    cfg:hiden=64\n        ^^^^^"), "{err}");
    }

    #[test]
    fn complete_recipes_must_give_every_key() {
        let full = mamba().to_text();
        for (from, to) in [
            (",seed=0", ""),
            ("dt_rank=8,", ""),
            (",clip=0", ""),
            ("mamba1 ", ""),
            ("mamba1", "gpt9"),
        ] {
            let bad = full.replacen(from, to, 1);
            assert!(Recipe::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_state_key_is_printed_only_when_it_carries() {
        let carry = mamba()
            .edit("0..:train(bptt=16,state=carry)", None)
            .unwrap();
        let Some(Action::Train(t)) = carry.actions().next() else {
            panic!()
        };
        assert_eq!(t.state, LiveState::Carry);
        let text = carry.to_text();
        assert!(
            text.ends_with(
                "0..:train(scope=all,opt=adam,lr=0.002,stride=16,bptt=16,clip=0,state=carry)"
            ),
            "{text}"
        );
        assert_eq!(Recipe::parse(&text).unwrap(), carry);
        // A stored recipe without the key (every file written before it) means rebuild, and an
        // explicit rebuild prints as such a recipe.
        let rebuild = mamba()
            .edit("0..:train(bptt=16,state=rebuild)", None)
            .unwrap();
        let old = rebuild.to_text();
        assert!(!old.contains("state=rebuild"), "{old}");
        assert_eq!(Recipe::parse(&old).unwrap(), rebuild);
        assert_eq!(
            Recipe::parse(&old.replace("clip=0)", "clip=0,state=rebuild)")).unwrap(),
            rebuild
        );
        let err = mamba().edit("0..:train(state=keep)", None).unwrap_err();
        assert_eq!(&err.text[err.at..err.at + err.len], "keep");
        assert!(err.message.contains("rebuild, carry"), "{err}");
    }

    #[test]
    fn model_file_bases_print_their_hash_and_name() {
        let file = Base::File {
            config: ModelConfig::default_for(ModelKind::Rwkv7),
            sha256: [0xab; 32],
            name: Some("my model, v2.safetensors".into()),
        };
        let r = crate::levels::default_recipe(ModelKind::Rwkv7)
            .edit("file:whatever.st 0..:train(lr=0.001)", Some(&file))
            .unwrap();
        let text = r.to_text();
        assert!(
            text.starts_with(&format!(
                "rwkv7 file:sha256={},name=my%20model%2C%20v2.safetensors,hidden=128",
                "ab".repeat(32)
            )),
            "{text}"
        );
        assert_eq!(Recipe::parse(&text).unwrap(), r);
        assert_eq!(file_path("file:a/b.st 0..:infer"), Some("a/b.st"));
        assert_eq!(file_path(&text), None);
        // The hash form must match the given file.
        let other = Base::File {
            config: ModelConfig::default_for(ModelKind::Rwkv7),
            sha256: [0xcd; 32],
            name: None,
        };
        assert!(
            crate::levels::default_recipe(ModelKind::Rwkv7)
                .edit(&text, Some(&other))
                .is_err()
        );
    }
}
