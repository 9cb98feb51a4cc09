// The GPU's share of the tiled fill (tile_cuda.h): pass 1's flood of one tile, by relaxation.
//
// Each cell holds a key, (level, label) packed into 64 bits with the level's bits made to order
// (priority_flood.h's levelKey) above the label, so that one unsigned comparison orders keys by
// level, then label. The tile's perimeter cells and edge cells are its sinks and keep their own keys
// (their elevation; their own label, or the ocean's); every other valid cell starts at the largest key
// and relaxes: it takes the least over its neighbours n of (max(z(c), level(n)), label(n)) where that
// level is below its own, in 32 x 32 blocks in shared memory, passes over the blocks until nothing
// changes (dem_cuda.cu's fill). Levels only fall and each key is the level of a real path from the
// cell to its label's sink, so the levels settle at the cells' minimax levels to the sinks
// (Priority-Flood's), and each label is a sink reached at that level: what Barnes's (2016) graph
// needs, whichever sink a tie picks (which one may differ from run to run; the levels do not). The
// spills are then the lowest max(level(a), level(b)) over neighbours of different labels, reduced by
// pair of labels with CUB's sort and reduce-by-key.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/dem_math.h"
#include "dem/detail/priority_flood.h"
#include "dem/tiled/perimeter.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::dem::tiled::detail {

namespace {

using dem::detail::DeviceBuffer;
using dem::detail::isNoData;
using dem::detail::kTile;
using dem::detail::TilePass;

constexpr unsigned long long kUnreached = ~0ull;

// The padded tile's cell (px, py) is a cell of the tile (not its halo) with an elevation.
__device__ bool inTileValid(const float* z, int64_t pw, int64_t ph, int64_t px, int64_t py)
{
  return px >= 1 && py >= 1 && px < pw - 1 && py < ph - 1 && !isNoData(z[py * pw + px]);
}

__global__ void floodInitKernel(const float* z, int64_t pw, int64_t ph, int32_t firstLabel, unsigned long long* key)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t px = c % pw, py = c / pw;
  unsigned long long k = kUnreached;
  if (inTileValid(z, pw, ph, px, py))
  {
    const int32_t label = seedLabel(z, pw, ph, px, py, firstLabel);
    if (label != kNotSeeded)
      k = (static_cast<unsigned long long>(dem::detail::levelKey(z[c])) << 32) | uint32_t(label);
  }
  key[c] = k;
}

// One block's relaxation of the keys in shared memory until nothing changes (two copies, as
// dem_cuda.cu's fillTileKernel: no cell is read in the step its owner writes it).
__global__ void floodTileKernel(const float* z, int64_t pw, int64_t ph, unsigned long long* key, TilePass pass)
{
  if (dem::detail::tileIdle(pass))
    return;
  __shared__ unsigned long long s[2][kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  dem::detail::loadTile<unsigned long long>(s[0], key, pw, ph, kUnreached);
  dem::detail::loadTile<unsigned long long>(s[1], key, pw, ph, kUnreached);
  __syncthreads();
  const int64_t x = int64_t(blockIdx.x) * kTile + tx, y = int64_t(blockIdx.y) * kTile + ty;
  const bool active = inTileValid(z, pw, ph, x, y) && seedLabel(z, pw, ph, x, y, 0) == kNotSeeded;
  const uint32_t zk = active ? dem::detail::levelKey(z[y * pw + x]) : 0u;
  unsigned long long mine = s[0][ty + 1][tx + 1];
  const bool lowered =
    dem::detail::settleInBlock<unsigned long long>(s, active, mine, [&](const unsigned long long (*r)[kTile + 2]) {
      unsigned long long m = kUnreached;
      for (int d = 0; d < 8; ++d)
      {
        unsigned long long v = r[ty + 1 + dem::stepY(d)][tx + 1 + dem::stepX(d)];
        if (v != kUnreached && uint32_t(v >> 32) < zk)
          v = (static_cast<unsigned long long>(zk) << 32) | (v & 0xffffffffull);
        m = v < m ? v : m;
      }
      // Only a lower level is taken: a tie keeps the label the cell has (any sink reached at the
      // cell's level will do), so that labels do not sweep the tile again for every tie.
      return (m >> 32) < (mine >> 32) ? m : mine;
    });
  if (lowered)
    key[y * pw + x] = mine;
  dem::detail::tileDone(pass, lowered);
}

// The spill of the cell's pair with its neighbour in direction d (0..3: E, SE, S, SW, so that each
// pair is seen once), or false.
__device__ bool spillOf(const float* z, int64_t pw, int64_t ph, const unsigned long long* key, int64_t px, int64_t py,
                        int d, unsigned long long* pair, uint32_t* level)
{
  const int64_t nx = px + dem::stepX(d), ny = py + dem::stepY(d);
  if (!inTileValid(z, pw, ph, nx, ny))
    return false;
  const unsigned long long a = key[py * pw + px], b = key[ny * pw + nx];
  const uint32_t la = uint32_t(a), lb = uint32_t(b);
  if (la == lb)
    return false;
  *pair = la < lb ? (static_cast<unsigned long long>(la) << 32 | lb) : (static_cast<unsigned long long>(lb) << 32 | la);
  *level = max(uint32_t(a >> 32), uint32_t(b >> 32));
  return true;
}

using BlockSum = cub::BlockReduce<unsigned long long, 256>;

// Counts the spills (count != null) or writes them from `next` on (an order of no meaning).
__global__ void spillKernel(const float* z, int64_t pw, int64_t ph, const unsigned long long* key,
                            unsigned long long* count, unsigned long long* next, unsigned long long* pairs,
                            uint32_t* levels)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t px = c % pw, py = c / pw;
  const bool valid = c < pw * ph && inTileValid(z, pw, ph, px, py);
  unsigned long long mine = 0;
  for (int d = 0; d < 4 && valid; ++d)
  {
    unsigned long long pair;
    uint32_t level;
    if (!spillOf(z, pw, ph, key, px, py, d, &pair, &level))
      continue;
    if (count)
      ++mine;
    else
    {
      const unsigned long long at = atomicAdd(next, 1ull);
      pairs[at] = pair;
      levels[at] = level;
    }
  }
  if (!count)
    return;
  __shared__ typename BlockSum::TempStorage temp;
  const unsigned long long total = BlockSum(temp).Sum(mine);
  if (threadIdx.x == 0 && total)
    atomicAdd(count, total);
}

