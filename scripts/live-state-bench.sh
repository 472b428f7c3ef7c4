#!/usr/bin/env bash
# Compares the two TBPTT live-state modes (recipe key `state`, docs/recipes.md) on 100 KB
# prefixes of corpus files: one line per file, model and mode with lmzip's -v summary (size,
# bits per byte, wall-clock KB/s) and the CPU seconds (user + sys, robust on a busy machine).
#
# Usage: scripts/live-state-bench.sh CORPUS_DIR [LEVEL [LR]]
#   CORPUS_DIR holds calgary/, enwik/ and canterbury/; LEVEL defaults to 6 (a 128x3 network)
#   and LR to that level's rate; both models are measured.

set -eu
corpus=${1:?usage: $0 CORPUS_DIR [LEVEL [LR]]}
level=${2:-6}
lr=${3:+lr=$3,}
repo=$(cd "$(dirname "$0")/.." && pwd)
lmzip=${LMZIP:-$repo/target/release/lmzip}
work=$(mktemp -d "${TMPDIR:-/tmp}/lmzip-state.XXXXXX")
trap 'rm -rf "$work"' EXIT

for f in calgary/book1 enwik/enwik6 calgary/progc calgary/obj2 canterbury/sum canterbury/kennedy.xls; do
    name=$(basename "$f")
    head -c 100000 "$corpus/$f" >"$work/$name"
    for model in mamba1 rwkv7; do
        for mode in rebuild carry; do
            line=$(/usr/bin/time -o "$work/cpu" -f "%U %S" "$lmzip" compress -v -c --level "$level" \
                --model "$model" --recipe "0..:train(${lr}bptt=16,state=$mode)" "$work/$name" \
                2>&1 >"$work/out.lmz")
            echo "level $level $model $name $mode: ${line#*: } cpu $(awk '{print $1 + $2}' "$work/cpu") s"
        done
    done
done
