//! `--block-size`: the input cut into blocks, each compressed from the recipe's start as a
//! member of its own, up to `-T` blocks at a time.
//!
//! Every block is coded by exactly the computation a single-member run does on the same bytes,
//! so the output does not depend on the number of threads: a batch of at most `threads` blocks
//! is read, coded in parallel, and written in input order. Memory stays bounded (a batch of
//! blocks and their codes) however long standard input is.

use std::io::{Read, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::settings::BlockPlan;
use crate::codec::{self, Member, Options, Progress, ProgressFn, Summary};
use crate::recipe::Recipe;

/// How often the progress of running blocks is gathered (and a signal noticed).
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Compresses `input` into `output` as one member per block. `recipe` may hold percent
/// positions: they are resolved with each block's length; with `fit`, its stage is sized for
/// each block (src/fit.rs).
pub fn compress(
    recipe: &Recipe,
    plan: BlockPlan,
    fit: bool,
    options: &Options<'_>,
    input: &mut dyn Read,
    output: &mut dyn Write,
    report: ProgressFn<'_>,
) -> Result<Summary> {
    let threads = plan.threads.max(1);
    let mut done = Progress::default();
    let mut members: Vec<Member> = Vec::new();
    let mut first_recipe = None;
    let mut ended = false;
    while !ended {
        let mut batch = Vec::with_capacity(threads);
        while batch.len() < threads {
            let block = read_block(input, plan.size)?;
            ended = (block.len() as u64) < plan.size;
            if !block.is_empty() {
                batch.push(block);
            }
            if ended {
                break;
            }
        }
        if batch.is_empty() {
            if !members.is_empty() {
                break;
            }
            // An empty input is one empty member: a stream has at least one.
            batch.push(Vec::new());
        }
        let first_index = members.len();
        let coded = code_batch(recipe, fit, options, &batch, first_index, &mut done, report)?;
        for (lmz, summary) in coded {
            output.write_all(&lmz).context("cannot write output")?;
            members.push(Member {
                raw_bytes: summary.raw_bytes,
                lmz_bytes: summary.lmz_bytes,
                starts_from_file: summary.members.iter().any(|m| m.starts_from_file),
            });
            first_recipe.get_or_insert(summary.recipe);
        }
        report(done)?;
    }
    output.flush().context("cannot write output")?;
    Ok(Summary {
        recipe: first_recipe.ok_or_else(|| anyhow!("no block was coded"))?,
        raw_bytes: members.iter().map(|m| m.raw_bytes).sum(),
        lmz_bytes: members.iter().map(|m| m.lmz_bytes).sum(),
        model: None,
        members,
    })
}

/// Reads up to `size` bytes (fewer only at the end of the input).
fn read_block(input: &mut dyn Read, size: u64) -> Result<Vec<u8>> {
    let mut block = Vec::new();
    input
        .take(size)
        .read_to_end(&mut block)
        .context("cannot read input")?;
    Ok(block)
}

/// Codes the blocks of a batch in parallel; `done` is the progress before the batch, and
/// grows by the batch's. The progress callback runs on this thread only.
fn code_batch(
    recipe: &Recipe,
    fit: bool,
    options: &Options<'_>,
    batch: &[Vec<u8>],
    first_index: usize,
    done: &mut Progress,
    report: ProgressFn<'_>,
) -> Result<Vec<(Vec<u8>, Summary)>> {
    let slots: Vec<Mutex<Progress>> = batch.iter().map(|_| Mutex::default()).collect();
    let stop = AtomicBool::new(false);
    let mut stopped_by = None;
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .iter()
            .zip(&slots)
            .map(|(block, slot)| {
                let stop = &stop;
                scope.spawn(move || -> Result<(Vec<u8>, Summary)> {
                    let len = Some(block.len() as u64);
                    let recipe = crate::fit::for_input(recipe, len, fit)?;
                    let seeded = options
                        .seeded
                        .map(|r| crate::fit::for_input(r, len, fit))
                        .transpose()?;
                    let options = &Options {
                        seeded: seeded.as_ref(),
                        known_len: len,
                        ..*options
                    };
                    let mut lmz = Vec::new();
                    let summary =
                        codec::compress(&recipe, options, &block[..], &mut lmz, &mut |p| {
                            *lock(slot) = p;
                            if stop.load(Ordering::SeqCst) {
                                Err(anyhow!("stopped"))
                            } else {
                                Ok(())
                            }
                        })?;
                    Ok((lmz, summary))
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(WATCH_EVERY);
            if let Err(e) = report(sum(*done, &slots)) {
                stop.store(true, Ordering::SeqCst);
                stopped_by = Some(e);
                break;
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a block's thread panicked")))
            })
            .collect::<Vec<_>>()
    });
    if let Some(e) = stopped_by {
        return Err(e);
    }
    *done = sum(*done, &slots);
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.with_context(|| format!("block {}", first_index + i + 1)))
        .collect()
}

fn lock(slot: &Mutex<Progress>) -> std::sync::MutexGuard<'_, Progress> {
    // A worker that panicked holding the lock left a whole Progress: take it as it is.
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// `base` plus the progress of every running block.
fn sum(base: Progress, slots: &[Mutex<Progress>]) -> Progress {
    slots.iter().fold(base, |acc, slot| {
        let p = *lock(slot);
        Progress {
            bytes: acc.bytes + p.bytes,
            bits: acc.bits + p.bits,
            container_bytes: acc.container_bytes + p.container_bytes,
        }
    })
}
