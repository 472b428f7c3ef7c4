#!/usr/bin/env bash
# Checks that a file decodes on any build, SIMD path and thread count (docs/determinism.md):
# builds lmzip three ways — default flags, -C target-cpu=x86-64-v3 and -C target-cpu=native —
# and runs each build with every kernel path this CPU has (LMZIP_SIMD=portable, avx2, avx512) on one
# thread, and the default build with each path on more (-T, every kernel split however small:
# LMZIP_THREAD_MIN_WORK=1), compresses a set of inputs
# with each model and training schedule on every build and path, requires the compressed bytes
# of all of them to be identical, and decodes every output with every build and path. Prints a
# table and exits with status 1 on any difference or failed decode.
#
# Usage: scripts/cross-build-check.sh [FILE...]
#   FILE             inputs are the first PREFIX bytes of each file given (say a text, an object
#                    file and XML); without any, generated English-like text and binary records,
#                    so the check needs nothing beside the repository
#   PREFIX=N         bytes taken from each file (default 8192)
#   SIMD_PATHS       the LMZIP_SIMD values to try (default "portable avx2 avx512"); a path this CPU
#                    lacks is left out, and said so
#   THREADS          the thread counts above 1 the default build also runs with (default "2";
#                    empty: one thread only)
#   CROSS_BUILD_DIR  where the two flagged builds go (default: TARGET/cross-build, TARGET being
#                    $CARGO_TARGET_DIR or ./target); the default build uses TARGET itself, so
#                    after `cargo test --release` it is already there
#
# Builds are sequential (one cargo at a time); the models are small and the inputs short, so
# the runs take a few minutes at most after the builds.

set -euo pipefail

files=()
for f in "$@"; do
    case $f in
    -h | --help)
        echo "usage: $0 [FILE...]" >&2
        exit 0
        ;;
    esac
    if [ ! -f "$f" ] || [ ! -r "$f" ]; then
        echo "$0: $f is not a readable file" >&2
        exit 2
    fi
    files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$repo/$target ;; esac
cross_dir=${CROSS_BUILD_DIR:-$target/cross-build}
prefix=${PREFIX:-8192}

