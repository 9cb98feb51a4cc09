// The CUDA backend of the plane Voronoi raster.
//
// Per band of rows: (1) one thread per tile finds the tile's bound and counts its candidates,
// (2) CUB scans the counts into list offsets, (3) one thread per tile writes its list, (4) one
// thread per pixel scans its tile's list (or searches the tree, for dense tiles). The site tree is
// built on the device with a CUB radix sort along the Morton curve. All per-element math is in
// detail/nearest_site.h, shared with the CPU backend.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
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
// Bands are cut so that a band's candidate offsets fit in int32 (tiles * kMaxTileCandidates).
constexpr int64_t kMaxBandPixels = int64_t(1) << 30;

__global__ void mortonKeysKernel(const Point* points, int32_t n, Box bounds, double scaleX, double scaleY,
                                 uint64_t* keys, int32_t* index)
{
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  keys[i] = mortonKey(points[i], bounds, scaleX, scaleY);
  index[i] = i;
}

__global__ void gatherKernel(const Point* points, const int32_t* order, int32_t n, Point* sorted, uint8_t* keep)
{
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const Point p = points[order[i]];
  sorted[i] = p;
  keep[i] = (i == 0 || !samePoint(p, points[order[i - 1]])) ? 1 : 0;
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

struct BandShape
{
  int64_t row0;
  int64_t rows;
  int64_t width;
  int64_t span;
  int64_t tilesX;
  int64_t tiles;

  __device__ Box tileRegion(int64_t tile, int64_t& c0, int64_t& r0) const
  {
    c0 = (tile % tilesX) * span;
    r0 = row0 + (tile / tilesX) * span;
    const int64_t c1 = minOf(width, c0 + span);
    const int64_t r1 = minOf(row0 + rows, r0 + span);
    return pixelCentreBox(c0, c1, r0, r1);
  }
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

__global__ void tileBoundsKernel(TreeView tree, BandShape band, double* bounds, int32_t* counts,
                                 unsigned long long* denseTiles)
{
  const int64_t tile = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tile >= band.tiles)
    return;
  int64_t c0, r0;
  const Box region = band.tileRegion(tile, c0, r0);
  RegionBoundVisitor bound{&tree, region, 1.79769313486231570e308};
  traverse(tree, bound);
  RegionCandidateVisitor<NoEmit> gather{&tree, region, bound.bound, kMaxTileCandidates, NoEmit{}};
  traverse(tree, gather);
  const bool dense = gather.count > kMaxTileCandidates;
  if (dense)
    atomicAdd(denseTiles, 1ull);
  bounds[tile] = bound.bound;
  counts[tile] = dense ? 0 : gather.count;
}

__global__ void tileFillKernel(TreeView tree, BandShape band, const double* bounds, const int32_t* counts,
                               const int32_t* offsets, LocalPoint* local, int32_t* slots)
{
  const int64_t tile = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tile >= band.tiles || counts[tile] == 0)
    return;
  int64_t c0, r0;
  const Box region = band.tileRegion(tile, c0, r0);
  const int32_t offset = offsets[tile];
  RegionCandidateVisitor<SlotEmit> gather{&tree, region, bounds[tile], kMaxTileCandidates, SlotEmit{slots + offset}};
  traverse(tree, gather);
  for (int k = 0; k < gather.count; ++k)
    local[offset + k] = toLocal(tree.points[slots[offset + k]], c0, r0);
}

// One block per tile. The block stages the tile's candidate list in shared memory, then its
// threads take the tile's pixels in row-major order (a warp writes 32 consecutive pixels of a row,
// or whole short rows of a small tile), each scanning the list from shared memory.
constexpr int kLabelThreads = 256;

struct TileOutput
{
  int32_t* site;
  float* distance;
  double pixelSize;
  unsigned long long* refinedPixels;
};

