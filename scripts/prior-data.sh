#!/usr/bin/env bash
# Rebuilds the training corpus of lmzip's built-in prior from the package registries (PyPI,
# crates.io, npm): downloads the pinned packages of scripts/prior-packages.tsv, checks each
# against the registry's checksum and license, keeps their prose, source code and markup/data
# files (no license texts, generated or minified files, duplicates or benchmark files), and
# writes a deterministic train/validation cut. docs/prior.md says what goes in and why.
#
# Usage: scripts/prior-data.sh [OUTDIR]          (default: ./prior-data)
#   PACKAGES=file   pinned list (default: scripts/prior-packages.tsv)
#   CORPUS=dir      benchmark corpus kept out of the data (default: ../shared/corpus beside the repo,
#                   else /work/shared/corpus)
#   CACHE=dir       downloaded archives, re-verified on every run (default: OUTDIR/cache)
#   SEED=n          shuffle and split seed (default: 26)
#
# Writes OUTDIR/train.bin, valid.bin (documents separated by a NUL byte), manifest.tsv (one line
# per document), SHA256SUMS and summary.txt. Fails on any registry error, checksum mismatch or
# license the registry does not confirm.

set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${1:-./prior-data}
PACKAGES=${PACKAGES:-$repo/scripts/prior-packages.tsv}
if [ -z "${CORPUS:-}" ]; then
    CORPUS=$repo/../shared/corpus
    [ -d "$CORPUS" ] || CORPUS=/work/shared/corpus
fi
CACHE=${CACHE:-$OUTDIR/cache}
SEED=${SEED:-26}

if [ ! -d "$CORPUS" ]; then
    echo "scripts/prior-data.sh: benchmark corpus $CORPUS not found (set CORPUS=dir): it is needed to keep its files out of the data" >&2
    exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' || {
    echo "scripts/prior-data.sh: needs Python 3.8 or newer" >&2
    exit 1
}

mkdir -p "$OUTDIR" "$CACHE"
start=$(date +%s)
python3 "$repo/scripts/prior_data.py" build "$OUTDIR" \
    --packages "$PACKAGES" --corpus "$CORPUS" --cache "$CACHE" --seed "$SEED"
echo "prior-data: done in $(( $(date +%s) - start )) s; $OUTDIR/SHA256SUMS:"
cat "$OUTDIR/SHA256SUMS"
