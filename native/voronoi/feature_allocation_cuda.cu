// The CUDA backend of the allocation to lines and polygons (feature_allocation.h): the same prepared
// input as the CPU (feature_allocation.cpp), the bucket index built on the device, a warp per tile
// of 32 x 32 pixels taking the CPU's steps (labelTileBlocks there) with the shared math of
// detail/segment_grid.h and detail/feature_index.h, so that labels and distances are the CPU's bit
// for bit.
//
// Index: each segment's buckets counted (forEachBucketRow), an exclusive scan of the counts (CUB),
// (bucket, segment) pairs written and sorted by bucket (CUB's radix sort), each bucket's first
// entry found by binary search, the segments gathered in that order.
// Index: also the pyramid of the buckets' counts, a level a launch.
// Labels, in two kernels. tileKernel gives a warp a tile of 4 x 4 blocks (32 x 32 pixels, as the
// CPU's tiles): it searches once for the tile (searchBox: the tile's buckets and ring, the rectangle
// grown while it holds at most kTileRect buckets, nearestBucket where all are empty, then the
// pyramid descended level by level with the warp's cells in a shared-memory stack; its lanes over
// the entries, the least squared distance by a warp reduction; the entries and their distances kept
// in shared memory), keeps the entries of the segments that may be nearest to one of the tile's
// pixels, each once (a hash set of segment ids), then for each of its 8 x 8 blocks cuts that list
// for the block (the least distance from the block's centre among them bounds the block's pixels),
// copies the block's segments into shared memory (up to kKeepCap), and each 2 x 2 cell of pixels
// (two lanes) cuts the block's list again for itself before scanning it (labelCells). A tile whose
// search or list overflows shared memory, and a block whose list does, is left to labelKernel: a
// warp per 8 x 8 block that searches for the block alone (the same searchBox with the smaller
// rectangle) and, where even its lists overflow, visits the same buckets again for each cell, with
// the block's cut (where the stack overflowed: every bucket of the square around the block within
// reach). Every path evaluates the same segments' distances with the same formula, so labels and
// distances are the same whichever path a block takes. LabelStats' candidates count the blocks'
// lists here (the CPU counts its cells' lists); denseTiles the blocks left to labelKernel.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/parallel.h"
#include "detail/feature_index.h"
#include "detail/feature_label_cuda.cuh"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;
using cuda::DeviceBuffer;
namespace sg = detail::segments;
using namespace feature_cuda;

namespace {

__global__ void makeSegmentsKernel(const Point* vertex, const int32_t* feature, int64_t slots, sg::Segment* seg,
                                   int64_t* count, sg::BucketGrid g)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots)
    return;
  const int32_t f = feature[i];
  if (f < 0)
  {
    seg[i] = sg::Segment{0.0, 0.0, 0.0, 0.0, 0.0, -1, int32_t(i)};
    count[i] = 0;
    return;
  }
  const sg::Segment s = sg::makeSegment(vertex[i].x, vertex[i].y, vertex[i + 1].x, vertex[i + 1].y, f, int32_t(i));
  seg[i] = s;
  count[i] = sg::bucketCount(g, s);
}

__global__ void emitKernel(const sg::Segment* seg, const int64_t* offset, int64_t slots, sg::BucketGrid g,
                           uint32_t* key, int32_t* value)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots || seg[i].feature < 0)
    return;
  int64_t at = offset[i];
  const int64_t end = offset[i + 1];  // the count pass's total: never written past
  sg::forEachBucketRow(g, seg[i], [&](int x0, int x1, int y) {
    for (int x = x0; x <= x1 && at < end; ++x, ++at)
    {
      key[at] = uint32_t(int64_t(y) * g.bx + x);
      value[at] = int32_t(i);
    }
  });
}

__global__ void startKernel(const uint32_t* key, int64_t n, int64_t buckets, int64_t* start)
{
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b > buckets)
    return;
  int64_t lo = 0, hi = n;  // the first entry whose key is >= b
  while (lo < hi)
  {
    const int64_t mid = (lo + hi) / 2;
    if (int64_t(key[mid]) < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  start[b] = lo;
}

__global__ void bucketCountKernel(const int64_t* start, int64_t buckets, int32_t* counts)
{
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < buckets)
    counts[b] = int32_t(start[b + 1] - start[b]);
}

// A level of the pyramid from the one below: each cell the sum of its (up to) four children.
__global__ void levelUpKernel(const int32_t* below, int widthBelow, int heightBelow, int32_t* above, int width,
                              int height)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(width) * height)
    return;
  const int X = int(i % width), Y = int(i / width);
  int32_t sum = 0;
  for (int j = 0; j < 4; ++j)
  {
    const int x = 2 * X + (j & 1), y = 2 * Y + (j >> 1);
    if (x < widthBelow && y < heightBelow)
      sum += below[int64_t(y) * widthBelow + x];
  }
  above[i] = sum;
}

