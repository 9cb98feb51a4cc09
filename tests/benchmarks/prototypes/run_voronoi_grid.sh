#!/bin/bash
# On the GPU machine, from any folder: the grid prototype (voronoi_grid.cu) on every workload of
# issue 22's first bar (8192² and 16384², 100 to 4,000,000 sites, uniform and skewed), then CuPy's
# exact EDT with indices on the same grid sizes and counts. Each prototype line gives upload, index
# and labels (ms), the index's parts, how many roots took the direct scan, overflowing tiles, the
# full-grid differences from the tile-only labeller and the sampled mismatches against brute force;
# it exits non-zero on any difference. Variants of the direct scan build with -DDIRECT_PIXELS=1|2|4,
# -DBRANCH_FREE=1, -DDIRECT_LIST=1 (see voronoi_grid.cu's header for what each gave).
# Environment (all optional): SIZES, KINDS (u s), COUNTS: the workloads; ARGS: options passed to
# every run (key=value: target, perbucket, maxtile, direct, fill, refine, heavy, chunks, sort, ref; see
# main() of voronoi_grid.cu); CUPY=0 skips CuPy, PROTO=0 the prototype; BIN: where the binary goes.
set -u
cd "$(dirname "$0")"
BIN=${BIN:-/tmp/voronoi_grid}
SIZES=${SIZES:-8192 16384}
KINDS=${KINDS:-u s}
COUNTS=${COUNTS:-100 1000 10000 100000 1000000 4000000}
if [ "${PROTO:-1}" = 0 ]; then
  :
elif nvcc -O3 -std=c++17 -arch=sm_90 -I../../../native -Xptxas -v -o "$BIN" voronoi_grid.cu >/tmp/ptxas.log 2>&1; then
  awk '/Compiling entry function/ {name=$7} /Used [0-9]+ registers/ && name ~ /(direct|tile|split)Kernel/ {print name, $5, $6; name=""}' /tmp/ptxas.log
  for size in $SIZES; do
    for kind in $KINDS; do
      for n in $COUNTS; do
        "$BIN" $size $n $kind ${ARGS:-}
      done
    done
  done
else
  grep -v "^ptxas info" /tmp/ptxas.log | head -40
  echo "COMPILE FAILED"
fi
[ "${CUPY:-1}" = 0 ] && exit 0
SIZES="$SIZES" KINDS="$KINDS" COUNTS="$COUNTS" python3 - <<'PY'
import os
import cupy as cp, numpy as np
from cupyx.scipy import ndimage
for size in map(int, os.environ["SIZES"].split()):
    for kind in os.environ["KINDS"].split():
        for n in map(int, os.environ["COUNTS"].split()):
            rng = np.random.default_rng(1)
            if kind == "u":
                flat = rng.choice(size * size, size=n, replace=False)
            else:  # 90 % in a square of 1 % of the area, as the prototype draws them
                side = size // 10
                # denser than the pixels at a million sites and more: sites then share pixels
                inner = rng.choice(side * side, size=n * 9 // 10, replace=n * 9 // 10 > side * side)
                r, c = np.divmod(inner, side)
                dense = (r + int(0.55 * size)) * size + (c + int(0.25 * size))
                flat = np.concatenate([dense, rng.choice(size * size, size=n - dense.size, replace=False)])
            image = cp.ones((size, size), dtype=cp.uint8)
            image.ravel()[cp.asarray(flat)] = 0
            s, e = cp.cuda.Event(), cp.cuda.Event()
            ts = []
            for rep in range(6):
                s.record(); r = ndimage.distance_transform_edt(image, return_indices=True); e.record(); e.synchronize()
                if rep: ts.append(cp.cuda.get_elapsed_time(s, e))
            del r
            print(f"cupy edt {size} {n} {'uniform' if kind == 'u' else 'skewed'}: median {sorted(ts)[len(ts)//2]:.3f} ms", flush=True)
PY