__global__ void __launch_bounds__(kLabelThreads) labelTilesKernel(TreeView tree, BandShape band, int spanShift,
                                                                  const int32_t* counts, const int32_t* offsets,
                                                                  const LocalPoint* local, const int32_t* slots,
                                                                  TileOutput out)
{
  __shared__ LocalPoint sLocal[kMaxTileCandidates];
  __shared__ Point sPoint[kMaxTileCandidates];
  __shared__ int32_t sSite[kMaxTileCandidates];
  const int32_t tile = blockIdx.x;
  const int32_t count = counts[tile];
  if (count == 0)
    return;  // a dense tile: denseTilesKernel
  const int32_t offset = offsets[tile];
  for (int k = threadIdx.x; k < count; k += blockDim.x)
  {
    const int32_t slot = slots[offset + k];
    sLocal[k] = local[offset + k];
    sPoint[k] = tree.points[slot];
    sSite[k] = tree.siteIndex[slot];
  }
  __syncthreads();
  const CandidateList list{sLocal, sPoint, sSite, count};
  const int32_t span = int32_t(band.span);
  const int32_t tileX = tile % int32_t(band.tilesX);
  const int64_t c0 = int64_t(tileX) << spanShift;
  const int32_t localRow0 = (tile / int32_t(band.tilesX)) << spanShift;
  const int64_t r0 = band.row0 + localRow0;
  const int32_t columns = int32_t(minOf<int64_t>(span, band.width - c0));
  const int32_t rows = int32_t(minOf<int64_t>(span, band.rows - localRow0));
  const float span2 = float(span * span);
  unsigned refined = 0;
  for (int32_t p = threadIdx.x; p < (rows << spanShift); p += kLabelThreads)
  {
    const int32_t dr = p >> spanShift;
    const int32_t dc = p & (span - 1);
    if (dc >= columns)
      continue;
    const PixelAnswer answer = nearestCandidate(list, c0 + dc, r0 + dr, c0, r0, span2);
    refined += answer.refined;
    const int64_t i = int64_t(localRow0 + dr) * band.width + c0 + dc;
    out.site[i] = answer.site;
    if (out.distance)
      out.distance[i] = distanceValue(answer.squared, out.pixelSize);
  }
  if (refined)
    atomicAdd(out.refinedPixels, static_cast<unsigned long long>(refined));
}

