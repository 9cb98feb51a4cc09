// The CUDA backend of the DEM tools.
//
// Filling: the filled surface is the greatest solution of W(c) = max(z(c), min over the neighbours
// of W(n)) with W = z on the edge cells (dem.h). Starting from +inf inside, each 32 x 32 tile loads
// its cells and a one-cell halo into shared memory and lowers them until nothing changes in the
// tile (Gauss-Seidel within the tile, in the manner of the source paper's 16 x 16 tiles with a
// halo); passes over all tiles repeat until no tile changes. Values only go down and every update
// keeps W >= the answer, so the order in which threads and blocks see each other's values does not
// matter: the result is the CPU's, bit for bit.
// Directions: by 32 x 32 tiles with a one-cell halo in shared memory, one thread a cell, the same rule
// as the CPU (detail/dem_math.h).
// Accumulation and travel times, by 32 x 32 tiles (flow paths are local, so most of the work stays in
// shared memory):
// - accumulation: each tile sums its own cells' counts and areas down its paths (dependency counting
//   in shared memory: a cell passes its sum on once all its upstream cells in the tile have); the
//   cells whose flow leaves their tile (exits) form a much smaller forest, summed by one thread per
//   leaf that climbs down while it is the last of a node's children to arrive; each tile then sums
//   again with the flows coming in from its neighbours' exits. Integer sums: the CPU's numbers exactly.
// - travel times: each tile finds, by pointer jumping in shared memory, where every cell's path
//   leaves the tile and the time to get there; pointer jumping over the exits alone then gives each
//   exit's time to the outlet, and a cell's time is its time to its exit plus the exit's.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/dem_math.h"
#include "dem/detail/flat_cuda.cuh"
#include "dem/detail/travel_math.h"
#include "dem/tiled/perimeter.h"

namespace gpugeo::dem::detail {

namespace {

// The most device memory each entry point holds at once, in bytes per cell (its grid-sized
// buffers), checked before it starts so that a DEM too large for the GPU stops at once with the
// limit named (cuda::withinDeviceMemory). A Manning raster adds 4 to the travel times.
constexpr std::size_t kFillBytes = kGpuFillBytesPerCell;                  // elevations, filled
constexpr std::size_t kDirectionBytes = kGpuDirectionBytesPerCell;        // elevations, the flat mask's seven arrays, directions
constexpr std::size_t kAccumulationBytes = kGpuAccumulationBytesPerCell;  // directions, counts and areas and their tile sums, exits, waits
// Elevations, directions, areas, and travelOnDevice's minutes, speeds and jumping arrays (72). The
// chain's peak too: it lets go of the counts before the travel times, and the bands (minutes, labels
// and the region tracing's 21) with the kept surfaces (13) stay under it.
constexpr std::size_t kTravelBytes = kGpuChainBytesPerCell;

__global__ void fillInitKernel(const float* z, int64_t w, int64_t h, float* W)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const float v = z[c];
  W[c] = isNoData(v) ? v : (isEdgeCell(z, w, h, c % w, c / w) ? v : INFINITY);
}

// One tile's relaxation of the fill, W = max(z, min over the neighbours' W), in shared memory until
// nothing changes. Two copies of the tile: each step reads one and writes its own cell to the other,
// so no thread reads a cell in the step its owner writes it (a data race in CUDA's memory model had
// they shared one copy). Each step only lowers W, never below the filled surface, so the steps reach
// the same fixed point in any order: the result is the CPU's, bit for bit.
__global__ void fillTileKernel(const float* z, int64_t w, int64_t h, float* W, TilePass pass)
{
  if (tileIdle(pass))
    return;
  __shared__ float s[2][kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  loadTile<float>(s[0], W, w, h, NAN);
  loadTile<float>(s[1], W, w, h, NAN);
  __syncthreads();
  const int64_t x = x0 + tx, y = y0 + ty;
  const bool inside = x < w && y < h;
  const bool active = inside && !isNoData(z[y * w + x]) && !isEdgeCell(z, w, h, x, y);
  const float zc = active ? z[y * w + x] : 0.f;
  float mine = s[0][ty + 1][tx + 1];
  const bool lowered = settleInBlock<float>(s, active, mine, [&](const float (*r)[kTile + 2]) {
    float m = INFINITY;
    for (int d = 0; d < 8; ++d)
    {
      const float v = r[ty + 1 + stepY(d)][tx + 1 + stepX(d)];
      if (!isNoData(v))
        m = fminf(m, v);
    }
    const float next = fmaxf(zc, m);
    return next < mine ? next : mine;
  });
  if (lowered)
    W[y * w + x] = mine;
  tileDone(pass, lowered);
}

__global__ void positiveZeroKernel(float* W, int64_t n)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && !isNoData(W[c]))
    W[c] = __fadd_rn(W[c], 0.0f);  // -0 as +0, as on the CPU (nodata keeps its NaN's bits)
}

// A cell's neighbourhood in a tile's shared memory (its elevations and masks with a one-cell halo;
// NaN off the grid).
struct TileAround
{
  const float (*z)[kTile + 2];
  const int32_t (*mask)[kTile + 2];
  int x, y;  // the cell in the tile's arrays
  __device__ float at(int d) const { return z[y + stepY(d)][x + stepX(d)]; }
  __device__ int32_t maskAt(int d) const { return mask[y + stepY(d)][x + stepX(d)]; }
};

