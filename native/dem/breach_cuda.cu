// Breaching on the device (breach.h's definition, the CPU's bits): the pits raised cell by cell; the
// bottoms found as equal-elevation components (flat_cuda.cuh's labelling) with no edge cell and no
// cell with a lower neighbour; each bottom's channel searched by one warp; the channels merged by
// their minimum; then the fill, the flat mask and the raise (raise_cuda.cu), the arrays kept on the
// device throughout.
//
// The search. The CPU's Dijkstra search over (cell, steps) takes states in the order of (cost, steps,
// cell, from) and drops a state whose cell was already left in as few steps or fewer; a state (c, k)
// is thus left exactly when its cost, the least over the states (p, k - 1) left before it of their
// cost plus c's height above the bottom (ties to the lowest p), is below the cost of every state of c
// left in fewer steps (the states of a cell that are left have ever fewer steps at ever higher cost).
// So the states can be taken a layer of steps at a time: layer k from layer k - 1, each cell's least
// cost over its neighbours (ties to the lowest index), kept where below the cell's best so far; the
// channel is the least (cost, steps, cell, from) over the targets reached, and a state costing as much
// as a target already reached is dropped (nothing past it can do better). The sums are the CPU's
// additions in the same order, so the costs, the ties and the channel are the CPU's.
//
// A warp searches in a window of W x W cells around its bottom (global scratch of its own, read
// through the L1 cache), layer by layer over the bounding box of the last layer's states; where a
// state kept reaches the window's border, or the layers outrun the scratch, the bottom goes on to a
// window of 64², then of 128² cells (fewer warps), and from there to the host's search (tiled_dem.h's
// bottomChannel). At 20,000² of the benchmark's terrain, 96 % of the 14 million searches end in the
// first window, all but 0.4 % in the second.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/backend.h"
#include "core/parallel.h"
#include "dem/breach.h"
#include "dem/detail/breach_cuda.h"
#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/dem_math.h"
#include "dem/detail/flat_cuda.cuh"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::dem::detail {

namespace {

constexpr uint8_t kEdge = 64;  // a cell class bit beside flat_cuda.cuh's: a valid cell on the edge
constexpr int kWarpsPerBlock = 4;
// "No state" in the costs (a real cost may be +inf, where the DEM holds infinite elevations: as on the
// CPU, such states are taken and ordered too). Every comparison with it is false, so it is tested apart.
constexpr double kNone = NAN;
__device__ bool none(double cost)
{
  return cost != cost;
}

// Whether target a = (cost, cell, from) comes before b; cell INT32_MAX: no target.
__device__ bool targetBefore(double ca, int cella, int froma, double cb, int cellb, int fromb)
{
  if (cella == INT32_MAX)
    return false;
  if (cellb == INT32_MAX)
    return true;
  return ca < cb || (ca == cb && (cella < cellb || (cella == cellb && froma < fromb)));
}

// How a warp's search of a bottom ended.
enum class Searched : int
{
  Done,
  OutgrewWindow,  // a state kept reached the window's border: a larger window may do
  OutgrewLayers,  // more layers than the scratch keeps: only the host will do
};

// Step 1 (breach.h): each single-cell pit raised to its lowest neighbour (-0 as +0); the classes:
// kValid, kEdge.
__global__ void pitKernel(const float* z, int64_t w, int64_t h, float* raised, uint8_t* cls, unsigned long long* pits)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool pit = false;
  if (c < w * h)
  {
    float r = z[c];
    if (r == 0.f)
      r = 0.f;
    uint8_t k = 0;
    if (!isNoData(r))
    {
      k = kValid;
      const int64_t x = c % w, y = c / w;
      if (isEdgeCell(z, w, h, x, y))
        k |= kEdge;
      else
      {
        float lowest = INFINITY;
        for (int d = 0; d < 8; ++d)
          lowest = fminf(lowest, z[(y + stepY(d)) * w + x + stepX(d)]);
        if (z[c] < lowest)
        {
          r = lowest == 0.f ? 0.f : lowest;
          pit = true;
        }
      }
    }
    raised[c] = r;
    cls[c] = k;
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, pit);
  if ((threadIdx.x & 31) == 0 && ballot)
    atomicAdd(pits, static_cast<unsigned long long>(__popc(ballot)));
}

