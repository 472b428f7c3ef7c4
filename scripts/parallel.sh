#!/usr/bin/env bash
# Compresses one file (or standard input) on several cores or machines with GNU parallel: the
# input is cut into blocks, each block is compressed by its own lmzip run, and the results are
# written in input order as one .lmz stream (a stream is a sequence of members, so the pieces
# concatenate). `lmzip -d` decodes the result like any other .lmz file.
#
# Usage: scripts/parallel.sh [options] [INPUT] > OUTPUT.lmz
#   -b SIZE     block size given to parallel --block (default 1M; e.g. 256k, 4M). Each block is
#               compressed from the recipe's start, so small blocks cost ratio (docs/guide.md, "Blocks").
#   -j N        jobs per host (default: one per core)
#   -S LOGINS   comma-separated --sshlogin list for other hosts (":" is this machine); lmzip
#               must be installed under the same name on every host
#   -- ARGS     the rest goes to `lmzip` on every block (e.g. -- -3)
#   LMZIP=path  binary (default: lmzip on PATH, else this repository's release build)
#
# Needs GNU parallel (Debian/Ubuntu: apt-get install parallel). An empty standard input gives
# an empty output (parallel starts no job); an empty INPUT file gives one empty member.
#
# On one machine `lmzip --block-size SIZE -T N` does the same without parallel; this script is
# for inputs larger than one machine wants to spend time on.

set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
block=1M
jobs=
logins=
while getopts "b:j:S:h" opt; do
    case $opt in
        b) block=$OPTARG ;;
        j) jobs=$OPTARG ;;
        S) logins=$OPTARG ;;
        h) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "usage: scripts/parallel.sh [-b SIZE] [-j N] [-S LOGINS] [INPUT] [-- LMZIP_ARGS]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
input=-
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    input=$1
    shift
fi
[ "${1:-}" = "--" ] && shift

if ! command -v parallel > /dev/null; then
    echo "scripts/parallel.sh: GNU parallel is not installed (Debian/Ubuntu: apt-get install parallel)" >&2
    exit 1
fi
if [ -z "${LMZIP:-}" ]; then
    if command -v lmzip > /dev/null; then
        LMZIP=lmzip
    else
        LMZIP="${CARGO_TARGET_DIR:-$repo/target}/release/lmzip"
    fi
fi
if [ -n "$logins" ] && [ "$LMZIP" != lmzip ]; then
    case $LMZIP in
        /*) ;;
        *) echo "scripts/parallel.sh: with -S, LMZIP must be an absolute path or lmzip on PATH" >&2; exit 2 ;;
    esac
fi
if [ -t 1 ]; then
    echo "scripts/parallel.sh: refusing to write compressed data to a terminal (redirect the output)" >&2
    exit 1
fi

# --recend '': blocks are cut at their size, not at line ends (binary input has none).
# --will-cite: no citation notice on a fresh install (it would wait for input on a terminal).
args=(--will-cite --pipe --keep-order --block "$block" --recend '' --halt now,fail=1)
[ -n "$jobs" ] && args+=(--jobs "$jobs")
[ -n "$logins" ] && args+=(--sshlogin "$logins")
# Blocks are compressed from standard input to standard output; -q keeps the runs' notes out of
# the way, and quoting keeps the arguments intact on remote hosts.
cmd=$(printf '%q ' "$LMZIP" -q "$@")
if [ "$input" != - ] && [ ! -s "$input" ]; then
    # parallel runs no job on an empty input; a stream needs one (empty) member.
    "$LMZIP" -q "$@" < "$input"
elif [ "$input" = - ]; then
    parallel "${args[@]}" "$cmd"
else
    parallel "${args[@]}" "$cmd" < "$input"
fi