// D8 directions by 32 x 32 tiles: each block loads its cells' elevations and flat masks with a
// one-cell halo into shared memory (as the source paper's 16 x 16 tiles do) and each thread takes
// its cell's direction from there, by the rule the CPU uses (detail/dem_math.h). mask may be null.
__global__ void directionKernel(const float* z, const int32_t* mask, int64_t w, int64_t h, const double* cellWidth,
                                const double* cellHeight, uint8_t* out)
{
  __shared__ float sz[kTile + 2][kTile + 2];
  __shared__ int32_t sm[kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  loadTile<float>(sz, z, w, h, NAN);
  loadTile<int32_t>(sm, mask, w, h, 0);
  __syncthreads();
  const int64_t x = x0 + tx, y = y0 + ty;
  if (x >= w || y >= h)
    return;
  out[y * w + x] = d8DirectionAround(sz[ty + 1][tx + 1], TileAround{sz, sm, tx + 1, ty + 1}, mask != nullptr,
                                     sm[ty + 1][tx + 1], cellWidth[y], cellHeight[y]);
}

// ---- accumulation by tiles ----

__device__ bool inTile(int64_t x0, int64_t y0, int64_t c, int64_t w)
{
  const int64_t x = c % w, y = c / w;
  return x >= x0 && y >= y0 && x < x0 + kTile && y < y0 + kTile;
}

// What flows into the grid's border cells from outside it (a tile of the tiled accumulation, whose
// neighbours' inflows are known): per place on the border (tiled/perimeter.h), or none.
struct BorderInflow
{
  const long long* cells = nullptr;
  const long long* area = nullptr;
};

// Sums counts and areas down the paths inside one tile. With inflow, each cell starts with what
// drains into it from exits of other tiles (their final sums, in exitCells/exitArea); without, the
// cells' exits are also written (exitOf: the last cell of the cell's path in the tile). A border cell
// also starts with its `border` inflow.
__global__ void tileAccumulateKernel(const uint8_t* dirs, int64_t w, int64_t h, const long long* rowArea,
                                     BorderInflow border, const long long* exitCells, const long long* exitArea,
                                     long long* cells, long long* area, int32_t* exitOf, int* looped)
{
  __shared__ int indegree[kTile * kTile];
  __shared__ int16_t ahead[kTile * kTile];
  __shared__ unsigned long long sc[kTile * kTile], sa[kTile * kTile];
  const int tx = threadIdx.x, ty = threadIdx.y, li = ty * kTile + tx;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  const int64_t x = x0 + tx, y = y0 + ty, c = y * w + x;
  const bool valid = x < w && y < h && dirs[c] != kNoData;
  const int64_t r = valid ? receiverOf(dirs, w, h, c) : -1;
  const int lr = (r >= 0 && inTile(x0, y0, r, w)) ? int((r / w - y0) * kTile + (r % w - x0)) : -1;
  unsigned long long myCells = valid ? 1ull : 0ull, myArea = valid ? (unsigned long long)rowArea[y] : 0ull;
  if (valid && border.cells && (x == 0 || y == 0 || x == w - 1 || y == h - 1))
  {
    const int64_t k = tiled::detail::perimeterPlace(w, h, x, y);
    myCells += (unsigned long long)border.cells[k];
    myArea += (unsigned long long)border.area[k];
  }
  if (valid && exitCells)
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = x + stepX(d), ny = y + stepY(d);
      if (nx < 0 || ny < 0 || nx >= w || ny >= h || (nx >= x0 && ny >= y0 && nx < x0 + kTile && ny < y0 + kTile))
        continue;
      const int64_t m = ny * w + nx;
      if (receiverOf(dirs, w, h, m) == c)
      {
        myCells += (unsigned long long)exitCells[m];
        myArea += (unsigned long long)exitArea[m];
      }
    }
  indegree[li] = 0;
  ahead[li] = int16_t(lr);
  sc[li] = myCells;
  sa[li] = myArea;
  __syncthreads();
  if (lr >= 0)
    atomicAdd(&indegree[lr], 1);
  bool done = !valid;
  for (;;)
  {
    __syncthreads();
    const bool ready = !done && indegree[li] == 0;
    __syncthreads();
    if (ready)
    {
      if (lr >= 0)
      {
        atomicAdd(&sc[lr], sc[li]);
        atomicAdd(&sa[lr], sa[li]);
        atomicSub(&indegree[lr], 1);
      }
      done = true;
    }
    if (!__syncthreads_or(ready))
      break;
  }
  if (!done)
    *looped = 1;
  if (valid)
  {
    cells[c] = (long long)sc[li];
    area[c] = (long long)sa[li];
  }
  if (!exitOf)
    return;
  // Where each cell's path leaves the tile: pointer jumping over `ahead`.
  __shared__ int16_t last[kTile * kTile];
  last[li] = int16_t(lr >= 0 ? lr : li);
  for (int round = 0; round < 10; ++round)
  {
    __syncthreads();
    const int a = ahead[li];
    const int16_t nextAhead = a >= 0 ? ahead[a] : int16_t(-1);
    const int16_t nextLast = a >= 0 ? last[a] : last[li];
    __syncthreads();
    ahead[li] = nextAhead;
    last[li] = nextLast;
  }
  if (valid)
    exitOf[c] = int32_t((y0 + last[li] / kTile) * w + x0 + last[li] % kTile);
}

// Per exit: how many exits of other tiles drain into it (through a cell of its path).
__global__ void exitPendingKernel(const uint8_t* dirs, int64_t w, int64_t h, const int32_t* exitOf, int* pending,
                                  unsigned long long* exits)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || dirs[c] == kNoData || exitOf[c] != c)
    return;
  atomicAdd(exits, 1ull);
  const int64_t r = receiverOf(dirs, w, h, c);
  if (r >= 0)
    atomicAdd(&pending[exitOf[r]], 1);
}

// From every exit no other exit drains into, one thread carries the sums down to the next exit
// and goes on from there only when it was the last of that exit's upstream exits to arrive (so
// every exit's sum is final before it is passed on; nothing waits).
__global__ void exitClimbKernel(const uint8_t* dirs, int64_t w, int64_t h, const int32_t* exitOf,
                                const int* pendingAtStart, int* pending, long long* cells, long long* area,
                                unsigned long long* finished)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || dirs[c] == kNoData || exitOf[c] != c || pendingAtStart[c] != 0)
    return;
  int64_t x = c;
  unsigned long long myCells = (unsigned long long)cells[x], myArea = (unsigned long long)area[x];
  for (;;)
  {
    atomicAdd(finished, 1ull);
    const int64_t r = receiverOf(dirs, w, h, x);
    if (r < 0)
      return;
    const int64_t p = exitOf[r];
    atomicAdd(reinterpret_cast<unsigned long long*>(cells + p), myCells);
    atomicAdd(reinterpret_cast<unsigned long long*>(area + p), myArea);
    __threadfence();
    if (atomicSub(&pending[p], 1) != 1)
      return;
    __threadfence();
    x = p;
    myCells = atomicAdd(reinterpret_cast<unsigned long long*>(cells + p), 0ull);
    myArea = atomicAdd(reinterpret_cast<unsigned long long*>(area + p), 0ull);
  }
}

// ---- flats (Barnes et al. 2014, as flatMaskCpu computes them; the classes, components and heights
// in detail/flat_cuda.cuh) ----

__global__ void flatClassKernel(const float* z, int64_t w, int64_t h, uint8_t* cls)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const int64_t x = c % w, y = c / w;
  const float zc = z[c];
  if (isNoData(zc))
  {
    cls[c] = 0;
    return;
  }
  bool lower = false;
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = x + stepX(d), ny = y + stepY(d);
    if (nx >= 0 && ny >= 0 && nx < w && ny < h)
      lower = lower || z[ny * w + nx] < zc;
  }
  cls[c] = uint8_t(kValid | ((!lower && !isEdgeCell(z, w, h, x, y)) ? kFlat : 0));
}

__global__ void flatEdgeKernel(const float* z, int64_t w, int64_t h, uint8_t* cls)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !(cls[c] & kValid))
    return;
  const int64_t x = c % w, y = c / w;
  const float zc = z[c];
  const bool flat = cls[c] & kFlat;
  bool low = false, high = false;
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = x + stepX(d), ny = y + stepY(d);
    if (nx < 0 || ny < 0 || nx >= w || ny >= h)
      continue;
    const int64_t m = ny * w + nx;
    if (!(cls[m] & kValid))
      continue;
    low = low || (!flat && (cls[m] & kFlat) && z[m] == zc);
    high = high || (flat && z[m] > zc);
  }
  cls[c] = uint8_t(cls[c] | (low ? kLowEdge : 0) | (high ? kHighEdge : 0));
}

// What a relaxation pass computes: value(c) = min over linked neighbours of value(n) + 1, for
// the cells it moves (sources keep their values).
enum class Relax
{
  Towards,    // flat cells from the low edges through flat or low-edge cells of their elevation
  Away,       // drained flat cells from the drained high edges through flat cells of their elevation
};

template <Relax R>
__device__ bool moves(uint8_t k)
{
  if (R == Relax::Towards)
    return k & kFlat;
  return (k & kFlat) && (k & kDrained) && !(k & kHighEdge);
}

template <Relax R>
__device__ bool links(uint8_t k)
{
  if (R == Relax::Towards)
    return k & (kFlat | kLowEdge);
  return k & kFlat;
}

