#!/usr/bin/env bash
# Issue 22 research, for one call on the GPU machine (about 100 s): why the overlapped start's
# uploads run at half the link's speed beside the labelling (8192^2, 4,000,000 skewed sites: 2.70 ms
# against 1.24 ms in one piece; 4,000,000 uniform: 2.1-2.3 ms against the 1.3-1.6 ms the copies take
# alone). It patches the working tree it runs in (the device machine's copy; never commit the
# result) with four switches read from the environment, builds bench_voronoi, and times the start
# at 8192^2 with 4,000,000 skewed and uniform sites under each:
#   GG_SPREAD=1    the overlapped start for crowded sites too (the spread rule off)
#   GG_NOLABEL=1   the pieces' labelling skipped: the upload and the index alone
#   GG_SYNC=1      the host waits for the whole upload before it launches the pieces
#   GG_NOCROWD=1   the crowded roots labelled by tiles (crowdedMin = 0)
# and CUDA_DEVICE_MAX_CONNECTIONS=32 / =1 (whether the streams' hardware queues matter).
# Reading: if GG_NOLABEL and GG_SYNC upload at the link's speed and the plain run does not, the
# labelling kernels slow the copies (then try the crowded kernel's and the tile kernel's grids
# smaller); if GG_NOLABEL is slow too, the index kernels or the copies' own pattern do.
# usage (repository root, on the GPU machine): bash tests/benchmarks/prototypes/overlap_knobs.sh
set -uo pipefail
python3 - <<'PY' || exit 1
p = 'native/voronoi/voronoi_cuda.cu'
s = open(p).read()
def rep(a, b):
    global s
    assert s.count(a) == 1, 'anchor not found once: ' + a[:50]
    s = s.replace(a, b)
rep('#include <cmath>\n', '#include <cmath>\n#include <cstdlib>\n')
rep('  return double(choice.densestRoot) <= kSpreadRoot',
    '  if (std::getenv("GG_SPREAD")) return true;\n  return double(choice.densestRoot) <= kSpreadRoot')
rep('      mView.maxTile = mView.bucket >= 4 ? 32 : 16;\n',
    '      mView.maxTile = mView.bucket >= 4 ? 32 : 16;\n      if (std::getenv("GG_NOCROWD")) mView.crowdedMin = 0.0;\n')
rep('    int turn = 0;\n    try\n    {\n      for (const int p : mBands.labelOrder)\n      {\n',
    '    int turn = 0;\n    if (std::getenv("GG_SYNC")) GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mCopyStream));\n'
    '    try\n    {\n      for (const int p : mBands.labelOrder)\n      {\n        if (std::getenv("GG_NOLABEL")) continue;\n')
open(p, 'w').write(s)
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cmake -S . -B build-gpu -G Ninja -DGPUGEO_WITH_QGIS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/configure.log 2>&1 || { tail -30 /tmp/configure.log; exit 1; }
cmake --build build-gpu -j 16 --target bench_voronoi > /tmp/build.log 2>&1 || { grep -E "error" -A5 /tmp/build.log | head -60; exit 1; }
B=build-gpu/tests/benchmarks/bench_voronoi
python3 - <<'PY'
import sys, numpy as np
sys.path.insert(0, "tests/benchmarks")
from bench_voronoi_gpu import make_sites
for kind in ("skewed", "uniform"):
    c, r = make_sites(8192, 4000000, kind, seed=8192 + 4000000)
    np.stack([c, r], axis=1).astype(np.float64).tofile(f"/tmp/s_{kind}.bin")
PY
run() {
  local kind=$1; shift
  env "$@" $B --width 8192 --height 8192 --sites /tmp/s_$kind.bin --backend gpu --reps 7 | grep "^{" | tail -1 |
    python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$kind', '$*'.ljust(44), {k: d[k] for k in ('upload_ms','index_ms','compute_ms','device_total_ms','site_bands','label_pieces')})"
}
run skewed X=1
run skewed GG_SPREAD=1
run skewed GG_SPREAD=1 GG_NOLABEL=1
run skewed GG_SPREAD=1 GG_SYNC=1
run skewed GG_SPREAD=1 GG_NOCROWD=1
run skewed GG_SPREAD=1 CUDA_DEVICE_MAX_CONNECTIONS=32
run skewed GG_SPREAD=1 CUDA_DEVICE_MAX_CONNECTIONS=1
run uniform X=1
run uniform GG_NOLABEL=1
run uniform GG_SYNC=1
run uniform CUDA_DEVICE_MAX_CONNECTIONS=32
