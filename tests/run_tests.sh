#!/usr/bin/env bash
# The whole test suite, as CI runs it on a fresh Debian 12 clone: set-up (packages, build), then
# every ctest label: native (the core; GPU tests skip themselves without a GPU), gdal (the GDAL layer
# without QGIS), processing (the algorithms through the QGIS API) and e2e (qgis_process in a throwaway
# profile); then the native and processing tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer and the native tests under ThreadSanitizer (tests/sanitizers.sh:
# build-asan/, build-tsan/; CPU only). Both parts always run; the exit status is non-zero if either
# failed. GPUGEO_SKIP_SANITIZERS=1 leaves the sanitizer part out (a quicker local run). Without a
# GPU the CUDA code is built for one architecture only (below).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPUGEO_BUILD_DIR:-$ROOT/build}
# Without a GPU the CUDA code cannot run here, and the build only shows that it compiles and links:
# one architecture (the oldest the plugin supports) is enough for that, and takes a third of the
# time of the five a release carries (CMakeLists.txt). A GPUGEO_CMAKE_ARGS that names its own
# architectures wins.
if ! nvidia-smi -L > /dev/null 2>&1 && [[ "${GPUGEO_CMAKE_ARGS:-}" != *CMAKE_CUDA_ARCHITECTURES* ]]; then
  export GPUGEO_CMAKE_ARGS="${GPUGEO_CMAKE_ARGS:-} -DCMAKE_CUDA_ARCHITECTURES=75-real"
fi
"$ROOT/tests/setup.sh"
status=0
ctest --test-dir "$BUILD" --output-on-failure -j "${GPUGEO_JOBS:-$(nproc)}" || status=$?
if [ "${GPUGEO_SKIP_SANITIZERS:-0}" != 1 ]; then
  "$ROOT/tests/sanitizers.sh" || status=$?
fi
exit "$status"
