#!/usr/bin/env bash
# The network's share: what the online-trained network saves against the same recipe with
# `--optimizer none` (the network left at its seeded start; the mixing stage then learns to
# ignore it). Prints a markdown table, one row per file and level: input bytes, bytes with the
# trained network and without training, the share saved, and compression and decompression
# times of both (wall clock, seconds) with their ratio. Every output is decoded and compared
# with its input.
#
# Usage: scripts/network-share.sh FILE...
#   LMZIP=path/to/lmzip   binary to measure (default: the release build, built if missing)
#   LMZIP_ARGS="..."      extra compress arguments for both runs, e.g. "--model rwkv7"
#   LEVELS="3 9"          levels to measure (default 3)
#   PREFIX=N              measure the first N bytes of each file (default: whole files)
#   ROUNDTRIP=0           skip decompression and its check (times then show n/a)
#   TSV=file              also append the rows as tab-separated values to file
#
# Times are of one run each on whatever else the machine is doing: for a speed claim, time the
# two commands side by side over several alternating runs.

set -eu

if [ "$#" -eq 0 ]; then
    echo "usage: $0 FILE..." >&2
    exit 2
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${LMZIP:-}" ]; then
    LMZIP="${CARGO_TARGET_DIR:-$repo/target}/release/lmzip"
    if [ ! -x "$LMZIP" ]; then
        echo "building $LMZIP ..." >&2
        (cd "$repo" && cargo build --release --quiet) >&2
    fi
fi
if [ ! -x "$LMZIP" ]; then
    echo "$0: no lmzip binary at $LMZIP" >&2
    exit 1
fi
LMZIP_ARGS=${LMZIP_ARGS:-}
LEVELS=${LEVELS:-3}
ROUNDTRIP=${ROUNDTRIP:-1}

work=$(mktemp -d "${TMPDIR:-/tmp}/lmzip-share.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

# run_one INPUT LEVEL EXTRA...: compresses INPUT (and decodes it, unless ROUNDTRIP=0);
# prints "bytes compress_seconds decompress_seconds".
run_one() {
    local input=$1 level=$2
    shift 2
    local out="$work/out.lmz" t0 t1 t2
    t0=$(now)
    # shellcheck disable=SC2086 # LMZIP_ARGS is a list of words
    "$LMZIP" -c -q "-$level" $LMZIP_ARGS "$@" "$input" > "$out"
    t1=$(now)
    local dsec=n/a
    if [ "$ROUNDTRIP" != 0 ]; then
        "$LMZIP" -dc -q "$out" > "$work/back"
        t2=$(now)
        if ! cmp -s "$work/back" "$input"; then
            echo "$0: $input at level $level $*: the round trip differs" >&2
            exit 1
        fi
        dsec=$(secs "$t1" "$t2")
    fi
    echo "$(stat -c %s "$out") $(secs "$t0" "$t1") $dsec"
}

echo "| file | level | bytes in | trained | --optimizer none | saved by training | compress s (trained / none, ratio) | decompress s (trained / none) |"
echo "|---|---:|---:|---:|---:|---:|---|---|"
for f in "$@"; do
    if [ ! -f "$f" ]; then
        echo "$0: $f is not a file" >&2
        exit 2
    fi
    input=$f
    name=$(basename "$f")
    if [ -n "${PREFIX:-}" ]; then
        input="$work/input"
        head -c "$PREFIX" "$f" > "$input"
        name="$name[:$PREFIX]"
    fi
    n=$(stat -c %s "$input")
    for level in $LEVELS; do
        read -r tb tc td <<< "$(run_one "$input" "$level")"
        read -r ub uc ud <<< "$(run_one "$input" "$level" --optimizer none)"
        saved=$(awk -v t="$tb" -v u="$ub" 'BEGIN { printf "%.2f%%", 100 * (u - t) / u }')
        echo "| $name | $level | $n | $tb | $ub | $saved | $tc / $uc ($(ratio "$tc" "$uc")×) | $td / $ud |"
        if [ -n "${TSV:-}" ]; then
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$level" "$n" "$tb" "$ub" \
                "$saved" "$tc" "$uc" "$td" "$ud" >> "$TSV"
        fi
    done
done
