#!/usr/bin/env bash
# compute-sanitizer over every GPU test, on a machine with an NVIDIA GPU (not in CI: CI has no GPU).
# Each test of gpugeo_gpu_tests runs alone under memcheck (with --leak-check full) and under
# racecheck, with GPUGEO_GPU_TESTS_SMALL=1 so that its inputs are small enough for the tools (they
# slow kernels down a hundredfold and more; every kernel still runs). Left out: the tests that fill
# the GPU's memory on purpose or label level 13 (536 million cells), which only test sizes.
#
# usage: tests/gpu_sanitizers.sh [BUILD_DIR]   (default build-gpu; configured and built when missing)
# TOOLS (default "memcheck racecheck") and TESTS (a grep -E pattern, default all) choose what runs;
# BUDGET_SECONDS stops starting new runs after that long and lists those left. Logs go to $OUT (or
# ./gpu-sanitizers). The exit code is 1 when any tool reports an error.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$PWD/gpu-sanitizers}
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
mkdir -p "$OUT"
BINARY=$BUILD/tests/native/gpugeo_gpu_tests
if [ ! -x "$BINARY" ]; then
  cmake -S . -B "$BUILD" -DGPUGEO_WITH_QGIS=OFF -DGPUGEO_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_ARCHITECTURES=native \
    -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" --target gpugeo_gpu_tests > "$OUT/build.log" 2>&1 ||
    { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }
fi
SKIP='^(DemGpu\.TooLargeForTheGpuNamesTheLimit|DemGpu\.MoreCellsThanTheGpuIndexesAreRefused|VoronoiGpu\.OutOfMemoryShrinksTheBandsWithAWarning|SphereGpu\.QtmRangesAtLevel13)$'
mapfile -t tests < <("$BINARY" --gtest_list_tests | awk '/^[A-Za-z]/{suite=$1} /^  /{print suite $1}' |
                     grep -Ev "$SKIP" | grep -E "${TESTS:-.}")
export GPUGEO_GPU_TESTS_SMALL=1
failed=0
began=$(date +%s)
printf '%-62s %-10s %8s  %s\n' test tool seconds summary
for tool in ${TOOLS:-memcheck racecheck}; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  for t in "${tests[@]}"; do
    if [ -n "${BUDGET_SECONDS:-}" ] && [ $(( $(date +%s) - began )) -ge "$BUDGET_SECONDS" ]; then
      echo "not run (budget): $tool $t"
      continue
    fi
    log="$OUT/${tool}_${t}.log"
    start=$(date +%s)
    timeout 900 "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$BINARY" --gtest_filter="$t" > "$log" 2>&1
    status=$?
    seconds=$(( $(date +%s) - start ))
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" "$log" | tr '\n' ' ')
    result=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]" "$log" | tail -1)
    printf '%-62s %-10s %8s  %s %s\n' "$t" "$tool" "$seconds" "${summary:-no summary (exit $status)}" "$result"
    if [ "$status" -ne 0 ] || grep -q "FAILED" "$log"; then
      failed=1
    fi
  done
done
exit $failed
