#!/usr/bin/env bash
# Set-up shared by the demo and the test suite, on Debian 12: installs the Debian packages that are
# missing (QGIS 3.22 and its development files, GDAL, GoogleTest, CGAL, SciPy as an independent
# reference for the spherical Voronoi test, python3-markdown for the plugin's help page, Xvfb for the
# desktop test, gdb so that the hostile-input test can tell a crash inside QGIS from one in our code,
# Open MPI for the DEM program gpugeo_dem and its tests under mpiexec), then configures and builds into $GPUGEO_BUILD_DIR (default: build/). nvcc, when found (PATH or
# /usr/local/cuda), adds the CUDA backend; without it the build is CPU-only. Extra CMake arguments:
# $GPUGEO_CMAKE_ARGS.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPUGEO_BUILD_DIR:-$ROOT/build}

PACKAGES=(cmake g++ make libqgis-dev qgis qgis-providers python3-qgis libgdal-dev gdal-bin python3-gdal
          python3-numpy python3-scipy python3-markdown libgtest-dev libcgal-dev xvfb xauth gdb
          openmpi-bin libopenmpi-dev)
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "Installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# shellcheck disable=SC2086 # GPUGEO_CMAKE_ARGS is a list of arguments
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release ${GPUGEO_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "${GPUGEO_JOBS:-$(nproc)}"
