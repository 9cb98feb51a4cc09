// The CUDA backend of the plane Voronoi raster.
//
// Per band of rows, the tile quadtree is built level by level (a thread per tile that searches the
// site tree, a warp per tile that filters its parent's list; CUB scans for list offsets and child
// positions), then one block per 64 x 64 root tile labels its pixels, each
// pixel scanning its leaf tile's list (or, in a dense leaf, searching the site tree). The site tree
// is built on the device with a CUB radix sort along the Hilbert curve. All per-element math is in
// detail/nearest_site.h, shared with the CPU backend, so both build the same quadtree and give the
// same labels and distances.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "site_tree.h"
#include "voronoi_backends.h"
#include "voronoi_cuda.h"

namespace gpugeo::voronoi {

using namespace detail;
using cuda::DeviceBuffer;

namespace {

constexpr int kTileThreads = 128;
// The largest band labelled in one pass (16384^2 pixels). A level whose lists would not fit int32
// offsets (only for extreme clustering) makes the band start again in two halves.
constexpr int64_t kMaxBandPixels = int64_t(1) << 28;

struct BandTooLarge
{
};

__global__ void curveKeysKernel(const Point* points, int32_t n, Box bounds, double scaleX, double scaleY,
                                 uint64_t* keys, int32_t* index)
{
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  keys[i] = curveKey(points[i], bounds, scaleX, scaleY);
  index[i] = i;
}

struct SortedPoints
{
  const Point* points;
  const int32_t* order;
  __device__ Point operator()(int32_t i) const { return points[order[i]]; }
};

__global__ void gatherKernel(const Point* points, const int32_t* order, const uint64_t* keys, int32_t n, Point* sorted,
                             uint8_t* keep)
{
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const SortedPoints pointAt{points, order};
  sorted[i] = pointAt(i);
  keep[i] = repeatsEarlier(keys, pointAt, i) ? 0 : 1;
}

__global__ void leafBoxesKernel(const Point* points, int32_t n, int32_t leaves, Box* boxes)
{
  const int32_t leaf = blockIdx.x * blockDim.x + threadIdx.x;
  if (leaf >= leaves)
    return;
  boxes[leaf] = boxOfPoints(points, leaf * kLeafSize, minOf(n, (leaf + 1) * kLeafSize));
}

__global__ void parentBoxesKernel(Box* boxes, int32_t childStart, int32_t childCount, int32_t parentStart,
                                  int32_t parentCount)
{
  const int32_t node = blockIdx.x * blockDim.x + threadIdx.x;
  if (node >= parentCount)
    return;
  boxes[parentStart + node] =
    boxOfBoxes(boxes + childStart, node * kFanout, minOf(childCount, (node + 1) * kFanout));
}

// --- The tile quadtree, level by level (detail/nearest_site.h, "The tile quadtree") -----------
//
// Level L holds tiles of side 64 >> L. For each level: the count kernels find each tile's bound and
// list length (searchCountKernel from the site tree, filterCountKernel from the parent's list) and
// whether it splits; CUB scans turn lengths into list offsets and split flags into child
// positions; the fill kernels write the lists, the tile's node and its children's tasks for the
// next level. One host synchronisation per level reads the totals.

struct TileTask
{
  int32_t x0, y0;        // top-left pixel, relative to the band
  int32_t parentOffset;  // the parent's list in the previous level's pool
  int32_t parentCount;   // -1: no parent list (search the tree)
};

struct TileNode
{
  int32_t child;   // first child in the next level (-1: a leaf)
  int32_t offset;  // list in this level's pool
  int32_t count;   // list length (-1: a dense leaf, searched per pixel)
};

struct BandShape
{
  int64_t row0;
  int64_t rowEnd;
  int64_t width;
};

struct Quadtree
{
  const TileNode* nodes[kTileLevels];
  const LocalPoint* local[kTileLevels];
  const int32_t* slots[kTileLevels];
};

// Counters shared by the kernels (read back by stats()); levelEntries is a level's list total.
struct Counters
{
  unsigned long long tiles, splitTiles, denseTiles, candidates, refinedPixels, levelEntries;
};

struct NoEmit
{
  __device__ void operator()(int, int32_t) const {}
};

struct SlotEmit
{
  int32_t* slots;
  __device__ void operator()(int k, int32_t slot) const { slots[k] = slot; }
};

struct ParentPoints
{
  const TreeView* tree;
  const int32_t* slots;
  __device__ const Point& operator()(int k) const { return tree->points[slots[k]]; }
};

// The pixel-centre box of a task's tile, clipped to the band; false when it holds no pixel.
__device__ bool tileRegion(const BandShape& band, const TileTask& task, int span, int64_t& c0, int64_t& r0, Box& region)
{
  c0 = task.x0;
  r0 = band.row0 + task.y0;
  const int64_t c1 = minOf<int64_t>(band.width, c0 + span);
  const int64_t r1 = minOf<int64_t>(band.rowEnd, r0 + span);
  if (c0 >= c1 || r0 >= r1)
    return false;
  region = pixelCentreBox(c0, c1, r0, r1);
  return true;
}

constexpr unsigned kFullMask = 0xffffffffu;

// A warp per tile for filtering a parent's list: lanes take every 32nd entry. The same bound (a
// minimum) and the same list, in the same order, as filterList() on the CPU.
__device__ double warpBoundFromList(const ParentPoints& pointAt, int count, const Box& region, int lane)
{
  double bound = 1.79769313486231570e308;
  for (int k = lane; k < count; k += 32)
    bound = minOf(bound, siteBound(pointAt(k), region));
  for (int offset = 16; offset > 0; offset >>= 1)
    bound = minOf(bound, __shfl_xor_sync(kFullMask, bound, offset));
  return bound;
}

// Returns the kept count in every lane; with `out`, writes the kept parent slots in list order.
__device__ int warpFilterList(const ParentPoints& pointAt, int count, const Box& region, double bound, int lane,
                              int32_t* out)
{
  int kept = 0;
  for (int base = 0; base < count; base += 32)
  {
    const int k = base + lane;
    const bool keep = k < count && mayBeNearest(pointAt(k), region, bound);
    const unsigned mask = __ballot_sync(kFullMask, keep);
    if (keep && out)
      out[kept + __popc(mask & ((1u << lane) - 1u))] = pointAt.slots[k];
    kept += __popc(mask);
  }
  return kept;
}

constexpr int kWarpsPerTileBlock = kTileThreads / 32;

// Phase names for the profile (setProfiling), per quadtree level.
constexpr const char* kSearchPhase[kTileLevels] = {"search 64", "search 32", "search 16", "search 8", "search 4", "search 2"};
constexpr const char* kFilterPhase[kTileLevels] = {"filter 64", "filter 32", "filter 16", "filter 8", "filter 4", "filter 2"};

// What the count kernels record of a tile.
__device__ void recordCount(int32_t t, int span, int count, double bound, double* bounds, int32_t* counts,
                            int32_t* listLengths, int32_t* splitFlags, Counters* counters)
{
  bounds[t] = bound;
  counts[t] = count;
  listLengths[t] = count > 0 ? count : 0;
  splitFlags[t] = shouldSplit(span, count) ? 1 : 0;
  if (count > 0)
    atomicAdd(&counters->levelEntries, static_cast<unsigned long long>(count));
}

// What the fill kernels record of a tile once its list is written: its node, and its children's
// tasks when it splits.
__device__ void recordNode(int32_t t, int span, const TileTask& task, int32_t count, int32_t offset,
                           const int32_t* splitIndex, TileNode* nodes, TileTask* children, Counters* counters)
{
  if (shouldSplit(span, count))
  {
    const int32_t first = 4 * splitIndex[t];
    nodes[t] = TileNode{first, offset, count};
    const int32_t half = span / 2;
    for (int q = 0; q < 4; ++q)
      children[first + q] = TileTask{task.x0 + (q & 1) * half, task.y0 + (q >> 1) * half, offset, count};
    atomicAdd(&counters->splitTiles, 1ull);
  }
  else
  {
    nodes[t] = TileNode{-1, offset, count};
    atomicAdd(&counters->tiles, 1ull);
    if (count < 0)
      atomicAdd(&counters->denseTiles, 1ull);
    else
      atomicAdd(&counters->candidates, static_cast<unsigned long long>(count));
  }
}

// Tiles without a parent list (the roots, and the children of a tile whose tree search found too
// many sites) search the site tree, a thread per tile. Tiles with a list are left to the warps below.
__global__ void __launch_bounds__(kTileThreads) searchCountKernel(TreeView tree, BandShape band, int span,
                                                                  const TileTask* tasks, int32_t tileCount,
                                                                  double* bounds, int32_t* counts,
                                                                  int32_t* listLengths, int32_t* splitFlags,
                                                                  Counters* counters)
{
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tileCount || tasks[t].parentCount >= 0)
    return;
  int64_t c0, r0;
  Box region;
  int count = 0;
  double bound = 0.0;
  if (tileRegion(band, tasks[t], span, c0, r0, region))
  {
    RegionBoundVisitor boundVisitor(&tree, region);
    traverse(tree, boundVisitor);
    bound = boundVisitor.bound;
    RegionCandidateVisitor<NoEmit> gather{&tree, region, bound, kMaxGathered, NoEmit{}};
    traverse(tree, gather);
    count = gather.count > kMaxGathered ? -1 : gather.count;
  }
  recordCount(t, span, count, bound, bounds, counts, listLengths, splitFlags, counters);
}

__global__ void __launch_bounds__(kTileThreads) searchFillKernel(TreeView tree, BandShape band, int span,
                                                                 const TileTask* tasks, int32_t tileCount,
                                                                 const double* bounds, const int32_t* counts,
                                                                 const int32_t* listOffsets, const int32_t* splitIndex,
                                                                 LocalPoint* local, int32_t* slots, TileNode* nodes,
                                                                 TileTask* children, Counters* counters)
{
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tileCount || tasks[t].parentCount >= 0)
    return;
  const TileTask task = tasks[t];
  int64_t c0, r0;
  Box region;
  if (!tileRegion(band, task, span, c0, r0, region))
  {
    nodes[t] = TileNode{-1, 0, 0};
    return;
  }
  const int32_t count = counts[t];
  const int32_t offset = listOffsets[t];
  if (count > 0)
  {
    RegionCandidateVisitor<SlotEmit> gather{&tree, region, bounds[t], kMaxGathered, SlotEmit{slots + offset}};
    traverse(tree, gather);
    for (int k = 0; k < count; ++k)
      local[offset + k] = toLocal(tree.points[slots[offset + k]], c0, r0);
  }
  recordNode(t, span, task, count, offset, splitIndex, nodes, children, counters);
}

