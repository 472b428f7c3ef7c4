#!/usr/bin/env bash
# Measures priming on the corpus: compress a prefix of one file saving the model, then a prefix of
# a related file both fresh and starting from that model, and print the sizes.
#
# Usage: scripts/priming.sh CORPUS_DIR [PRIME_BYTES [TARGET_BYTES]]
#   CORPUS_DIR         corpus folder holding PRIME and TARGET (e.g. ../shared/corpus)
#   PRIME=file         file that trains the model (default: calgary/book1)
#   TARGET=file        file compressed with it (default: calgary/book2)
#   LMZIP=path         binary (default: the release build, built if missing)
#   LMZIP_ARGS="..."   extra compress arguments for both runs, e.g. "-3"
#
# Every .lmz is decompressed again (with the model file where it needs one) and compared.

set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ]; then
    echo "usage: scripts/priming.sh CORPUS_DIR [PRIME_BYTES [TARGET_BYTES]]" >&2
    echo "  CORPUS_DIR holds the files to measure on (PRIME=calgary/book1, TARGET=calgary/book2 by default)" >&2
    exit 2
fi
CORPUS=$1
shift
PRIME=${PRIME:-calgary/book1}
TARGET=${TARGET:-calgary/book2}
for f in "$PRIME" "$TARGET"; do
    if [ ! -f "$CORPUS/$f" ]; then
        echo "scripts/priming.sh: $CORPUS/$f: no such file (give the corpus folder, or set PRIME/TARGET)" >&2
        exit 1
    fi
done
prime_bytes=${1:-100000}
target_bytes=${2:-50000}
if [ -z "${LMZIP:-}" ]; then
    LMZIP="${CARGO_TARGET_DIR:-$repo/target}/release/lmzip"
    if [ ! -x "$LMZIP" ]; then
        echo "building $LMZIP ..." >&2
        (cd "$repo" && cargo build --release --quiet) >&2
    fi
fi
LMZIP_ARGS=${LMZIP_ARGS:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/lmzip-priming.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT

head -c "$prime_bytes" "$CORPUS/$PRIME" > "$work/prime"
head -c "$target_bytes" "$CORPUS/$TARGET" > "$work/target"

bpb() { awk -v o="$1" -v i="$2" 'BEGIN { printf "%.3f", 8 * o / i }'; }
size() { wc -c < "$1" | tr -d ' '; }

# shellcheck disable=SC2086
"$LMZIP" compress -q $LMZIP_ARGS --save-weights "$work/prime.st" -o "$work/prime.lmz" "$work/prime"
# shellcheck disable=SC2086
"$LMZIP" compress -q $LMZIP_ARGS -o "$work/fresh.lmz" "$work/target"
# The primed run takes the model file's sizes; size knobs in LMZIP_ARGS do not apply to it.
primed_args=$(printf '%s\n' $LMZIP_ARGS | grep -v -e '^--hidden' -e '^--layers' -e '^--seed' || true)
# shellcheck disable=SC2086
"$LMZIP" compress -q $primed_args --weights "$work/prime.st" -o "$work/primed.lmz" "$work/target"

"$LMZIP" decompress -q -c "$work/fresh.lmz" | cmp - "$work/target"
"$LMZIP" decompress -q -c --weights "$work/prime.st" "$work/primed.lmz" | cmp - "$work/target"

echo "| run | input | bytes | lmz bytes | bpb |"
echo "|---|---|---:|---:|---:|"
echo "| prime, saves the model | $PRIME | $prime_bytes | $(size "$work/prime.lmz") | $(bpb "$(size "$work/prime.lmz")" "$prime_bytes") |"
echo "| fresh model | $TARGET | $target_bytes | $(size "$work/fresh.lmz") | $(bpb "$(size "$work/fresh.lmz")" "$target_bytes") |"
echo "| primed by $PRIME | $TARGET | $target_bytes | $(size "$work/primed.lmz") | $(bpb "$(size "$work/primed.lmz")" "$target_bytes") |"
echo
echo "recipe of the primed run: $("$LMZIP" info "$work/primed.lmz" | sed -n 's/^ *recipe: *//p')"
