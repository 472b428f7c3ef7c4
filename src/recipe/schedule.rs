//! Which rule governs which byte: a resolved schedule cut into *pieces*, maximal runs of
//! positions that one rule instance decides (one span of a plain rule, one part of one cycle of
//! a repeat). The predictor asks for the piece at a position only when the previous piece ends,
//! so the lookup costs nothing per byte.

use super::{Action, Body, Pos, Rule};

/// The rules with byte positions (`u64::MAX` for the end of the input).
#[derive(Clone, Debug)]
pub struct Schedule {
    rules: Vec<Resolved>,
}

#[derive(Clone, Debug)]
struct Resolved {
    start: u64,
    end: u64,
    body: Body,
}

/// The action of a run of positions, and the position where the run ends (exclusive;
/// `u64::MAX` when it lasts to the end of the input).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piece<'a> {
    pub action: &'a Action,
    pub end: u64,
}

static INFER: Action = Action::Infer;

impl Schedule {
    /// The schedule of resolved rules; a rule whose positions are still in percent is an error
    /// of the caller, reported as `None`.
    pub fn new(rules: &[Rule]) -> Option<Self> {
        let rules = rules
            .iter()
            .map(|r| {
                Some(Resolved {
                    start: r.span.start.bytes()?,
                    end: match r.span.end {
                        Pos::End => u64::MAX,
                        p => p.bytes()?,
                    },
                    body: r.body.clone(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Schedule { rules })
    }

    /// The piece that holds position `pos`: the first rule whose span holds it decides; where no
    /// rule holds a position, the model only predicts.
    pub fn piece_at(&self, pos: u64) -> Piece<'_> {
        for (k, rule) in self.rules.iter().enumerate() {
            if !(rule.start <= pos && pos < rule.end) {
                continue;
            }
            let (action, own_end) = match &rule.body {
                Body::Action(a) => (a, rule.end),
                Body::Repeat(parts) => {
                    // Validated: at least one part, each ≥ 1 byte, the cycle fits a u64.
                    let period: u64 = parts.iter().map(|p| p.len).sum();
                    let offset = (pos - rule.start) % period;
                    let mut acc = 0u64;
                    let mut found = (&INFER, rule.end);
                    for part in parts {
                        if offset < acc + part.len {
                            let end = (pos - offset).saturating_add(acc + part.len);
                            found = (&part.action, end.min(rule.end));
                            break;
                        }
                        acc += part.len;
                    }
                    found
                }
            };
            // An earlier rule that starts later takes over from there.
            let end = next_start(&self.rules[..k], pos).map_or(own_end, |s| s.min(own_end));
            return Piece { action, end };
        }
        Piece {
            action: &INFER,
            end: next_start(&self.rules, pos).unwrap_or(u64::MAX),
        }
    }
}

/// The first start after `pos` among `rules`.
fn next_start(rules: &[Resolved], pos: u64) -> Option<u64> {
    rules
        .iter()
        .filter(|r| r.start > pos && r.start < r.end)
        .map(|r| r.start)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{ModelKind, Recipe};

    /// The action names of positions `0..n`, one letter each: `i` infer, `t` train.
    fn letters(rules: &str, n: u64) -> String {
        let r = Recipe::default_for(ModelKind::Mamba1)
            .edit(rules, None)
            .unwrap();
        let s = Schedule::new(&r.schedule).unwrap();
        let mut out = String::new();
        let mut pos = 0;
        while pos < n {
            let piece = s.piece_at(pos);
            assert!(piece.end > pos, "a piece ends after its start");
            let c = match piece.action {
                Action::Infer => 'i',
                Action::Train(t) if t.bptt == 1 => 't',
                Action::Train(_) => 'T',
            };
            // Every position of a piece must have the same answer.
            for p in pos..piece.end.min(n) {
                assert_eq!(s.piece_at(p).action, piece.action, "position {p}");
                out.push(c);
            }
            out.push('|');
            pos = piece.end;
        }
        out
    }

    #[test]
    fn pieces_follow_first_match_repeats_and_gaps() {
        assert_eq!(letters("0..:train()", 5), "ttttt|");
        assert_eq!(letters("2..4:train()", 6), "ii|tt|ii|");
        // The first matching rule wins, and an earlier rule that starts later cuts a piece.
        assert_eq!(letters("3..5:infer 0..:train()", 8), "ttt|ii|ttt|");
        assert_eq!(
            letters("1..:repeat(2:train(),1:infer,1:train(bptt=2))", 10),
            "i|tt|i|T|tt|i|T|t|"
        );
        // A repeat ends where its span ends, mid-part.
        assert_eq!(letters("0..3:repeat(2:train())", 5), "tt|t|ii|");
    }
}