// Tiles with a parent list filter it, a warp per tile.
__global__ void __launch_bounds__(kTileThreads) filterCountKernel(TreeView tree, BandShape band, int span,
                                                                  const TileTask* tasks, int32_t tileCount,
                                                                  const int32_t* parentSlots, double* bounds,
                                                                  int32_t* counts, int32_t* listLengths,
                                                                  int32_t* splitFlags, Counters* counters)
{
  const int32_t t = blockIdx.x * kWarpsPerTileBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= tileCount || tasks[t].parentCount < 0)
    return;
  const TileTask task = tasks[t];
  int64_t c0, r0;
  Box region;
  int count = 0;
  double bound = 0.0;
  if (tileRegion(band, task, span, c0, r0, region))
  {
    const ParentPoints pointAt{&tree, parentSlots + task.parentOffset};
    bound = warpBoundFromList(pointAt, task.parentCount, region, lane);
    count = warpFilterList(pointAt, task.parentCount, region, bound, lane, nullptr);
  }
  if (lane == 0)
    recordCount(t, span, count, bound, bounds, counts, listLengths, splitFlags, counters);
}

__global__ void __launch_bounds__(kTileThreads) filterFillKernel(TreeView tree, BandShape band, int span,
                                                                 const TileTask* tasks, int32_t tileCount,
                                                                 const int32_t* parentSlots, const double* bounds,
                                                                 const int32_t* counts, const int32_t* listOffsets,
                                                                 const int32_t* splitIndex, LocalPoint* local,
                                                                 int32_t* slots, TileNode* nodes, TileTask* children,
                                                                 Counters* counters)
{
  const int32_t t = blockIdx.x * kWarpsPerTileBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= tileCount || tasks[t].parentCount < 0)
    return;
  const TileTask task = tasks[t];
  int64_t c0, r0;
  Box region;
  if (!tileRegion(band, task, span, c0, r0, region))
  {
    if (lane == 0)
      nodes[t] = TileNode{-1, 0, 0};
    return;
  }
  const int32_t count = counts[t];
  const int32_t offset = listOffsets[t];
  if (count > 0)
  {
    warpFilterList(ParentPoints{&tree, parentSlots + task.parentOffset}, task.parentCount, region, bounds[t], lane,
                   slots + offset);
    __syncwarp();
    for (int k = lane; k < count; k += 32)
      local[offset + k] = toLocal(tree.points[slots[offset + k]], c0, r0);
  }
  if (lane == 0)
    recordNode(t, span, task, count, offset, splitIndex, nodes, children, counters);
}