// One tile's steps of a flat's relaxation (each cell the least of its linked neighbours' values plus
// one) in shared memory until nothing changes. As fillTileKernel: two copies of the values, each step
// reading one and writing its own cell to the other, so no cell is read in the step its owner writes
// it; the values only fall, to the same fixed point in any order.
template <Relax R>
__global__ void relaxTileKernel(const float* z, const uint8_t* cls, int64_t w, int64_t h, int32_t* value,
                                TilePass pass)
{
  if (tileIdle(pass))
    return;
  __shared__ int32_t s[2][kTile + 2][kTile + 2];
  __shared__ float sz[kTile + 2][kTile + 2];
  __shared__ uint8_t sk[kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  loadTile<int32_t>(s[0], value, w, h, kFar);
  loadTile<int32_t>(s[1], value, w, h, kFar);
  loadTile<float>(sz, z, w, h, NAN);
  loadTile<uint8_t>(sk, cls, w, h, 0);
  __syncthreads();
  const int64_t x = x0 + tx, y = y0 + ty;
  const bool active = x < w && y < h && moves<R>(sk[ty + 1][tx + 1]);
  const float zc = sz[ty + 1][tx + 1];
  int32_t mine = s[0][ty + 1][tx + 1];
  const bool lowered = settleInBlock<int32_t>(s, active, mine, [&](const int32_t (*r)[kTile + 2]) {
    int32_t m = mine;
    for (int d = 0; d < 8; ++d)
    {
      const int yy = ty + 1 + stepY(d), xx = tx + 1 + stepX(d);
      const int32_t v = r[yy][xx];
      if (sz[yy][xx] == zc && links<R>(sk[yy][xx]) && v < kFar)
        m = min(m, v + 1);
    }
    return m;
  });
  if (lowered)
    value[y * w + x] = mine;
  tileDone(pass, lowered);
}

template <Relax R>
void relax(const DeviceBuffer<float>& z, const DeviceBuffer<uint8_t>& cls, int64_t w, int64_t h,
           DeviceBuffer<int32_t>& value, const RunControl& control)
{
  untilSettled(w, h, control, [&](dim3 blocks, dim3 threads, TilePass pass) {
    relaxTileKernel<R><<<blocks, threads>>>(z.data(), cls.data(), w, h, value.data(), pass);
  });
}

__global__ void drainedRootKernel(const uint8_t* cls, const int32_t* label, int64_t n, uint8_t* rootDrained)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && (cls[c] & kLowEdge))
    rootDrained[label[c]] = 1;
}

__global__ void drainedKernel(const int32_t* label, const uint8_t* rootDrained, int64_t n, uint8_t* cls)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && (cls[c] & kValid) && rootDrained[label[c]])
    cls[c] = uint8_t(cls[c] | kDrained);
}

__global__ void distanceInitKernel(const uint8_t* cls, int64_t n, Relax mode, int32_t* value)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  const uint8_t k = cls[c];
  if (mode == Relax::Towards)
    value[c] = (k & kLowEdge) ? 0 : kFar;
  else
    value[c] = ((k & kHighEdge) && (k & kDrained)) ? 1 : kFar;
}

__global__ void maskKernel(const uint8_t* cls, const int32_t* label, const int32_t* towards, const int32_t* away,
                           const int32_t* height, int64_t n, bool towardsOnly, int32_t* mask)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  const uint8_t k = cls[c];
  if (!((k & kFlat) && (k & kDrained)))
  {
    mask[c] = 0;
    return;
  }
  const int32_t t = towards[c] < kFar ? towards[c] : 0, a = away[c] < kFar ? away[c] : 0;
  mask[c] = towardsOnly ? t : combinedFlatMask(t, a, height[label[c]]);
}

// ---- travel time ----

__global__ void travelInitKernel(const float* z, const uint8_t* dirs, const long long* area, const double* cellWidth,
                                 const double* cellHeight, const float* manning, VelocityModel model,
                                 double overlandNPower, int64_t w, int64_t h, int64_t outlet, int32_t* next,
                                 int32_t* tail, double* sum, double* speed)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  tail[c] = int32_t(c);
  if (dirs[c] == kNoData)
  {
    next[c] = -1;
    sum[c] = 0;
    speed[c] = NAN;
    return;
  }
  const int64_t x = c % w, y = c / w;
  const int64_t receiver = receiverAt(dirs, w, h, x, y);
  const double v =
    cellSpeed(model, overlandNPower, z, manning, w, h, x, y, receiver, area[c], cellWidth[y], cellHeight[y], dirs[c]);
  speed[c] = v;
  sum[c] = flowLength(cellWidth[y], cellHeight[y], dirs[c]) / v / 60.0;
  next[c] = c == outlet ? -1 : int32_t(receiver);
}

// Whether cell c is on the border of a w x h grid (a tile's halo, for travelTileCuda).
__device__ bool onBorder(int64_t c, int64_t w, int64_t h)
{
  const int64_t x = c % w, y = c / w;
  return x == 0 || y == 0 || x == w - 1 || y == h - 1;
}

// A tile's halo (the grid's border cells): each ends the paths that enter it, with its own time to
// the outlet as its step (haloTimes, per place in tiled/perimeter.h's order).
__global__ void haloEndKernel(int64_t w, int64_t h, const double* haloTimes, int32_t* next, double* step, double* speed)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !onBorder(c, w, h))
    return;
  next[c] = -1;
  step[c] = haloTimes ? haloTimes[tiled::detail::perimeterPlace(w, h, c % w, c / w)] : 0.0;
  speed[c] = NAN;
}

// Each cell's path's last cell (the chains' tails, through each cell's exit).
__global__ void pathEndKernel(int64_t n, const int32_t* exitOf, const int32_t* tail, int32_t* end)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n)
    end[c] = tail[exitOf[c]];
}

// Per tile: where each cell's path (next) leaves the tile or ends (exitOf) and the sum of the steps
// before that cell (partial; 0 at an exit), by pointer jumping in shared memory.
__global__ void travelTileKernel(const int32_t* next, const double* step, int64_t w, int64_t h, double* partial,
                                 int32_t* exitOf)
{
  __shared__ int16_t ahead[kTile * kTile], last[kTile * kTile];
  __shared__ double sum[kTile * kTile];
  const int tx = threadIdx.x, ty = threadIdx.y, li = ty * kTile + tx;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  const int64_t x = x0 + tx, y = y0 + ty, c = y * w + x;
  const bool inside = x < w && y < h;
  const int64_t r = inside ? next[c] : -1;
  const bool local = r >= 0 && r % w >= x0 && r / w >= y0 && r % w < x0 + kTile && r / w < y0 + kTile;
  const int lr = local ? int((r / w - y0) * kTile + (r % w - x0)) : -1;
  ahead[li] = int16_t(lr);
  last[li] = int16_t(local ? lr : li);
  sum[li] = local ? step[c] : 0.0;
  for (int round = 0; round < 10; ++round)
  {
    __syncthreads();
    const int a = ahead[li];
    double mine = sum[li];
    int16_t nextAhead = -1, nextLast = last[li];
    if (a >= 0)
    {
      mine += sum[a];
      nextAhead = ahead[a];
      nextLast = last[a];
    }
    __syncthreads();
    ahead[li] = nextAhead;
    last[li] = nextLast;
    sum[li] = mine;
  }
  if (inside)
  {
    partial[c] = sum[li];
    exitOf[c] = int32_t((y0 + last[li] / kTile) * w + x0 + last[li] % kTile);
  }
}

