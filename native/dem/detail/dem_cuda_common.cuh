// What the DEM tools' CUDA code shares (dem_cuda.cu, tiled/tiled_cuda.cu): the pooled device
// buffers, the memory check before a call starts, and the 32 x 32 tiles of the relaxation kernels
// with the passes that run them until nothing changes.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/run_control.h"
#include "dem/dem.h"

namespace gpugeo::dem::detail {

// Buffers from the device's stream-ordered pool (all of this backend's work runs on the calling
// thread's default stream; a call takes and frees up to a dozen grid-sized buffers), which keeps up to
// kPoolKeep bytes between calls.
template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;
constexpr uint64_t kPoolKeep = uint64_t(1) << 30;

constexpr int kTile = 32;

// Cells are indexed with 32 bits on the device (labels, receivers, exits; kFar marks "none").
constexpr int64_t kMostCells = kGpuMostCells;

inline std::size_t need(int64_t cells, std::size_t bytesPerCell)
{
  return std::size_t(cells) * bytesPerCell + (std::size_t(64) << 20);  // + room for the small buffers
}

// work() on the device for `what` on n cells: after the memory check (cuda::withinDeviceMemory with
// bytesPerCell), and refused if n is past the device's 32-bit cell indices.
template <typename Work>
auto onDevice(const std::string& what, int64_t n, std::size_t bytesPerCell, Work&& work) -> decltype(work())
{
  return cuda::withinDeviceMemory(what, need(n, bytesPerCell), [&] {
    if (n > kMostCells)
      throw InvalidInput(what + ": " + std::to_string(n) + " cells are more than the GPU path's " +
                         std::to_string(kMostCells) + " (32-bit cell indices); run it on the CPU");
    return work();
  });
}

inline std::string sizeWhat(const char* what, int64_t w, int64_t h)
{
  return std::string(what) + " on a DEM of " + std::to_string(w) + " x " + std::to_string(h) + " cells";
}

using cuda::download;
using cuda::readOne;
using cuda::upload;

inline unsigned blocksFor(int64_t n, int threads = 256)
{
  return unsigned((n + threads - 1) / threads);
}

// The grid's tiles for the 32 x 32 kernels.
inline dim3 tilesOf(int64_t w, int64_t h)
{
  return dim3(unsigned((w + kTile - 1) / kTile), unsigned((h + kTile - 1) / kTile));
}

inline void useGpu()
{
  const GpuInfo& gpu = probeGpu();
  if (!gpu.usable)
    throw DeviceUnavailable(gpu.reason);
  GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
  cuda::keepPooledMemory(gpu.device, kPoolKeep);
}

// The tiles a pass of untilSettled works on. A tile that has run settles against the halo it read, so
// it needs another run only when a neighbour changed a cell of that halo: a tile whose changed cells
// touch its border marks the neighbours across it for the next pass, and the others are skipped.
struct TilePass
{
  uint8_t* now;   // per tile: run in this pass (each tile that runs clears its own flag)
  uint8_t* next;  // per tile: run in the next pass
  int* changed;   // set to pass + 1 when any tile changed a cell in this pass
  int pass;
};

// Whether this block's tile sits this pass out (uniform over the block: return before any barrier).
__device__ inline bool tileIdle(const TilePass& p)
{
  return !p.now[int64_t(blockIdx.y) * gridDim.x + blockIdx.x];
}

// The end of a tile's run: `lowered` is whether this thread changed its cell. Every thread calls it.
__device__ inline void tileDone(const TilePass& p, bool lowered)
{
  __shared__ int across[9];  // the 3 x 3 neighbourhood of tiles, this one in the middle
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kTile + tx;
  if (tid < 9)
    across[tid] = 0;
  __syncthreads();
  if (lowered)
  {
    const int ey = ty == 0 ? -1 : (ty == kTile - 1 ? 1 : 0), ex = tx == 0 ? -1 : (tx == kTile - 1 ? 1 : 0);
    across[4] = 1;
    if (ey)
      across[4 + 3 * ey] = 1;
    if (ex)
      across[4 + ex] = 1;
    if (ey && ex)
      across[4 + 3 * ey + ex] = 1;
  }
  __syncthreads();
  if (tid == 0)
    p.now[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = 0;  // so `now` is clear for its turn as `next`
  if (tid == 0 && across[4])
  {
    *p.changed = p.pass + 1;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
      {
        const int64_t by = int64_t(blockIdx.y) + dy, bx = int64_t(blockIdx.x) + dx;
        if ((dy || dx) && across[4 + 3 * dy + dx] && by >= 0 && bx >= 0 && by < gridDim.y && bx < gridDim.x)
          p.next[by * gridDim.x + bx] = 1;
      }
  }
}

// Runs launch(blocks, threads, pass) over the grid's tiles (TilePass) until a pass changes nothing.
// A pass is one launch and one read of `changed`: the tiles clear their own flags and `changed`
// holds a pass number, so nothing is reset between passes.
template <typename Launch>
void untilSettled(int64_t w, int64_t h, const RunControl& control, Launch launch)
{
  const dim3 blocks = tilesOf(w, h), threads(kTile, kTile);
  const std::size_t tiles = std::size_t(blocks.x) * blocks.y;
  DeviceBuffer<int> changed(1);
  DeviceBuffer<uint8_t> now(tiles), next(tiles);
  GPUGEO_CUDA_CHECK(cudaMemset(now.data(), 1, tiles));
  GPUGEO_CUDA_CHECK(cudaMemset(next.data(), 0, tiles));
  GPUGEO_CUDA_CHECK(cudaMemset(changed.data(), 0, sizeof(int)));
  for (int pass = 0;; ++pass)
  {
    if (pass == INT_MAX - 1)
      throw std::logic_error("untilSettled: the tile passes do not settle");
    launch(blocks, threads, TilePass{now.data(), next.data(), changed.data(), pass});
    GPUGEO_CUDA_CHECK_LAUNCH();
    if (readOne(changed.data()) != pass + 1)
      break;
    std::swap(now, next);
    if ((pass & 63) == 63 && control.isCanceled())
      throw Canceled();
  }
}

// One block's relaxation in shared memory until no thread's cell changes (the fill, the flats'
// distances, the tiled fill's flood): each step, an active thread takes step(copy) for its cell,
// `step` reading its neighbours in that copy and giving the cell's value (its own where nothing is
// better). Two copies of the tile: each step reads one and writes its own cell to the other, so no
// thread reads a cell in the step its owner writes it (a data race in CUDA's memory model had they
// shared one copy). Every thread of the block calls it; returns whether this thread's cell changed.
template <typename T, typename Step>
__device__ bool settleInBlock(T (*s)[kTile + 2][kTile + 2], bool active, T& mine, Step step)
{
  const int tx = threadIdx.x, ty = threadIdx.y;
  bool changed = false;
  for (int read = 0;; read ^= 1)
  {
    bool stepped = false;
    if (active)
    {
      const T next = step(s[read]);
      stepped = next != mine;
      mine = next;
      // Every step: the other copy holds this cell as it was two steps ago. (Cells that are not
      // active never change: both copies hold them from the load.)
      s[read ^ 1][ty + 1][tx + 1] = mine;
    }
    changed = changed || stepped;
    if (!__syncthreads_or(stepped))
      break;
  }
  return changed;
}

// Loads this block's tile of `from` with a one-cell halo into `to` (`outside` off the grid; from may
// be null: all `outside`). Every thread of the block calls it; the caller synchronises after.
template <typename T>
__device__ void loadTile(T (*to)[kTile + 2], const T* from, int64_t w, int64_t h, T outside)
{
  const int tid = int(threadIdx.y) * kTile + int(threadIdx.x);
  const int64_t x0 = int64_t(blockIdx.x) * kTile, y0 = int64_t(blockIdx.y) * kTile;
  for (int i = tid; i < (kTile + 2) * (kTile + 2); i += kTile * kTile)
  {
    const int64_t hx = x0 + i % (kTile + 2) - 1, hy = y0 + i / (kTile + 2) - 1;
    to[i / (kTile + 2)][i % (kTile + 2)] = from && hx >= 0 && hy >= 0 && hx < w && hy < h ? from[hy * w + hx] : outside;
  }
}

// The filled surface (dem.h's fillDepressions) and the flat mask (flatMask; towardsOnly: the
// TowardsOutlet gradient, else Combined) of a DEM already on the device (dem_cuda.cu).
DeviceBuffer<float> fillOnDevice(const DeviceBuffer<float>& z, int64_t w, int64_t h, const RunControl& control);
DeviceBuffer<int32_t> flatMaskOnDevice(const DeviceBuffer<float>& z, int64_t w, int64_t h, bool towardsOnly,
                                       const RunControl& control);

// The fill, the flat mask (towardsOnly as flatMaskOnDevice's) and the raise of the flats of a DEM on
// the device (raise_cuda.cu, dem.h's fillAndRaiseFlats), `z` freed once filled: the raised DEM on the
// device and RaisedFlats' counts. Its arrays at most: elevations and filled, then filled and the flat
// mask's seven, then filled, the mask, the raised DEM, its marks and the rounds' two lists and marks.
struct RaisedOnDevice
{
  DeviceBuffer<float> z;
  int64_t raised = 0, raisedInTurn = 0;
};
RaisedOnDevice fillAndRaiseOnDevice(DeviceBuffer<float> z, int64_t w, int64_t h, bool towardsOnly,
                                    const RunControl& control);
constexpr std::size_t kFillAndRaiseBytesPerCell = 4 + 22;

}  // namespace gpugeo::dem::detail