// Step 2: a component with an edge cell or a cell with a lower neighbour is no bottom (flag 1 on its
// root).
__global__ void disqualifyKernel(const float* raised, const uint8_t* cls, const int32_t* label, int64_t w, int64_t h,
                                 int32_t* flag)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !(cls[c] & kValid))
    return;
  bool no = cls[c] & kEdge;
  if (!no)
  {
    const int64_t x = c % w, y = c / w;
    const float v = raised[c];
    for (int d = 0; d < 8 && !no; ++d)
      no = raised[(y + stepY(d)) * w + x + stepX(d)] < v;  // not an edge cell: all on the grid
  }
  if (no)
    atomicOr(flag + label[c], 1);
}

// The bottoms' roots listed (in no particular order: nothing depends on it), each root's flag set to
// 2 + its place in the list.
__global__ void listBottomsKernel(const uint8_t* cls, const int32_t* label, int64_t n, int32_t* flag, int32_t* roots,
                                  unsigned* count)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n || !(cls[c] & kValid) || label[c] != c || flag[c] != 0)
    return;
  const unsigned i = atomicAdd(count, 1u);
  if (int64_t(i) < n / 2 + 1)  // a bottom holds two cells or more (breach.h); the host checks the count
  {
    roots[i] = int32_t(c);
    flag[c] = 2 + int32_t(i);
  }
}

struct Box
{
  int32_t x0, y0, x1, y1;
};

__global__ void boxInitKernel(Box* boxes, int64_t count)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    boxes[i] = Box{INT32_MAX, INT32_MAX, -1, -1};
}

__global__ void boxKernel(const uint8_t* cls, const int32_t* label, const int32_t* flag, int64_t w, int64_t h,
                          Box* boxes)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !(cls[c] & kValid))
    return;
  const int32_t f = flag[label[c]];
  if (f < 2)
    return;
  Box& b = boxes[f - 2];
  const int32_t x = int32_t(c % w), y = int32_t(c / w);
  atomicMin(&b.x0, x);
  atomicMin(&b.y0, y);
  atomicMax(&b.x1, x);
  atomicMax(&b.y1, y);
}

// A float lowered to v where v is lower (-0 and +0 kept apart by the bits, as the CPU's std::min of
// the same values in any order would not: `<` alone decides, as in breach.cpp's cutChannel).
__device__ void lowerTo(float* cell, float v)
{
  unsigned* bits = reinterpret_cast<unsigned*>(cell);
  unsigned old = *bits;
  while (v < __uint_as_float(old))
  {
    const unsigned seen = atomicCAS(bits, old, __float_as_uint(v));
    if (seen == old)
      return;
    old = seen;
  }
}

__device__ float lowerSteps(float x, int64_t steps)
{
  return -floatStepsUp(-x, steps);
}

// A warp's scratch for a window of W x W cells: elevations, codes (0 blocked, 1 passable, 2 target),
// each cell's best cost so far, two layers of costs, and each layer's directions back (kLayers).
struct Scratch
{
  float* z;
  uint8_t* code;
  double* best;
  double* cost;    // 2 W²
  uint8_t* back;   // layers W²
  int layers;
};

struct SearchInput
{
  const float* raised;
  const uint8_t* cls;
  const int32_t* label;
  int64_t w, h;
  const int32_t* roots;
  const Box* boxes;
  const int32_t* work;  // the bottoms to search (places in roots); null: all of them
  unsigned count;
  int64_t maxLength;
  double maxDepth;
};

struct SearchOutput
{
  float* cut;
  unsigned* next;          // the work counter
  unsigned long long* breached;
  int32_t* overflow;       // the bottoms handed on
  unsigned* overflowCount;
};