// The exits' chains: exit x goes on to the exit of the cell it drains to, with its own step plus
// that cell's partial sum.
__global__ void exitChainKernel(const int32_t* next, const double* step, const double* partial, const int32_t* exitOf,
                                int64_t n, int32_t* jump, int32_t* tail, double* sum)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  tail[c] = int32_t(c);
  if (exitOf[c] != c || next[c] < 0)
  {
    jump[c] = -1;
    sum[c] = exitOf[c] == c ? step[c] : 0.0;
    return;
  }
  jump[c] = exitOf[next[c]];
  sum[c] = step[c] + partial[next[c]];
}

__global__ void exitJumpKernel(int64_t n, const int32_t* exitOf, const int32_t* jumpIn, const int32_t* tailIn,
                               const double* sumIn, int32_t* jumpOut, int32_t* tailOut, double* sumOut, int* going)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n || exitOf[c] != c)
    return;
  const int32_t j = jumpIn[c];
  if (j < 0)
  {
    jumpOut[c] = j;
    tailOut[c] = tailIn[c];
    sumOut[c] = sumIn[c];
    return;
  }
  jumpOut[c] = jumpIn[j];
  tailOut[c] = tailIn[j];
  sumOut[c] = sumIn[c] + sumIn[j];
  if (jumpIn[j] >= 0)
    *going = 1;
}

// With haloEnds, a path may also end at a cell of the grid's border (a tile's halo: its time is that
// cell's, NaN where it never reaches the outlet).
__global__ void travelFinishKernel(int64_t w, int64_t h, const uint8_t* dirs, const int32_t* exitOf, const int32_t* tail,
                                   const double* exitSum, const double* partial, int64_t outlet, bool haloEnds,
                                   double* minutes, double* speed)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const int32_t e = exitOf[c];
  const bool ends = tail[e] == outlet || (haloEnds && onBorder(tail[e], w, h) && exitSum[e] == exitSum[e]);
  if (dirs[c] == kNoData || !ends)
  {
    minutes[c] = NAN;
    speed[c] = NAN;
    return;
  }
  minutes[c] = partial[c] + exitSum[e];
}

}  // namespace

DeviceBuffer<float> fillOnDevice(const DeviceBuffer<float>& z, int64_t w, int64_t h, const RunControl& control)
{
  const int64_t n = w * h;
  DeviceBuffer<float> W(static_cast<std::size_t>(n));
  fillInitKernel<<<blocksFor(n), 256>>>(z.data(), w, h, W.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  untilSettled(w, h, control, [&](dim3 blocks, dim3 threads, TilePass pass) {
    fillTileKernel<<<blocks, threads>>>(z.data(), w, h, W.data(), pass);
  });
  positiveZeroKernel<<<blocksFor(n), 256>>>(W.data(), n);
  GPUGEO_CUDA_CHECK_LAUNCH();
  return W;
}

namespace {

// ---- the chain's own steps ----

// The largest basin's outlet: the cell that drains out of the grid with the most cells upstream,
// ties to the lowest index (as largestBasinOutlet), as the largest key (cells, ~index).
__global__ void largestOutletKernel(const uint8_t* dirs, int64_t w, int64_t h, const long long* cells,
                                    unsigned long long* best)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || dirs[c] == kNoData || receiverOf(dirs, w, h, c) >= 0)
    return;
  atomicMax(best, (static_cast<unsigned long long>(cells[c]) << 32) | (0xffffffffull - static_cast<unsigned long long>(c)));
}

// Reductions over the grid: each block of 256 reduces its values first and makes one atomic, so the
// atomics do not queue on one address cell by cell.
using BlockReduce64 = cub::BlockReduce<unsigned long long, 256>;
struct Max64
{
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a > b ? a : b; }
};
struct Min64
{
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a < b ? a : b; }
};

// The longest travel time (positive doubles order as their bits). Blocks of 256.
__global__ void longestKernel(const double* minutes, int64_t n, unsigned long long* longest)
{
  __shared__ typename BlockReduce64::TempStorage temp;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long bits = c < n && minutes[c] == minutes[c]
                                    ? static_cast<unsigned long long>(__double_as_longlong(minutes[c]))
                                    : 0ull;
  const unsigned long long most = BlockReduce64(temp).Reduce(bits, Max64());
  if (threadIdx.x == 0 && most)
    atomicMax(longest, most);
}

// How many cells the fill raised. Blocks of 256.
__global__ void raisedKernel(const float* z, const float* filled, int64_t n, unsigned long long* raised)
{
  __shared__ typename BlockReduce64::TempStorage temp;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long count = BlockReduce64(temp).Sum(c < n && filled[c] > z[c] ? 1ull : 0ull);
  if (threadIdx.x == 0 && count)
    atomicAdd(raised, count);
}

// The greatest upstream cell count. Blocks of 256.
__global__ void mostCellsKernel(const long long* cells, int64_t n, unsigned long long* most)
{
  __shared__ typename BlockReduce64::TempStorage temp;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long top = BlockReduce64(temp).Reduce(c < n ? static_cast<unsigned long long>(cells[c]) : 0ull, Max64());
  if (threadIdx.x == 0 && top)
    atomicMax(most, top);
}

// The least and greatest speed over the watershed (positive doubles order as their bits). Blocks of 256.
__global__ void speedRangeKernel(const double* speed, int64_t n, unsigned long long* range)
{
  __shared__ typename BlockReduce64::TempStorage low, high;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool inside = c < n && speed[c] == speed[c];
  const unsigned long long bits = inside ? static_cast<unsigned long long>(__double_as_longlong(speed[c])) : 0ull;
  const unsigned long long least = BlockReduce64(low).Reduce(inside ? bits : ~0ull, Min64());
  const unsigned long long most = BlockReduce64(high).Reduce(bits, Max64());
  if (threadIdx.x == 0 && most)
  {
    atomicMin(range, least);
    atomicMax(range + 1, most);
  }
}

// The least and greatest of the speeds that are not NaN into lowest and highest (left as they are
// where all are NaN).
void speedRangeOnDevice(const DeviceBuffer<double>& speed, int64_t n, double& lowest, double& highest)
{
  DeviceBuffer<unsigned long long> range(2);
  const unsigned long long start[2] = {~0ull, 0ull};
  GPUGEO_CUDA_CHECK(cudaMemcpy(range.data(), start, sizeof start, cudaMemcpyHostToDevice));
  speedRangeKernel<<<blocksFor(n), 256>>>(speed.data(), n, range.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  unsigned long long bits[2];
  GPUGEO_CUDA_CHECK(cudaMemcpy(bits, range.data(), sizeof bits, cudaMemcpyDeviceToHost));
  if (bits[1] != 0)
  {
    std::memcpy(&lowest, &bits[0], sizeof(double));
    std::memcpy(&highest, &bits[1], sizeof(double));
  }
}

// Each row's count of cells inside the watershed (a block of 256 per row).
__global__ void rowCountKernel(const double* minutes, int64_t w, unsigned long long* rowCells)
{
  __shared__ typename BlockReduce64::TempStorage temp;
  const int64_t y = blockIdx.x;
  unsigned long long count = 0;
  for (int64_t x = threadIdx.x; x < w; x += blockDim.x)
    count += minutes[y * w + x] == minutes[y * w + x] ? 1ull : 0ull;
  const unsigned long long total = BlockReduce64(temp).Sum(count);
  if (threadIdx.x == 0)
    rowCells[y] = total;
}

// The watershed's cells and area from the minutes on the device (watershedFromRows).
void watershedOnDevice(const Grid& grid, const DeviceBuffer<double>& minutes, TravelTimes& out)
{
  DeviceBuffer<unsigned long long> rows(static_cast<std::size_t>(grid.height));
  rowCountKernel<<<unsigned(grid.height), 256>>>(minutes.data(), grid.width, rows.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  const std::vector<unsigned long long> counts = download(rows, std::size_t(grid.height));
  watershedFromRows(grid, std::vector<int64_t>(counts.begin(), counts.end()), out);
}

// The values of a w x h tile's perimeter cells, per place (tiled/perimeter.h's order): the tile's cell
// (x, y) is cells[offset + y * stride + x].
template <typename T>
__global__ void perimeterGatherKernel(const T* cells, int64_t w, int64_t h, int64_t stride, int64_t offset, T* out)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= tiled::detail::perimeterCount(w, h))
    return;
  int64_t x = 0, y = 0;
  tiled::detail::perimeterCell(w, h, k, x, y);
  out[k] = cells[offset + y * stride + x];
}