struct TileOutput
{
  int32_t* site;
  float* distance;
  double pixelSize;
  Counters* counters;
};

__device__ void writePixel(const TileOutput& out, const BandShape& band, int64_t column, int64_t row,
                           const PixelAnswer& answer)
{
  const int64_t i = (row - band.row0) * band.width + column;
  out.site[i] = answer.site;
  if (out.distance)
    out.distance[i] = distanceValue(answer.squared, out.pixelSize);
}

// The leaf tile holding pixel (dx, dy) of a root tile: its level and node.
__device__ TileNode findLeaf(const Quadtree& tree, int32_t root, int dx, int dy, int& level)
{
  TileNode node = tree.nodes[0][root];
  level = 0;
  while (node.child >= 0)
  {
    const int bit = kRootShift - 1 - level;
    const int quadrant = ((dy >> bit) & 1) * 2 + ((dx >> bit) & 1);
    ++level;
    node = tree.nodes[level][node.child + quadrant];
  }
  return node;
}

constexpr int kLabelThreads = 256;

// One block per root tile. A root that is a leaf (the common case away from dense places) stages
// its short list in shared memory; the pixels of a split root each find their leaf and scan its
// list from the pool. Pixels of dense leaves are left to denseTilesKernel.
__global__ void __launch_bounds__(kLabelThreads) labelTilesKernel(TreeView tree, BandShape band, Quadtree quadtree,
                                                                  const TileTask* roots, TileOutput out)
{
  __shared__ LocalPoint sLocal[kRootLeafMaxList];
  __shared__ Point sPoint[kRootLeafMaxList];
  __shared__ int32_t sSite[kRootLeafMaxList];
  const int32_t root = blockIdx.x;
  const TileTask task = roots[root];
  const TileNode node = quadtree.nodes[0][root];
  const int64_t c0 = task.x0;
  const int64_t r0 = band.row0 + task.y0;
  const int columns = int(minOf<int64_t>(kRootSpan, band.width - c0));
  const int rows = int(minOf<int64_t>(kRootSpan, band.rowEnd - r0));
  unsigned refined = 0;
  if (node.child < 0)
  {
    for (int k = threadIdx.x; k < node.count; k += blockDim.x)
    {
      const int32_t slot = quadtree.slots[0][node.offset + k];
      sLocal[k] = quadtree.local[0][node.offset + k];
      sPoint[k] = tree.points[slot];
      sSite[k] = tree.siteIndex[slot];
    }
    __syncthreads();
    const CandidateArrays list{sLocal, sPoint, sSite, node.count};
    for (int p = threadIdx.x; p < (rows << kRootShift); p += kLabelThreads)
    {
      const int dx = p & (kRootSpan - 1), dy = p >> kRootShift;
      if (dx >= columns)
        continue;
      const PixelAnswer answer = nearestCandidate(list, c0 + dx, r0 + dy, c0, r0, float(kRootSpan * kRootSpan));
      refined += answer.refined;
      writePixel(out, band, c0 + dx, r0 + dy, answer);
    }
  }
  else
  {
    for (int p = threadIdx.x; p < (rows << kRootShift); p += kLabelThreads)
    {
      const int dx = p & (kRootSpan - 1), dy = p >> kRootShift;
      if (dx >= columns)
        continue;
      int level;
      const TileNode leaf = findLeaf(quadtree, root, dx, dy, level);
      if (leaf.count < 0)
        continue;
      const int shift = kRootShift - level;
      const int64_t leafC0 = c0 + ((dx >> shift) << shift);
      const int64_t leafR0 = r0 + ((dy >> shift) << shift);
      const CandidateSlots list{&tree, quadtree.local[level] + leaf.offset, quadtree.slots[level] + leaf.offset, leaf.count};
      const PixelAnswer answer = nearestCandidate(list, c0 + dx, r0 + dy, leafC0, leafR0, float((1 << shift) << shift));
      refined += answer.refined;
      writePixel(out, band, c0 + dx, r0 + dy, answer);
    }
  }
  if (refined)
    atomicAdd(&out.counters->refinedPixels, static_cast<unsigned long long>(refined));
}

