#!/usr/bin/env bash
# Issue 22 research, for one call on the GPU machine (about 350 s): the last 0.09 ms of 8192^2 with
# 4,000,000 skewed sites (2.28 ms against CuPy's 6.56 ms on 2026-12-07: 2.9x, the bar 3x). A trace
# showed the crowded pieces as the tail after the last band is indexed (~0.7 ms); a piece of 158
# dense roots' tile kernel took 0.45 ms alone on an idle GPU. Its cause in the code: launchLabels
# launches the tile kernel with one block per root, and a dense root becomes kHeavyParts heavy
# items, so a small piece leaves each block ~5 items in turn. This applies tile_grid.patch (beside
# it) to the working tree it runs in (the device machine's copy; never commit the result):
#   the tile kernel's grid = max(roots, min((kHeavyParts + 1) * roots, resident blocks)): the
#     grid-stride loop is unchanged, so the labels cannot change; GG_TILEGRID=0 restores a block per
#     root (the A/B in one build)
#   GG_SPLITGRID=n  the split kernels' grid n blocks a multiprocessor instead of 4
#   GG_ORDER=1      the bands with the most sites uploaded first (tried 2026-12-07 with a block per
#                   root: 2.53-2.76 ms, worse; worth a second look once a crowded piece runs faster)
#   GG_FORK=1       the crowded and direct kernels (~0.1 ms of a crowded piece's critical path) on a
#                   companion stream beside the tile and split kernels (they label other roots)
# then runs the VoronoiGpu tests with the new grid (again with GG_FORK=1), times each variant
# (medians of 7, twice each, `cmp` of the labels and distances against the new grid's), and
# bench_voronoi_gpu.py beside CuPy (8192^2, then 16384^2; 1,000,000 and 4,000,000 sites).
# Written 2026-12-08, when no GPU machine was lent: not yet run. If a variant wins and the tests
# pass, land its lines of the patch (without the switches) and rerun the README's table.
# usage (repository root, on the GPU machine): OUT=<dir> bash tests/benchmarks/prototypes/tile_grid.sh
set -uo pipefail
OUT=${OUT:-/tmp/tile_grid}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/r.txt") 2>&1
git apply tests/benchmarks/prototypes/tile_grid.patch || { echo "tile_grid.patch does not apply"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
cmake -S . -B build-gpu -G Ninja -DGPUGEO_WITH_QGIS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > "$OUT/cfg.txt" 2>&1 || { tail -30 "$OUT/cfg.txt"; exit 1; }
cmake --build build-gpu -j 16 --target gpugeo_gpu_tests bench_voronoi > "$OUT/build.txt" 2>&1 || { grep -E "error" -A5 "$OUT/build.txt" | head -60; exit 1; }
el build
TB=$(find build-gpu -name gpugeo_gpu_tests -type f | head -1)
BV=$(find build-gpu -name bench_voronoi -type f | head -1)
S=/tmp/tile_grid_sites
mkdir -p $S
python3 - "$S" <<'PY' &
import os, sys, numpy as np
sys.path.insert(0, "tests/benchmarks")
from bench_voronoi_gpu import make_sites
for size, count, kind in [(8192, 4000000, "skewed"), (8192, 1000000, "skewed"), (8192, 4000000, "uniform")]:
    c, r = make_sites(size, count, kind, seed=size + count)
    tmp = f"{sys.argv[1]}/{kind}_{count}.tmp"
    np.stack([c, r], axis=1).astype(np.float64).tofile(tmp)
    os.rename(tmp, f"{sys.argv[1]}/{kind}_{count}.bin")
PY
SITES=$!  # (a bare `wait` would wait for the log's tee too)
for fork in 0 1; do  # GG_FORK is read as set or not: set only for the second run
  if [ $fork = 1 ]; then export GG_FORK=1; else unset GG_FORK; fi
  timeout 240 $TB --gtest_filter='VoronoiGpu*' > "$OUT/gtest$fork.txt" 2>&1; el "VoronoiGpu* fork=$fork rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED" "$OUT/gtest$fork.txt" | head -20
done
unset GG_FORK
wait $SITES
one() { # sites grid split tag [VAR=value ...]
  local f=$1 grid=$2 split=$3 tag=$4; shift 4
  env GG_TILEGRID=$grid GG_SPLITGRID=$split "$@" $BV --width 8192 --height 8192 --sites $S/$f.bin --backend gpu --reps 7 \
    --labels-out $S/l_$tag.bin > $S/o.txt 2>&1
  echo "$f grid=$grid split=$split $*: $(grep '^{' $S/o.txt | tail -1 | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k: v for k, v in d.items() if k.endswith("_ms")})')"
}
for f in skewed_4000000 skewed_1000000 uniform_4000000; do
  for rep in 1 2; do one $f 0 4 old; one $f 1 4 new; one $f 1 4 fork GG_FORK=1; done
  cmp $S/l_old.bin $S/l_new.bin && cmp $S/l_new.bin $S/l_fork.bin && echo "$f: the same labels and distances (old grid, new, new forked)"
  if [ $f = skewed_4000000 ]; then cp $S/l_new.bin $S/l_ref.bin; fi
done
el "grid and fork A/B"
for sp in 2 8 16; do one skewed_4000000 1 $sp c; cmp $S/l_c.bin $S/l_ref.bin || echo "split $sp: LABELS DIFFER"; done
for rep in 1 2; do one skewed_4000000 1 4 d GG_ORDER=1; one skewed_4000000 1 4 e GG_ORDER=1 GG_FORK=1; done
cmp $S/l_d.bin $S/l_ref.bin || echo "GG_ORDER: LABELS DIFFER"
el "split and order"
python3 tests/benchmarks/bench_voronoi_gpu.py $BV --sizes 8192 --counts 4000000,1000000 > "$OUT/sweep8192.txt" 2>&1; el "sweep 8192 rc=$?"
tail -8 "$OUT/sweep8192.txt"
GG_FORK=1 python3 tests/benchmarks/bench_voronoi_gpu.py $BV --sizes 8192 --counts 4000000 > "$OUT/sweep8192_fork.txt" 2>&1; el "sweep 8192 GG_FORK=1 rc=$?"
tail -5 "$OUT/sweep8192_fork.txt"
python3 tests/benchmarks/bench_voronoi_gpu.py $BV --sizes 16384 --counts 4000000,1000000 > "$OUT/sweep16384.txt" 2>&1; el "sweep 16384 rc=$?"
tail -8 "$OUT/sweep16384.txt"