__global__ void gatherKernel(const sg::Segment* seg, const int32_t* value, int64_t n, sg::Segment* entries)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n)
    entries[k] = seg[value[k]];
}

__global__ void fillKernel(int32_t* out, int64_t n, int32_t value)
{
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

// A warp per span: its pixels take the lowest feature whose interior holds them.
__global__ void paintKernel(const Span* spans, int64_t first, int64_t last, int64_t row0, int width, int32_t* cover)
{
  const int lane = threadIdx.x % 32;
  for (int64_t k = first + (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; k < last;
       k += (int64_t(gridDim.x) * blockDim.x) / 32)
  {
    const Span s = spans[k];
    int32_t* line = cover + (int64_t(s.row) - row0) * width;
    for (int c = s.c0 + lane; c <= s.c1; c += 32)
      atomicMin(line + c, s.feature);
  }
}

unsigned gridFor(int64_t n, int threads = 256)
{
  return static_cast<unsigned>(std::max<int64_t>(1, (n + threads - 1) / threads));
}

class GpuFeatureLabeller final : public Labeller
{
public:
  GpuFeatureLabeller(const Grid& grid, const FeatureSites& features, const FeatureLabellerOptions& options,
                     const RunControl& control)
    : mGrid(grid), mOptions(options)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDeviceName = gpu.name;
    mDevice = gpu.device;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    int resident = 0;
    GPUGEO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, labelKernel, kWarps * 32, 0));
    mLabelGrid = std::max(1, resident) * std::max(1, gpu.multiprocessors);
    const int threads = options.threads > 0 ? options.threads : defaultThreadCount();
    PreparedFeatures prepared;
    {
      ScopedStage stage(mTimes, "prepare");
      prepared = prepareFeatures(grid, features, options.interior, threads, control);
    }
    if (control.isCanceled())
      throw Canceled();
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking));
    try
    {
      buildIndex(prepared);
    }
    catch (...)
    {
      cudaStreamDestroy(mStream);
      throw;
    }
    mStats.uniqueSites = prepared.featuresWithSegments;
  }

  ~GpuFeatureLabeller() override
  {
    cudaSetDevice(mDevice);
    cudaStreamSynchronize(mStream);
    cudaStreamDestroy(mStream);
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
    int64_t done = 0;
    while (done < rows)
    {
      if (control.isCanceled())
        throw Canceled();
      const int64_t part = std::min(bandRows(distance != nullptr), rows - done);
      try
      {
        const size_t pixels = static_cast<size_t>(part * mGrid.width);
        mSiteOut.resize(pixels);
        if (distance)
          mDistanceOut.resize(pixels);
        if (mSpanCount)
          mCover.resize(pixels);
        cuda::EventTimer compute;
        compute.start(mStream);
        launchBand(row0 + done, part, distance != nullptr);
        compute.stop(mStream);
        mTimes.add("compute", compute.milliseconds());
        const auto downloadStart = std::chrono::steady_clock::now();
        cuda::copyToHost(site + done * mGrid.width, mSiteOut.data(), pixels * sizeof(int32_t));
        if (distance)
          cuda::copyToHost(distance + done * mGrid.width, mDistanceOut.data(), pixels * sizeof(float));
        mTimes.add("download",
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - downloadStart).count());
      }
      catch (const DeviceOutOfMemory&)
      {
        GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
        mSiteOut.release();
        mDistanceOut.release();
        mCover.release();
        if (mBandRows <= sg::kBlock)
          throw;
        mBandRows = std::max<int64_t>(sg::kBlock, mBandRows / 2 / sg::kBlock * sg::kBlock);
        mWarnings.push_back("The GPU ran out of memory; continuing in bands of " + std::to_string(mBandRows) + " rows.");
        continue;
      }
      done += part;
    }
  }

  Backend backend() const override { return Backend::Gpu; }
  std::string deviceName() const override { return mDeviceName; }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override
  {
    unsigned long long counters[kCounterCount] = {};
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpy(counters, mCounters.data(), sizeof(counters), cudaMemcpyDeviceToHost));
    mStats.tiles = static_cast<int64_t>(counters[kBlocks]);
    mStats.splitTiles = static_cast<int64_t>(counters[kWidened]);
    mStats.candidates = static_cast<int64_t>(counters[kCandidates]);
    mStats.refinedPixels = static_cast<int64_t>(counters[kInside]);
    mStats.denseTiles = static_cast<int64_t>(counters[kLeftByTile] + counters[kLeftByBlock]);
    return mStats;
  }
  std::vector<std::string> warnings() const override { return mWarnings; }