// The pixels of dense leaves, each by an exact search of the tree. Launched only when a band has
// dense leaves; other pixels return at once.
__global__ void __launch_bounds__(kLabelThreads) denseTilesKernel(TreeView tree, BandShape band, Quadtree quadtree,
                                                                  const TileTask* roots, TileOutput out)
{
  const int32_t root = blockIdx.x;
  const TileTask task = roots[root];
  if (quadtree.nodes[0][root].child < 0)
    return;
  const int64_t c0 = task.x0;
  const int64_t r0 = band.row0 + task.y0;
  const int columns = int(minOf<int64_t>(kRootSpan, band.width - c0));
  const int rows = int(minOf<int64_t>(kRootSpan, band.rowEnd - r0));
  for (int p = threadIdx.x; p < (rows << kRootShift); p += kLabelThreads)
  {
    const int dx = p & (kRootSpan - 1), dy = p >> kRootShift;
    if (dx >= columns)
      continue;
    int level;
    if (findLeaf(quadtree, root, dx, dy, level).count >= 0)
      continue;
    writePixel(out, band, c0 + dx, r0 + dy, nearestByTree(tree, c0 + dx, r0 + dy));
  }
}

__global__ void rootTasksKernel(int32_t rootsX, int32_t roots, TileTask* tasks)
{
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < roots)
    tasks[t] = TileTask{(t % rootsX) * kRootSpan, (t / rootsX) * kRootSpan, 0, -1};
}