struct Rect
{
  int x0, y0, x1, y1;  // inclusive; empty when x0 > x1
  __device__ bool has(int x, int y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
  __device__ int width() const { return x1 - x0 + 1; }
  __device__ int cells() const { return x0 > x1 || y0 > y1 ? 0 : (x1 - x0 + 1) * (y1 - y0 + 1); }
};

__device__ int warpMin(int v)
{
  for (int o = 16; o; o >>= 1)
    v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ int warpMax(int v)
{
  for (int o = 16; o; o >>= 1)
    v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One bottom's search by one warp in a W x W window.
template <int W>
__device__ Searched searchBottom(const SearchInput& in, const Scratch& s, int32_t root, const Box& box, SearchOutput& out)
{
  const int lane = int(threadIdx.x & 31u);
  const float level = in.raised[root];
  const int bw = box.x1 - box.x0 + 1, bh = box.y1 - box.y0 + 1;
  if (bw > W - 2 || bh > W - 2)
    return Searched::OutgrewWindow;
  const int64_t ox = int64_t(box.x0) - (W - bw) / 2, oy = int64_t(box.y0) - (W - bh) / 2;  // window's (0, 0)
  double* prev = s.cost;
  double* cur = s.cost + W * W;
  // The cells known (elevation, code, best): a rectangle grown as the layers need.
  Rect known{int(box.x0 - ox), int(box.y0 - oy), int(box.x1 - ox), int(box.y1 - oy)};
  const auto load = [&](int x, int y) {
    const int i = y * W + x;
    const int64_t gx = ox + x, gy = oy + y;
    float v = NAN;
    uint8_t code = 0;
    if (gx >= 0 && gy >= 0 && gx < in.w && gy < in.h)
    {
      const int64_t g = gy * in.w + gx;
      v = in.raised[g];
      const double above = double(v) - double(level);
      if (!isNoData(v) && in.label[g] != root && above <= in.maxDepth)
        code = (in.cls[g] & kEdge) || v < level ? 2 : 1;
    }
    s.z[i] = v;
    s.code[i] = code;
    s.best[i] = kNone;
  };
  for (int i = lane; i < known.cells(); i += 32)
  {
    const int x = known.x0 + i % known.width(), y = known.y0 + i / known.width();
    load(x, y);
    const int64_t g = (oy + y) * in.w + ox + x;
    prev[y * W + x] = in.label[g] == root ? 0.0 : kNone;  // layer 0: the bottom's cells
  }
  __syncwarp();
  Rect last = known;  // the cells the last layer wrote
  Rect live = known;  // the bounding box of its kept states
  double bestCost = kNone;
  int bestLayer = 0, bestCell = -1;  // the least target of the layers so far (-1: none)
  for (int k = 1;; ++k)
  {
    const Rect scan{max(live.x0 - 1, 0), max(live.y0 - 1, 0), min(live.x1 + 1, W - 1), min(live.y1 + 1, W - 1)};
    if (scan.x0 < known.x0 || scan.y0 < known.y0 || scan.x1 > known.x1 || scan.y1 > known.y1)
    {
      const Rect grown{min(scan.x0, known.x0), min(scan.y0, known.y0), max(scan.x1, known.x1), max(scan.y1, known.y1)};
      for (int i = lane; i < grown.cells(); i += 32)
      {
        const int x = grown.x0 + i % grown.width(), y = grown.y0 + i / grown.width();
        if (!known.has(x, y))
          load(x, y);
      }
      known = grown;
      __syncwarp();
    }
    uint8_t* back = s.back + int64_t(k - 1) * W * W;
    Rect kept{W, W, -1, -1};
    bool atBorder = false;
    double targetCost = kNone;
    int targetCell = INT32_MAX, targetFrom = INT32_MAX;  // this layer's least target
    for (int i = lane; i < scan.cells(); i += 32)
    {
      const int x = scan.x0 + i % scan.width(), y = scan.y0 + i / scan.width(), c = y * W + x;
      double mine = kNone;
      const uint8_t code = s.code[c];
      if (code != 0)
      {
        const double add = fmax(0.0, double(s.z[c]) - double(level));
        int from = INT32_MAX, dir = 0;
        for (int d = 0; d < 8; ++d)
        {
          const int nx = x + stepX(d), ny = y + stepY(d);
          if (!last.has(nx, ny))
            continue;
          const int j = ny * W + nx;
          const double p = prev[j];
          if (none(p))
            continue;
          const double cost = p + add;
          if (from == INT32_MAX || cost < mine || (cost == mine && j < from))
          {
            mine = cost;
            from = j;
            dir = d;
          }
        }
        if (from != INT32_MAX && (bestCell < 0 || mine < bestCost))
        {
          back[c] = uint8_t(dir);
          if (code == 2)
          {
            if (targetBefore(mine, c, from, targetCost, targetCell, targetFrom))
            {
              targetCost = mine;
              targetCell = c;
              targetFrom = from;
            }
            mine = kNone;  // a target is not gone on from
          }
          else if (none(s.best[c]) || mine < s.best[c])
          {
            s.best[c] = mine;
            kept = Rect{min(kept.x0, x), min(kept.y0, y), max(kept.x1, x), max(kept.y1, y)};
            atBorder = atBorder || x == 0 || y == 0 || x == W - 1 || y == W - 1;
          }
          else
            mine = kNone;
        }
        else
          mine = kNone;
      }
      cur[c] = mine;
    }
    // The warp's least target of this layer: (cost, cell, from).
    for (int o = 16; o; o >>= 1)
    {
      const double oc = __shfl_xor_sync(0xffffffffu, targetCost, o);
      const int ocell = __shfl_xor_sync(0xffffffffu, targetCell, o);
      const int ofrom = __shfl_xor_sync(0xffffffffu, targetFrom, o);
      if (targetBefore(oc, ocell, ofrom, targetCost, targetCell, targetFrom))
      {
        targetCost = oc;
        targetCell = ocell;
        targetFrom = ofrom;
      }
    }
    if (targetCell != INT32_MAX && (bestCell < 0 || targetCost < bestCost))  // an earlier layer wins ties
    {
      bestCost = targetCost;
      bestLayer = k;
      bestCell = targetCell;
    }
    live = Rect{warpMin(kept.x0), warpMin(kept.y0), warpMax(kept.x1), warpMax(kept.y1)};
    const bool goesOn = live.x0 <= live.x1 && k < in.maxLength;
    if (goesOn && __any_sync(0xffffffffu, atBorder))
      return Searched::OutgrewWindow;
    if (!goesOn)
      break;
    if (k == s.layers)
      return Searched::OutgrewLayers;
    last = scan;
    double* t = prev;
    prev = cur;
    cur = t;
    __syncwarp();
  }
  __syncwarp();  // the last layer's directions back, written by every lane
  if (bestCell < 0)
    return Searched::Done;
  if (lane == 0)
  {
    int c = bestCell;
    for (int k = bestLayer; k >= 1; --k)
    {
      const int x = c % W, y = c / W;
      lowerTo(out.cut + (oy + y) * in.w + ox + x, lowerSteps(level, k));
      const int d = s.back[int64_t(k - 1) * W * W + c];
      c = (y + stepY(d)) * W + x + stepX(d);
    }
    atomicAdd(out.breached, 1ull);
  }
  return Searched::Done;
}

template <int W>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) searchKernel(SearchInput in, Scratch s, SearchOutput out)
{
  const int64_t slot = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t cells = int64_t(W) * W;
  Scratch mine{s.z + slot * cells, s.code + slot * cells, s.best + slot * cells, s.cost + slot * 2 * cells,
               s.back + slot * s.layers * cells, s.layers};
  const int lane = int(threadIdx.x & 31u);
  for (;;)
  {
    unsigned item = 0;
    if (lane == 0)
      item = atomicAdd(out.next, 1u);
    item = __shfl_sync(0xffffffffu, item, 0);
    if (item >= in.count)
      return;
    const int32_t b = in.work ? in.work[item] : int32_t(item);
    const Searched searched = searchBottom<W>(in, mine, in.roots[b], in.boxes[b], out);
    if (searched != Searched::Done && lane == 0)  // handed on: ~b straight to the host
      out.overflow[atomicAdd(out.overflowCount, 1u)] = searched == Searched::OutgrewLayers ? ~b : b;
    __syncwarp();
  }
}

__global__ void lowerCellsKernel(const int64_t* cells, const float* values, int64_t count, float* cut)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    lowerTo(cut + cells[i], values[i]);
}

__global__ void loweredKernel(const float* cut, const float* raised, int64_t n, unsigned long long* count)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned ballot = __ballot_sync(0xffffffffu, c < n && cut[c] < raised[c]);
  if ((threadIdx.x & 31) == 0 && ballot)
    atomicAdd(count, static_cast<unsigned long long>(__popc(ballot)));
}

