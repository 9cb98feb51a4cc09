// The CUDA backend of the DEM tools.
//
// Filling: the filled surface is the greatest solution of W(c) = max(z(c), min over the neighbours
// of W(n)) with W = z on the edge cells (dem.h). Starting from +inf inside, each 32 x 32 tile loads
// its cells and a one-cell halo into shared memory and lowers them until nothing changes in the
// tile (Gauss-Seidel within the tile, in the manner of the source paper's 16 x 16 tiles with a
// halo); passes over all tiles repeat until no tile changes. Values only go down and every update
// keeps W >= the answer, so the order in which threads and blocks see each other's values does not
// matter: the result is the CPU's, bit for bit.
// Directions: one thread a cell, the same rule as the CPU (detail/dem_math.h).
// Accumulation: the flow directions make a forest (each cell's parent is the cell it drains to). Its
// Euler tour (enter a cell, its upstream cells' tours, leave it) is linked from the children lists
// (a CUB radix sort of the cells by parent) and ranked by pointer jumping; a cell's upstream cells
// are the cells entered between its enter and its leave, so the counts come from the two positions
// and the areas from a CUB prefix sum over the tour. Integer sums: the CPU's numbers exactly.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/travel_math.h"

namespace gpugeo::dem::detail {

namespace {

// Buffers from the device's stream-ordered pool (all of this backend's work runs on the legacy
// default stream; a call takes and frees up to a dozen grid-sized buffers), which keeps up to
// kPoolKeep bytes between calls.
template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;
constexpr uint64_t kPoolKeep = uint64_t(1) << 30;

constexpr int kTile = 32;

using cuda::download;
using cuda::readOne;
using cuda::upload;

unsigned blocksFor(int64_t n, int threads = 256)
{
  return unsigned((n + threads - 1) / threads);
}

void useGpu()
{
  const GpuInfo& gpu = probeGpu();
  if (!gpu.usable)
    throw DeviceUnavailable(gpu.reason);
  GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
  cuda::keepPooledMemory(gpu.device, kPoolKeep);
}

// Runs launch(blocks, threads, changed) over the grid's tiles until a pass changes nothing.
template <typename Launch>
void untilSettled(int64_t w, int64_t h, const RunControl& control, Launch launch)
{
  const dim3 blocks(unsigned((w + kTile - 1) / kTile), unsigned((h + kTile - 1) / kTile)), threads(kTile, kTile);
  DeviceBuffer<int> changed(1);
  for (int64_t pass = 0;; ++pass)
  {
    GPUGEO_CUDA_CHECK(cudaMemset(changed.data(), 0, sizeof(int)));
    launch(blocks, threads, changed.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    if (!readOne(changed.data()))
      break;
    if ((pass & 63) == 63 && control.isCanceled())
      throw Canceled();
  }
}

__global__ void fillInitKernel(const float* z, int64_t w, int64_t h, float* W)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const float v = z[c];
  W[c] = isNoData(v) ? v : (isEdgeCell(z, w, h, c % w, c / w) ? v : INFINITY);
}

__global__ void fillTileKernel(const float* z, int64_t w, int64_t h, float* W, int* changed)
{
  __shared__ float s[kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  for (int i = tid; i < (kTile + 2) * (kTile + 2); i += kTile * kTile)
  {
    const int64_t hx = x0 + i % (kTile + 2) - 1, hy = y0 + i / (kTile + 2) - 1;
    s[i / (kTile + 2)][i % (kTile + 2)] = (hx >= 0 && hy >= 0 && hx < w && hy < h) ? W[hy * w + hx] : NAN;
  }
  __syncthreads();
  const int64_t x = x0 + tx, y = y0 + ty;
  const bool inside = x < w && y < h;
  const bool active = inside && !isNoData(z[y * w + x]) && !isEdgeCell(z, w, h, x, y);
  const float zc = active ? z[y * w + x] : 0.f;
  float mine = s[ty + 1][tx + 1];
  bool lowered = false;
  for (;;)
  {
    bool step = false;
    if (active)
    {
      float m = INFINITY;
      for (int d = 0; d < 8; ++d)
      {
        const float v = s[ty + 1 + stepY(d)][tx + 1 + stepX(d)];
        if (!isNoData(v))
          m = fminf(m, v);
      }
      const float next = fmaxf(zc, m);
      if (next < mine)
      {
        mine = next;
        s[ty + 1][tx + 1] = next;
        step = true;
      }
    }
    lowered = lowered || step;
    if (!__syncthreads_or(step))
      break;
  }
  if (lowered)
    W[y * w + x] = mine;
  if (__syncthreads_or(lowered) && tid == 0)
    *changed = 1;
}

__global__ void positiveZeroKernel(float* W, int64_t n)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && !isNoData(W[c]))
    W[c] = __fadd_rn(W[c], 0.0f);  // -0 as +0, as on the CPU (nodata keeps its NaN's bits)
}

__global__ void directionKernel(const float* z, const int32_t* mask, int64_t w, int64_t h, const double* cellWidth,
                                const double* cellHeight, uint8_t* out)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const int64_t y = c / w;
  out[c] = d8Direction(z, mask, w, h, c % w, y, cellWidth[y], cellHeight[y]);
}