// The pixels of dense tiles (candidate list too long), each by an exact search of the tree.
// Launched only when a band has dense tiles; blocks of other tiles return at once.
__global__ void __launch_bounds__(kLabelThreads) denseTilesKernel(TreeView tree, BandShape band, int spanShift,
                                                                  const int32_t* counts, TileOutput out)
{
  const int32_t tile = blockIdx.x;
  if (counts[tile] != 0)
    return;
  const int32_t span = int32_t(band.span);
  const int64_t c0 = int64_t(tile % int32_t(band.tilesX)) << spanShift;
  const int32_t localRow0 = (tile / int32_t(band.tilesX)) << spanShift;
  const int32_t columns = int32_t(minOf<int64_t>(span, band.width - c0));
  const int32_t rows = int32_t(minOf<int64_t>(span, band.rows - localRow0));
  for (int32_t p = threadIdx.x; p < (rows << spanShift); p += kLabelThreads)
  {
    const int32_t dr = p >> spanShift;
    const int32_t dc = p & (span - 1);
    if (dc >= columns)
      continue;
    const PixelAnswer answer = nearestByTree(tree, c0 + dc, band.row0 + localRow0 + dr);
    const int64_t i = int64_t(localRow0 + dr) * band.width + c0 + dc;
    out.site[i] = answer.site;
    if (out.distance)
      out.distance[i] = distanceValue(answer.squared, out.pixelSize);
  }
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
    GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
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
    cudaStreamSynchronize(mStream);
    cudaStreamDestroy(mStream);
  }

  void labelRowsOnDevice(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance) override
  {
    const int64_t maxRows = std::max<int64_t>(mStats.tileSpan, kMaxBandPixels / mGrid.width / mStats.tileSpan * mStats.tileSpan);
    for (int64_t done = 0; done < rows; done += maxRows)
    {
      const int64_t part = std::min(maxRows, rows - done);
      labelBand(row0 + done, part, deviceSite + done * mGrid.width, deviceDistance ? deviceDistance + done * mGrid.width : nullptr);
    }
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    int64_t done = 0;
    while (done < rows)
    {
      if (control.isCanceled())
        throw Canceled();
      const int64_t part = std::min(bandRows(distance != nullptr), rows - done);
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

        cuda::EventTimer download;
        download.start(mStream);
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(site + done * mGrid.width, mSiteOut.data(), part * mGrid.width * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, mStream));
        if (distance)
          GPUGEO_CUDA_CHECK(cudaMemcpyAsync(distance + done * mGrid.width, mDistanceOut.data(),
                                            part * mGrid.width * sizeof(float), cudaMemcpyDeviceToHost, mStream));
        download.stop(mStream);
        mTimes.add("download", download.milliseconds());
      }
      catch (const DeviceOutOfMemory&)
      {
        releaseBandBuffers();
        if (mBandRows <= mStats.tileSpan)
          throw;
        mBandRows = std::max<int64_t>(mStats.tileSpan, mBandRows / 2 / mStats.tileSpan * mStats.tileSpan);
        mWarnings.push_back("The GPU ran out of memory; continuing in bands of " + std::to_string(mBandRows) + " rows.");
        continue;
      }
      done += part;
    }
    unsigned long long refined = 0, dense = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpy(&refined, mRefinedPixels.data(), sizeof(refined), cudaMemcpyDeviceToHost));
    GPUGEO_CUDA_CHECK(cudaMemcpy(&dense, mDenseTiles.data(), sizeof(dense), cudaMemcpyDeviceToHost));
    mStats.refinedPixels = static_cast<int64_t>(refined);
    mStats.denseTiles = static_cast<int64_t>(dense);
  }

  cudaStream_t stream() const override { return mStream; }
  void setProfiling(bool on) override { mProfiling = on; }
  StageTimes phaseTimes() override
  {
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
  const LabelStats& stats() const override { return mStats; }
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
    mortonKeysKernel<<<blocksFor(n, 256), 256, 0, mStream>>>(input.data(), n, bounds, mortonScale(bounds.x0, bounds.x1),
                                                              mortonScale(bounds.y0, bounds.y1), keys.data(), order.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t tempBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, keys.data(), sortedKeys.data(), order.data(),
                                                      sortedOrder.data(), n, 0, 64, mStream));
    DeviceBuffer<unsigned char> temp(tempBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), tempBytes, keys.data(), sortedKeys.data(),
                                                      order.data(), sortedOrder.data(), n, 0, 64, mStream));

    DeviceBuffer<Point> sorted(n);
    DeviceBuffer<uint8_t> keep(n);
    gatherKernel<<<blocksFor(n, 256), 256, 0, mStream>>>(input.data(), sortedOrder.data(), n, sorted.data(), keep.data());
    GPUGEO_CUDA_CHECK_LAUNCH();

    mPoints.resize(n);
    mSiteIndex.resize(n);
    DeviceBuffer<int32_t> selected(1);
    size_t selectBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, selectBytes, sorted.data(), keep.data(), mPoints.data(),
                                                 selected.data(), n, mStream));
    temp.resize(std::max(tempBytes, selectBytes));
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), selectBytes, sorted.data(), keep.data(), mPoints.data(),
                                                 selected.data(), n, mStream));
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), selectBytes, sortedOrder.data(), keep.data(),
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
    mStats.tileSpan = chooseTileSpan(unique, mGrid.width, mGrid.height, mOptions.tileSpan);

    mRefinedPixels.resize(1);
    mDenseTiles.resize(1);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mRefinedPixels.data(), 0, sizeof(unsigned long long), mStream));
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mDenseTiles.data(), 0, sizeof(unsigned long long), mStream));
  }

  // Rows per band for labelRows(): what the memory budget allows, a whole number of tile rows.
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
      const int64_t span = mStats.tileSpan;
      // Per row: the outputs, plus per tile its bound, count, offset and up to 16 candidates.
      const double bytesPerRow = double(mGrid.width) * ((withDistance ? 8.0 : 4.0) + (8.0 + 4 + 4 + 16 * 12) / (span * span));
      mBandRows = std::max<int64_t>(span, int64_t(double(budget) / bytesPerRow) / span * span);
      mBandRows = std::min(mBandRows, (mGrid.height + span - 1) / span * span);
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
    mTileBounds.release();
    mTileCounts.release();
    mTileOffsets.release();
    mCandidateLocal.release();
    mCandidateSlots.release();
    mScanTemp.release();
  }

  void labelBand(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance)
  {
    const int64_t span = mStats.tileSpan;
    BandShape band{row0, rows, mGrid.width, span, (mGrid.width + span - 1) / span, 0};
    band.tiles = band.tilesX * ((rows + span - 1) / span);
    const int32_t tiles = static_cast<int32_t>(band.tiles);

    mTileBounds.resize(tiles);
    mTileCounts.resize(tiles);
    mTileOffsets.resize(tiles);
    const unsigned long long denseBefore = mDenseCount;
    phase(nullptr);
    tileBoundsKernel<<<blocksFor(tiles, kTileThreads), kTileThreads, 0, mStream>>>(mView, band, mTileBounds.data(),
                                                                                   mTileCounts.data(), mDenseTiles.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    phase("tile bounds");
    size_t scanBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, mTileCounts.data(), mTileOffsets.data(), tiles, mStream));
    mScanTemp.resize(scanBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(mScanTemp.data(), scanBytes, mTileCounts.data(), mTileOffsets.data(),
                                                    tiles, mStream));
    int32_t lastOffset = 0, lastCount = 0;
    unsigned long long denseAfter = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&lastOffset, mTileOffsets.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&lastCount, mTileCounts.data() + tiles - 1, sizeof(int32_t), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&denseAfter, mDenseTiles.data(), sizeof(denseAfter), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    phase("scan");
    mDenseCount = denseAfter;
    const int64_t total = int64_t(lastOffset) + lastCount;
    mStats.tiles += band.tiles;
    mStats.candidates += total;

    mCandidateLocal.resize(std::max<int64_t>(total, 1));
    mCandidateSlots.resize(std::max<int64_t>(total, 1));
    tileFillKernel<<<blocksFor(tiles, kTileThreads), kTileThreads, 0, mStream>>>(
      mView, band, mTileBounds.data(), mTileCounts.data(), mTileOffsets.data(), mCandidateLocal.data(), mCandidateSlots.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    phase("tile lists");
    int spanShift = 0;
    while ((int64_t(1) << spanShift) < span)
      ++spanShift;
    const TileOutput out{deviceSite, deviceDistance, mGrid.pixelSize, mRefinedPixels.data()};
    labelTilesKernel<<<tiles, kLabelThreads, 0, mStream>>>(mView, band, spanShift, mTileCounts.data(),
                                                           mTileOffsets.data(), mCandidateLocal.data(),
                                                           mCandidateSlots.data(), out);
    GPUGEO_CUDA_CHECK_LAUNCH();
    if (denseAfter > denseBefore)
    {
      denseTilesKernel<<<tiles, kLabelThreads, 0, mStream>>>(mView, band, spanShift, mTileCounts.data(), out);
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    phase("label");
  }

  Grid mGrid;
  LabellerOptions mOptions;
  std::string mDeviceName;
  cudaStream_t mStream = nullptr;
  StageTimes mTimes;
  LabelStats mStats;
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;
  bool mProfiling = false;
  unsigned long long mDenseCount = 0;  // the device counter's value after the last band
  std::vector<std::pair<const char*, cudaEvent_t>> mPhaseEvents;

  DeviceBuffer<Point> mPoints;
  DeviceBuffer<int32_t> mSiteIndex;
  DeviceBuffer<Box> mBoxes;
  TreeView mView;

  DeviceBuffer<double> mTileBounds;
  DeviceBuffer<int32_t> mTileCounts;
  DeviceBuffer<int32_t> mTileOffsets;
  DeviceBuffer<LocalPoint> mCandidateLocal;
  DeviceBuffer<int32_t> mCandidateSlots;
  DeviceBuffer<unsigned char> mScanTemp;
  DeviceBuffer<int32_t> mSiteOut;
  DeviceBuffer<float> mDistanceOut;
  DeviceBuffer<unsigned long long> mRefinedPixels;
  DeviceBuffer<unsigned long long> mDenseTiles;
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