work=$(mktemp -d "${TMPDIR:-/tmp}/lmzip-cross.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- builds ----------------------------------------------------------------------------------

names=(default)
flags=("")
dirs=("$target")
if [ "$(uname -m)" = x86_64 ]; then
    names+=(x86-64-v3)
    flags+=("-C target-cpu=x86-64-v3")
    dirs+=("$cross_dir/x86-64-v3")
fi
names+=(native)
flags+=("-C target-cpu=native")
dirs+=("$cross_dir/native")

# The target features a set of flags turns on beyond the default target's.
added_features() {
    # shellcheck disable=SC2086 # the flags are words
    comm -13 <(rustc --print cfg | sort) <(rustc --print cfg $1 | sort) |
        sed -n 's/^target_feature="\(.*\)"$/\1/p' | paste -sd, -
}

bins=()
for i in "${!names[@]}"; do
    echo "building ${names[$i]} (RUSTFLAGS='${flags[$i]}') in ${dirs[$i]}" >&2
    # Only these flags: a RUSTFLAGS from the environment would make every build something else.
    env -u CARGO_ENCODED_RUSTFLAGS RUSTFLAGS="${flags[$i]}" CARGO_TARGET_DIR="${dirs[$i]}" \
        cargo build --release --quiet --bin lmzip
    bins+=("${dirs[$i]}/release/lmzip")
done

# A build for a CPU newer than this one cannot run here; it is left out, and said so.
runnable=()
for i in "${!names[@]}"; do
    if "${bins[$i]}" --version >/dev/null 2>&1; then
        runnable+=("$i")
    else
        echo "note: the ${names[$i]} build cannot run on this CPU; left out" >&2
    fi
done

# Every runnable build with every SIMD path this CPU has: the runs compared below.
run_labels=()
run_bins=()
run_simd=()
run_threads=()
for path in ${SIMD_PATHS:-portable avx2 avx512}; do
    # A path this CPU lacks makes lmzip exit with a usage error before any work.
    if ! printf 'x' | LMZIP_SIMD=$path "${bins[${runnable[0]}]}" compress -q -c --hidden 16 \
        --layers 1 >/dev/null 2>&1; then
        echo "note: LMZIP_SIMD=$path cannot run on this CPU; left out" >&2
        continue
    fi
    for i in "${runnable[@]}"; do
        run_labels+=("${names[$i]}/$path")
        run_bins+=("${bins[$i]}")
        run_simd+=("$path")
        run_threads+=(1)
    done
    for t in ${THREADS-2}; do
        run_labels+=("${names[${runnable[0]}]}/$path/T$t")
        run_bins+=("${bins[${runnable[0]}]}")
        run_simd+=("$path")
        run_threads+=("$t")
    done
done
if [ "${#run_labels[@]}" -eq 0 ]; then
    echo "$0: no SIMD path runs (SIMD_PATHS=${SIMD_PATHS:-})" >&2
    exit 2
fi

echo "target features beyond the default build:"
for i in "${runnable[@]}"; do
    [ -n "${flags[$i]}" ] || continue
    printf '  %-10s %s\n' "${names[$i]}" "$(added_features "${flags[$i]}")"
done
echo

# --- inputs ----------------------------------------------------------------------------------

mkdir "$work/in"
# The generators write a little past N bytes to FILE and cut it there (a file, not `head -c`, so
# no writer dies of a closed pipe under pipefail).
# gen_text N FILE: English-like text from a fixed word list and a fixed linear congruential
# sequence (whose products stay below 2^53, exact in awk's doubles).
gen_text() {
    awk -v n="$1" 'BEGIN {
        nw = split("the a model learns each byte as it comes and range coder spends few bits " \
                   "on what expected while state of network moves with data, then: every file.", w, " ")
        x = 7; out = 0
        while (out < n) {
            x = (x * 69069 + 1) % 4294967296
            word = w[1 + int(x / 65536) % nw]
            printf "%s%s", word, (x % 13 == 0 ? ".\n" : " ")
            out += length(word) + 1
        }
    }' >"$2"
    truncate -s "$1" "$2"
}
# gen_binary N FILE: little-endian records as a binary format has them: a counter, a slowly
# moving value, a flag and a noise byte.
gen_binary() {
    local n=$1 i=0 x=12345 s="" e b
    while [ $((i * 6)) -lt "$n" ]; do
        x=$(((x * 1103515245 + 12345) & 0x7fffffff))
        for b in $((i & 255)) $(((i >> 8) & 255)) $(((1000 + 3 * i) & 255)) \
            $((((1000 + 3 * i) >> 8) & 255)) $((i % 5 == 0 ? 255 : 0)) $((x >> 23)); do
            printf -v e '\\x%02x' "$b"
            s+=$e
        done
        i=$((i + 1))
    done
    # shellcheck disable=SC2059 # the escapes are the data
    printf "$s" >"$2"
    truncate -s "$n" "$2"
}

if [ "${#files[@]}" -gt 0 ]; then
    for i in "${!files[@]}"; do
        # Numbered, so that two files of one name stay two inputs.
        head -c "$prefix" "${files[$i]}" >"$work/in/$((i + 1))-$(basename "${files[$i]}")"
    done
else
    gen_text 8192 "$work/in/text"
    gen_binary 8192 "$work/in/records"
