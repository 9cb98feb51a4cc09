// The flats' pieces that the in-memory GPU flat mask (dem_cuda.cu) and the tiled one on the GPU
// (tiled/tiled_cuda.cu) share: the cells' classes, the equal-elevation components and each flat's
// greatest distance from higher ground.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "core/union_find.cuh"
#include "dem/detail/dem_cuda_common.cuh"

namespace gpugeo::dem::detail {

namespace {

// Cell classes, one byte a cell.
constexpr uint8_t kValid = 1, kFlat = 2, kLowEdge = 4, kHighEdge = 8, kDrained = 16;
constexpr int32_t kFar = 0x3fffffff;

// Equal-elevation components (8-connected valid cells of one elevation), each labelled with its
// lowest cell index, by union-find (in the manner of Playne & Hawick 2018's block-based labelling):
// each 32 x 32 tile joins its cells in shared memory (a row of the tile is a warp: its runs of equal
// cells are found with one ballot, then the runs join the runs above); the cells on tile borders then
// join their components across the borders in global memory; the tiles' own roots take their final
// roots, and every other cell its tile root's. A root always links under the lower of two roots, so
// each component's root is its lowest index. A handful of launches and no passes, however large the
// flats.
constexpr uint8_t kTileRoot = 32;  // a cell class bit: the root of its component within its tile

__global__ void componentTileKernel(const float* z, uint8_t* cls, int64_t w, int64_t h, int32_t* label)
{
  static_assert(kTile == 32, "a row of the tile is a warp");
  __shared__ int parent[kTile * kTile];
  __shared__ float sz[kTile * kTile];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  const int64_t x = int64_t(blockIdx.x) * kTile + tx, y = int64_t(blockIdx.y) * kTile + ty, c = y * w + x;
  const bool valid = x < w && y < h && (cls[c] & kValid);
  const float zc = valid ? z[c] : NAN;  // NaN: equal to nothing
  sz[tid] = zc;
  __syncthreads();
  // The runs of equal cells along the row: each cell links to its run's first cell.
  const bool left = tx > 0 && sz[tid - 1] == zc;
  const unsigned joined = __ballot_sync(0xffffffffu, left);
  const unsigned upToMe = tx == kTile - 1 ? 0xffffffffu : (2u << tx) - 1u;
  parent[tid] = ty * kTile + (31 - __clz(~joined & upToMe));  // lane 0 never joins its left
  __syncthreads();
  // The rows above: the cell above, else the two diagonals (the cell above joins them if it is
  // equal); the neighbours above that the left cell shares need no second join.
  if (ty > 0 && valid)
  {
    const int up = tid - kTile;
    if (sz[up] == zc)
    {
      if (!left)
        cuda::joinSets(parent, tid, up);
    }
    else
    {
      if (!left && tx > 0 && sz[up - 1] == zc)
        cuda::joinSets(parent, tid, up - 1);
      if (tx < kTile - 1 && sz[up + 1] == zc)
        cuda::joinSets(parent, tid, up + 1);
    }
  }
  __syncthreads();
  if (!valid)
  {
    if (x < w && y < h)
      label[c] = kFar;
    return;
  }
  const int root = cuda::rootOf(parent, tid);  // the lowest cell of the component in the tile
  label[c] = int32_t((int64_t(blockIdx.y) * kTile + root / kTile) * w + int64_t(blockIdx.x) * kTile + root % kTile);
  if (root == tid)
    cls[c] = uint8_t(cls[c] | kTileRoot);
}

// The earlier half of the eight neighbours (left, and the three above): joining with these joins
// every 8-connected pair once.
__constant__ int kEarlierX[4] = {-1, -1, 0, 1};
__constant__ int kEarlierY[4] = {0, -1, -1, -1};

__global__ void componentBorderKernel(const float* z, const uint8_t* cls, int64_t w, int64_t h, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const int64_t x = c % w, y = c / w;
  if ((x % kTile != 0 && x % kTile != kTile - 1 && y % kTile != 0) || !(cls[c] & kValid))
    return;
  const float zc = z[c];
  for (int k = 0; k < 4; ++k)
  {
    const int64_t nx = x + kEarlierX[k], ny = y + kEarlierY[k];
    if (nx < 0 || ny < 0 || nx >= w || (nx / kTile == x / kTile && ny / kTile == y / kTile))
      continue;
    const int64_t m = ny * w + nx;
    if ((cls[m] & kValid) && z[m] == zc)
      cuda::joinSets(label, int32_t(c), int32_t(m));
  }
}

__global__ void tileRootKernel(int64_t n, const uint8_t* cls, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && (cls[c] & kTileRoot))
    label[c] = cuda::rootOf(label, int32_t(c));
}

__global__ void componentLabelKernel(int64_t n, const uint8_t* cls, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && (cls[c] & kValid) && !(cls[c] & kTileRoot))
    label[c] = label[label[c]];  // the tile root's final root
}

// Labels the equal-elevation components of the cells classed kValid (each cell its component's
// lowest index; kFar for the others), marking each 32 x 32 tile's own roots kTileRoot in `cls`.
inline void labelComponents(const float* z, uint8_t* cls, int64_t w, int64_t h, int32_t* label)
{
  const int64_t n = w * h;
  componentTileKernel<<<tilesOf(w, h), dim3(kTile, kTile)>>>(z, cls, w, h, label);
  GPUGEO_CUDA_CHECK_LAUNCH();
  componentBorderKernel<<<blocksFor(n), 256>>>(z, cls, w, h, label);
  GPUGEO_CUDA_CHECK_LAUNCH();
  tileRootKernel<<<blocksFor(n), 256>>>(n, cls, label);
  GPUGEO_CUDA_CHECK_LAUNCH();
  componentLabelKernel<<<blocksFor(n), 256>>>(n, cls, label);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

// Each drained flat's greatest distance from its high edges. Blocks of 256: the lanes of a warp on
// the same flat make one atomic between them (a large flat's cells would queue on one address).
__global__ void flatHeightKernel(const uint8_t* cls, const int32_t* label, const int32_t* away, int64_t n,
                                 int32_t* height)
{
  __shared__ int32_t value[256];
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool counts = c < n && (cls[c] & kFlat) && (cls[c] & kDrained) && away[c] < kFar;
  const int32_t flat = counts ? label[c] : -1;
  value[threadIdx.x] = counts ? away[c] : 0;
  __syncwarp();
  const unsigned peers = __match_any_sync(0xffffffffu, flat);
  const int lane = int(threadIdx.x & 31u), first = int(threadIdx.x) - lane;
  if (!counts || lane != __ffs(peers) - 1)
    return;
  int32_t most = 0;
  for (unsigned rest = peers; rest; rest &= rest - 1)
    most = max(most, value[first + __ffs(rest) - 1]);
  atomicMax(height + flat, most);
}

}  // namespace

}  // namespace gpugeo::dem::detail