__global__ void parentKernel(const uint8_t* dirs, int64_t w, int64_t h, uint32_t* key, int32_t* cell)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  // Key 0: roots (cells that drain out); p + 1: cells that drain to p; invalid cells last.
  key[c] = dirs[c] == kNoData ? uint32_t(w * h + 1) : uint32_t(receiverOf(dirs, w, h, c) + 1);
  cell[c] = int32_t(c);
}

// From the cells sorted by parent: each cell's first child and next sibling (roots are siblings).
__global__ void childrenKernel(const uint32_t* key, const int32_t* cell, int64_t n, int32_t* firstChild,
                               int32_t* nextSibling)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || key[i] > uint32_t(n))
    return;
  const int32_t c = cell[i];
  nextSibling[c] = (i + 1 < n && key[i + 1] == key[i]) ? cell[i + 1] : -1;
  if ((i == 0 || key[i - 1] != key[i]) && key[i] > 0)
    firstChild[key[i] - 1] = c;
}

// Tour states: 2c enters cell c, 2c + 1 leaves it.
__global__ void tourKernel(const uint8_t* dirs, int64_t w, int64_t h, const int32_t* firstChild,
                           const int32_t* nextSibling, int32_t* next, int32_t* dist)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  if (dirs[c] == kNoData)
  {
    next[2 * c] = next[2 * c + 1] = -1;
    dist[2 * c] = dist[2 * c + 1] = 0;
    return;
  }
  const int32_t child = firstChild[c];
  next[2 * c] = child >= 0 ? 2 * child : int32_t(2 * c + 1);
  const int32_t sibling = nextSibling[c];
  const int64_t parent = receiverOf(dirs, w, h, c);
  next[2 * c + 1] = sibling >= 0 ? 2 * sibling : (parent >= 0 ? int32_t(2 * parent + 1) : -1);
  dist[2 * c] = 1;
  dist[2 * c + 1] = next[2 * c + 1] >= 0 ? 1 : 0;
}

__global__ void jumpKernel(int64_t n, const int32_t* nextIn, const int32_t* distIn, int32_t* nextOut, int32_t* distOut)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int32_t j = nextIn[i];
  nextOut[i] = j < 0 ? j : nextIn[j];
  distOut[i] = j < 0 ? distIn[i] : distIn[i] + distIn[j];
}

// Each cell's enter weight at its tour position (positions counted from the tour's end).
__global__ void weightKernel(const uint8_t* dirs, int64_t w, int64_t h, const long long* rowArea, const int32_t* dist,
                             int64_t length, long long* weight)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || dirs[c] == kNoData)
    return;
  weight[length - 1 - dist[2 * c]] = rowArea[c / w];
}

__global__ void accumulationKernel(const uint8_t* dirs, int64_t w, int64_t h, const int32_t* dist, int64_t length,
                                   const long long* prefix, long long* cells, long long* area)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  if (dirs[c] == kNoData)
  {
    cells[c] = area[c] = 0;
    return;
  }
  const int64_t enter = length - 1 - dist[2 * c], leave = length - 1 - dist[2 * c + 1];
  cells[c] = (leave - enter + 1) / 2;
  area[c] = prefix[leave] - (enter > 0 ? prefix[enter - 1] : 0);
}

// ---- flats (Barnes et al. 2014, as flatMaskCpu computes them) ----

// Cell classes, one byte a cell.
constexpr uint8_t kValid = 1, kFlat = 2, kLowEdge = 4, kHighEdge = 8, kDrained = 16;
constexpr int32_t kFar = 0x3fffffff;

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

// What a relaxation pass computes: value(c) = min over linked neighbours of value(n) + step, for
// the cells it moves (sources keep their values).
enum class Relax
{
  Component,  // equal-elevation valid cells: the lowest cell index (step 0)
  Towards,    // flat cells from the low edges through flat or low-edge cells of their elevation
  Away,       // drained flat cells from the drained high edges through flat cells of their elevation
};

