#!/bin/bash
# On the GPU machine, from this folder: the grid prototype (voronoi_grid.cu) on every workload of
# issue 22's first bar (8192² and 16384², 100 to 4,000,000 sites, uniform and skewed), then CuPy's
# exact EDT with indices on the same grid sizes and counts. TARGET, PERBUCKET, MAXTILE: the
# prototype's tuning (sites per tile, sites per bucket in the densest 64² block, largest tile side).
set -u
cd "$(dirname "$0")"
nvcc -O3 -std=c++17 -arch=sm_90 -I../../../native -o /tmp/voronoi_grid voronoi_grid.cu || exit 1
for size in 8192 16384; do
  for kind in u s; do
    for n in 100 1000 10000 100000 1000000 4000000; do
      /tmp/voronoi_grid $size $n $kind ${TARGET:-8} ${PERBUCKET:-4} ${MAXTILE:-16}
    done
  done
done
python3 - <<'PY'
import cupy as cp, numpy as np
from cupyx.scipy import ndimage
for size in (8192, 16384):
    for kind in ("u", "s"):
        for n in (100, 1000, 10000, 100000, 1000000, 4000000):
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
            print(f"cupy edt {size} {n} {'uniform' if kind == 'u' else 'skewed'}: median {sorted(ts)[len(ts)//2]:.3f} ms")
PY
