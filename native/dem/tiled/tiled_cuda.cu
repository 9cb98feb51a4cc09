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
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/dem_math.h"
#include "dem/detail/flat_cuda.cuh"
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

// ---- the flat mask's visits to a tile (flatTileCuda) ----
//
// The tile's cells are classed as dem_cuda.cu's (kValid, and kFlat | kDrained for flat cells: which
// flats drain does not matter here, as undrained flats' cells are never reached from a low edge). The
// distances are relaxed as dem_cuda.cu's: each flat cell of the tile takes the least over its
// neighbours of the same elevation of their distance plus one. The sources hold theirs: the tile's
// cells that are not flat (0 towards the outlet: they are the low edges of the flats of their
// elevation beside them), the flat cells beside higher ground (1 away from it), and the ring's cells
// (those of its flat cells from the neighbours' perimeters, 0 for its cells that are not flat).

constexpr int64_t kFlatPad = 2;

__device__ bool inFlatTile(int64_t pw, int64_t ph, int64_t px, int64_t py)
{
  return px >= kFlatPad && py >= kFlatPad && px < pw - kFlatPad && py < ph - kFlatPad;
}

// dem.h's flat cell: valid, and no neighbour lower or nodata (off the raster is NaN too).
__device__ bool isFlatCell(const float* z, int64_t pw, int64_t px, int64_t py)
{
  const float v = z[py * pw + px];
  if (isNoData(v))
    return false;
  for (int d = 0; d < 8; ++d)
    if (!(z[(py + dem::stepY(d)) * pw + px + dem::stepX(d)] >= v))
      return false;
  return true;
}

__global__ void flatTileInitKernel(const float* z, int64_t pw, int64_t ph, const int32_t* ringTowards,
                                   const int32_t* ringAway, bool withAway, uint8_t* cls, int32_t* towards,
                                   int32_t* away)
{
  using dem::detail::kFar;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t px = c % pw, py = c / pw;
  uint8_t k = 0;
  int32_t t = kFar, a = kFar;
  const bool ring = px >= 1 && py >= 1 && px < pw - 1 && py < ph - 1 && !inFlatTile(pw, ph, px, py);
  if ((ring || inFlatTile(pw, ph, px, py)) && !isNoData(z[c]))
  {
    const bool flat = isFlatCell(z, pw, px, py);
    if (!flat)
      t = 0;
    else if (ring)
    {
      const int64_t place = perimeterPlace(pw - 2, ph - 2, px - 1, py - 1);
      t = ringTowards[place] > 0 ? ringTowards[place] : kFar;
      a = withAway && ringAway[place] > 0 ? ringAway[place] : kFar;
    }
    else if (withAway)
    {
      bool higher = false;
      for (int d = 0; d < 8; ++d)
        higher = higher || z[(py + dem::stepY(d)) * pw + px + dem::stepX(d)] != z[c];
      a = higher ? 1 : kFar;
    }
    if (!ring)
      k = uint8_t(dem::detail::kValid | (flat ? dem::detail::kFlat | dem::detail::kDrained : 0));
  }
  cls[c] = k;
  towards[c] = t;
  away[c] = a;
}

// A kept tile's ring cells take the ring's distances as they stand now (flatTileInitKernel's rule;
// the tile's own cells keep theirs).
__global__ void flatRingKernel(const float* z, int64_t pw, int64_t ph, const int32_t* ringTowards,
                               const int32_t* ringAway, bool withAway, int32_t* towards, int32_t* away)
{
  using dem::detail::kFar;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t px = c % pw, py = c / pw;
  const bool ring = px >= 1 && py >= 1 && px < pw - 1 && py < ph - 1 && !inFlatTile(pw, ph, px, py);
  if (!ring || isNoData(z[c]) || !isFlatCell(z, pw, px, py))
    return;
  const int64_t place = perimeterPlace(pw - 2, ph - 2, px - 1, py - 1);
  towards[c] = ringTowards[place] > 0 ? ringTowards[place] : kFar;
  away[c] = withAway && ringAway[place] > 0 ? ringAway[place] : kFar;
}