template <Relax R>
__device__ bool moves(uint8_t k)
{
  if (R == Relax::Component)
    return k & kValid;
  if (R == Relax::Towards)
    return k & kFlat;
  return (k & kFlat) && (k & kDrained) && !(k & kHighEdge);
}

template <Relax R>
__device__ bool links(uint8_t k)
{
  if (R == Relax::Component)
    return k & kValid;
  if (R == Relax::Towards)
    return k & (kFlat | kLowEdge);
  return k & kFlat;
}

template <Relax R>
__global__ void relaxTileKernel(const float* z, const uint8_t* cls, int64_t w, int64_t h, int32_t* value,
                                int* changed)
{
  constexpr int32_t step = R == Relax::Component ? 0 : 1;
  __shared__ int32_t s[kTile + 2][kTile + 2];
  __shared__ float sz[kTile + 2][kTile + 2];
  __shared__ uint8_t sk[kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  for (int i = tid; i < (kTile + 2) * (kTile + 2); i += kTile * kTile)
  {
    const int64_t hx = x0 + i % (kTile + 2) - 1, hy = y0 + i / (kTile + 2) - 1;
    const bool in = hx >= 0 && hy >= 0 && hx < w && hy < h;
    s[i / (kTile + 2)][i % (kTile + 2)] = in ? value[hy * w + hx] : kFar;
    sz[i / (kTile + 2)][i % (kTile + 2)] = in ? z[hy * w + hx] : NAN;
    sk[i / (kTile + 2)][i % (kTile + 2)] = in ? cls[hy * w + hx] : 0;
  }
  __syncthreads();
  const int64_t x = x0 + tx, y = y0 + ty;
  const bool active = x < w && y < h && moves<R>(sk[ty + 1][tx + 1]);
  const float zc = sz[ty + 1][tx + 1];
  int32_t mine = s[ty + 1][tx + 1];
  bool lowered = false;
  for (;;)
  {
    bool stepped = false;
    if (active)
    {
      int32_t m = mine;
      for (int d = 0; d < 8; ++d)
      {
        const int yy = ty + 1 + stepY(d), xx = tx + 1 + stepX(d);
        if (sz[yy][xx] == zc && links<R>(sk[yy][xx]) && s[yy][xx] < kFar)
          m = min(m, s[yy][xx] + step);
      }
      if (m < mine)
      {
        mine = m;
        s[ty + 1][tx + 1] = m;
        stepped = true;
      }
    }
    lowered = lowered || stepped;
    if (!__syncthreads_or(stepped))
      break;
  }
  if (lowered)
    value[y * w + x] = mine;
  if (__syncthreads_or(lowered) && tid == 0)
    *changed = 1;
}

template <Relax R>
void relax(const DeviceBuffer<float>& z, const DeviceBuffer<uint8_t>& cls, int64_t w, int64_t h,
           DeviceBuffer<int32_t>& value, const RunControl& control)
{
  untilSettled(w, h, control, [&](dim3 blocks, dim3 threads, int* changed) {
    relaxTileKernel<R><<<blocks, threads>>>(z.data(), cls.data(), w, h, value.data(), changed);
  });
}

__global__ void componentInitKernel(const uint8_t* cls, int64_t n, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n)
    label[c] = (cls[c] & kValid) ? int32_t(c) : kFar;
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

__global__ void flatHeightKernel(const uint8_t* cls, const int32_t* label, const int32_t* away, int64_t n,
                                 int32_t* height)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && (cls[c] & kFlat) && (cls[c] & kDrained) && away[c] < kFar)
    atomicMax(height + label[c], away[c]);
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
  mask[c] = towardsOnly ? t : 2 * t + (a > 0 ? height[label[c]] - a : 0);
}

// ---- travel time ----

__global__ void travelInitKernel(const float* z, const uint8_t* dirs, const long long* area, const double* cellWidth,
                                 const double* cellHeight, const float* manning, VelocityModel model, int64_t w,
                                 int64_t h, int64_t outlet, int32_t* next, int32_t* tail, double* sum, double* speed)
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
  const int64_t receiver = receiverOf(dirs, w, h, c);
  const double v = cellSpeed(model, z, manning, w, h, x, y, receiver, area[c], cellWidth[y], cellHeight[y], dirs[c]);
  speed[c] = v;
  sum[c] = flowLength(cellWidth[y], cellHeight[y], dirs[c]) / v / 60.0;
  next[c] = c == outlet ? -1 : int32_t(receiver);
}