// One tier: every listed bottom searched by warps in windows of W², those that outgrow them returned.
template <int W>
std::vector<int32_t> searchTier(const SearchInput& input, const DeviceBuffer<int32_t>* work, unsigned count,
                                int layers, int blocks, SearchOutput out, DeviceBuffer<int32_t>& overflow,
                                DeviceBuffer<unsigned>& counters)
{
  std::vector<int32_t> left;
  if (count == 0)
    return left;
  const int64_t slots = int64_t(blocks) * kWarpsPerBlock, cells = int64_t(W) * W;
  DeviceBuffer<float> z(std::size_t(slots * cells));
  DeviceBuffer<uint8_t> code(std::size_t(slots * cells)), back(std::size_t(slots * cells * layers));
  DeviceBuffer<double> best(std::size_t(slots * cells)), cost(std::size_t(slots * cells * 2));
  SearchInput in = input;
  in.work = work ? work->data() : nullptr;
  in.count = count;
  GPUGEO_CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
  out.next = counters.data();
  out.overflowCount = counters.data() + 1;
  out.overflow = overflow.data();
  const Scratch scratch{z.data(), code.data(), best.data(), cost.data(), back.data(), layers};
  searchKernel<W><<<blocks, 32 * kWarpsPerBlock>>>(in, scratch, out);
  GPUGEO_CUDA_CHECK_LAUNCH();
  const std::vector<unsigned> c = download(counters, 2);
  if (c[1] > 0)
    left = download(overflow, std::size_t(c[1]));
  return left;
}

}  // namespace

