// The CUDA backend of the plane Voronoi raster: the sites in a bucket grid, each pixel labelled from
// the buckets around it (kernels in voronoi_grid_cuda.cu, per-element math in
// detail/nearest_site.h, shared with the CPU backend, so that both give the same labels and
// distances bit for bit; the CPU backend keeps its tile quadtree over a site tree).
//
// Index. The bucket side is a power of two from the densest 64 x 64 root of pixels (about 4 sites a
// bucket there, at least a quarter of the mean spacing, at most 2^24 buckets; sites outside the
// grid go to the nearest edge bucket). A counting sort on the device: each site's bucket and its
// rank in it (atomics), an exclusive scan of the counts (CUB), the order scattered and the points
// gathered by it. Exact duplicates are left in place (every tie goes to the lowest input index)
// unless a bucket holds more than a tile's list can (then they are dropped first, by a hash table,
// so that piles of copies cannot make pixels scan them all).
//
// Labels, per 64 x 64 root of the band (planned from its own buckets):
// - Roots of evenly filled dense buckets are labelled directly: the block stages the root's
//   buckets and two rings in shared memory; each warp's 8 x 8 pixels scan ring after ring of
//   buckets exactly in float64 until every best is certainly nearer than any bucket beyond.
// - Other roots are cut into tiles of about 8 sites; a warp per tile bounds the nearest distance,
//   gathers the sites that may be nearest to any of its pixels into shared memory and labels each
//   pixel by a certified float32 scan (float64 at near ties). A list of more than 256 sites makes
//   the tile split into four (a queue per level, its children labelled anywhere on the GPU),
//   down to single pixels, which then scan their buckets exactly.
// The source method (a GPU thread per pixel over the generators, with neighbourhood expansion) is in
// ../shared/papers (001); the measurements are in README.md.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "core/parallel.h"
#include "detail/bucket_grid.h"
#include "site_tree.h"
#include "voronoi_backends.h"
#include "voronoi_cuda.h"

namespace gpugeo::voronoi {

using namespace detail;
using cuda::DeviceBuffer;

namespace {

namespace g = detail::grid;

constexpr double kSitesPerBucket = 4.0;  // in the densest root

struct BucketChoice
{
  int shift = g::kMinShift;  // log2 of the bucket side
  int32_t densestRoot = 0;   // the most sites in one 64 x 64 root of pixels
};

// The bucket side for these pixel-frame sites on this grid: about kSitesPerBucket sites a bucket in
// the densest root, at least a quarter of the mean spacing, at most kMaxBuckets buckets.
BucketChoice chooseBuckets(const Grid& grid, const Point* points, int64_t n, int threads)
{
  const int64_t rootsX = (grid.width + g::kRoot - 1) / g::kRoot, rootsY = (grid.height + g::kRoot - 1) / g::kRoot;
  const int64_t roots = rootsX * rootsY;
  const int parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads > 0 ? threads : defaultThreadCount(),
                                                                           n / 65536 + 1)));
  std::vector<std::vector<int32_t>> perRoot(static_cast<size_t>(parts));
  parallelFor(parts, 1, parts, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
    {
      std::vector<int32_t>& count = perRoot[static_cast<size_t>(part)];
      count.assign(static_cast<size_t>(roots), 0);
      for (int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
      {
        const double rx = std::floor(points[i].x / g::kRoot), ry = std::floor(points[i].y / g::kRoot);
        const int64_t x = static_cast<int64_t>(std::min(std::max(rx, 0.0), double(rootsX - 1)));
        const int64_t y = static_cast<int64_t>(std::min(std::max(ry, 0.0), double(rootsY - 1)));
        ++count[static_cast<size_t>(y * rootsX + x)];
      }
    }
  });
  BucketChoice choice;
  for (int64_t r = 0; r < roots; ++r)
  {
    int32_t sum = 0;
    for (const std::vector<int32_t>& count : perRoot)
      sum += count[static_cast<size_t>(r)];
    choice.densestRoot = std::max(choice.densestRoot, sum);
  }
  const double pixels = double(grid.width) * double(grid.height);
  const double side = std::max({double(g::kRoot) * std::sqrt(kSitesPerBucket / std::max(1, choice.densestRoot)),
                                std::sqrt(pixels / double(n)) / 4.0, std::sqrt(pixels / g::kMaxBuckets)});
  while (choice.shift < g::kMaxShift && double(int64_t(1) << (choice.shift + 1)) <= side)
    ++choice.shift;
  auto buckets = [&](int s) {
    const int64_t b = int64_t(1) << s;
    return ((grid.width + b - 1) / b) * ((grid.height + b - 1) / b);
  };
  while (choice.shift < g::kMaxShift && buckets(choice.shift) > g::kMaxBuckets)
    ++choice.shift;
  return choice;
}