__global__ void travelJumpKernel(int64_t n, const int32_t* nextIn, const int32_t* tailIn, const double* sumIn,
                                 int32_t* nextOut, int32_t* tailOut, double* sumOut)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  const int32_t j = nextIn[c];
  if (j < 0)
  {
    nextOut[c] = j;
    tailOut[c] = tailIn[c];
    sumOut[c] = sumIn[c];
    return;
  }
  nextOut[c] = nextIn[j];
  tailOut[c] = tailIn[j];
  sumOut[c] = sumIn[c] + sumIn[j];
}

__global__ void travelFinishKernel(int64_t n, const int32_t* tail, int64_t outlet, double* minutes, double* speed)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && tail[c] != outlet)
  {
    minutes[c] = NAN;
    speed[c] = NAN;
  }
}

}  // namespace

std::vector<float> fillCuda(const Grid& grid, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  DeviceBuffer<float> z, W(static_cast<std::size_t>(n));
  upload(z, grid.z, std::size_t(n));
  fillInitKernel<<<blocksFor(n), 256>>>(z.data(), w, h, W.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  untilSettled(w, h, control, [&](dim3 blocks, dim3 threads, int* changed) {
    fillTileKernel<<<blocks, threads>>>(z.data(), w, h, W.data(), changed);
  });
  positiveZeroKernel<<<blocksFor(n), 256>>>(W.data(), n);
  GPUGEO_CUDA_CHECK_LAUNCH();
  return download(W, std::size_t(n));
}

namespace {
DeviceBuffer<int32_t> flatMaskOnDevice(const DeviceBuffer<float>& z, int64_t w, int64_t h, bool towardsOnly,
                                       const RunControl& control);
}  // namespace

std::vector<uint8_t> directionsCuda(const Grid& grid, bool resolveFlats, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  DeviceBuffer<float> z;
  DeviceBuffer<double> cw, ch;
  upload(z, grid.z, std::size_t(n));
  upload(cw, grid.cellWidth, std::size_t(h));
  upload(ch, grid.cellHeight, std::size_t(h));
  DeviceBuffer<int32_t> mask;
  if (resolveFlats)
    mask = flatMaskOnDevice(z, w, h, false, control);
  DeviceBuffer<uint8_t> out(static_cast<std::size_t>(n));
  directionKernel<<<blocksFor(n), 256>>>(z.data(), resolveFlats ? mask.data() : nullptr, w, h, cw.data(), ch.data(),
                                         out.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  return download(out, std::size_t(n));
}

Accumulation accumulationCuda(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  std::vector<long long> rowArea(static_cast<std::size_t>(h));
  for (int64_t y = 0; y < h; ++y)
    rowArea[std::size_t(y)] = cellArea(grid, y);
  DeviceBuffer<uint8_t> dirs;
  DeviceBuffer<long long> rows;
  upload(dirs, directions.data(), std::size_t(n));
  upload(rows, rowArea.data(), std::size_t(h));
  // Children lists: the cells sorted by parent.
  DeviceBuffer<uint32_t> key(static_cast<std::size_t>(n)), keySorted(static_cast<std::size_t>(n));
  DeviceBuffer<int32_t> cell(static_cast<std::size_t>(n)), cellSorted(static_cast<std::size_t>(n));
  parentKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, key.data(), cell.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  int bits = 1;
  while ((int64_t(1) << bits) < n + 2)
    ++bits;
  std::size_t need = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, need, key.data(), keySorted.data(), cell.data(),
                                                    cellSorted.data(), n, 0, bits));
  DeviceBuffer<unsigned char> temp(need);
  GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), need, key.data(), keySorted.data(), cell.data(),
                                                    cellSorted.data(), n, 0, bits));
  DeviceBuffer<int32_t> firstChild(static_cast<std::size_t>(n)), nextSibling(static_cast<std::size_t>(n));
  GPUGEO_CUDA_CHECK(cudaMemset(firstChild.data(), 0xff, firstChild.bytes()));
  GPUGEO_CUDA_CHECK(cudaMemset(nextSibling.data(), 0xff, nextSibling.bytes()));
  childrenKernel<<<blocksFor(n), 256>>>(keySorted.data(), cellSorted.data(), n, firstChild.data(), nextSibling.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  key.release();
  keySorted.release();
  cell.release();
  cellSorted.release();
  // The tour, ranked: dist = steps to its end.
  const int64_t states = 2 * n;
  DeviceBuffer<int32_t> next(static_cast<std::size_t>(states)), dist(static_cast<std::size_t>(states)),
      next2(static_cast<std::size_t>(states)), dist2(static_cast<std::size_t>(states));
  tourKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, firstChild.data(), nextSibling.data(), next.data(), dist.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  for (int64_t span = 1; span < states; span *= 2)
  {
    jumpKernel<<<blocksFor(states), 256>>>(states, next.data(), dist.data(), next2.data(), dist2.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::swap(next, next2);
    std::swap(dist, dist2);
  }
  if (control.isCanceled())
    throw Canceled();
  {
    // A list that never ends: the directions go round in a loop somewhere.
    DeviceBuffer<int32_t> largest(1);
    GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, need, next.data(), largest.data(), states));
    temp.resize(need);
    GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(temp.data(), need, next.data(), largest.data(), states));
    if (readOne(largest.data()) >= 0)
      throw InvalidInput("the flow directions go round in a loop; they cannot be accumulated");
  }
  // The tour's length: the valid cells' enters and leaves.
  const int64_t valid = int64_t(std::count_if(directions.begin(), directions.end(), [](uint8_t d) { return d != kNoData; }));
  const int64_t length = 2 * valid;
  DeviceBuffer<long long> weight(static_cast<std::size_t>(std::max<int64_t>(length, 1))),
      prefix(static_cast<std::size_t>(std::max<int64_t>(length, 1)));
  GPUGEO_CUDA_CHECK(cudaMemset(weight.data(), 0, weight.bytes()));
  weightKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, rows.data(), dist.data(), length, weight.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, need, weight.data(), prefix.data(), length));
  temp.resize(need);
  GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp.data(), need, weight.data(), prefix.data(), length));
  DeviceBuffer<long long> cells(static_cast<std::size_t>(n)), area(static_cast<std::size_t>(n));
  accumulationKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, dist.data(), length, prefix.data(), cells.data(),
                                            area.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  Accumulation out;
  const std::vector<long long> c = download(cells, std::size_t(n)), a = download(area, std::size_t(n));
  out.cells.assign(c.begin(), c.end());
  out.area.assign(a.begin(), a.end());
  return out;
}