BreachOnDevice breachCuda(const Grid& grid, const BreachLimits& limits, int threads, const RunControl& control,
                          StageTimes& times)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const int layers = int(std::min<int64_t>(limits.maxLength, 64));
  const int manyBlocks = probeGpu().multiprocessors * 8, fewBlocks = probeGpu().multiprocessors * 2;
  const std::size_t scratch = std::max(std::size_t(manyBlocks) * kWarpsPerBlock * 64 * 64,
                                       std::size_t(fewBlocks) * kWarpsPerBlock * 128 * 128) *
                              std::size_t(29 + layers);
  // The cut's arrays (elevations, raised, classes, labels, flags, the cut; boxes and roots up to a
  // bottom every two cells), then the fill's and raise's.
  const std::size_t perCell = kGpuBreachBytesPerCell;
  static_assert(kGpuBreachBytesPerCell >= 4 + 4 + 1 + 4 + 4 + 4 + 10 &&
                  kGpuBreachBytesPerCell >= int64_t(kFillAndRaiseBytesPerCell) + 4,
                "the cut's arrays, then the fill's and raise's");
  return cuda::withinDeviceMemory(sizeWhat("breach depressions", w, h), need(n, perCell) + scratch, [&] {
    if (n > kMostCells)
      throw InvalidInput(sizeWhat("breach depressions", w, h) + ": more cells than the GPU path's " +
                         std::to_string(kMostCells) + " (32-bit cell indices); run it on the CPU");
    BreachOnDevice result;
    auto zAhead = cuda::hostVectorAhead<float>(std::size_t(n));  // the result's host memory, touched meanwhile
    DeviceBuffer<float> cut;
    {
      std::optional<ScopedStage> stage(std::in_place, times, "breach (bottoms)");
      DeviceBuffer<float> raised(static_cast<std::size_t>(n));
      DeviceBuffer<uint8_t> cls(static_cast<std::size_t>(n));
      DeviceBuffer<unsigned long long> counts(3);  // pits, breached, channel cells
      GPUGEO_CUDA_CHECK(cudaMemset(counts.data(), 0, counts.bytes()));
      {
        DeviceBuffer<float> z;
        upload(z, grid.z, std::size_t(n));
        pitKernel<<<blocksFor(n), 256>>>(z.data(), w, h, raised.data(), cls.data(), counts.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
      }
      DeviceBuffer<int32_t> label(static_cast<std::size_t>(n)), flag(static_cast<std::size_t>(n));
      labelComponents(raised.data(), cls.data(), w, h, label.data());
      GPUGEO_CUDA_CHECK(cudaMemset(flag.data(), 0, flag.bytes()));
      disqualifyKernel<<<blocksFor(n), 256>>>(raised.data(), cls.data(), label.data(), w, h, flag.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      DeviceBuffer<unsigned> counters(2);
      GPUGEO_CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
      DeviceBuffer<int32_t> roots(static_cast<std::size_t>(n / 2 + 1));
      listBottomsKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), n, flag.data(), roots.data(), counters.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      const unsigned bottoms = readOne(counters.data());
      if (bottoms > roots.size())
        throw std::logic_error("breach depressions: more bottoms than cells in them");
      DeviceBuffer<Box> boxes(std::max<std::size_t>(bottoms, 1));
      if (bottoms > 0)
      {
        boxInitKernel<<<blocksFor(bottoms), 256>>>(boxes.data(), bottoms);
        GPUGEO_CUDA_CHECK_LAUNCH();
      }
      boxKernel<<<blocksFor(n), 256>>>(cls.data(), label.data(), flag.data(), w, h, boxes.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      cut = DeviceBuffer<float>(static_cast<std::size_t>(n));
      GPUGEO_CUDA_CHECK(cudaMemcpy(cut.data(), raised.data(), raised.bytes(), cudaMemcpyDeviceToDevice));

      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
      stage.emplace(times, "breach (channels, device)");
      // The searches: windows of 32², 64², then 128² (every search of up to 50 cells from a bottom up to 26
      // cells across), then the host.
      const SearchInput input{raised.data(), cls.data(), label.data(), w, h, roots.data(), boxes.data(), nullptr, 0,
                              limits.maxLength, limits.maxDepth};
      const SearchOutput output{cut.data(), nullptr, counts.data() + 1, nullptr, nullptr};
      DeviceBuffer<int32_t> overflow(std::max<std::size_t>(bottoms, 1));
      std::vector<int32_t> left =
        searchTier<32>(input, nullptr, bottoms, layers, manyBlocks, output, overflow, counters);
      DeviceBuffer<int32_t> work;
      std::vector<int32_t> toHost;  // the bottoms that outgrew the layers (~b in `left`) or every window
      const auto nextTier = [&](auto search) {
        if (control.isCanceled())
          throw Canceled();
        std::vector<int32_t> larger;
        for (const int32_t b : left)
          (b < 0 ? toHost : larger).push_back(b < 0 ? ~b : b);
        left.clear();
        if (larger.empty())
          return;
        upload(work, larger.data(), larger.size());
        left = search(unsigned(larger.size()));
      };
      nextTier([&](unsigned count) {
        return searchTier<64>(input, &work, count, layers, manyBlocks, output, overflow, counters);
      });
      nextTier([&](unsigned count) {
        return searchTier<128>(input, &work, count, layers, fewBlocks, output, overflow, counters);
      });
      for (const int32_t b : left)
        toHost.push_back(b < 0 ? ~b : b);
      left = std::move(toHost);
      stage.emplace(times, "breach (channels, host)");
      if (!left.empty())
      {
        const std::vector<int32_t> leftRoots = [&] {
          std::vector<int32_t> all = download(roots, bottoms);
          std::vector<int32_t> r;
          for (const int32_t b : left)
            r.push_back(all[std::size_t(b)]);
          return r;
        }();
        std::vector<Box> allBoxes = download(boxes, bottoms);
        std::vector<std::vector<std::pair<int64_t, float>>> channels(left.size());
        parallelFor(int64_t(left.size()), 1, threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e && !control.isCanceled(); ++i)
          {
            const Box& box = allBoxes[std::size_t(left[std::size_t(i)])];
            channels[std::size_t(i)] =
              tiled::bottomChannel(grid, box.x0, box.y0, box.x1, box.y1, leftRoots[std::size_t(i)], limits);
          }
        }, &control);
        if (control.isCanceled())
          throw Canceled();
        std::vector<int64_t> cells;
        std::vector<float> values;
        unsigned long long breached = 0;
        for (const auto& channel : channels)
        {
          breached += !channel.empty();
          for (const auto& [cell, value] : channel)
          {
            cells.push_back(cell);
            values.push_back(value);
          }
        }
        if (!cells.empty())
        {
          DeviceBuffer<int64_t> dc;
          DeviceBuffer<float> dv;
          upload(dc, cells.data(), cells.size());
          upload(dv, values.data(), values.size());
          lowerCellsKernel<<<blocksFor(int64_t(cells.size())), 256>>>(dc.data(), dv.data(), int64_t(cells.size()),
                                                                       cut.data());
          GPUGEO_CUDA_CHECK_LAUNCH();
        }
        result.counts.hostSearches = int64_t(left.size());
        result.counts.breached += int64_t(breached);
      }
      loweredKernel<<<blocksFor(n), 256>>>(cut.data(), raised.data(), n, counts.data() + 2);
      GPUGEO_CUDA_CHECK_LAUNCH();
      const std::vector<unsigned long long> c = download(counts, 3);
      result.counts.pitsRaised = int64_t(c[0]);
      result.counts.bottoms = int64_t(bottoms);
      result.counts.breached += int64_t(c[1]);
      result.counts.channelCells = int64_t(c[2]);
    }
    ScopedStage stage(times, "fill, flats and raise");
    RaisedOnDevice raised = fillAndRaiseOnDevice(std::move(cut), w, h, false, control);
    result.z = download(raised.z, std::size_t(n), zAhead);
    return result;
  });
}

}  // namespace gpugeo::dem::detail
