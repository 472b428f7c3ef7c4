//! The canonical text of a recipe (docs/recipes.md, "The canonical form"): what headers store
//! and `lmzip info` prints. Every key is given, in the order of its table (the model's sizes,
//! [`crate::mix::KEYS`], [`super::train::TRAIN_KEYS`]), numbers in their shortest exact form, so
//! parsing the text gives the recipe back and printing that gives the same text.

use super::syntax::{encode_name, hex};
use super::{Action, Base, Body, ModelConfig, ModelKind, PERCENT_ONE, Pos, Recipe, Rule};
use crate::mix::{self, MixSpec};

/// The canonical text of a recipe.
pub fn print(recipe: &Recipe) -> String {
    let kind = recipe.kind();
    let mut out = format!("{} {}", kind.name(), print_base(&recipe.base));
    if let Some(mix) = &recipe.mix {
        out += &format!(" mix:{}", print_mix(mix));
    }
    for rule in &recipe.schedule {
        out.push(' ');
        out += &print_rule(rule, kind);
    }
    out
}

fn print_base(base: &Base) -> String {
    match base {
        Base::Fresh { config, seed } => format!("cfg:{},seed={seed}", print_sizes(config)),
        Base::File {
            config,
            sha256,
            name,
        } => {
            let mut out = format!("file:sha256={}", hex(sha256));
            if let Some(name) = name.as_deref().filter(|n| !n.is_empty()) {
                out += &format!(",name={}", encode_name(name));
            }
            out + &format!(",{}", print_sizes(config))
        }
    }
}

fn print_sizes(config: &ModelConfig) -> String {
    let pairs: Vec<String> = config
        .stated_keys()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    pairs.join(",")
}

fn print_mix(mix: &MixSpec) -> String {
    // A key at its implicit value is left out, so that headers print as before it existed.
    let pairs: Vec<String> = mix::KEYS
        .iter()
        .filter(|k| k.implicit != Some((k.get)(mix)))
        .map(|k| format!("{}={}", k.name, (k.get)(mix)))
        .collect();
    pairs.join(",")
}

fn print_rule(rule: &Rule, kind: ModelKind) -> String {
    print_rule_with(rule, &|a| print_action(a, kind))
}

/// A rule with its actions printed by `action`.
pub(super) fn print_rule_with(rule: &Rule, action: &dyn Fn(&Action) -> String) -> String {
    let end = match rule.span.end {
        Pos::End => String::new(),
        p => print_pos(p),
    };
    let body = match &rule.body {
        Body::Action(a) => action(a),
        Body::Repeat(parts) => {
            let parts: Vec<String> = parts
                .iter()
                .map(|p| format!("{}:{}", print_bytes(p.len), action(&p.action)))
                .collect();
            format!("repeat({})", parts.join(","))
        }
    };
    format!("{}..{end}:{body}", print_pos(rule.span.start))
}

/// The canonical text of an action.
pub fn print_action(action: &Action, kind: ModelKind) -> String {
    match action {
        Action::Infer => "infer".into(),
        Action::Train(t) => format!("train({})", t.to_text(kind)),
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
