#!/usr/bin/env bash
# The whole test suite, as CI runs it on a fresh Debian 12 clone: set-up (packages, build), then
# every ctest label: native (the core; GPU tests skip themselves without a GPU), processing (the
# algorithms through the QGIS API) and e2e (qgis_process in a throwaway profile).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPUGEO_BUILD_DIR:-$ROOT/build}
"$ROOT/tests/setup.sh"
ctest --test-dir "$BUILD" --output-on-failure -j "${GPUGEO_JOBS:-$(nproc)}"
