#!/usr/bin/env bash
# Learns the stage's built-in warm start (src/mix/warm.rs, priors/mixtext1.lmzw) from the
# prior's training corpus: the documents of 1-20 KB of train.bin (2.5 MB of them), coded one after
# another at the default level, each mixer starting from the weights the one before ended with; the
# start is the average of the weights after each document.
#
# Usage: scripts/warm-start.sh TRAIN_BIN [OUT] [key=value...]
#   TRAIN_BIN  the corpus scripts/prior-data.sh writes (documents separated by NUL bytes)
#   OUT        default: priors/mixtext1.lmzw
#   keys       bytes=2500000 level=3 min=1000 max=20000 all=0 avg=N (examples/warm_start.rs)
#
# About a minute on one core. The same corpus gives the same bytes; the SHA-256 it prints is the
# one src/mix/warm.rs pins. A new start gets a new number and file: a start's number is never
# reused for other weights.

set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: scripts/warm-start.sh TRAIN_BIN [OUT] [key=value...]" >&2
    exit 1
fi
train=$1
shift
out=$repo/priors/mixtext1.lmzw
if [ $# -gt 0 ] && [[ $1 != *=* ]]; then
    out=$1
    shift
fi
cargo build --release --example warm_start --manifest-path "$repo/Cargo.toml"
"$repo/target/release/examples/warm_start" "$train" "$out" "$@"