unsigned blocksFor(int64_t items, int threads)
{
  return static_cast<unsigned>((items + threads - 1) / threads);
}

class GpuLabeller final : public CudaLabeller
{
public:
  GpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options, const RunControl& control)
    : mGrid(grid), mOptions(options)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDeviceName = gpu.name;
    mDevice = gpu.device;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking));
    try
    {
      buildTree(sites, control);
    }
    catch (...)
    {
      cudaStreamDestroy(mStream);
      throw;
    }
  }

  ~GpuLabeller() override
  {
    cudaSetDevice(mDevice);
    cudaStreamSynchronize(mStream);
    for (auto& event : mPhaseEvents)
      cudaEventDestroy(event.second);
    cudaStreamDestroy(mStream);
  }

  void labelRowsOnDevice(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance) override
  {
    // The CUDA device is a per-thread setting and callers may come from any thread (the
    // processing layer labels each band on a worker thread).
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    checkRows(row0, rows);
    // Sub-bands of whole root rows, so that the roots fall where the CPU backend puts them.
    const int64_t maxRows = std::max<int64_t>(kRootSpan, kMaxBandPixels / mGrid.width / kRootSpan * kRootSpan);
    for (int64_t done = 0; done < rows; done += maxRows)
    {
      const int64_t part = std::min(maxRows, rows - done);
      labelRange(row0 + done, part, deviceSite + done * mGrid.width, deviceDistance ? deviceDistance + done * mGrid.width : nullptr);
    }
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    checkRows(row0, rows);
    int64_t done = 0;
    while (done < rows)
    {
      if (control.isCanceled())
        throw Canceled();
      const int64_t part = std::min(bandRows(distance != nullptr), rows - done);
      mCountersSaved.resize(1);
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mCountersSaved.data(), mCounters.data(), sizeof(Counters),
                                        cudaMemcpyDeviceToDevice, mStream));
      try
      {
        mSiteOut.resize(static_cast<size_t>(part * mGrid.width));
        if (distance)
          mDistanceOut.resize(static_cast<size_t>(part * mGrid.width));
        cuda::EventTimer compute;
        compute.start(mStream);
        labelRowsOnDevice(row0 + done, part, mSiteOut.data(), distance ? mDistanceOut.data() : nullptr);
        compute.stop(mStream);
        mTimes.add("compute", compute.milliseconds());

        // The stream is idle (compute.milliseconds() waited for it): the band goes down through the
        // staged copies, spread over threads when it is large (core/staged_copy.h).
        const auto downloadStart = std::chrono::steady_clock::now();
        cuda::copyToHost(site + done * mGrid.width, mSiteOut.data(), std::size_t(part * mGrid.width) * sizeof(int32_t));
        if (distance)
          cuda::copyToHost(distance + done * mGrid.width, mDistanceOut.data(),
                           std::size_t(part * mGrid.width) * sizeof(float));
        mTimes.add("download",
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - downloadStart).count());
      }
      catch (const DeviceOutOfMemory&)
      {
        // What the failed attempt counted does not count.
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mCounters.data(), mCountersSaved.data(), sizeof(Counters),
                                          cudaMemcpyDeviceToDevice, mStream));
        GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
        releaseBandBuffers();
        if (mBandRows <= kRootSpan)
          throw;
        mBandRows = std::max<int64_t>(kRootSpan, mBandRows / 2 / kRootSpan * kRootSpan);
        mWarnings.push_back("The GPU ran out of memory; continuing in bands of " + std::to_string(mBandRows) + " rows.");
        continue;
      }
      done += part;
    }
  }

  cudaStream_t stream() const override { return mStream; }
  void setProfiling(bool on) override { mProfiling = on; }
  StageTimes phaseTimes() override
  {
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    StageTimes times;
    for (size_t i = 1; i < mPhaseEvents.size(); ++i)
      if (mPhaseEvents[i].first)
      {
        float ms = 0.f;
        GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&ms, mPhaseEvents[i - 1].second, mPhaseEvents[i].second));
        times.add(mPhaseEvents[i].first, ms);
      }
    for (auto& event : mPhaseEvents)
      cudaEventDestroy(event.second);
    mPhaseEvents.clear();
    return times;
  }

  Backend backend() const override { return Backend::Gpu; }
  std::string deviceName() const override { return mDeviceName; }
  const StageTimes& times() const override { return mTimes; }
  // Waits for the stream, then reads the device counters.
  const LabelStats& stats() const override
  {
    Counters counters{};
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpy(&counters, mCounters.data(), sizeof(Counters), cudaMemcpyDeviceToHost));
    mStats.tiles = static_cast<int64_t>(counters.tiles);
    mStats.splitTiles = static_cast<int64_t>(counters.splitTiles);
    mStats.denseTiles = static_cast<int64_t>(counters.denseTiles);
    mStats.candidates = static_cast<int64_t>(counters.candidates);
    mStats.refinedPixels = static_cast<int64_t>(counters.refinedPixels);
    return mStats;
  }
  std::vector<std::string> warnings() const override { return mWarnings; }

