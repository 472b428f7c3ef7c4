#!/usr/bin/env bash
# Compares lmzip with the usual compressors on the given files and prints a markdown table:
# one row per file and compressor with the threads it ran on, input and output bytes, bits per
# byte, compression and decompression speed (KB/s, 1 KB = 1000 bytes, wall clock), the peak memory of compression
# (maximum resident set, where /usr/bin/time is installed) and a round-trip check (cmp).
#
# Usage: scripts/bench.sh FILE...
#   LMZIP=path/to/lmzip   binary to measure (default: the release build, built if missing)
#   LMZIP_ARGS="..."      extra compress arguments, e.g. "-9" or "--model rwkv7 --bptt 8"
#   COMPARE=0             measure lmzip alone (for level tables)
#   ROUNDTRIP=0           skip lmzip's decompression and its check (for slow level sweeps;
#                         the other compressors are always checked)
#   LEVELS="1 3 5"        measure lmzip at each of these levels (with LMZIP_ARGS added)
#   THREADS="1 2"         measure lmzip with each of these thread counts (-T N, both ways;
#                         default 1); the other compressors run on one thread
#   OUT=dir               also write dir/bench.md (the table), dir/bench.tsv (compressor, file,
#                         bpb, compress KB/s) and dir/bench.svg (bits per byte against compression
#                         speed, one point per compressor and file; needs gnuplot)
#
# gzip -9, bzip2 -9, xz -9e and zstd --ultra -22 are measured where installed.

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