struct MinLevel
{
  __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a < b ? a : b; }
};

// The places on the GPU in use, across the process's tiled runs.
struct Places
{
  std::mutex lock;
  std::condition_variable freed;
  int inUse = 0;
};

Places& gpuPlaces()
{
  static Places places;
  return places;
}

}  // namespace

GpuTurn::GpuTurn(int slots)
{
  Places& p = gpuPlaces();
  std::unique_lock<std::mutex> lock(p.lock);
  p.freed.wait(lock, [&] { return p.inUse < std::max(1, slots); });
  ++p.inUse;
}

GpuTurn::~GpuTurn()
{
  Places& p = gpuPlaces();
  {
    std::lock_guard<std::mutex> lock(p.lock);
    --p.inUse;
  }
  p.freed.notify_all();
}

std::vector<dem::detail::Spill> floodSpillsCuda(const float* zPadded, int64_t width, int64_t height,
                                                int32_t firstLabel, const RunControl& control)
{
  using dem::detail::blocksFor;
  dem::detail::useGpu();
  const int64_t pw = width + 2, ph = height + 2, n = pw * ph;
  // Elevations and keys (12), the spills with their sorted copies (up to 4 a cell, 24 bytes each).
  return dem::detail::onDevice(dem::detail::sizeWhat("the tiled fill's flood", width, height), n, 12 + 96, [&] {
    DeviceBuffer<float> z;
    cuda::upload(z, zPadded, std::size_t(n));
    DeviceBuffer<unsigned long long> key(static_cast<std::size_t>(n)), counters(2);
    floodInitKernel<<<blocksFor(n), 256>>>(z.data(), pw, ph, firstLabel, key.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    dem::detail::untilSettled(pw, ph, control, [&](dim3 blocks, dim3 threads, TilePass pass) {
      floodTileKernel<<<blocks, threads>>>(z.data(), pw, ph, key.data(), pass);
    });
    GPUGEO_CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
    spillKernel<<<blocksFor(n), 256>>>(z.data(), pw, ph, key.data(), counters.data(), nullptr, nullptr, nullptr);
    GPUGEO_CUDA_CHECK_LAUNCH();
    const unsigned long long found = cuda::readOne(counters.data());
    std::vector<dem::detail::Spill> spills;
    if (found == 0)
      return spills;
    DeviceBuffer<unsigned long long> pairs(found), sortedPairs(found), uniquePairs(found);
    DeviceBuffer<uint32_t> levels(found), sortedLevels(found), lowest(found);
    spillKernel<<<blocksFor(n), 256>>>(z.data(), pw, ph, key.data(), nullptr, counters.data() + 1, pairs.data(),
                                       levels.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    // Sorted by pair (a pair of labels below 2^31 fits in 63 bits), then the lowest level of each pair.
    std::size_t sortBytes = 0, reduceBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, pairs.data(), sortedPairs.data(),
                                                      levels.data(), sortedLevels.data(), int64_t(found), 0, 63));
    GPUGEO_CUDA_CHECK(cub::DeviceReduce::ReduceByKey(nullptr, reduceBytes, sortedPairs.data(), uniquePairs.data(),
                                                     sortedLevels.data(), lowest.data(), counters.data(), MinLevel(),
                                                     int64_t(found)));
    DeviceBuffer<uint8_t> temp(std::max(sortBytes, reduceBytes));
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), sortBytes, pairs.data(), sortedPairs.data(),
                                                      levels.data(), sortedLevels.data(), int64_t(found), 0, 63));
    GPUGEO_CUDA_CHECK(cub::DeviceReduce::ReduceByKey(temp.data(), reduceBytes, sortedPairs.data(), uniquePairs.data(),
                                                     sortedLevels.data(), lowest.data(), counters.data(), MinLevel(),
                                                     int64_t(found)));
    const std::size_t unique = std::size_t(cuda::readOne(counters.data()));
    const std::vector<unsigned long long> keys = cuda::download(uniquePairs, unique);
    const std::vector<uint32_t> levelKeys = cuda::download(lowest, unique);
    spills.resize(unique);
    for (std::size_t i = 0; i < unique; ++i)
    {
      spills[i] = dem::detail::Spill{int32_t(keys[i] >> 32), int32_t(keys[i] & 0xffffffffu),
                                     dem::detail::levelOfKey(levelKeys[i])};
    }
    return spills;
  });
}

}  // namespace gpugeo::dem::tiled::detail

namespace gpugeo::dem::tiled {

int64_t freeGpuMemory()
{
  if (!probeGpu().usable)
    return 0;
  GPUGEO_CUDA_CHECK(cudaSetDevice(probeGpu().device));
  std::size_t available = 0, total = 0;
  GPUGEO_CUDA_CHECK(cudaMemGetInfo(&available, &total));
  return int64_t(available);
}

}  // namespace gpugeo::dem::tiled
