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
#   GG_ONECOPY=1   all the bands' sites in one copy and all their gaps in another (no overlap)
#   GG_GAPSFIRST=1 all the gaps in one copy first, then the sites band by band
#   GG_INDEXAFTER=1 no index kernel before the last band has arrived
#   GG_BANDS=n     up to n bands instead of kBands
# and CUDA_DEVICE_MAX_CONNECTIONS=32 / =1 (whether the streams' hardware queues matter).
# Reading: if GG_NOLABEL and GG_SYNC upload at the link's speed and the plain run does not, the
# labelling kernels slow the copies (then try the crowded kernel's and the tile kernel's grids
# smaller); if GG_NOLABEL is slow too, the index kernels or the copies' own pattern do.
# Found on 2026-12-07 (H100): GG_SYNC uploads as slowly as the plain run (skewed 2.97 ms, uniform
# 2.22 ms): not the labelling. upload_pattern.cu (beside this) times the bare copy patterns. On a
# second host every variant uploaded at link speed (1.34-1.41 ms); 16 and 32 bands were slower than
# 8 (skewed 3.71 / 5.13 against 2.86 ms). The runs below print the host's enqueue times
# (host_start_ms, host_label_enqueue_ms) to tell whether the host's launches are what costs.
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
rep('    for (const int b : mBands.order)\n    {\n      const int32_t first = mBands.offset[size_t(b)], count = mBands.offset[size_t(b) + 1] - first;\n      if (count > 0)\n      {\n        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mInput.data()',
    '    const bool ggOne = std::getenv("GG_ONECOPY"), ggGapsFirst = std::getenv("GG_GAPSFIRST");\n'
    '    if (ggOne || ggGapsFirst) GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mGapBytes.data(), mHostGaps.data(), size_t(mGaps.at.back()), cudaMemcpyHostToDevice, mCopyStream));\n'
    '    if (ggOne) GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mInput.data(), mHostBanded.data(), sizeof(Point) * size_t(n), cudaMemcpyHostToDevice, mCopyStream));\n'
    '    for (const int b : mBands.order)\n    {\n      const int32_t first = mBands.offset[size_t(b)], count = mBands.offset[size_t(b) + 1] - first;\n      if (count > 0 && !ggOne)\n      {\n        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mInput.data()')
rep('        const int64_t at = mGaps.at[size_t(b)];\n        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(',
    '        const int64_t at = mGaps.at[size_t(b)];\n        if (!ggGapsFirst) GPUGEO_CUDA_CHECK(cudaMemcpyAsync(')
rep('    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCount.data(), 0, sizeof(int32_t) * (buckets + 1), mIndexStream));\n',
    '    if (std::getenv("GG_INDEXAFTER")) GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mIndexStream, mArrived[size_t(mBands.order.back())], 0));\n'
    '    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCount.data(), 0, sizeof(int32_t) * (buckets + 1), mIndexStream));\n')
rep('mView.maxTile, kBands, threads)', 'mView.maxTile, std::getenv("GG_BANDS") ? std::atoi(std::getenv("GG_BANDS")) : kBands, threads)')
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
    python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$kind', '$*'.ljust(44), {k: d[k] for k in ('upload_ms','index_ms','compute_ms','device_total_ms','site_bands','label_pieces','host_start_ms','host_label_enqueue_ms')})"
}
run skewed X=1
run skewed GG_SPREAD=1
run skewed GG_SPREAD=1 GG_BANDS=16
run skewed GG_SPREAD=1 GG_BANDS=32
run uniform X=1
run uniform GG_BANDS=16
run uniform GG_BANDS=32
run uniform GG_SYNC=1