work=$(mktemp -d "${TMPDIR:-/tmp}/lmzip-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }

# kbps BYTES START END: kilobytes per second, or n/a when the clock saw no time pass.
kbps() {
    awk -v n="$1" -v a="$2" -v b="$3" \
        'BEGIN { t = b - a; if (t > 0) printf "%.1f", n / 1000 / t; else printf "n/a" }'
}

# bpb OUT IN: bits per byte.
bpb() {
    awk -v o="$1" -v i="$2" 'BEGIN { if (i > 0) printf "%.3f", 8 * o / i; else printf "n/a" }'
}

size() { wc -c <"$1" | tr -d ' '; }

# GNU time reports the peak resident set of the command it runs; without it the column says n/a.
if [ -x /usr/bin/time ] && /usr/bin/time -o /dev/null -f %M true >/dev/null 2>&1; then
    timed() { /usr/bin/time -o "$work/rss" -f %M "$@"; }
else
    timed() { echo n/a >"$work/rss"; "$@"; }
fi

# peak_mb: the peak of the last timed command, in MB (1 MB = 10^6 bytes).
peak_mb() {
    awk '{ if ($1 ~ /^[0-9]+$/) printf "%.0f", $1 * 1024 / 1e6; else printf "n/a" } END { if (NR == 0) printf "n/a" }' "$work/rss"
}

# measure FILE NAME THREADS COMPRESS DECOMPRESS [nocheck]: COMPRESS reads stdin and writes
# stdout, DECOMPRESS likewise; prints one table row. With nocheck, only compression is run.
measure() {
    file=$1 label="$2 | $3" pack=$4 unpack=$5
    packed="$work/packed" unpacked="$work/unpacked"
    in_bytes=$(size "$file")
    t0=$(now)
    if ! timed sh -c "$pack" <"$file" >"$packed" 2>"$work/err"; then
        printf '| %s | %s | %s | - | - | - | - | - | compress failed: %s |\n' \
            "$(basename "$file")" "$label" "$in_bytes" "$(head -n 1 "$work/err")"
        return 0
    fi
    t1=$(now)
    peak=$(peak_mb)
    if [ "${6:-check}" = nocheck ]; then
        printf '| %s | %s | %s | %s | %s | %s | - | %s | not run |\n' \
            "$(basename "$file")" "$label" "$in_bytes" "$(size "$packed")" \
            "$(bpb "$(size "$packed")" "$in_bytes")" "$(kbps "$in_bytes" "$t0" "$t1")" "$peak"
        rm -f "$packed"
        return 0
    fi
    if ! sh -c "$unpack" <"$packed" >"$unpacked" 2>"$work/err"; then
        printf '| %s | %s | %s | %s | %s | %s | - | %s | decompress failed: %s |\n' \
            "$(basename "$file")" "$label" "$in_bytes" "$(size "$packed")" \
            "$(bpb "$(size "$packed")" "$in_bytes")" "$(kbps "$in_bytes" "$t0" "$t1")" "$peak" \
            "$(head -n 1 "$work/err")"
        return 0
    fi
    t2=$(now)
    out_bytes=$(size "$packed")
    if cmp -s "$file" "$unpacked"; then check=ok; else check=MISMATCH; fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
        "$(basename "$file")" "$label" "$in_bytes" "$out_bytes" "$(bpb "$out_bytes" "$in_bytes")" \
        "$(kbps "$in_bytes" "$t0" "$t1")" "$(kbps "$in_bytes" "$t1" "$t2")" "$peak" "$check"
    rm -f "$packed" "$unpacked"
}

# Quote a word for the sh -c command lines above.
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

lmzip_q=$(quote "$LMZIP")
lmzip_name="lmzip${LMZIP_ARGS:+ $LMZIP_ARGS}"

table() {
echo "| file | compressor | threads | input bytes | output bytes | bpb | compress KB/s | decompress KB/s | peak MB | round trip |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
for file in "$@"; do
    if [ ! -f "$file" ]; then
        echo "$0: $file: not a regular file, skipped" >&2
        continue
    fi
    # LMZIP_ARGS is split into words on purpose, as a shell would split it.
    for level in ${LEVELS:-default}; do
        if [ "$level" = default ]; then
            level_args=$LMZIP_ARGS name=$lmzip_name
        else
            level_args="-$level $LMZIP_ARGS" name="lmzip -$level${LMZIP_ARGS:+ $LMZIP_ARGS}"
        fi
        for threads in ${THREADS:-1}; do
            measure "$file" "$name" "$threads" \
                "$lmzip_q compress -q -T $threads $level_args" \
                "$lmzip_q decompress -q -T $threads" \
                "$([ "${ROUNDTRIP:-1}" = 0 ] && echo nocheck || echo check)"
        done
    done
    [ "${COMPARE:-1}" = 0 ] && continue
    command -v gzip >/dev/null && measure "$file" "gzip -9" 1 "gzip -9 -c" "gzip -d -c"
    command -v bzip2 >/dev/null && measure "$file" "bzip2 -9" 1 "bzip2 -9 -c" "bzip2 -d -c"
    command -v xz >/dev/null && measure "$file" "xz -9e" 1 "xz -T1 -9e -c" "xz -d -c"
    command -v zstd >/dev/null && measure "$file" "zstd --ultra -22" 1 \
        "zstd -q --ultra -22 -c" "zstd -q -d -c"
done
}

if [ -z "${OUT:-}" ]; then
    table "$@"
    exit 0
fi
mkdir -p "$OUT"
table "$@" | tee "$OUT/bench.md"
# compressor (with its thread count when not 1), file, bpb, compress KB/s of every measured row.
awk -F'|' 'NR > 2 && $7 ~ /[0-9]/ && $8 ~ /[0-9]/ {
    gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/ /, "", $4); gsub(/ /, "", $7)
    gsub(/ /, "", $8)
    name = $3; if ($4 != "1") name = name " -T" $4
    printf "%s\t%s\t%s\t%s\n", name, $2, $7, $8 }' "$OUT/bench.md" > "$OUT/bench.tsv"
if ! command -v gnuplot > /dev/null; then
    echo "$0: gnuplot is not installed (Debian/Ubuntu: apt-get install gnuplot-nox); $OUT/bench.svg not drawn" >&2
    exit 0
fi
gnuplot <<GNUPLOT
set terminal svg size 800,520 dynamic enhanced font 'sans,12' background rgb 'white'
set output '$OUT/bench.svg'
set title 'bits per byte against compression speed'
set datafile separator tab
set logscale x
set grid
set key off
set xlabel 'compression speed (KB/s, log scale)'
set ylabel 'bits per byte (lower is better)'
plot '$OUT/bench.tsv' using 4:3 with points pt 7 ps 1, \\
     '' using 4:3:(sprintf('%s (%s)', stringcolumn(1), stringcolumn(2))) with labels offset 0,1 font ',9'
GNUPLOT
echo "$0: wrote $OUT/bench.md, $OUT/bench.tsv and $OUT/bench.svg" >&2