__global__ void flatRelaxKernel(const float* z, const uint8_t* cls, int64_t pw, int64_t ph, int32_t* value,
                                TilePass pass)
{
  using dem::detail::kFar;
  if (dem::detail::tileIdle(pass))
    return;
  __shared__ int32_t s[2][kTile + 2][kTile + 2];
  __shared__ float sz[kTile + 2][kTile + 2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  dem::detail::loadTile<int32_t>(s[0], value, pw, ph, kFar);
  dem::detail::loadTile<int32_t>(s[1], value, pw, ph, kFar);
  dem::detail::loadTile<float>(sz, z, pw, ph, NAN);
  __syncthreads();
  const int64_t x = int64_t(blockIdx.x) * kTile + tx, y = int64_t(blockIdx.y) * kTile + ty;
  const bool active = x < pw && y < ph && (cls[y * pw + x] & dem::detail::kFlat);
  const float zc = sz[ty + 1][tx + 1];
  int32_t mine = s[0][ty + 1][tx + 1];
  const bool lowered = dem::detail::settleInBlock<int32_t>(s, active, mine, [&](const int32_t (*r)[kTile + 2]) {
    int32_t m = mine;
    for (int d = 0; d < 8; ++d)
    {
      const int yy = ty + 1 + dem::stepY(d), xx = tx + 1 + dem::stepX(d);
      if (sz[yy][xx] == zc && r[yy][xx] < kFar)
        m = min(m, r[yy][xx] + 1);
    }
    return m;
  });
  if (lowered)
    value[y * pw + x] = mine;
  dem::detail::tileDone(pass, lowered);
}

// The tile's perimeter cell at padded cell c, or -1.
__device__ int64_t flatPerimeterPlace(int64_t pw, int64_t ph, int64_t c)
{
  const int64_t px = c % pw, py = c / pw, w = pw - 2 * kFlatPad, h = ph - 2 * kFlatPad;
  const int64_t x = px - kFlatPad, y = py - kFlatPad;
  if (!inFlatTile(pw, ph, px, py) || (x > 0 && y > 0 && x < w - 1 && y < h - 1))
    return -1;
  return perimeterPlace(w, h, x, y);
}

__global__ void flatPerimeterKernel(const uint8_t* cls, const int32_t* label, const int32_t* towards,
                                    const int32_t* away, const int32_t* height, int64_t pw, int64_t ph,
                                    bool withComponents, int32_t* outTowards, int32_t* outAway,
                                    int32_t* outComponent, int32_t* outHighest)
{
  using dem::detail::kFar;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t k = flatPerimeterPlace(pw, ph, c);
  if (k < 0)
    return;
  outTowards[k] = towards[c] < kFar ? towards[c] : 0;
  outAway[k] = away[c] < kFar ? away[c] : 0;
  const bool valid = withComponents && (cls[c] & dem::detail::kValid);
  outComponent[k] = valid ? label[c] : -1;
  outHighest[k] = valid ? height[label[c]] : 0;
}

// The tile's components that reach its perimeter take their joined components' greatest distances
// (every perimeter cell of a component gives the same).
__global__ void flatJoinedKernel(const uint8_t* cls, const int32_t* label, const int32_t* joined, int64_t pw,
                                 int64_t ph, int32_t* height)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t k = flatPerimeterPlace(pw, ph, c);
  if (k >= 0 && (cls[c] & dem::detail::kValid))
    height[label[c]] = joined[k];
}

// tiled_flats.cpp's mask of a tile cell: 0 where no way leads to a low edge; else twice the steps
// towards it, plus (withAway) the steps from higher ground turned round by the component's greatest.
__global__ void flatTileMaskKernel(const int32_t* label, const int32_t* towards, const int32_t* away,
                                   const int32_t* height, int64_t pw, int64_t ph, bool withAway, int32_t* mask)
{
  using dem::detail::kFar;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t px = c % pw, py = c / pw;
  if (!inFlatTile(pw, ph, px, py))
    return;
  const int32_t t = towards[c] < kFar ? towards[c] : 0, a = away[c] < kFar ? away[c] : 0;
  int32_t m = 0;
  if (t > 0)
    m = withAway ? dem::detail::combinedFlatMask(t, a, height[label[c]]) : t;
  mask[(py - kFlatPad) * (pw - 2 * kFlatPad) + px - kFlatPad] = m;
}

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

namespace {

int64_t nowNs()
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

std::atomic<int64_t> gTurns{0}, gWaitNs{0}, gHeldNs{0};

}  // namespace

GpuTurn::GpuTurn(int slots)
{
  const int64_t asked = nowNs();
  Places& p = gpuPlaces();
  std::unique_lock<std::mutex> lock(p.lock);
  p.freed.wait(lock, [&] { return p.inUse < std::max(1, slots); });
  ++p.inUse;
  mStart = nowNs();
  gWaitNs += mStart - asked;
  ++gTurns;
}

GpuTurn::~GpuTurn()
{
  gHeldNs += nowNs() - mStart;
  Places& p = gpuPlaces();
  {
    std::lock_guard<std::mutex> lock(p.lock);
    --p.inUse;
  }
  p.freed.notify_all();
}