private:
  void buildTree(const Sites& sites, const RunControl& control)
  {
    std::vector<Point> points;
    Box bounds;
    {
      ScopedStage stage(mTimes, "prepare");
      points = toPixelFrame(mGrid, sites);
      bounds = boundsOf(points);
    }
    const int32_t n = static_cast<int32_t>(points.size());
    DeviceBuffer<Point> input(n);
    {
      cuda::EventTimer upload;
      upload.start(mStream);
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(input.data(), points.data(), n * sizeof(Point), cudaMemcpyHostToDevice, mStream));
      upload.stop(mStream);
      mTimes.add("upload", upload.milliseconds());
    }
    if (control.isCanceled())
      throw Canceled();

    cuda::EventTimer index;
    index.start(mStream);
    DeviceBuffer<uint64_t> keys(n), sortedKeys(n);
    DeviceBuffer<int32_t> order(n), sortedOrder(n);
    curveKeysKernel<<<blocksFor(n, 256), 256, 0, mStream>>>(input.data(), n, bounds, curveScale(bounds.x0, bounds.x1),
                                                              curveScale(bounds.y0, bounds.y1), keys.data(), order.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t tempBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, keys.data(), sortedKeys.data(), order.data(),
                                                      sortedOrder.data(), n, 0, 64, mStream));
    DeviceBuffer<unsigned char> temp(tempBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), tempBytes, keys.data(), sortedKeys.data(),
                                                      order.data(), sortedOrder.data(), n, 0, 64, mStream));

    DeviceBuffer<Point> sorted(n);
    DeviceBuffer<uint8_t> keep(n);
    gatherKernel<<<blocksFor(n, 256), 256, 0, mStream>>>(input.data(), sortedOrder.data(), sortedKeys.data(), n,
                                                          sorted.data(), keep.data());
    GPUGEO_CUDA_CHECK_LAUNCH();

    mPoints.resize(n);
    mSiteIndex.resize(n);
    DeviceBuffer<int32_t> selected(1);
    size_t pointBytes = 0, indexBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, pointBytes, sorted.data(), keep.data(), mPoints.data(),
                                                 selected.data(), n, mStream));
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, indexBytes, sortedOrder.data(), keep.data(),
                                                 mSiteIndex.data(), selected.data(), n, mStream));
    temp.resize(std::max(pointBytes, indexBytes));
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), pointBytes, sorted.data(), keep.data(), mPoints.data(),
                                                 selected.data(), n, mStream));
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), indexBytes, sortedOrder.data(), keep.data(),
                                                 mSiteIndex.data(), selected.data(), n, mStream));
    int32_t unique = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&unique, selected.data(), sizeof(unique), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));

    mView.levelCount = levelLayout(unique, mView.levelStart);
    mBoxes.resize(mView.levelStart[mView.levelCount]);
    const int32_t leaves = mView.levelStart[1];
    leafBoxesKernel<<<blocksFor(leaves, 256), 256, 0, mStream>>>(mPoints.data(), unique, leaves, mBoxes.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    for (int level = 1; level < mView.levelCount; ++level)
    {
      const int32_t parents = mView.levelStart[level + 1] - mView.levelStart[level];
      parentBoxesKernel<<<blocksFor(parents, 256), 256, 0, mStream>>>(
        mBoxes.data(), mView.levelStart[level - 1], mView.levelStart[level] - mView.levelStart[level - 1],
        mView.levelStart[level], parents);
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    index.stop(mStream);
    mTimes.add("index", index.milliseconds());

    mView.points = mPoints.data();
    mView.siteIndex = mSiteIndex.data();
    mView.boxes = mBoxes.data();
    mView.pointCount = unique;
    mStats.uniqueSites = unique;

    mCounters.resize(1);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCounters.data(), 0, sizeof(Counters), mStream));
  }

  void checkRows(int64_t row0, int64_t rows) const
  {
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
  }

  // Rows per band for labelRows(): what the memory budget allows, in whole root rows.
  int64_t bandRows(bool withDistance)
  {
    if (mBandRows == 0)
    {
      size_t budget = mOptions.gpuMemoryBudget;
      if (budget == 0)
      {
        size_t freeBytes = 0, totalBytes = 0;
        GPUGEO_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
        budget = std::min<size_t>(freeBytes / 2, size_t(4) << 30);
      }
      // Per pixel: the outputs, and about 16 bytes of tile tasks, nodes and lists over all levels.
      const double bytesPerRow = double(mGrid.width) * ((withDistance ? 8.0 : 4.0) + 16.0);
      mBandRows = std::max<int64_t>(kRootSpan, int64_t(double(budget) / bytesPerRow) / kRootSpan * kRootSpan);
      mBandRows = std::min(mBandRows, (mGrid.height + kRootSpan - 1) / kRootSpan * kRootSpan);
    }
    return mBandRows;
  }

  // With profiling on, marks the end of a phase of labelBand (nullptr: the start).
  void phase(const char* name)
  {
    if (!mProfiling)
      return;
    cudaEvent_t event;
    GPUGEO_CUDA_CHECK(cudaEventCreate(&event));
    GPUGEO_CUDA_CHECK(cudaEventRecord(event, mStream));
    mPhaseEvents.emplace_back(name, event);
  }

  void releaseBandBuffers()
  {
    mSiteOut.release();
    mDistanceOut.release();
    for (Level& level : mLevels)
      level = Level();
    mScanTemp.release();
  }

  // The buffers of one quadtree level.
  struct Level
  {
    DeviceBuffer<TileTask> tasks;
    DeviceBuffer<TileNode> nodes;
    DeviceBuffer<double> bounds;
    DeviceBuffer<int32_t> counts, listLengths, listOffsets, splitFlags, splitIndex;
    DeviceBuffer<LocalPoint> local;
    DeviceBuffer<int32_t> slots;
  };

  template <typename Scan>
  void scan(Scan&& call)
  {
    size_t bytes = 0;
    GPUGEO_CUDA_CHECK(call(nullptr, bytes));
    mScanTemp.resize(bytes);
    GPUGEO_CUDA_CHECK(call(mScanTemp.data(), bytes));
  }

  // labelBand(), or two halves of whole root rows when the band's lists are too many.
  void labelRange(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance)
  {
    mCountersSaved.resize(1);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mCountersSaved.data(), mCounters.data(), sizeof(Counters), cudaMemcpyDeviceToDevice, mStream));
    try
    {
      labelBand(row0, rows, deviceSite, deviceDistance);
    }
    catch (const BandTooLarge&)
    {
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mCounters.data(), mCountersSaved.data(), sizeof(Counters), cudaMemcpyDeviceToDevice, mStream));
      if (rows <= kRootSpan)
        throw DeviceError("The candidate lists of 64 rows of pixels exceed 2^31 entries; the sites are too clustered.");
      const int64_t half = (rows / 2 + kRootSpan - 1) / kRootSpan * kRootSpan;
      labelRange(row0, half, deviceSite, deviceDistance);
      labelRange(row0 + half, rows - half, deviceSite + half * mGrid.width,
                 deviceDistance ? deviceDistance + half * mGrid.width : nullptr);
    }
  }

  void labelBand(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance)
  {
    const BandShape band{row0, row0 + rows, mGrid.width};
    const int32_t rootsX = static_cast<int32_t>((mGrid.width + kRootSpan - 1) / kRootSpan);
    const int32_t roots = rootsX * static_cast<int32_t>((rows + kRootSpan - 1) / kRootSpan);
    phase(nullptr);
    mLevels[0].tasks.resize(roots);
    rootTasksKernel<<<blocksFor(roots, 256), 256, 0, mStream>>>(rootsX, roots, mLevels[0].tasks.data());
    GPUGEO_CUDA_CHECK_LAUNCH();

    Quadtree quadtree{};
    int32_t tiles = roots;
    for (int level = 0; level < kTileLevels && tiles > 0; ++level)
    {
      Level& here = mLevels[level];
      const int span = kRootSpan >> level;
      const int32_t* parentSlots = level > 0 ? mLevels[level - 1].slots.data() : nullptr;
      here.nodes.resize(tiles);
      here.bounds.resize(tiles);
      here.counts.resize(tiles);
      here.listLengths.resize(tiles);
      here.listOffsets.resize(tiles);
      here.splitFlags.resize(tiles);
      here.splitIndex.resize(tiles);
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(&mCounters.data()->levelEntries, 0, sizeof(unsigned long long), mStream));
      searchCountKernel<<<blocksFor(tiles, kTileThreads), kTileThreads, 0, mStream>>>(
        mView, band, span, here.tasks.data(), tiles, here.bounds.data(), here.counts.data(), here.listLengths.data(),
        here.splitFlags.data(), mCounters.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      phase(kSearchPhase[level]);
      if (level > 0)
      {
        filterCountKernel<<<blocksFor(tiles, kWarpsPerTileBlock), kTileThreads, 0, mStream>>>(
          mView, band, span, here.tasks.data(), tiles, parentSlots, here.bounds.data(), here.counts.data(),
          here.listLengths.data(), here.splitFlags.data(), mCounters.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        phase(kFilterPhase[level]);
      }
      scan([&](void* temp, size_t& bytes) {
        return cub::DeviceScan::ExclusiveSum(temp, bytes, here.listLengths.data(), here.listOffsets.data(), tiles, mStream);
      });
      scan([&](void* temp, size_t& bytes) {
        return cub::DeviceScan::ExclusiveSum(temp, bytes, here.splitFlags.data(), here.splitIndex.data(), tiles, mStream);
      });
      int32_t last[4] = {};
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&last[0], here.listOffsets.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&last[1], here.listLengths.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&last[2], here.splitIndex.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&last[3], here.splitFlags.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
      unsigned long long entries = 0;
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&entries, &mCounters.data()->levelEntries, sizeof(entries), cudaMemcpyDeviceToHost, mStream));
      GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
      if (entries > 0x7fffffffull)
        throw BandTooLarge();
      phase("scans");
      const int32_t listTotal = last[0] + last[1];
      const int32_t splits = last[2] + last[3];

      here.local.resize(std::max(listTotal, 1));
      here.slots.resize(std::max(listTotal, 1));
      TileTask* children = nullptr;
      if (splits > 0)
      {
        mLevels[level + 1].tasks.resize(4 * size_t(splits));
        children = mLevels[level + 1].tasks.data();
      }
      searchFillKernel<<<blocksFor(tiles, kTileThreads), kTileThreads, 0, mStream>>>(
        mView, band, span, here.tasks.data(), tiles, here.bounds.data(), here.counts.data(), here.listOffsets.data(),
        here.splitIndex.data(), here.local.data(), here.slots.data(), here.nodes.data(), children, mCounters.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      phase(kSearchPhase[level]);
      if (level > 0)
      {
        filterFillKernel<<<blocksFor(tiles, kWarpsPerTileBlock), kTileThreads, 0, mStream>>>(
          mView, band, span, here.tasks.data(), tiles, parentSlots, here.bounds.data(), here.counts.data(),
          here.listOffsets.data(), here.splitIndex.data(), here.local.data(), here.slots.data(), here.nodes.data(),
          children, mCounters.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        phase(kFilterPhase[level]);
      }
      quadtree.nodes[level] = here.nodes.data();
      quadtree.local[level] = here.local.data();
      quadtree.slots[level] = here.slots.data();
      tiles = 4 * splits;
    }

    const TileOutput out{deviceSite, deviceDistance, mGrid.pixelSize, mCounters.data()};
    labelTilesKernel<<<roots, kLabelThreads, 0, mStream>>>(mView, band, quadtree, mLevels[0].tasks.data(), out);
    GPUGEO_CUDA_CHECK_LAUNCH();
    unsigned long long dense = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&dense, &mCounters.data()->denseTiles, sizeof(dense), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    if (dense > mDenseSeen)
    {
      denseTilesKernel<<<roots, kLabelThreads, 0, mStream>>>(mView, band, quadtree, mLevels[0].tasks.data(), out);
      GPUGEO_CUDA_CHECK_LAUNCH();
      mDenseSeen = dense;
    }
    phase("label");
  }

  Grid mGrid;
  LabellerOptions mOptions;
  std::string mDeviceName;
  int mDevice = 0;
  cudaStream_t mStream = nullptr;
  StageTimes mTimes;
  mutable LabelStats mStats;
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;
  bool mProfiling = false;
  std::vector<std::pair<const char*, cudaEvent_t>> mPhaseEvents;
  unsigned long long mDenseSeen = 0;  // dense leaves counted before this band

  DeviceBuffer<Point> mPoints;
  DeviceBuffer<int32_t> mSiteIndex;
  DeviceBuffer<Box> mBoxes;
  TreeView mView;

  Level mLevels[kTileLevels];
  DeviceBuffer<unsigned char> mScanTemp;
  DeviceBuffer<int32_t> mSiteOut;
  DeviceBuffer<float> mDistanceOut;
  DeviceBuffer<Counters> mCounters;
  DeviceBuffer<Counters> mCountersSaved;
};

}  // namespace

std::unique_ptr<CudaLabeller> makeCudaLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options,
                                               const RunControl& control)
{
  validate(grid, sites);
  return std::make_unique<GpuLabeller>(grid, sites, options, control);
}

std::unique_ptr<Labeller> makeGpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options,
                                          const RunControl& control)
{
  return std::make_unique<GpuLabeller>(grid, sites, options, control);
}

}  // namespace gpugeo::voronoi
