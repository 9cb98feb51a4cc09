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
// Accumulation: each source cell (nothing drains into it) walks downstream with its sums; at every
// cell it adds them and counts down the cell's inflow, and the walker that brings the last inflow
// goes on with the cell's complete sums. Every cell is passed on once; integer sums, so the result
// does not depend on the order.
#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

namespace {

template <typename T>
using DeviceBuffer = cuda::DeviceBuffer<T>;

constexpr int kTile = 32;

template <typename T>
void upload(DeviceBuffer<T>& d, const T* h, std::size_t n)
{
  d.resize(n);
  GPUGEO_CUDA_CHECK(cudaMemcpy(d.data(), h, n * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& d, std::size_t n)
{
  std::vector<T> h(n);
  GPUGEO_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

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
  if (c < n)
    W[c] = __fadd_rn(W[c], 0.0f);  // -0 as +0, as on the CPU
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

__device__ int64_t downstreamOf(const uint8_t* dirs, int64_t w, int64_t h, int64_t c)
{
  const uint8_t d = dirs[c];
  if (d >= 8)
    return -1;
  const int64_t nx = c % w + stepX(d), ny = c / w + stepY(d);
  if (nx < 0 || ny < 0 || nx >= w || ny >= h || dirs[ny * w + nx] == kNoData)
    return -1;
  return ny * w + nx;
}

__global__ void accumulationInitKernel(const uint8_t* dirs, int64_t w, int64_t h, const long long* rowArea,
                                       unsigned long long* cells, unsigned long long* area, int* inflow)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const bool valid = dirs[c] != kNoData;
  cells[c] = valid ? 1 : 0;
  area[c] = valid ? (unsigned long long)rowArea[c / w] : 0;
  if (!valid)
    return;
  const int64_t d = downstreamOf(dirs, w, h, c);
  if (d >= 0)
    atomicAdd(inflow + d, 1);
}

__global__ void sourceKernel(const uint8_t* dirs, const int* inflow, int64_t n, uint8_t* source)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n)
    source[c] = dirs[c] != kNoData && inflow[c] == 0;
}

__global__ void accumulationWalkKernel(const uint8_t* dirs, const uint8_t* source, int64_t w, int64_t h,
                                       unsigned long long* cells, unsigned long long* area, int* inflow)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !source[c])
    return;
  int64_t at = c;
  unsigned long long sc = cells[at], sa = area[at];
  for (;;)
  {
    const int64_t d = downstreamOf(dirs, w, h, at);
    if (d < 0)
      return;
    atomicAdd(cells + d, sc);
    atomicAdd(area + d, sa);
    __threadfence();
    if (atomicSub(inflow + d, 1) != 1)
      return;  // another walker brings the rest
    __threadfence();
    at = d;
    sc = atomicAdd(cells + d, 0ull);
    sa = atomicAdd(area + d, 0ull);
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
  DeviceBuffer<int> changed(1);
  const dim3 blocks(unsigned((w + kTile - 1) / kTile), unsigned((h + kTile - 1) / kTile)), threads(kTile, kTile);
  for (int64_t pass = 0;; ++pass)
  {
    GPUGEO_CUDA_CHECK(cudaMemset(changed.data(), 0, sizeof(int)));
    fillTileKernel<<<blocks, threads>>>(z.data(), w, h, W.data(), changed.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    int any = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpy(&any, changed.data(), sizeof(int), cudaMemcpyDeviceToHost));
    if (!any)
      break;
    if ((pass & 63) == 63 && control.isCanceled())
      throw Canceled();
  }
  positiveZeroKernel<<<blocksFor(n), 256>>>(W.data(), n);
  GPUGEO_CUDA_CHECK_LAUNCH();
  return download(W, std::size_t(n));
}

std::vector<uint8_t> directionsCuda(const Grid& grid, const std::vector<int32_t>* mask, const RunControl&)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  DeviceBuffer<float> z;
  DeviceBuffer<double> cw, ch;
  DeviceBuffer<int32_t> m;
  upload(z, grid.z, std::size_t(n));
  upload(cw, grid.cellWidth, std::size_t(h));
  upload(ch, grid.cellHeight, std::size_t(h));
  if (mask)
    upload(m, mask->data(), std::size_t(n));
  DeviceBuffer<uint8_t> out(static_cast<std::size_t>(n));
  directionKernel<<<blocksFor(n), 256>>>(z.data(), mask ? m.data() : nullptr, w, h, cw.data(), ch.data(), out.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  return download(out, std::size_t(n));
}

Accumulation accumulationCuda(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl&)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  std::vector<long long> rowArea(static_cast<std::size_t>(h));
  for (int64_t y = 0; y < h; ++y)
    rowArea[std::size_t(y)] = cellArea(grid, y);
  DeviceBuffer<uint8_t> dirs, source(static_cast<std::size_t>(n));
  DeviceBuffer<long long> rows;
  upload(dirs, directions.data(), std::size_t(n));
  upload(rows, rowArea.data(), std::size_t(h));
  DeviceBuffer<unsigned long long> cellSum(static_cast<std::size_t>(n)), areaSum(static_cast<std::size_t>(n));
  DeviceBuffer<int> inflow(static_cast<std::size_t>(n));
  GPUGEO_CUDA_CHECK(cudaMemset(inflow.data(), 0, inflow.bytes()));
  accumulationInitKernel<<<blocksFor(n), 256>>>(dirs.data(), w, h, rows.data(), cellSum.data(), areaSum.data(),
                                                inflow.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  sourceKernel<<<blocksFor(n), 256>>>(dirs.data(), inflow.data(), n, source.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  accumulationWalkKernel<<<blocksFor(n), 256>>>(dirs.data(), source.data(), w, h, cellSum.data(), areaSum.data(),
                                                inflow.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  Accumulation out;
  const std::vector<unsigned long long> cells = download(cellSum, std::size_t(n));
  const std::vector<unsigned long long> areas = download(areaSum, std::size_t(n));
  out.cells.assign(cells.begin(), cells.end());
  out.area.assign(areas.begin(), areas.end());
  return out;
}

}  // namespace gpugeo::dem::detail
