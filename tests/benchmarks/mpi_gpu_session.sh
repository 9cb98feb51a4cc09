#!/usr/bin/env bash
# The DEM chain under MPI on the lent GPU machines (device tool), one call a step: Open MPI built
# from Debian's source (those machines have no MPI and no network: fetch the source here first,
#   mkdir -p .device/ompi && curl -sSfL -o .device/ompi/openmpi_4.1.4.orig.tar.xz \
#     http://deb.debian.org/debian/pool/main/o/openmpi/openmpi_4.1.4.orig.tar.xz
# and carry .device), bench_dem_mpi built for sm_90, then the chain fill -> flat mask -> directions ->
# accumulation -> travel times -> bands with one worker rank a GPU beside rank 0.
# Open MPI built on the developer's machine beforehand and carried as .device/ompi/prefix.tar.gz (tar
# of /tmp/ompi, made there with `tar -C / -czf .device/ompi/prefix.tar.gz tmp/ompi`) is unpacked
# instead of built (309 s on the 64 cores of the 4-GPU machine). Built on Debian 12 with the configure
# below plus `ac_cv_func_arc4random=no ac_cv_func_arc4random_buf=no CFLAGS="-O2 -include arc4.h"`,
# where arc4.h defines _GNU_SOURCE, includes <stdlib.h> and renames arc4random, arc4random_buf and
# arc4random_uniform (libevent's own copies), so that it needs no symbol newer than GLIBC_2.34.
# usage: tests/benchmarks/mpi_gpu_session.sh build          Open MPI and the benchmark
#        tests/benchmarks/mpi_gpu_session.sh gputests       the distributed tests, CPU and GPU (ranks as
#                                                           threads sharing GPU 0)
#        tests/benchmarks/mpi_gpu_session.sh smoke          build, then 20,000² on 1 and 2 GPUs
#        tests/benchmarks/mpi_gpu_session.sh big SIZE TILE TILES_IN_FLIGHT GPUS...
#                                                           SIZE² on each count of GPUs (built before);
#                                                           BENCH_ARGS: more options of bench_dem_mpi
#                                                           (default: rank 0 on 32 threads, the scratch
#                                                           rasters in bands of 2,048 columns)
set -uo pipefail
cd "$(dirname "$0")/../.."
TARBALL=${OMPI_TARBALL:-.device/ompi/openmpi_4.1.4.orig.tar.xz}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH=/tmp/ompi/bin:$PATH LD_LIBRARY_PATH=/tmp/ompi/lib:${LD_LIBRARY_PATH:-}
B=build-dev
J=$(nproc)

build() {
  nvidia-smi -L; nproc; free -g | head -2; df -h /dev/shm /tmp / | cat
  if [ ! -x /tmp/ompi/bin/mpiexec ] && [ -f .device/ompi/prefix.tar.gz ]; then
    tar -C / -xzf .device/ompi/prefix.tar.gz && echo "Open MPI unpacked"
    /tmp/ompi/bin/mpiexec -n 1 true || { echo "the carried Open MPI does not run here: building it"; rm -rf /tmp/ompi; }
  fi
  if [ ! -x /tmp/ompi/bin/mpiexec ]; then
    t0=$(date +%s)
    rm -rf /tmp/ompi-src && mkdir -p /tmp/ompi-src && tar -C /tmp/ompi-src -xJf "$TARBALL"
    (cd /tmp/ompi-src/openmpi-4.1.4 && ./configure --prefix=/tmp/ompi --disable-mpi-fortran --disable-oshmem \
       --disable-io-romio --disable-mpi-cxx --without-ucx --without-verbs --without-ofi --without-cuda --without-psm2 \
       --with-libevent=internal --with-hwloc=internal --with-pmix=internal \
       --enable-mca-no-build=btl-uct,pml-ucx,osc-ucx > /tmp/ompi-configure.log 2>&1 && make -j"$J" > /tmp/ompi-make.log 2>&1 \
       && make install > /tmp/ompi-install.log 2>&1) || { tail -30 /tmp/ompi-*.log; exit 1; }
    echo "Open MPI built in $(( $(date +%s) - t0 )) s"
  fi
  t0=$(date +%s)
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DGPUGEO_WITH_QGIS=OFF \
    -DMPI_HOME=/tmp/ompi -DMPI_CXX_COMPILER=/tmp/ompi/bin/mpicxx > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log; exit 1; }
  grep "gpugeo:" /tmp/cmake.log
  cmake --build $B -j"$J" --target bench_dem_mpi gpugeo_native_tests gpugeo_gpu_tests > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
  echo "project built in $(( $(date +%s) - t0 )) s"
}

# run RANKS SIZE TILE TILES_IN_FLIGHT EXTRA...: one job, rank 0 the coordinator, the others one a GPU
# each (gpu_mapping.h); the scratch rasters in /dev/shm where it has room (60,000²: about 95 GB).
run() {
  local ranks=$1 size=$2 tile=$3 gthreads=$4; shift 4
  local scratch=/dev/shm
  [ "$(df --output=avail -B1G /dev/shm | tail -1)" -gt 130 ] || scratch=/tmp
  echo "== $((ranks - 1)) GPUs, ${size}², tiles of ${tile}, ${gthreads} in flight, ${BENCH_ARGS---threads 32 --band-columns 2048} $*, scratch $scratch"
  timeout "${RUN_TIMEOUT:-560}" mpiexec --bind-to none -n "$ranks" $B/tests/benchmarks/bench_dem_mpi --width "$size" --height "$size" \
    --tile "$tile" --gpu --gpu-threads "$gthreads" --flats --isochrones --bands 10 --scratch "$scratch" ${BENCH_ARGS---threads 32 --band-columns 2048} "$@" 2>&1 \
    | grep -E "^stage|^\{|rror|abort" | tail -40
  rm -rf "$scratch"/gpugeo* 2>/dev/null
}

case "${1:-}" in
  build) build ;;
  gputests)
    CUDA_VISIBLE_DEVICES=0 $B/tests/native/gpugeo_native_tests --gtest_filter='DemDistributed*' 2>&1 \
      | grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure|tests ran"
    CUDA_VISIBLE_DEVICES=0 $B/tests/native/gpugeo_gpu_tests --gtest_filter='DemDistributedGpu*:DemTiledGpu*' 2>&1 \
      | grep -E "^\[ *(OK|PASSED|FAILED|SKIPPED) *\]|Failure|tests ran" ;;
  smoke)
    build || exit 1
    for n in 2 3; do run $n 20000 2048 8; done ;;
  big)
    shift; size=$1 tile=$2 gthreads=$3; shift 3
    for n in "$@"; do run $((n + 1)) "$size" "$tile" "$gthreads"; done ;;
  *) echo "usage: $0 build|smoke|big SIZE TILE TILES_IN_FLIGHT GPUS..."; exit 2 ;;
esac
