#!/usr/bin/env bash
# The tests under sanitizers, CPU only (run by tests/run_tests.sh after the normal suite):
#   asan: build-asan/, AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer (float-cast-overflow
#         included), QGIS on: ctest -L native, processing, gdal and cli (gpugeo_dem under mpiexec; the
#         plugin and e2e are not run under ASan: qgis_process itself is not instrumented);
#   tsan: build-tsan/, ThreadSanitizer, QGIS off: ctest -L native.
# Any report fails the run: every report is fatal (-fno-sanitize-recover=all, halt_on_error) and
# makes the test exit non-zero; every stage runs, and the script exits non-zero at the end if a test
# failed (at once if a build fails). QGIS, Qt, GDAL and the system libraries are not instrumented;
# what QGIS leaks when it starts is left out of the leak check where it is allocated, and what else
# they leak (or, should it come to that, race on) is suppressed by tests/sanitizers/*.supp, one reason
# per entry. Nothing that points into native/, processing/ or tests/ is ever suppressed.
#
# Usage: tests/sanitizers.sh [asan] [tsan]     (both when none is named)
# Environment: GPUGEO_JOBS (parallel build and test jobs, default nproc), GPUGEO_ASAN_BUILD_DIR,
# GPUGEO_TSAN_BUILD_DIR (default build-asan/, build-tsan/), GPUGEO_SANITIZER_CMAKE_ARGS (extra
# CMake arguments for both).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${GPUGEO_JOBS:-$(nproc)}
SUPP=$ROOT/tests/sanitizers
ASAN_BUILD=${GPUGEO_ASAN_BUILD_DIR:-$ROOT/build-asan}
TSAN_BUILD=${GPUGEO_TSAN_BUILD_DIR:-$ROOT/build-tsan}

configs=("$@")
((${#configs[@]})) || configs=(asan tsan)
for config in "${configs[@]}"; do
  case $config in asan|tsan) ;; *) echo "usage: $0 [asan] [tsan]" >&2; exit 2;; esac
done

# Options for every sanitizer runtime, here and in the processes ctest starts (the test discovery at
# build time runs the test programs too). Reports go to stderr, which ctest shows on failure; each
# runtime exits with its own code (66 ASan, 67 LSan, 68 UBSan, 69 TSan).
common="halt_on_error=1:abort_on_error=0:print_stacktrace=1:symbolize=1:handle_abort=1:allocator_may_return_null=0"
# tests/sanitizers/NAME.supp, where there is one. Only lsan.supp is needed today: UBSan instruments
# nothing but our own translation units (and does not apply suppressions to non-recoverable checks
# anyway), and neither ASan nor TSan has reported anything from third-party code.
suppressions() { [ ! -f "$SUPP/$1.supp" ] || echo ":suppressions=$SUPP/$1.supp"; }
# asan_options fast|slow: how ASan records each malloc's stack. The fast (frame-pointer) unwinder is
# the default: our code and the tests keep frame pointers, and what QGIS and Qt allocate while
# starting is left out of the leak check where it is made (processing_test_main.cpp). Open MPI's
# runtime leaves allocations behind at exit from code built without frame pointers, so its
# suppressions (lsan.supp: by library) can only match a stack taken by the slow unwinder: every run
# of gpugeo_dem under mpiexec (the cli label, and the processing tests named DemMpi*) uses it. It is
# slow: 5 to 25 times the fast one on allocation-heavy tests; 30 frames reach into Open MPI's
# libraries from any allocation of theirs.
asan_options() {
  local fast=1
  [ "$1" = fast ] || fast=0
  echo "$common:exitcode=66:detect_leaks=1:fast_unwind_on_malloc=$fast:malloc_context_size=30:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2$(suppressions asan)"
}
ASAN_OPTIONS=$(asan_options fast)
LSAN_OPTIONS="exitcode=67:print_suppressions=1$(suppressions lsan)"
UBSAN_OPTIONS="$common:exitcode=68:report_error_type=1$(suppressions ubsan)"
TSAN_OPTIONS="$common:exitcode=69:second_deadlock_stack=1$(suppressions tsan)"
export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS

# configure_and_build DIR SANITIZERS TARGETS [CMAKE ARGS...]: only the test programs (and what they
# link, and the help page the processing tests read: plugin/CMakeLists.txt writes it with the ASan
# runtime preloaded into Debian's python3) are built, at -O1 (as the sanitizers' own documentation
# advises; it compiles in about 55% of the time of -O2, which matters on a two-core CI machine) with
# line tables (-g1, CMakeLists.txt).
configure_and_build() {
  local build=$1 sanitize=$2 targets=$3
  shift 3
  local start=$SECONDS
  # shellcheck disable=SC2086 # GPUGEO_SANITIZER_CMAKE_ARGS is a list of arguments
  cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" \
        -DGPUGEO_SANITIZE="$sanitize" \
        -DGPUGEO_ENABLE_CUDA=OFF -DGPUGEO_BUILD_BENCHMARKS=OFF "$@" ${GPUGEO_SANITIZER_CMAKE_ARGS:-}
  # shellcheck disable=SC2086 # targets is a list
  cmake --build "$build" -j "$JOBS" --target $targets
  echo "sanitizers: $build ($sanitize) configured and built in $((SECONDS - start)) s"
}

# run_ctest DIR LABEL [CTEST ARGS...]: a failure is recorded, and the next stage still runs.
failed=()
run_ctest() {
  local build=$1 label=$2
  shift 2
  local start=$SECONDS
  if ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$JOBS" -L "$label" "$@"; then
    echo "sanitizers: ctest -L $label $* in $build passed in $((SECONDS - start)) s"
  else
    echo "sanitizers: ctest -L $label $* in $build FAILED in $((SECONDS - start)) s"
    failed+=("$(basename "$build") -L $label $*")
  fi
}

for config in "${configs[@]}"; do
  case $config in
    asan)
      configure_and_build "$ASAN_BUILD" address,undefined \
        "gpugeo_native_tests gpugeo_gpu_tests gpugeo_processing_tests gpugeo_gdal_tests gpugeo_dem" -DGPUGEO_WITH_QGIS=ON
      run_ctest "$ASAN_BUILD" native
      run_ctest "$ASAN_BUILD" processing -E '^DemMpi'
      run_ctest "$ASAN_BUILD" gdal
      ASAN_OPTIONS=$(asan_options slow) run_ctest "$ASAN_BUILD" processing -R '^DemMpi'
      ASAN_OPTIONS=$(asan_options slow) GPUGEO_DEM_TEST_RANKS=1,3 run_ctest "$ASAN_BUILD" cli
      ;;
    tsan)
      configure_and_build "$TSAN_BUILD" thread "gpugeo_native_tests gpugeo_gpu_tests" -DGPUGEO_WITH_QGIS=OFF
      run_ctest "$TSAN_BUILD" native
      ;;
  esac
done
if ((${#failed[@]})); then
  echo "sanitizers: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "sanitizers: ${configs[*]}: no reports"
