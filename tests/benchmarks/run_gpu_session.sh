#!/usr/bin/env bash
# One call on the GPU machine: build the native core (no QGIS there), run the native tests (the GPU
# ones included) and the benchmarks against their GPU peers. Logs go to $OUT (the device tool's
# folder that comes back) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DGPUGEO_WITH_QGIS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }
ctest --test-dir build-gpu -L native --output-on-failure -j 4 > "$OUT/ctest.log" 2>&1
status=$?
grep -E "tests passed|Skipped|Failed|\*\*\*" "$OUT/ctest.log" | head -30
echo "ctest exit $status"
./build-gpu/tests/native/gpugeo_gpu_tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"; tail -4 "$OUT/gpu_tests.log"
for bench in "$@"; do
  case "$bench" in
    voronoi) python3 tests/benchmarks/bench_voronoi_gpu.py build-gpu/tests/benchmarks/bench_voronoi --out "$OUT/bench_voronoi.json" 2>&1 | tee "$OUT/bench_voronoi.log" ;;
    sphere) python3 tests/benchmarks/bench_sphere_gpu.py build-gpu/tests/benchmarks/bench_sphere --out "$OUT/bench_sphere.json" 2>&1 | tee "$OUT/bench_sphere.log" ;;
    sphere-quick) python3 tests/benchmarks/bench_sphere_gpu.py build-gpu/tests/benchmarks/bench_sphere --quick 2>&1 | tee "$OUT/bench_sphere.log" ;;
    neighbours) python3 tests/benchmarks/bench_neighbours_gpu.py build-gpu/tests/benchmarks/bench_neighbours 2>&1 | tee "$OUT/bench_neighbours.log" ;;
    # Issue 22's transfers: every family's uploads and downloads against its device time, the caller's
    # memory pageable (and pinned where the benchmark offers it); the spread copies alone.
    transfers) { B=build-gpu/tests/benchmarks
                 for spec in "12 1000000 pinned" "12 1000000 pageable" "9 50000 pinned"; do set -- $spec
                   echo "sphere level=$1 sites=$2 out=$3"
                   $B/bench_sphere --level $1 --sites $2 --backend gpu --method indexed --reps 5 --out $3; done
                 for n in 1000000 10000000; do for mode in summary pairs; do for mem in "" "--pageable"; do
                   echo "neighbours n=$n mode=$mode ${mem:-pinned}"
                   $B/bench_neighbours --points $n --neighbours 8 --mode $mode --backend gpu --reps 5 $mem; done; done; done
                 echo "dbscan 1M pageable"
                 $B/bench_neighbours --points 1000000 --neighbours 8 --mode dbscan --backend gpu --reps 5 --pageable
                 for spec in "8192 1000" "16384 10000"; do set -- $spec
                   $B/bench_voronoi --width $1 --height $1 --sites $2 --backend gpu --reps 5; done
                 $B/bench_dem --width 2511 --height 2550 --chain
                 $B/bench_dem --width 10000 --height 10000 --reps 3 --chain
                 for g in 1000 3163; do for mem in "" "--pageable"; do
                   echo "mesh grid $g ${mem:-pinned}"; $B/bench_meshcontours --grid $g --what both $mem; done; done
                 for mib in 8 16 32 64 256; do $B/bench_staged_copy --mib $mib --reps 4; done
               } 2>&1 | tee "$OUT/bench_transfers.log" ;;
    neighbours-quick) python3 tests/benchmarks/bench_neighbours_gpu.py build-gpu/tests/benchmarks/bench_neighbours --quick 2>&1 | tee "$OUT/bench_neighbours.log" ;;
    mesh) for g in 1000 3163; do for what in both lines bands; do ./build-gpu/tests/benchmarks/bench_meshcontours --grid $g --what $what --paper; done;
            ./build-gpu/tests/benchmarks/bench_meshcontours --grid $g --backend cpu --reps 3; done 2>&1 | tee "$OUT/bench_mesh.log" ;;
    dem) { ./build-gpu/tests/benchmarks/bench_dem --width 2511 --height 2550 --chain;
           ./build-gpu/tests/benchmarks/bench_dem --width 2511 --height 2550;
           ./build-gpu/tests/benchmarks/bench_dem --width 2511 --height 2550 --backend cpu --reps 3 --chain;
           ./build-gpu/tests/benchmarks/bench_dem --width 10000 --height 10000 --reps 1 --chain;
           # 20,000^2 with the GPU's memory in use sampled every 50 ms (its peak is the chain's)
           nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$OUT/dem_memory.log" &
           sampler=$!
           ./build-gpu/tests/benchmarks/bench_dem --width 20000 --height 20000 --reps 1 --chain
           kill $sampler; echo "GPU memory in use, peak MiB: $(sort -n "$OUT/dem_memory.log" | tail -1)"; } 2>&1 | tee "$OUT/bench_dem.log" ;;
    # The tiled engine on the host's 16 cores: 20,000^2 against the in-memory tools (outputs compared),
    # then 40,000^2 (1.6e9 cells; raw files on the local disk), the isochrones included.
    dem-tiled) { ./build-gpu/tests/benchmarks/bench_dem_tiled --width 20000 --height 20000 --tile 2048 --threads 16 \
                   --compare --isochrones;
                 df -h /tmp | tail -1;
                 ./build-gpu/tests/benchmarks/bench_dem_tiled --width 40000 --height 40000 --tile 4096 --threads 16 \
                   --isochrones; } 2>&1 | tee "$OUT/bench_dem_tiled.log" ;;
    # The tiled engine with its tiles on the GPU: the staged copies against pageable cudaMemcpy; 20,000^2
    # against the in-memory GPU tools (outputs compared; the flat mask against the in-memory CPU mask,
    # the isochrones' times and polygons against the in-memory ones), then the isochrone chain at
    # 40,000^2 (1.6e9 cells, beyond the in-memory GPU path), rasters in host memory, with the GPU's
    # use sampled every 100 ms.
    watersheds) for size in "2511 2550 3" "20000 20000 1"; do set -- $size
                  ./build-gpu/tests/benchmarks/bench_watersheds --width $1 --height $2 --backend gpu --reps 5
                  ./build-gpu/tests/benchmarks/bench_watersheds --width $1 --height $2 --backend gpu --tile 4096 --threads 8 --reps 3
                  ./build-gpu/tests/benchmarks/bench_watersheds --width $1 --height $2 --backend cpu --threads 1 --reps $3
                  ./build-gpu/tests/benchmarks/bench_watersheds --width $1 --height $2 --backend cpu --threads 16 --reps $3
                done 2>&1 | tee "$OUT/bench_watersheds.log" ;;
    hand) for size in "2511 2550 3" "20000 20000 1"; do set -- $size
            ./build-gpu/tests/benchmarks/bench_watersheds --hand --width $1 --height $2 --backend gpu --reps 5
            ./build-gpu/tests/benchmarks/bench_watersheds --hand --width $1 --height $2 --backend gpu --tile 4096 --threads 8 --reps 3
            ./build-gpu/tests/benchmarks/bench_watersheds --hand --width $1 --height $2 --backend cpu --threads 1 --reps $3
            ./build-gpu/tests/benchmarks/bench_watersheds --hand --width $1 --height $2 --backend cpu --threads 16 --reps $3
          done 2>&1 | tee "$OUT/bench_hand.log" ;;
    # The stream network (gpugeo:streamnetwork's work: the accumulation and the network) at 1,000 cells.
    streams) for size in "2511 2550 3" "20000 20000 1"; do set -- $size
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --width $1 --height $2 --backend gpu --reps 5
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --width $1 --height $2 --backend gpu --tile 4096 --threads 8 --reps 3
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --width $1 --height $2 --backend cpu --threads 1 --reps $3
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --width $1 --height $2 --backend cpu --threads 16 --reps $3
               # only the rasters' fields (gpugeo:streamnetwork without its lines)
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --orders --width $1 --height $2 --backend gpu --reps 5
               ./build-gpu/tests/benchmarks/bench_watersheds --streams --orders --width $1 --height $2 --backend cpu --threads 16 --reps $3
             done 2>&1 | tee "$OUT/bench_streams.log" ;;
    # The subbasins of that network (the segments' exits and the watersheds of the exits).
    subbasins) for size in "2511 2550 3" "20000 20000 1"; do set -- $size
                 ./build-gpu/tests/benchmarks/bench_watersheds --subbasins --width $1 --height $2 --backend gpu --threads 16 --reps 5
                 ./build-gpu/tests/benchmarks/bench_watersheds --subbasins --width $1 --height $2 --backend gpu --tile 4096 --threads 8 --reps 3
                 ./build-gpu/tests/benchmarks/bench_watersheds --subbasins --width $1 --height $2 --backend cpu --threads 1 --reps $3
                 ./build-gpu/tests/benchmarks/bench_watersheds --subbasins --width $1 --height $2 --backend cpu --threads 16 --reps $3
               done 2>&1 | tee "$OUT/bench_subbasins.log" ;;
    # The breached DEM of the unfilled terrain (in memory on the GPU every step on the device; tiled, the
    # channels on the CPU's threads and the fill and flats on the device).
    breach|breach-large) sizes="2511 2550 3"; [ "$bench" = breach-large ] && sizes="20000 20000 1"
            for size in "$sizes"; do set -- $size
              ./build-gpu/tests/benchmarks/bench_watersheds --breach --width $1 --height $2 --backend gpu --threads 16 --reps $(( $3 + 2 ))
              ./build-gpu/tests/benchmarks/bench_watersheds --breach --width $1 --height $2 --backend gpu --tile 4096 --threads 16 --reps 1
              [ "$bench" = breach ] && ./build-gpu/tests/benchmarks/bench_watersheds --breach --width $1 --height $2 --backend cpu --threads 1 --reps 1
              ./build-gpu/tests/benchmarks/bench_watersheds --breach --width $1 --height $2 --backend cpu --threads 16 --reps $3
            done 2>&1 | tee "$OUT/bench_breach.log" ;;
    dem-tiled-gpu) { ./build-gpu/tests/benchmarks/bench_staged_copy;
                     ./build-gpu/tests/benchmarks/bench_dem_tiled --width 20000 --height 20000 --tile 2048 --threads 16 \
                       --gpu --flats --no-raise --compare --input-in-ram --in-ram;
                     ./build-gpu/tests/benchmarks/bench_dem_tiled --width 20000 --height 20000 --tile 2048 --threads 16 \
                       --gpu --isochrones --compare --input-in-ram --in-ram;
                     nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$OUT/tiled_gpu_use.log" &
                     sampler=$!
                     ./build-gpu/tests/benchmarks/bench_dem_tiled --width 40000 --height 40000 --tile 4096 --threads 16 \
                       --gpu --isochrones --input-in-ram --in-ram;
                     kill $sampler
                     echo "GPU memory in use, peak MiB: $(cut -d, -f1 "$OUT/tiled_gpu_use.log" | sort -n | tail -1);" \
                          "utilization samples > 0: $(awk -F, '$2 > 0' "$OUT/tiled_gpu_use.log" | wc -l) of $(wc -l < "$OUT/tiled_gpu_use.log")"; } 2>&1 | tee "$OUT/bench_dem_tiled_gpu.log" ;;
    voronoi-cpu) for s in 1000 100000 1000000; do ./build-gpu/tests/benchmarks/bench_voronoi --width 8192 --height 8192 --sites $s --backend cpu --reps 3; done 2>&1 | tee "$OUT/bench_voronoi_cpu16.log" ;;
  esac
done