// The inner w x h cells of a (w + 2) x (h + 2) device array, side by side into `inner`.
template <typename T>
void dropHalo(const T* padded, int64_t w, int64_t h, T* inner)
{
  GPUGEO_CUDA_CHECK(cudaMemcpy2D(inner, std::size_t(w) * sizeof(T), padded + (w + 2) + 1, std::size_t(w + 2) * sizeof(T),
                                 std::size_t(w) * sizeof(T), std::size_t(h), cudaMemcpyDeviceToDevice));
}

// Each cell's band (-1 outside the watershed), or with interval <= 0 the watershed (0) itself.
__global__ void bandLabelKernel(const double* minutes, int64_t n, double interval, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  const double t = minutes[c];
  label[c] = t != t ? -1 : (interval > 0 ? bandOfTime(t, interval) : 0);
}
}  // namespace

void fillCuda(const Grid& grid, const RunControl& control, std::vector<float>& out)
{
  useGpu();
  const int64_t n = grid.width * grid.height;
  onDevice(sizeWhat("depression filling", grid.width, grid.height), n, kFillBytes, [&] {
    DeviceBuffer<float> z;
    upload(z, grid.z, std::size_t(n));
    cuda::downloadInto(fillOnDevice(z, grid.width, grid.height, control), std::size_t(n), out);
  });
}

std::vector<float> fillCuda(const Grid& grid, const RunControl& control)
{
  std::vector<float> out;
  fillCuda(grid, control, out);
  return out;
}