fi
inputs=("$work"/in/*)

# --- runs ------------------------------------------------------------------------------------

SECONDS=0

# Sizes with lengths that exercise both the 32-wide blocks and the tails of the kernels
# (Mamba-1: 36 and 72), and two blocks each (RWKV-7's value residual needs a second one).
# Each entry is "label|model|base" and "label|rules" of the recipe language (docs/recipes.md).
# The third network is the default level's, started from its built-in prior (src/prior: the
# F16 weights widened, the context tables fitted to 2^9 rows).
models=("mamba1|mamba1|cfg:hidden=36,layers=2" "rwkv7|rwkv7|cfg:hidden=64,layers=2"
    "prior|mamba1|cfg:ctx=9,prior=1")
modes=("none|0..:infer"
    "sgd bptt1|0..:train(opt=sgd,lr=0.05,bptt=1)"
    "adam bptt1|0..:train(opt=adam,lr=0.002,bptt=1)"
    "adam bptt8|0..:train(opt=adam,lr=0.002,bptt=8)"
    "schedule|0..2K:train(opt=sgd,lr=0.05,stride=2,bptt=1) 2K..:repeat(1K:train(opt=adam,lr=0.001,bptt=16,clip=1),512:infer)")

failures=0
printf '%-12s %-7s %-11s %8s %6s  %-9s %s\n' input model mode bytes bpb builds decodes
for input in "${inputs[@]}"; do
    name=$(basename "$input")
    in_bytes=$(wc -c <"$input" | tr -d ' ')
    for model in "${models[@]}"; do
        net=${model%%|*}
        rest=${model#*|}
        kind=${rest%%|*}
        for mode in "${modes[@]}"; do
            label=${mode%%|*}
            args=(--model "$kind" --recipe "${rest#*|} ${mode#*|}")
            case="$work/$name.$net.${label// /-}"
            # Compress on every build and compare with the first.
            same=yes
            first=""
            for r in "${!run_labels[@]}"; do
                out="$case.${run_labels[$r]//\//-}.lmz"
                if ! LMZIP_SIMD=${run_simd[$r]} LMZIP_THREAD_MIN_WORK=1 "${run_bins[$r]}" \
                    compress -q -c -T "${run_threads[$r]}" "${args[@]}" "$input" >"$out"; then
                    echo "${run_labels[$r]}: compress failed: $name ${args[*]}" >&2
                    same=FAILED
                    continue
                fi
                if [ -z "$first" ]; then
                    first=$out
                elif ! cmp -s "$first" "$out"; then
                    same=DIFFERENT
                fi
            done
            if [ -z "$first" ]; then
                failures=$((failures + 1))
                printf '%-12s %-7s %-11s %8s %6s  %-9s\n' "$name" "$net" "$label" - - FAILED
                continue
            fi
            # Decode each distinct output with every run. Identical outputs are one file, so
            # decoding one of them with every run decodes each run's output with each.
            outputs=("$first")
            [ "$same" = yes ] || outputs=("$case".*.lmz)
            ok=0
            total=0
            for out in "${outputs[@]}"; do
                for r in "${!run_labels[@]}"; do
                    total=$((total + 1))
                    if LMZIP_SIMD=${run_simd[$r]} LMZIP_THREAD_MIN_WORK=1 "${run_bins[$r]}" \
                        decompress -q -c -T "${run_threads[$r]}" "$out" 2>/dev/null |
                        cmp -s - "$input"; then
                        ok=$((ok + 1))
                    else
                        echo "${run_labels[$r]} cannot decode $(basename "$out")" >&2
                    fi
                done
            done
            [ "$same" = yes ] && [ "$ok" -eq "$total" ] || failures=$((failures + 1))
            bytes=$(wc -c <"$first" | tr -d ' ')
            bpb=$(awk -v o="$bytes" -v i="$in_bytes" 'BEGIN { printf "%.3f", 8 * o / i }')
            builds=$([ "$same" = yes ] && echo "identical" || echo "$same")
            printf '%-12s %-7s %-11s %8s %6s  %-9s %s/%s\n' \
                "$name" "$net" "$label" "$bytes" "$bpb" "$builds" "$ok" "$total"
        done
    done
done

echo
builds_run=$(printf '%s ' "${run_labels[@]}")
if [ "$failures" -ne 0 ]; then
    echo "FAILED: $failures of the cases above differ between builds or do not decode" \
        "(builds/paths: ${builds_run% })"
    exit 1
fi
echo "ok: every build and SIMD path (${builds_run% }) wrote the same bytes, and each decoded them" \
    "(runs took ${SECONDS} s)"