namespace {

// The flat mask of the DEM already on the device.
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
  componentInitKernel<<<blocksFor(n), 256>>>(cls.data(), n, label.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  relax<Relax::Component>(z, cls, w, h, label, control);
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

}  // namespace

std::vector<int32_t> flatMaskCuda(const Grid& grid, bool towardsOnly, const RunControl& control)
{
  useGpu();
  const int64_t n = grid.width * grid.height;
  DeviceBuffer<float> z;
  upload(z, grid.z, std::size_t(n));
  return download(flatMaskOnDevice(z, grid.width, grid.height, towardsOnly, control), std::size_t(n));
}

TravelTimes travelTimeCuda(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation,
                           int64_t outlet, const VelocityModel& model, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  DeviceBuffer<float> z, manning;
  DeviceBuffer<uint8_t> dirs;
  DeviceBuffer<long long> area;
  DeviceBuffer<double> cw, ch;
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
  DeviceBuffer<int32_t> next(static_cast<std::size_t>(n)), tail(static_cast<std::size_t>(n)),
      next2(static_cast<std::size_t>(n)), tail2(static_cast<std::size_t>(n));
  DeviceBuffer<double> sum(static_cast<std::size_t>(n)), sum2(static_cast<std::size_t>(n)), speed(static_cast<std::size_t>(n));
  travelInitKernel<<<blocksFor(n), 256>>>(z.data(), dirs.data(), area.data(), cw.data(), ch.data(),
                                          model.manning ? manning.data() : nullptr, deviceModel, w, h, outlet,
                                          next.data(), tail.data(), sum.data(), speed.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  for (int64_t span = 1; span < n; span *= 2)
  {
    travelJumpKernel<<<blocksFor(n), 256>>>(n, next.data(), tail.data(), sum.data(), next2.data(), tail2.data(),
                                            sum2.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::swap(next, next2);
    std::swap(tail, tail2);
    std::swap(sum, sum2);
  }
  if (control.isCanceled())
    throw Canceled();
  travelFinishKernel<<<blocksFor(n), 256>>>(n, tail.data(), outlet, sum.data(), speed.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  TravelTimes out;
  out.minutes = download(sum, std::size_t(n));
  out.speed = download(speed, std::size_t(n));
  return out;
}

}  // namespace gpugeo::dem::detail