std::vector<uint8_t> directionsCuda(const Grid& grid, bool resolveFlats, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  return onDevice(sizeWhat("flow directions", w, h), n, kDirectionBytes, [&] {
    DeviceBuffer<float> z;
    DeviceBuffer<double> cw, ch;
    upload(z, grid.z, std::size_t(n));
    upload(cw, grid.cellWidth, std::size_t(h));
    upload(ch, grid.cellHeight, std::size_t(h));
    DeviceBuffer<int32_t> mask;
    if (resolveFlats)
      mask = flatMaskOnDevice(z, w, h, false, control);
    DeviceBuffer<uint8_t> out(static_cast<std::size_t>(n));
    directionKernel<<<tilesOf(w, h), dim3(kTile, kTile)>>>(z.data(), resolveFlats ? mask.data() : nullptr, w, h, cw.data(),
                                           ch.data(), out.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    return download(out, std::size_t(n));
  });
}

void directionsWithMaskCuda(const Grid& grid, const int32_t* mask, const RunControl&, std::vector<uint8_t>& tile)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  onDevice(sizeWhat("flow directions", w, h), n, kDirectionBytes + 1, [&] {
    DeviceBuffer<float> z;
    DeviceBuffer<double> cw, ch;
    DeviceBuffer<int32_t> flats;
    upload(z, grid.z, std::size_t(n));
    upload(cw, grid.cellWidth, std::size_t(h));
    upload(ch, grid.cellHeight, std::size_t(h));
    if (mask)
      upload(flats, mask, std::size_t(n));
    DeviceBuffer<uint8_t> out(static_cast<std::size_t>(n));
    directionKernel<<<tilesOf(w, h), dim3(kTile, kTile)>>>(z.data(), mask ? flats.data() : nullptr, w, h, cw.data(),
                                                           ch.data(), out.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    const int64_t tw = w - 2, th = h - 2;
    DeviceBuffer<uint8_t> inner(static_cast<std::size_t>(tw * th));
    dropHalo(out.data(), tw, th, inner.data());
    cuda::downloadInto(inner, std::size_t(tw * th), tile);
  });
}

namespace {

// Upstream counts and areas of the directions on the device (the file's header).
void accumulateOnDevice(const DeviceBuffer<uint8_t>& dirs, int64_t w, int64_t h, const DeviceBuffer<long long>& rowArea,
                        DeviceBuffer<long long>& cells, DeviceBuffer<long long>& area, const RunControl& control,
                        BorderInflow border = {})
{
  const int64_t n = w * h;
  const dim3 tiles = tilesOf(w, h), threads(kTile, kTile);
  DeviceBuffer<long long> localCells(static_cast<std::size_t>(n)), localArea(static_cast<std::size_t>(n));
  DeviceBuffer<int32_t> exitOf(static_cast<std::size_t>(n));
  DeviceBuffer<int> pending(static_cast<std::size_t>(n)), pendingAtStart(static_cast<std::size_t>(n)), looped(1);
  DeviceBuffer<unsigned long long> counts(2);  // exits, exits finished
  GPUGEO_CUDA_CHECK(cudaMemset(looped.data(), 0, sizeof(int)));
  GPUGEO_CUDA_CHECK(cudaMemset(counts.data(), 0, counts.bytes()));
  GPUGEO_CUDA_CHECK(cudaMemset(pending.data(), 0, pending.bytes()));
  tileAccumulateKernel<<<tiles, threads>>>(dirs.data(), w, h, rowArea.data(), border, nullptr, nullptr, localCells.data(),
                                           localArea.data(), exitOf.data(), looped.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  exitPendingKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, exitOf.data(), pending.data(), counts.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  GPUGEO_CUDA_CHECK(cudaMemcpy(pendingAtStart.data(), pending.data(), pending.bytes(), cudaMemcpyDeviceToDevice));
  exitClimbKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, exitOf.data(), pendingAtStart.data(), pending.data(),
                                         localCells.data(), localArea.data(), counts.data() + 1);
  GPUGEO_CUDA_CHECK_LAUNCH();
  if (control.isCanceled())
    throw Canceled();
  cells.resize(std::size_t(n));
  area.resize(std::size_t(n));
  GPUGEO_CUDA_CHECK(cudaMemset(cells.data(), 0, cells.bytes()));
  GPUGEO_CUDA_CHECK(cudaMemset(area.data(), 0, area.bytes()));
  tileAccumulateKernel<<<tiles, threads>>>(dirs.data(), w, h, rowArea.data(), border, localCells.data(), localArea.data(),
                                           cells.data(), area.data(), nullptr, looped.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  unsigned long long counted[2];
  GPUGEO_CUDA_CHECK(cudaMemcpy(counted, counts.data(), sizeof counted, cudaMemcpyDeviceToHost));
  // A path that never ends: the directions go round in a loop, inside a tile or across tiles.
  if (readOne(looped.data()) || counted[0] != counted[1])
    throw LoopedDirections("the flow directions go round in a loop; they cannot be accumulated");
}

std::vector<long long> rowAreas(const Grid& grid)
{
  std::vector<long long> rows(static_cast<std::size_t>(grid.height));
  for (int64_t y = 0; y < grid.height; ++y)
    rows[std::size_t(y)] = cellArea(grid, y);
  return rows;
}

// The first n counts and areas into out.cells and out.area (their room reused).
void downloadSums(const DeviceBuffer<long long>& cells, const DeviceBuffer<long long>& area, std::size_t n,
                  Accumulation& out)
{
  static_assert(sizeof(long long) == sizeof(int64_t), "accumulated sums are 64-bit");
  resizeHuge(out.cells, n);
  resizeHuge(out.area, n);
  cuda::copyToHost(out.cells.data(), cells.data(), n * sizeof(long long));
  cuda::copyToHost(out.area.data(), area.data(), n * sizeof(long long));
}

}  // namespace

Accumulation accumulationCuda(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  return onDevice(sizeWhat("flow accumulation", w, h), n, kAccumulationBytes, [&] {
    DeviceBuffer<uint8_t> dirs;
    DeviceBuffer<long long> rows, cells, area;
    upload(dirs, directions.data(), std::size_t(n));
    const std::vector<long long> rowArea = rowAreas(grid);
    upload(rows, rowArea.data(), std::size_t(h));
    accumulateOnDevice(dirs, w, h, rows, cells, area, control);
    Accumulation out;
    downloadSums(cells, area, std::size_t(n), out);
    return out;
  });
}

void accumulationTileCuda(const Grid& grid, const uint8_t* paddedDirections, const int64_t* borderCells,
                          const int64_t* borderArea, bool perimeterOnly, const RunControl& control, Accumulation& out)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  onDevice(sizeWhat("flow accumulation", w, h), (w + 2) * (h + 2), kAccumulationBytes + 1, [&] {
    DeviceBuffer<uint8_t> padded, dirs(static_cast<std::size_t>(n));
    DeviceBuffer<long long> rows, cells, area, inCells, inArea;
    upload(padded, paddedDirections, std::size_t((w + 2) * (h + 2)));
    dropHalo(padded.data(), w, h, dirs.data());
    const std::vector<long long> rowArea = rowAreas(grid);
    upload(rows, rowArea.data(), std::size_t(h));
    const std::size_t places = std::size_t(tiled::detail::perimeterCount(w, h));
    BorderInflow border;
    if (borderCells)
    {
      upload(inCells, reinterpret_cast<const long long*>(borderCells), places);
      upload(inArea, reinterpret_cast<const long long*>(borderArea), places);
      border = BorderInflow{inCells.data(), inArea.data()};
    }
    accumulateOnDevice(dirs, w, h, rows, cells, area, control, border);
    if (!perimeterOnly)
    {
      downloadSums(cells, area, std::size_t(n), out);
      return;
    }
    DeviceBuffer<long long> perimeterCells(places), perimeterArea(places);
    perimeterGatherKernel<<<blocksFor(int64_t(places)), 256>>>(cells.data(), w, h, w, 0, perimeterCells.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    perimeterGatherKernel<<<blocksFor(int64_t(places)), 256>>>(area.data(), w, h, w, 0, perimeterArea.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    downloadSums(perimeterCells, perimeterArea, places, out);
  });
}

DeviceBuffer<int32_t> flatMaskOnDevice(const DeviceBuffer<float>& z, int64_t w, int64_t h, bool towardsOnly,
                                       const RunControl& control)
{
  const int64_t n = w * h;
  DeviceBuffer<uint8_t> cls(static_cast<std::size_t>(n)), rootDrained(static_cast<std::size_t>(n));
  DeviceBuffer<int32_t> label(static_cast<std::size_t>(n)), towards(static_cast<std::size_t>(n)),
      away(static_cast<std::size_t>(n)), height(static_cast<std::size_t>(n)), mask(static_cast<std::size_t>(n));
  flatClassKernel<<<blocksFor(n), 256>>>(z.data(), w, h, cls.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  flatEdgeKernel<<<blocksFor(n), 256>>>(z.data(), w, h, cls.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  labelComponents(z.data(), cls.data(), w, h, label.data());
  GPUGEO_CUDA_CHECK(cudaMemset(rootDrained.data(), 0, rootDrained.bytes()));
  drainedRootKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), n, rootDrained.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  drainedKernel<<<blocksFor(n), 256>>>(label.data(), rootDrained.data(), n, cls.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  distanceInitKernel<<<blocksFor(n), 256>>>(cls.data(), n, Relax::Towards, towards.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  relax<Relax::Towards>(z, cls, w, h, towards, control);
  distanceInitKernel<<<blocksFor(n), 256>>>(cls.data(), n, Relax::Away, away.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  relax<Relax::Away>(z, cls, w, h, away, control);
  GPUGEO_CUDA_CHECK(cudaMemset(height.data(), 0, height.bytes()));
  flatHeightKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), away.data(), n, height.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  maskKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), towards.data(), away.data(), height.data(), n,
                                    towardsOnly, mask.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  return mask;
}

std::vector<int32_t> flatMaskCuda(const Grid& grid, bool towardsOnly, const RunControl& control)
{
  useGpu();
  const int64_t n = grid.width * grid.height;
  return onDevice(sizeWhat("the flat mask", grid.width, grid.height), n, kDirectionBytes, [&] {
    DeviceBuffer<float> z;
    upload(z, grid.z, std::size_t(n));
    return download(flatMaskOnDevice(z, grid.width, grid.height, towardsOnly, control), std::size_t(n));
  });
}

namespace {

// How travelOnDevice treats a tile given with its halo (travelTileCuda): the paths end at the halo.
struct HaloEnds
{
  const double* times = nullptr;  // device, per halo place (tiled/perimeter.h's order); null: 0 each
  DeviceBuffer<int32_t>* ends = nullptr;  // if set: each cell's path's last cell
};

// Travel times (minutes, into `step`) and speeds of the chain's arrays on the device (the file's
// header); model.manning, if set, is a device array. With `halo`, the grid's border cells end the
// paths that enter them, each with its time (HaloEnds).
void travelOnDevice(const DeviceBuffer<float>& z, const DeviceBuffer<uint8_t>& dirs, const DeviceBuffer<long long>& area,
                    const DeviceBuffer<double>& cw, const DeviceBuffer<double>& ch, const VelocityModel& model,
                    int64_t w, int64_t h, int64_t outlet, const RunControl& control, DeviceBuffer<double>& step,
                    DeviceBuffer<double>& speed, const HaloEnds* halo = nullptr)
{
  const int64_t n = w * h;
  DeviceBuffer<int32_t> next(static_cast<std::size_t>(n)), tail(static_cast<std::size_t>(n)),
      exitOf(static_cast<std::size_t>(n));
  step.resize(std::size_t(n));
  speed.resize(std::size_t(n));
  DeviceBuffer<double> partial(static_cast<std::size_t>(n));
  travelInitKernel<<<blocksFor(n), 256>>>(z.data(), dirs.data(), area.data(), cw.data(), ch.data(), model.manning,
                                          model, manningNPower(model.overlandN), w, h, outlet, next.data(), tail.data(),
                                          step.data(), speed.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  if (halo)
  {
    haloEndKernel<<<blocksFor(n), 256>>>(w, h, halo->times, next.data(), step.data(), speed.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
  }
  const dim3 tiles = tilesOf(w, h), threads(kTile, kTile);
  travelTileKernel<<<tiles, threads>>>(next.data(), step.data(), w, h, partial.data(), exitOf.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  DeviceBuffer<int32_t> jump(static_cast<std::size_t>(n)), jump2(static_cast<std::size_t>(n)),
      tail2(static_cast<std::size_t>(n));
  DeviceBuffer<double> sum(static_cast<std::size_t>(n)), sum2(static_cast<std::size_t>(n));
  exitChainKernel<<<blocksFor(n), 256>>>(next.data(), step.data(), partial.data(), exitOf.data(), n, jump.data(),
                                         tail.data(), sum.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  DeviceBuffer<int> going(1);
  for (int64_t round = 0;; ++round)
  {
    GPUGEO_CUDA_CHECK(cudaMemset(going.data(), 0, sizeof(int)));
    exitJumpKernel<<<blocksFor(n), 256>>>(n, exitOf.data(), jump.data(), tail.data(), sum.data(), jump2.data(),
                                          tail2.data(), sum2.data(), going.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::swap(jump, jump2);
    std::swap(tail, tail2);
    std::swap(sum, sum2);
    if (!readOne(going.data()))
      break;
    if (round > 64)  // a chain of 2^64 exits: the directions go round in a loop
      throw LoopedDirections("the flow directions go round in a loop; no travel time can be summed");
    if ((round & 7) == 7 && control.isCanceled())
      throw Canceled();
  }
  if (control.isCanceled())
    throw Canceled();
  travelFinishKernel<<<blocksFor(n), 256>>>(w, h, dirs.data(), exitOf.data(), tail.data(), sum.data(), partial.data(),
                                            outlet, halo != nullptr, step.data(), speed.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  if (halo && halo->ends)
  {
    halo->ends->resize(std::size_t(n));
    pathEndKernel<<<blocksFor(n), 256>>>(n, exitOf.data(), tail.data(), halo->ends->data());
    GPUGEO_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

TravelTimes travelTimeCuda(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation,
                           int64_t outlet, const VelocityModel& model, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  return onDevice(sizeWhat("travel times", w, h), n, kTravelBytes + (model.manning ? 4 : 0), [&] {
    DeviceBuffer<float> z, manning;
    DeviceBuffer<uint8_t> dirs;
    DeviceBuffer<long long> area;
    DeviceBuffer<double> cw, ch, minutes, speed;
    upload(z, grid.z, std::size_t(n));
    upload(dirs, directions.data(), std::size_t(n));
    static_assert(sizeof(long long) == sizeof(int64_t), "accumulated areas are 64-bit");
    upload(area, reinterpret_cast<const long long*>(accumulation.area.data()), std::size_t(n));
    upload(cw, grid.cellWidth, std::size_t(h));
    upload(ch, grid.cellHeight, std::size_t(h));
    VelocityModel deviceModel = model;
    if (model.manning)
    {
      upload(manning, model.manning, std::size_t(n));
      deviceModel.manning = manning.data();
    }
    travelOnDevice(z, dirs, area, cw, ch, deviceModel, w, h, outlet, control, minutes, speed);
    TravelTimes out;
    watershedOnDevice(grid, minutes, out);
    out.minutes = download(minutes, std::size_t(n));
    out.speed = download(speed, std::size_t(n));
    return out;
  });
}

void travelTileCuda(const Grid& padded, const uint8_t* directions, const int64_t* area, const VelocityModel& model,
                    int64_t outlet, const double* haloTimes, bool perimeterOnly, const RunControl& control,
                    TileTravel& out)
{
  useGpu();
  const int64_t pw = padded.width, ph = padded.height, n = pw * ph, w = pw - 2, h = ph - 2;
  onDevice(sizeWhat("the tiled travel times", w, h), n, kTravelBytes + 4 + (model.manning ? 4 : 0), [&] {
    DeviceBuffer<float> z, manning;
    DeviceBuffer<uint8_t> dirs;
    DeviceBuffer<long long> areas;
    DeviceBuffer<double> cw, ch, minutes, speed, times;
    upload(z, padded.z, std::size_t(n));
    upload(dirs, directions, std::size_t(n));
    static_assert(sizeof(long long) == sizeof(int64_t), "accumulated areas are 64-bit");
    upload(areas, reinterpret_cast<const long long*>(area), std::size_t(n));
    upload(cw, padded.cellWidth, std::size_t(ph));
    upload(ch, padded.cellHeight, std::size_t(ph));
    VelocityModel deviceModel = model;
    if (model.manning)
    {
      upload(manning, model.manning, std::size_t(n));
      deviceModel.manning = manning.data();
    }
    if (haloTimes)
      upload(times, haloTimes, std::size_t(tiled::detail::perimeterCount(pw, ph)));
    DeviceBuffer<int32_t> ends;
    HaloEnds halo{haloTimes ? times.data() : nullptr, perimeterOnly ? &ends : nullptr};
    travelOnDevice(z, dirs, areas, cw, ch, deviceModel, pw, ph, outlet, control, minutes, speed, &halo);
    if (perimeterOnly)
    {
      // The tile's perimeter cells (inside the halo): their minutes and ends, per place.
      const std::size_t places = std::size_t(tiled::detail::perimeterCount(w, h));
      DeviceBuffer<double> perimeterMinutes(places);
      DeviceBuffer<int32_t> perimeterEnds(places);
      perimeterGatherKernel<<<blocksFor(int64_t(places)), 256>>>(minutes.data(), w, h, pw, pw + 1,
                                                                 perimeterMinutes.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      perimeterGatherKernel<<<blocksFor(int64_t(places)), 256>>>(ends.data(), w, h, pw, pw + 1, perimeterEnds.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      cuda::downloadInto(perimeterMinutes, places, out.minutes);
      cuda::downloadInto(perimeterEnds, places, out.end);
      return;
    }
    DeviceBuffer<double> inner(static_cast<std::size_t>(w * h));
    dropHalo(minutes.data(), w, h, inner.data());
    cuda::downloadInto(inner, std::size_t(w * h), out.minutes);
    out.end.clear();
    out.minSpeed = out.maxSpeed = std::numeric_limits<double>::quiet_NaN();
    speedRangeOnDevice(speed, n, out.minSpeed, out.maxSpeed);
  });
}

ChainResult isochroneChainCuda(const Grid& grid, const ChainOptions& o, const RunControl& control, StageTimes& times)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  return onDevice(sizeWhat("the isochrone chain", w, h), n, kTravelBytes + (o.model.manning ? 4 : 0), [&] {
    const auto starting = [&](ChainStage s) {
      if (o.onStage)
        o.onStage(s);
    };
    ChainResult out;
    // The DEM goes up first, alone: the host arrays made below page-fault on other threads, whose
    // memory traffic would share the host's bandwidth with the upload's.
    DeviceBuffer<float> z;
    {
      ScopedStage stage(times, "allocate");
      z.resize(std::size_t(n));
    }
    {
      ScopedStage stage(times, "upload");
      cuda::copyToDevice(z.data(), grid.z, std::size_t(n) * sizeof(float));
    }
    ScopedStage setup(times, "setup");
    // The host arrays that will come back, made while the device works.
    const std::size_t cells0 = o.keepAccumulation ? std::size_t(n) : 0, none = 0;
    auto minutesAhead = cuda::hostVectorAhead<double>(std::size_t(n));
    auto speedAhead = cuda::hostVectorAhead<double>(o.keepSpeed ? std::size_t(n) : none);
    auto filledAhead = cuda::hostVectorAhead<float>(o.keepFilled ? std::size_t(n) : none);
    auto dirsAhead = cuda::hostVectorAhead<uint8_t>(o.keepDirections ? std::size_t(n) : none);
    auto cellsAhead = cuda::hostVectorAhead<int64_t>(cells0), areaAhead = cuda::hostVectorAhead<int64_t>(cells0);
    DeviceBuffer<double> cw, ch;
    upload(cw, grid.cellWidth, std::size_t(h));
    upload(ch, grid.cellHeight, std::size_t(h));
    setup.stop();
    DeviceBuffer<float> filled;
    {
      starting(ChainStage::Fill);
      ScopedStage stage(times, "fill");
      filled = fillOnDevice(z, w, h, control);
      DeviceBuffer<unsigned long long> raised(1);
      GPUGEO_CUDA_CHECK(cudaMemset(raised.data(), 0, sizeof(unsigned long long)));
      raisedKernel<<<blocksFor(n), 256>>>(z.data(), filled.data(), n, raised.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      out.raisedCells = int64_t(readOne(raised.data()));
      z.release();
    }
    DeviceBuffer<uint8_t> dirs(static_cast<std::size_t>(n));
    {
      starting(ChainStage::Directions);
      ScopedStage stage(times, "flats and directions");
      DeviceBuffer<int32_t> mask = flatMaskOnDevice(filled, w, h, false, control);
      directionKernel<<<tilesOf(w, h), dim3(kTile, kTile)>>>(filled.data(), mask.data(), w, h, cw.data(), ch.data(), dirs.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    }
    DeviceBuffer<long long> cells, area;
    {
      starting(ChainStage::Accumulation);
      ScopedStage stage(times, "accumulation");
      DeviceBuffer<long long> rows;
      const std::vector<long long> rowArea = rowAreas(grid);
      upload(rows, rowArea.data(), std::size_t(h));
      accumulateOnDevice(dirs, w, h, rows, cells, area, control);
      if (upstreamAreaCanOverflow(grid))  // a DEM of more than 9.2 million km²: is any catchment that large?
      {
        DeviceBuffer<unsigned long long> most(1);
        GPUGEO_CUDA_CHECK(cudaMemset(most.data(), 0, sizeof(unsigned long long)));
        mostCellsKernel<<<blocksFor(n), 256>>>(cells.data(), n, most.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        checkUpstreamArea(grid, int64_t(readOne(most.data())));
      }
      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    }
    DeviceBuffer<double> minutes;
    {
      starting(ChainStage::TravelTime);
      ScopedStage stage(times, "travel time");
      if (o.automaticOutlet)
      {
        DeviceBuffer<unsigned long long> best(1);
        GPUGEO_CUDA_CHECK(cudaMemset(best.data(), 0, sizeof(unsigned long long)));
        largestOutletKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, cells.data(), best.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        const unsigned long long key = readOne(best.data());
        if (key == 0)
          throw InvalidInput("the DEM has no valid cell");
        out.outlet = int64_t(0xffffffffull - (key & 0xffffffffull));
      }
      else
      {
        // The snap window's accumulation only: its rows come back.
        const double minSize = std::min(grid.cellWidth[o.outletRow], grid.cellHeight[o.outletRow]);
        const int64_t reach = std::isfinite(o.snapDistance) && o.snapDistance >= 0
                                ? std::min<int64_t>(h, int64_t(std::floor(o.snapDistance / minSize)))
                                : 0;
        const int64_t y0 = std::max<int64_t>(0, o.outletRow - reach), y1 = std::min(h - 1, o.outletRow + reach);
        // snapOutlet on the band of rows y0..y1 as a grid of its own (the same window, the same sizes).
        Accumulation window;
        window.cells.resize(std::size_t((y1 - y0 + 1) * w));
        cuda::copyToHost(window.cells.data(), cells.data() + y0 * w, window.cells.size() * sizeof(long long));
        const Grid rows{grid.z + y0 * w, w, y1 - y0 + 1, grid.cellWidth + y0, grid.cellHeight + y0};
        out.outlet = y0 * w + snapOutlet(rows, window, o.outletColumn, o.outletRow - y0, o.snapDistance);
      }
      out.outletCells = readOne(cells.data() + out.outlet);
      // The counts are done with: to the host if kept, and their memory to the travel times.
      if (o.keepAccumulation)
      {
        out.accumulation.cells = cellsAhead.get();
        cuda::copyToHost(out.accumulation.cells.data(), cells.data(), cells.bytes());
      }
      cells.release();
      VelocityModel model = o.model;
      DeviceBuffer<float> manning;
      if (o.model.manning)
      {
        upload(manning, o.model.manning, std::size_t(n));
        model.manning = manning.data();
      }
      DeviceBuffer<double> speed;
      travelOnDevice(filled, dirs, area, cw, ch, model, w, h, out.outlet, control, minutes, speed);
      watershedOnDevice(grid, minutes, out.travel);
      speedRangeOnDevice(speed, n, out.minSpeed, out.maxSpeed);
      if (o.keepSpeed)
      {
        ScopedStage copy(times, "download");
        out.travel.speed = download(speed, std::size_t(n), speedAhead);
      }
    }
    // The surfaces not kept are done with: their memory to the bands. The kept ones and the travel
    // times come back while the host turns the bands' rings into polygons.
    if (!o.keepFilled)
      filled.release();
    if (!o.keepDirections)
      dirs.release();
    if (!o.keepAccumulation)
      area.release();
    RawRings bandRings, watershedRings;
    {
      starting(ChainStage::Bands);
      ScopedStage stage(times, "bands");
      DeviceBuffer<unsigned long long> longest(1);
      GPUGEO_CUDA_CHECK(cudaMemset(longest.data(), 0, sizeof(unsigned long long)));
      longestKernel<<<blocksFor(n), 256>>>(minutes.data(), n, longest.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      const unsigned long long bits = readOne(longest.data());
      double longestMinutes;
      std::memcpy(&longestMinutes, &bits, sizeof longestMinutes);
      out.bands = chainBandCount(longestMinutes, o, out.interval);
      DeviceBuffer<int32_t> labels(static_cast<std::size_t>(n));
      bandLabelKernel<<<blocksFor(n), 256>>>(minutes.data(), n, out.interval, labels.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      bandRings = regionRingsOnDevice(labels.data(), w, h, out.bands, control);
      bandLabelKernel<<<blocksFor(n), 256>>>(minutes.data(), n, 0.0, labels.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      watershedRings = regionRingsOnDevice(labels.data(), w, h, 1, control);
    }
    // The downloads on a thread of their own (the device is otherwise idle now); declared after the
    // buffers it reads, so that it is waited for before they go, whatever happens here.
    const int device = probeGpu().device;
    std::future<double> downloads = startAsync([&] {
      const auto begin = std::chrono::steady_clock::now();
      GPUGEO_CUDA_CHECK(cudaSetDevice(device));
      out.travel.minutes = download(minutes, std::size_t(n), minutesAhead);
      if (o.keepFilled)
        out.filled = download(filled, std::size_t(n), filledAhead);
      if (o.keepDirections)
        out.directions = download(dirs, std::size_t(n), dirsAhead);
      if (o.keepAccumulation)
      {
        out.accumulation.area = areaAhead.get();
        cuda::copyToHost(out.accumulation.area.data(), area.data(), area.bytes());
      }
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    });
    {
      ScopedStage host(times, "rings to polygons");  // on the host, alongside the downloads
      out.bandPolygons = polygonsFromRings(std::move(bandRings), w, control, 0);  // the host's threads
      out.watershed = polygonsFromRings(std::move(watershedRings), w, control, 0);
    }
    {
      ScopedStage wait(times, "download (left after the rings)");
      times.add("download (alongside the rings)", downloads.get());
    }
    return out;
  });
}

}  // namespace gpugeo::dem::detail