// A power of two, about twice the sites (n < 2^31, so n + 1 <= 2^31 always fits).
uint32_t tableCapacity(int64_t n)
{
  uint64_t capacity = 1024;
  while (capacity < uint64_t(2 * n) && capacity < (uint64_t(1) << 31))
    capacity *= 2;
  return static_cast<uint32_t>(capacity);
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
    GPUGEO_CUDA_CHECK(cudaDeviceGetAttribute(&mMultiprocessors, cudaDevAttrMultiProcessorCount, mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking));
    try
    {
      buildIndex(sites, control);
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
    if (rows == 0)
      return;
    const int64_t roots = ((mGrid.width + g::kRoot - 1) / g::kRoot) * ((rows + g::kRoot - 1) / g::kRoot);
    mHeavy.resize(static_cast<size_t>(4 * roots));
    mLight.resize(static_cast<size_t>(roots));
    g::GridView view = mView;
    view.rowBegin = static_cast<int>(row0);
    view.rowEnd = static_cast<int>(row0 + rows);
    view.outSite = deviceSite;
    view.outDistance = deviceDistance;
    phase(nullptr);
    g::launchLabels(view, mLevels, mHeavy.data(), mLight.data(), mHeavyCount.data(), mJobs.data(), mQueueCount.data(),
                    mMultiprocessors, mStream, &GpuLabeller::phaseHook, this);
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
        // The band buffers are allocated before any kernel runs, so nothing was counted.
        GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
        releaseBandBuffers();
        if (mBandRows <= g::kRoot)
          throw;
        mBandRows = std::max<int64_t>(g::kRoot, mBandRows / 2 / g::kRoot * g::kRoot);
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
  // Waits for the stream, then reads the device counters; the distinct sites are counted on the
  // first call where the index did not need to (a hash table over the sites).
  const LabelStats& stats() const override
  {
    unsigned long long counters[g::kCounterCount] = {};
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpy(counters, mCounters.data(), sizeof(counters), cudaMemcpyDeviceToHost));
    if (mStats.uniqueSites < 0)
      mStats.uniqueSites = countDistinct(mPoints.data(), mSiteCount);
    mStats.tiles = static_cast<int64_t>(counters[g::kTilesLabelled]);
    mStats.splitTiles = static_cast<int64_t>(counters[g::kTilesSplit]);
    mStats.candidates = static_cast<int64_t>(counters[g::kCandidates]);
    mStats.refinedPixels = static_cast<int64_t>(counters[g::kRefinedPixels]);
    mStats.denseTiles = static_cast<int64_t>(counters[g::kDirectRoots] + counters[g::kExactPixels]);
    return mStats;
  }
  std::vector<std::string> warnings() const override { return mWarnings; }

private:
  // The sites' bucket grid: prepared on the host (pixel frame into pinned memory, bucket side,
  // device buffers), uploaded in chunks, each chunk's sites counted into their buckets while the
  // next is on its way, then the counting sort's scan, order and gather.
  void buildIndex(const Sites& sites, const RunControl& control)
  {
    const int32_t n = static_cast<int32_t>(sites.count);
    mSiteCount = n;
    cuda::PinnedBuffer<Point> host;
    DeviceBuffer<Point> input;
    DeviceBuffer<uint32_t> key;
    DeviceBuffer<int32_t> rank, count;
    BucketChoice choice;
    int buckets = 0;
    {
      ScopedStage stage(mTimes, "prepare");
      host.resize(n);
      toPixelFrame(mGrid, sites, host.data(), mOptions.threads);
      choice = chooseBuckets(mGrid, host.data(), n, mOptions.threads);
      mView.width = static_cast<int>(mGrid.width);
      mView.height = static_cast<int>(mGrid.height);
      mView.shift = choice.shift;
      mView.bucket = 1 << choice.shift;
      mView.bx = static_cast<int>((mGrid.width + mView.bucket - 1) / mView.bucket);
      mView.by = static_cast<int>((mGrid.height + mView.bucket - 1) / mView.bucket);
      mView.maxTile = mView.bucket >= 4 ? 32 : 16;
      mView.pixelSize = mGrid.pixelSize;
      mLevels = mView.maxTile == 32 ? 5 : 4;
      buckets = mView.bx * mView.by;
      input.resize(n);
      key.resize(n);
      rank.resize(n);
      count.resize(buckets + 1);
      mStart.resize(buckets + 1);
      mSiteIndex.resize(n);
      mPoints.resize(n);
      mJobs.resize(size_t(mLevels) * g::kQueueCap);
      mQueueCount.resize(mLevels);
      mHeavyCount.resize(1);
      mCounters.resize(g::kCounterCount);
      size_t scanBytes = 0, maxBytes = 0;
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, count.data(), mStart.data(), buckets + 1, mStream));
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, maxBytes, count.data(), mStart.data(), buckets, mStream));
      mScanTemp.resize(std::max(scanBytes, maxBytes));
    }
    if (control.isCanceled())
      throw Canceled();

    cudaStream_t copy = nullptr;
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> events;
    try
    {
      const int chunks = std::max(1, std::min(8, n / 65536));
      events.resize(size_t(chunks) + 3, nullptr);
      for (cudaEvent_t& e : events)
        GPUGEO_CUDA_CHECK(cudaEventCreate(&e));
      const cudaEvent_t cleared = events[0], uploadStart = events[1], indexed = events[2];
      const cudaEvent_t* arrivedChunk = events.data() + 3;
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(count.data(), 0, sizeof(int32_t) * (buckets + 1), mStream));
      GPUGEO_CUDA_CHECK(cudaEventRecord(cleared, mStream));
      GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(copy, cleared, 0));
      GPUGEO_CUDA_CHECK(cudaEventRecord(uploadStart, copy));
      auto chunkFirst = [&](int c) { return int(int64_t(n) * c / chunks); };
      // All the copies first (the copy engine never waits for the host), then the counts, each
      // after its chunk.
      for (int c = 0; c < chunks; ++c)
      {
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(input.data() + chunkFirst(c), host.data() + chunkFirst(c),
                                          sizeof(Point) * size_t(chunkFirst(c + 1) - chunkFirst(c)),
                                          cudaMemcpyHostToDevice, copy));
        GPUGEO_CUDA_CHECK(cudaEventRecord(arrivedChunk[c], copy));
      }
      for (int c = 0; c < chunks; ++c)
      {
        GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mStream, arrivedChunk[c], 0));
        g::launchCount(input.data(), nullptr, chunkFirst(c), chunkFirst(c + 1) - chunkFirst(c), mView.shift, mView.bx,
                       mView.by, key.data(), rank.data(), count.data(), mStream);
      }
      const cudaEvent_t arrived = arrivedChunk[chunks - 1];
      int32_t kept = n;
      DeviceBuffer<uint8_t> duplicate;
      // Piles of exact copies would make every pixel near them scan them all: where a bucket holds
      // more than a tile's list can (only possible where a root does), they are dropped first.
      if (choice.densestRoot > g::kCap && fullestBucket(count.data(), buckets) > g::kCap)
      {
        duplicate.resize(n);
        kept = markDuplicates(input.data(), n, duplicate.data());
        mStats.uniqueSites = kept;
        GPUGEO_CUDA_CHECK(cudaMemsetAsync(count.data(), 0, sizeof(int32_t) * (buckets + 1), mStream));
        g::launchCount(input.data(), duplicate.data(), 0, n, mView.shift, mView.bx, mView.by, key.data(), rank.data(),
                       count.data(), mStream);
      }
      size_t bytes = mScanTemp.size();
      GPUGEO_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(mScanTemp.data(), bytes, count.data(), mStart.data(), buckets + 1, mStream));
      g::launchOrder(input.data(), duplicate.size() ? duplicate.data() : nullptr, key.data(), rank.data(),
                     mStart.data(), n, mSiteIndex.data(), mStream);
      g::launchGather(input.data(), mSiteIndex.data(), kept, mPoints.data(), mStream);
      GPUGEO_CUDA_CHECK(cudaEventRecord(indexed, mStream));
      GPUGEO_CUDA_CHECK(cudaEventSynchronize(indexed));
      float uploadMs = 0.f, indexMs = 0.f;
      GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&uploadMs, uploadStart, arrived));
      GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&indexMs, arrived, indexed));
      mTimes.add("upload", uploadMs);
      mTimes.add("index", indexMs);
      mSiteCount = kept;
    }
    catch (...)
    {
      cudaStreamSynchronize(copy);
      for (cudaEvent_t e : events)
        if (e)
          cudaEventDestroy(e);
      cudaStreamDestroy(copy);
      throw;
    }
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    cudaStreamDestroy(copy);

    mView.start = mStart.data();
    mView.points = mPoints.data();
    mView.index = mSiteIndex.data();
    mView.counters = mCounters.data();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCounters.data(), 0, sizeof(unsigned long long) * g::kCounterCount, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
  }

  // The most sites any bucket holds (waits for the stream).
  int32_t fullestBucket(const int32_t* count, int buckets)
  {
    DeviceBuffer<int32_t> most(1);
    size_t bytes = mScanTemp.size();
    GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(mScanTemp.data(), bytes, count, most.data(), buckets, mStream));
    int32_t value = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&value, most.data(), sizeof(value), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    return value;
  }

  // Flags every site that is not its point's lowest input index; returns the distinct points.
  int32_t markDuplicates(const Point* points, int32_t n, uint8_t* duplicate) const
  {
    const uint32_t capacity = tableCapacity(n);
    DeviceBuffer<int32_t> table(capacity), unique(1);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(table.data(), 0xff, sizeof(int32_t) * capacity, mStream));
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(unique.data(), 0, sizeof(int32_t), mStream));
    g::launchMarkDuplicates(points, n, table.data(), capacity, duplicate, unique.data(), mStream);
    int32_t value = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&value, unique.data(), sizeof(value), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    return value;
  }

  int64_t countDistinct(const Point* points, int32_t n) const
  {
    if (n == 0)
      return 0;
    DeviceBuffer<uint8_t> duplicate(n);
    return markDuplicates(points, n, duplicate.data());
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
      // Per pixel: the outputs, and the roots' work items (80 bytes a root of 4,096 pixels).
      const double bytesPerRow = double(mGrid.width) * ((withDistance ? 8.0 : 4.0) + 0.05);
      mBandRows = std::max<int64_t>(g::kRoot, int64_t(double(budget) / bytesPerRow) / g::kRoot * g::kRoot);
      mBandRows = std::min(mBandRows, (mGrid.height + g::kRoot - 1) / g::kRoot * g::kRoot);
    }
    return mBandRows;
  }

  static void phaseHook(void* self, const char* name) { static_cast<GpuLabeller*>(self)->phase(name); }

  // With profiling on, marks the end of a phase of a band's labelling (nullptr: the start).
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
    mHeavy.release();
    mLight.release();
  }

  Grid mGrid;
  LabellerOptions mOptions;
  std::string mDeviceName;
  int mDevice = 0;
  int mMultiprocessors = 1;
  cudaStream_t mStream = nullptr;
  StageTimes mTimes;
  mutable LabelStats mStats{-1};
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;
  bool mProfiling = false;
  std::vector<std::pair<const char*, cudaEvent_t>> mPhaseEvents;

  int32_t mSiteCount = 0;
  int mLevels = 5;
  g::GridView mView;
  DeviceBuffer<int32_t> mStart;
  DeviceBuffer<Point> mPoints;
  DeviceBuffer<int32_t> mSiteIndex;
  DeviceBuffer<g::TileJob> mJobs;
  DeviceBuffer<int> mQueueCount;
  DeviceBuffer<int> mHeavyCount;
  DeviceBuffer<g::RootItem> mHeavy;
  DeviceBuffer<g::RootItem> mLight;
  DeviceBuffer<unsigned long long> mCounters;
  DeviceBuffer<unsigned char> mScanTemp;
  DeviceBuffer<int32_t> mSiteOut;
  DeviceBuffer<float> mDistanceOut;
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