GpuTurnTotals gpuTurnTotals()
{
  return GpuTurnTotals{gTurns.load(), gWaitNs.load(), gHeldNs.load()};
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

namespace {

// A tile's state between the flat mask's visits (FlatTilesOnGpu).
struct FlatDeviceState : FlatTilesOnGpu::State
{
  DeviceBuffer<float> z;
  DeviceBuffer<uint8_t> cls;
  DeviceBuffer<int32_t> towards, away, label;
};

}  // namespace

FlatTileResult flatTileCuda(const float* zPadded, int64_t width, int64_t height, const int32_t* ringTowards,
                            const int32_t* ringAway, bool withAway, const int32_t* joinedHighest, int32_t* mask,
                            const RunControl& control, FlatTilesOnGpu* kept, int64_t tile)
{
  using dem::detail::blocksFor;
  dem::detail::useGpu();
  const int64_t pw = width + 2 * kFlatPad, ph = height + 2 * kFlatPad, n = pw * ph;
  const std::size_t ring = std::size_t(perimeterCount(width + 2, height + 2));
  const std::size_t places = std::size_t(perimeterCount(width, height));
  // Elevations, classes, the two distances, the components and their greatest distances, the mask.
  return dem::detail::onDevice(dem::detail::sizeWhat("the tiled flat mask", width, height), n, 25, [&] {
    std::unique_ptr<FlatTilesOnGpu::State> taken = kept ? kept->take(tile) : nullptr;
    std::unique_ptr<FlatDeviceState> state(static_cast<FlatDeviceState*>(taken.release()));
    const bool warm = state != nullptr;
    if (!warm && !zPadded)
      throw std::logic_error("flatTileCuda: a tile not kept on the GPU needs its elevations");
    if (!warm)
      state = std::make_unique<FlatDeviceState>();
    DeviceBuffer<float>& z = state->z;
    DeviceBuffer<uint8_t>& cls = state->cls;
    DeviceBuffer<int32_t>&towards = state->towards, &away = state->away, &label = state->label;
    DeviceBuffer<int32_t> ringT, ringA;
    cuda::upload(ringT, ringTowards, ring);
    cuda::upload(ringA, ringAway, ring);
    if (warm)
    {
      flatRingKernel<<<blocksFor(n), 256>>>(z.data(), pw, ph, ringT.data(), ringA.data(), withAway, towards.data(),
                                            away.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    else
    {
      cuda::upload(z, zPadded, std::size_t(n));
      cls.resize(std::size_t(n));
      towards.resize(std::size_t(n));
      away.resize(std::size_t(n));
      flatTileInitKernel<<<blocksFor(n), 256>>>(z.data(), pw, ph, ringT.data(), ringA.data(), withAway, cls.data(),
                                                towards.data(), away.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    for (DeviceBuffer<int32_t>* value : {&towards, &away})
    {
      if (value == &away && !withAway)
        break;
      dem::detail::untilSettled(pw, ph, control, [&](dim3 blocks, dim3 threads, TilePass pass) {
        flatRelaxKernel<<<blocks, threads>>>(z.data(), cls.data(), pw, ph, value->data(), pass);
      });
    }
    DeviceBuffer<int32_t> most(static_cast<std::size_t>(n));
    if (withAway)
    {
      if (!warm)
      {
        label.resize(std::size_t(n));
        dem::detail::labelComponents(z.data(), cls.data(), pw, ph, label.data());
      }
      GPUGEO_CUDA_CHECK(cudaMemset(most.data(), 0, most.bytes()));
      dem::detail::flatHeightKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), away.data(), n, most.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    DeviceBuffer<int32_t> out(4 * places);
    flatPerimeterKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), towards.data(), away.data(), most.data(), pw,
                                               ph, withAway, out.data(), out.data() + places,
                                               out.data() + 2 * places, out.data() + 3 * places);
    GPUGEO_CUDA_CHECK_LAUNCH();
    const std::vector<int32_t> all = cuda::download(out, 4 * places);
    FlatTileResult result;
    const auto part = [&](int i) { return std::vector<int32_t>(all.begin() + i * places, all.begin() + (i + 1) * places); };
    result.towards = part(0);
    result.away = part(1);
    result.component = part(2);
    result.highest = part(3);
    if (joinedHighest)
    {
      if (withAway)
      {
        DeviceBuffer<int32_t> joined;
        cuda::upload(joined, joinedHighest, places);
        flatJoinedKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), joined.data(), pw, ph, most.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
      }
      DeviceBuffer<int32_t> cells(std::size_t(width * height));
      flatTileMaskKernel<<<blocksFor(n), 256>>>(label.data(), towards.data(), away.data(), most.data(), pw, ph,
                                                withAway, cells.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      cuda::copyToHost(mask, cells.data(), cells.bytes());
    }
    else if (kept)
    {
      const int64_t bytes = int64_t(z.bytes() + cls.bytes() + towards.bytes() + away.bytes() + label.bytes());
      kept->put(tile, std::move(state), bytes);
    }
    return result;
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