private:
  void buildIndex(const PreparedFeatures& p)
  {
    const int64_t slots = static_cast<int64_t>(p.vertex.size());
    const int64_t buckets = p.buckets.count();
    cuda::PinnedBuffer<Point> hostVertex;
    cuda::PinnedBuffer<int32_t> hostFeature;
    hostVertex.resize(static_cast<size_t>(slots));
    hostFeature.resize(static_cast<size_t>(slots));
    std::copy(p.vertex.begin(), p.vertex.end(), hostVertex.data());
    std::copy(p.segmentFeature.begin(), p.segmentFeature.end(), hostFeature.data());
    DeviceBuffer<Point> vertex(static_cast<size_t>(slots));
    DeviceBuffer<int32_t> feature(static_cast<size_t>(slots));
    DeviceBuffer<sg::Segment> seg(static_cast<size_t>(slots));
    DeviceBuffer<int64_t> count(static_cast<size_t>(slots) + 1), offset(static_cast<size_t>(slots) + 1);
    mCounters.resize(kCounterCount);

    cuda::EventTimer upload, index;
    upload.start(mStream);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(vertex.data(), hostVertex.data(), sizeof(Point) * size_t(slots),
                                      cudaMemcpyHostToDevice, mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(feature.data(), hostFeature.data(), sizeof(int32_t) * size_t(slots),
                                      cudaMemcpyHostToDevice, mStream));
    if (!p.spans.empty())
    {
      mSpans.resize(p.spans.size());
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mSpans.data(), p.spans.data(), sizeof(Span) * p.spans.size(),
                                        cudaMemcpyHostToDevice, mStream));
      mRowSpan = p.rowSpan;
      mSpanCount = static_cast<int64_t>(p.spans.size());
    }
    upload.stop(mStream);
    mTimes.add("upload", upload.milliseconds());

    index.start(mStream);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(count.data() + slots, 0, sizeof(int64_t), mStream));
    makeSegmentsKernel<<<gridFor(slots), 256, 0, mStream>>>(vertex.data(), feature.data(), slots, seg.data(),
                                                             count.data(), p.buckets);
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t scanBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, count.data(), offset.data(), slots + 1, mStream));
    DeviceBuffer<unsigned char> temp(scanBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), scanBytes, count.data(), offset.data(), slots + 1, mStream));
    int64_t total = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&total, offset.data() + slots, sizeof(total), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    if (total >= (int64_t(1) << 31))
      throw DeviceOutOfMemory("the segments would be listed " + std::to_string(total) +
                              " times in their buckets, more than the GPU index holds (2^31)");
    DeviceBuffer<uint32_t> key(static_cast<size_t>(total)), keySorted(static_cast<size_t>(total));
    DeviceBuffer<int32_t> value(static_cast<size_t>(total)), valueSorted(static_cast<size_t>(total));
    emitKernel<<<gridFor(slots), 256, 0, mStream>>>(seg.data(), offset.data(), slots, p.buckets, key.data(),
                                                     value.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    int bits = 1;
    while (bits < 32 && (int64_t(1) << bits) < buckets)
      ++bits;
    size_t sortBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, key.data(), keySorted.data(), value.data(),
                                                      valueSorted.data(), total, 0, bits, mStream));
    temp.resize(sortBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), sortBytes, key.data(), keySorted.data(),
                                                      value.data(), valueSorted.data(), total, 0, bits, mStream));
    mStart.resize(static_cast<size_t>(buckets + 1));
    startKernel<<<gridFor(buckets + 1), 256, 0, mStream>>>(keySorted.data(), total, buckets, mStart.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    mPyramid = pyramidOf(p.buckets);
    mCounts.resize(static_cast<size_t>(mPyramid.levelStart[mPyramid.levels]));
    bucketCountKernel<<<gridFor(buckets), 256, 0, mStream>>>(mStart.data(), buckets, mCounts.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    for (int k = 1; k < mPyramid.levels; ++k)
    {
      levelUpKernel<<<gridFor(int64_t(mPyramid.levelWidth[k]) * mPyramid.levelHeight[k]), 256, 0, mStream>>>(
        mCounts.data() + mPyramid.levelStart[k - 1], mPyramid.levelWidth[k - 1], mPyramid.levelHeight[k - 1],
        mCounts.data() + mPyramid.levelStart[k], mPyramid.levelWidth[k], mPyramid.levelHeight[k]);
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    mEntries.resize(static_cast<size_t>(std::max<int64_t>(1, total)));
    gatherKernel<<<gridFor(total), 256, 0, mStream>>>(seg.data(), valueSorted.data(), total, mEntries.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCounters.data(), 0, sizeof(unsigned long long) * kCounterCount, mStream));
    index.stop(mStream);
    mTimes.add("index", index.milliseconds());

    mView.g = p.buckets;
    mView.start = mStart.data();
    mView.entries = mEntries.data();
    mView.pyramid = mPyramid;
    mView.counts = mCounts.data();
    mView.slack = p.slack;
    mView.width = static_cast<int>(mGrid.width);
    mView.height = static_cast<int>(mGrid.height);
  }

  void launchBand(int64_t row0, int64_t rows, bool withDistance)
  {
    const int64_t pixels = rows * mGrid.width;
    Band band{static_cast<int>(row0), static_cast<int>(row0 + rows), nullptr, mSiteOut.data(),
              withDistance ? mDistanceOut.data() : nullptr, mGrid.pixelSize, mCounters.data()};
    if (mSpanCount)
    {
      fillKernel<<<gridFor(pixels, 1024) > 4096 ? 4096 : gridFor(pixels, 1024), 1024, 0, mStream>>>(mCover.data(),
                                                                                                      pixels, INT32_MAX);
      GPUGEO_CUDA_CHECK_LAUNCH();
      const int64_t first = mRowSpan[static_cast<size_t>(row0)], last = mRowSpan[static_cast<size_t>(row0 + rows)];
      if (last > first)
      {
        paintKernel<<<gridFor((last - first) * 32) > 8192 ? 8192 : gridFor((last - first) * 32), 256, 0, mStream>>>(
          mSpans.data(), first, last, row0, static_cast<int>(mGrid.width), mCover.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
      }
      band.cover = mCover.data();
    }
    constexpr int K = sg::kBlock;
    const int blocksX = static_cast<int>((mGrid.width + K - 1) / K);
    const int blocksY = static_cast<int>((rows + K - 1) / K);
    const int64_t blocks = int64_t(blocksX) * blocksY;
    const int tilesX = (blocksX + kTileBlocks - 1) / kTileBlocks, tilesY = (blocksY + kTileBlocks - 1) / kTileBlocks;
    mLeft.resize(static_cast<size_t>(blocks) + 1);  // the blocks left to labelKernel, then their count
    unsigned* left = reinterpret_cast<unsigned*>(mLeft.data() + blocks);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(left, 0, sizeof(unsigned), mStream));
    tileKernel<<<static_cast<unsigned>(int64_t(tilesX) * tilesY), 32, 0, mStream>>>(mView, band, blocksX, blocksY,
                                                                                     tilesX, mLeft.data(), left);
    GPUGEO_CUDA_CHECK_LAUNCH();
    // (The host does not know how many were left: as many CUDA blocks as can be resident at once,
    // each looping over the list, so that an empty list costs one short wave.)
    labelKernel<<<static_cast<unsigned>(std::min<int64_t>(mLabelGrid, gridFor(blocks, kWarps))), kWarps * 32, 0,
                  mStream>>>(
      mView, band, blocksX, mLeft.data(), left);
    GPUGEO_CUDA_CHECK_LAUNCH();
  }

  // Rows per band: what the memory budget allows, in whole blocks of rows.
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
      const double bytesPerRow =
        double(mGrid.width) * (4.0 + (withDistance ? 4.0 : 0.0) + (mSpanCount ? 4.0 : 0.0) + 4.0 / (sg::kBlock * sg::kBlock));
      mBandRows = std::max<int64_t>(sg::kBlock, int64_t(double(budget) / bytesPerRow) / sg::kBlock * sg::kBlock);
      mBandRows = std::min(mBandRows, (mGrid.height + sg::kBlock - 1) / sg::kBlock * sg::kBlock);
    }
    return mBandRows;
  }

  Grid mGrid;
  FeatureLabellerOptions mOptions;
  std::string mDeviceName;
  int mDevice = 0;
  int64_t mLabelGrid = 1;  // labelKernel's CUDA blocks: those resident at once on the device
  cudaStream_t mStream = nullptr;
  StageTimes mTimes;
  mutable LabelStats mStats;
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;

  SegmentIndexView mView;
  DeviceBuffer<int64_t> mStart;
  DeviceBuffer<sg::Segment> mEntries;
  Pyramid mPyramid;
  DeviceBuffer<int32_t> mCounts;
  DeviceBuffer<Span> mSpans;
  std::vector<int64_t> mRowSpan;
  int64_t mSpanCount = 0;
  DeviceBuffer<unsigned long long> mCounters;
  DeviceBuffer<int32_t> mSiteOut;
  DeviceBuffer<float> mDistanceOut;
  DeviceBuffer<int32_t> mCover;
  DeviceBuffer<int32_t> mLeft;
};

}  // namespace

std::unique_ptr<Labeller> makeGpuFeatureLabeller(const Grid& grid, const FeatureSites& features,
                                                 const FeatureLabellerOptions& options, const RunControl& control)
{
  return std::make_unique<GpuFeatureLabeller>(grid, features, options, control);
}

}  // namespace gpugeo::voronoi
