#!/usr/bin/env bash
# Run one libFuzzer target of tests/fuzz for a bounded time, starting from its seed corpus.
#   tools/fuzz.sh [--build DIR] TARGET SECONDS [libFuzzer options...]
# TARGET: nic_rx, verbs_rx, firmware, ctrl_msg, qp_info, oob, cm_mad or cm_agent. DIR (default
# build-fuzz) is a build configured with -DSDR_FUZZ=ON and clang (tests/fuzz/README.md). New
# inputs and any crash land in DIR/tests/fuzz/out/TARGET; the committed corpus is only read.
# SECONDS 0: no limit.
# Extra options go to libFuzzer (e.g. -runs=1000000, or a crash file to replay).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-fuzz
if [ "${1:-}" = --build ]; then
  build=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
bin=$build/tests/fuzz/fuzz_$target
seeds=$here/tests/fuzz/corpus/$target
if [ ! -x "$bin" ]; then
  echo "fuzz.sh: $bin missing: cmake -S . -B $build -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSDR_FUZZ=ON && cmake --build $build --target fuzz" >&2
  exit 2
fi
if [ ! -d "$seeds" ]; then
  echo "fuzz.sh: no seed corpus $seeds" >&2
  exit 2
fi
out=$build/tests/fuzz/out/$target
mkdir -p "$out/corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limit=()
[ "$seconds" != 0 ] && limit=(-max_total_time="$seconds")
# A replay (a file argument) runs just that input.
for a in "$@"; do
  if [ -f "$a" ]; then exec "$bin" "$@"; fi
done
# -timeout=60: every input runs in well under a second; a wall-clock limit this long is not
# tripped by a run that shares its core (a 10 s limit was, under a parallel build).
exec "$bin" "${limit[@]}" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" "$@" "$out/corpus" "$seeds"
