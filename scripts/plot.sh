#!/usr/bin/env bash
# Draws learning curves (`lmzip --stats FILE.tsv`) as an SVG line chart: bits per byte so far
# against input position, one line per curve, with gzip -9, bzip2 -9 and xz -9e on the original
# file as horizontal reference lines.
#
# Usage: scripts/plot.sh [-o OUT.svg] [-r ORIGINAL] [-b] [-t TITLE] [LABEL=]CURVE.tsv...
#   -o OUT.svg    output (default: curves.svg)
#   -r ORIGINAL   the file the curves were measured on: adds the classic compressors' bpb on it
#   -b            plot each block's bpb instead of the running total
#   -t TITLE      chart title
#   LABEL=FILE    name a curve (default: the file name without .tsv)
#
# Needs gnuplot (Debian/Ubuntu: apt-get install gnuplot-nox).
#
# Example:
#   lmzip -1 --stats l1.tsv -c book1 > /dev/null; lmzip --stats l5.tsv -c book1 > /dev/null
#   scripts/plot.sh -o book1.svg -r book1 level1=l1.tsv level5=l5.tsv

set -euo pipefail

out=curves.svg
original=
column=3
title="lmzip learning curves"
while getopts "o:r:bt:h" opt; do
    case $opt in
        o) out=$OPTARG ;;
        r) original=$OPTARG ;;
        b) column=2 ;;
        t) title=$OPTARG ;;
        h) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "usage: scripts/plot.sh [-o OUT.svg] [-r ORIGINAL] [-b] [-t TITLE] [LABEL=]CURVE.tsv..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    echo "usage: scripts/plot.sh [-o OUT.svg] [-r ORIGINAL] [-b] [-t TITLE] [LABEL=]CURVE.tsv..." >&2
    exit 2
fi
if ! command -v gnuplot > /dev/null; then
    echo "scripts/plot.sh: gnuplot is not installed (Debian/Ubuntu: apt-get install gnuplot-nox); no chart drawn" >&2
    exit 1
fi

# gnuplot strings in single quotes: double any single quote.
gq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }

plots=()
for arg in "$@"; do
    case $arg in
        *=*) label=${arg%%=*} file=${arg#*=} ;;
        *) file=$arg label=$(basename "$arg" .tsv) ;;
    esac
    if [ ! -s "$file" ]; then
        echo "scripts/plot.sh: $file: no such curve" >&2
        exit 1
    fi
    plots+=("$(gq "$file") using (\$1/1000):$column with lines lw 2 title $(gq "$label")")
done

if [ -n "$original" ]; then
    n=$(wc -c < "$original" | tr -d ' ')
    if [ "$n" -gt 0 ]; then
        for tool in "gzip -9" "bzip2 -9" "xz -9e"; do
            cmd=${tool%% *}
            command -v "$cmd" > /dev/null || continue
            bytes=$($tool -c < "$original" | wc -c | tr -d ' ')
            bpb=$(awk -v o="$bytes" -v i="$n" 'BEGIN { printf "%.3f", 8 * o / i }')
            plots+=("$bpb with lines dt 2 lw 1 title $(gq "$tool ($bpb)")")
        done
    fi
fi

joined=$(printf '%s, ' "${plots[@]}")
gnuplot <<GNUPLOT
set terminal svg size 800,480 dynamic enhanced font 'sans,12' background rgb 'white'
set output $(gq "$out")
set title $(gq "$title")
set datafile separator tab
set key top right
set grid
set xlabel 'input position (KB)'
set ylabel '$( [ "$column" = 2 ] && echo "bits per byte of the block" || echo "bits per byte so far" )'
set yrange [0:*]
plot ${joined%, }
GNUPLOT
echo "scripts/plot.sh: wrote $out" >&2
