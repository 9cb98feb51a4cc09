// The CUDA backend of the plane Voronoi raster: the sites in a bucket grid, each pixel labelled from
// the buckets around it (kernels in voronoi_index_cuda.cu and voronoi_grid_cuda.cu, per-element math
// in detail/nearest_site.h, shared with the CPU backend, so that both give the same labels and
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
// Overlapped start (500,000 sites or more, spread out or crowded, no bucket holding more than a
// tile's list): the host cuts the sites into up to eight bands of bucket rows of about equal work
// (pixels and sites; detail/site_bands.h), each site with its input index (sent as the gaps between
// a band's indices, mostly a byte each: IndexGaps). The bands go up one after another, in the order
// that lets labelling start soonest; each is indexed into its own buckets (its indices restored by a
// scan, count, scan from the band's first slot, scatter) on an index stream as soon as it has
// arrived, and each 64 x 64 root of pixels is labelled once every band within its reach is indexed
// (pieces: the roots that can start at the same arrival, wherever they lie; a crowded patch's roots
// reach a few rows, the sparse roots beside them many), while later bands are still on their way
// (up to four labelling streams taking turns, so that pieces ready together run together and one
// piece's last tiles overlap the next one's first). Until a band is indexed its buckets read as
// empty and its slots as sites farther than any; the reach (from a bound on every pixel's nearest
// distance) keeps every site that can be nearest, ties included, inside the bands waited for, so
// labels and distances are the same bits as the one-piece index's. Every read of the direct scan
// (its staged rings included) and of a crowded root's pixels (no farther than the nearest distance
// and two buckets) lies within the reach; a tile's may not (its bound from a site outside the grid,
// held in an edge bucket) and may meet a band being indexed: forRect reads bucket lengths as at
// least 0 and the sites are fewer than 2^26, so it sees real sites or far ones, never a slot outside
// the sites.
//
// Labels, per 64 x 64 root of the band (planned from its own buckets):
// - Roots of evenly filled dense buckets are labelled directly: the block stages the root's
//   buckets and two rings in shared memory; each warp's 8 x 8 pixels scan ring after ring of
//   buckets exactly in float64 until every best is certainly nearer than any bucket beyond.
// - Roots holding more sites than pixels (crowded) are labelled a pixel a thread: each pixel scans
//   its own bucket exactly, then grows its rectangle of buckets on each side its best is not
//   certainly nearer than (the direct scan's certificate, per pixel).
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
#include "detail/site_bands.h"
#include "site_tree.h"
#include "voronoi_backends.h"
#include "voronoi_cuda.h"

namespace gpugeo::voronoi {

using namespace detail;
using cuda::DeviceBuffer;

namespace {

namespace g = detail::grid;

constexpr double kSitesPerBucket = 4.0;  // in the densest root
constexpr int64_t kBandedAtLeast = 500000;  // sites for the overlapped start ...
// ... and fewer than this: a read beyond the reach sums up to 32 rows of a band being indexed, each
// at most the band's sites, in 32-bit offsets (voronoi_grid_cuda.cu, forRect).
constexpr int64_t kBandedBelow = int64_t(1) << 26;
constexpr int kBands = 8;
// Labelling streams the pieces take turns on: a piece of crowded roots runs several short kernels in
// a row, so two streams left the last pieces queued behind each other after the upload.
constexpr int kLabelStreams = 4;
static_assert(kRootSide == g::kRoot, "the bands' pieces are the labelling's roots");

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

// The 64 x 64 roots of `rows` rows of `width` pixels.
int64_t rootsOf(int64_t width, int64_t rows)
{
  return ((width + g::kRoot - 1) / g::kRoot) * ((rows + g::kRoot - 1) / g::kRoot);
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
    g::prepareLabels();
    try
    {
      buildIndex(sites, control);
    }
    catch (...)
    {
      cudaStreamSynchronize(mStream);
      releaseStart();
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
    releaseStart();
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
    // In one piece where the whole index is there (it always is but during an overlapped start), and
    // for rows that do not start on a root row (once the whole index is there).
    const cudaEvent_t lastIndexed = mBands.count() > 0 ? mIndexed[size_t(mBands.order.back())] : nullptr;
    bool indexed = true;
    if (lastIndexed)
    {
      const cudaError_t query = cudaEventQuery(lastIndexed);
      if (query != cudaErrorNotReady)
        GPUGEO_CUDA_CHECK(query);
      indexed = query == cudaSuccess;
    }
    if (indexed || row0 % g::kRoot != 0)
    {
      if (lastIndexed)
        GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mStream, lastIndexed, 0));
      labelPiece(row0, rows, deviceSite, deviceDistance, mWork[0], mStream);
      return;
    }
    // Piece by piece (the roots whose reads lie in the bands indexed by then, SiteBands), each once
    // those bands are indexed; the pieces take turns on this stream and up to kLabelStreams - 1 side
    // streams (each with work buffers of its own), so that pieces ready together run together.
    GPUGEO_CUDA_CHECK(cudaEventRecord(mSideDone, mStream));  // the side streams after this stream's earlier work
    for (const cudaStream_t side : mSideStreams)
      GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(side, mSideDone, 0));
    // The call's roots, numbered from its first row: those of the whole grid's numbering in
    // [base, base + callRoots).
    const int32_t base = static_cast<int32_t>(row0 / g::kRoot * mBands.rootsX);
    const int32_t callRoots = static_cast<int32_t>((rows + g::kRoot - 1) / g::kRoot * mBands.rootsX);
    int turn = 0;
    try
    {
      for (int p = 0; p < mBands.pieces(); ++p)
      {
        const int32_t* ids = mBands.pieceRoots.data();
        const int32_t* lo = std::lower_bound(ids + mBands.pieceAt[size_t(p)], ids + mBands.pieceAt[size_t(p) + 1], base);
        const int32_t* hi = std::lower_bound(lo, ids + mBands.pieceAt[size_t(p) + 1], base + callRoots);
        if (lo == hi)
          continue;
        const cudaStream_t stream = turn == 0 ? mStream : mSideStreams[size_t(turn - 1)];
        const int band = mBands.order[size_t(mBands.pieceReady[size_t(p)])];
        GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(stream, mIndexed[size_t(band)], 0));
        labelPiece(row0, rows, deviceSite, deviceDistance, mWork[turn], stream,
                   g::RootSet{mPieceRoots.data() + (lo - ids), static_cast<int>(hi - lo), base});
        turn = (turn + 1) % int(mWork.size());
      }
      for (const cudaStream_t side : mSideStreams)
      {
        GPUGEO_CUDA_CHECK(cudaEventRecord(mSideDone, side));
        GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mStream, mSideDone, 0));
      }
    }
    catch (...)
    {
      for (const cudaStream_t side : mSideStreams)
        cudaStreamSynchronize(side);  // nothing left writing the caller's buffers
      throw;
    }
  }

  // The buffers one labelling at a time uses (launchLabels').
  struct LabelWork
  {
    DeviceBuffer<g::TileJob> jobs;
    DeviceBuffer<int> counts;  // heavy items, crowded roots, each split level's jobs
    DeviceBuffer<g::RootItem> heavy;
    DeviceBuffer<g::RootItem> light;
    DeviceBuffer<g::RootItem> crowded;

    void reserve(int levels, int64_t roots)
    {
      jobs.resize(size_t(levels) * g::kQueueCap);
      counts.resize(2 + size_t(levels));
      heavy.resize(static_cast<size_t>(g::kHeavyParts * roots));
      light.resize(static_cast<size_t>(roots));
      crowded.resize(static_cast<size_t>(roots));
    }
  };

  // Enqueues the labelling of rows [row0, row0 + rows) (or of the roots of them in `set`) on
  // `stream`, whose reach is indexed.
  void labelPiece(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance, LabelWork& work,
                  cudaStream_t stream, g::RootSet set = {})
  {
    work.reserve(mLevels, rootsOf(mGrid.width, rows));
    g::GridView view = mView;
    view.rowBegin = static_cast<int>(row0);
    view.rowEnd = static_cast<int>(row0 + rows);
    view.outSite = deviceSite;
    view.outDistance = deviceDistance;
    phase(nullptr);
    g::launchLabels(view, set, mLevels, work.heavy.data(), work.light.data(), work.crowded.data(), work.counts.data(),
                    work.jobs.data(), mMultiprocessors, stream, &GpuLabeller::phaseHook, this);
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
        // The band's output buffers are allocated before any kernel runs (the work buffers are
        // made for the whole grid in the constructor and kept), so nothing was counted.
        GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
        for (const cudaStream_t side : mSideStreams)
          GPUGEO_CUDA_CHECK(cudaStreamSynchronize(side));
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
  cudaEvent_t startEvent() const override { return mStartEvent; }
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
  const StageTimes& times() const override
  {
    settleStart();
    return mTimes;
  }
  // Waits for the stream, then reads the device counters; the distinct sites are counted on the
  // first call where the index did not need to (a hash table over the sites).
  const LabelStats& stats() const override
  {
    unsigned long long counters[g::kCounterCount] = {};
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    settleStart();
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpy(counters, mCounters.data(), sizeof(counters), cudaMemcpyDeviceToHost));
    if (mStats.uniqueSites < 0)
      mStats.uniqueSites = countDistinct(mPoints.data(), mSiteCount);
    mStats.tiles = static_cast<int64_t>(counters[g::kTilesLabelled]);
    mStats.splitTiles = static_cast<int64_t>(counters[g::kTilesSplit]);
    mStats.candidates = static_cast<int64_t>(counters[g::kCandidates]);
    mStats.refinedPixels = static_cast<int64_t>(counters[g::kRefinedPixels]);
    mStats.denseTiles =
      static_cast<int64_t>(counters[g::kDirectRoots] + counters[g::kExactPixels] + counters[g::kCrowdedRoots]);
    mStats.siteBands = mBands.count();
    mStats.labelPieces = mBands.pieces();
    mStats.crowdedRoots = static_cast<int64_t>(counters[g::kCrowdedRoots]);
    return mStats;
  }
  std::vector<std::string> warnings() const override { return mWarnings; }

private:
  // The sites' bucket grid: prepared on the host (pixel frame, bucket side, the bands where they
  // apply, device buffers), then built in one piece (buildWhole, waited for) or band by band
  // (startBanded, not waited for).
  void buildIndex(const Sites& sites, const RunControl& control)
  {
    const int32_t n = static_cast<int32_t>(sites.count);
    mSiteCount = n;
    const int threads = mOptions.threads;
    cuda::PinnedBuffer<Point>& host = mHostWhole;
    BucketChoice choice;
    int buckets = 0;
    {
      ScopedStage stage(mTimes, "prepare");
      // A large input goes to the pixel frame in pageable memory first: the bands are made from it.
      const bool large = n >= kBandedAtLeast && n < kBandedBelow;
      std::vector<Point> frame;
      if (large)
      {
        frame = hugeVector<Point>(size_t(n));
        toPixelFrame(mGrid, sites, frame.data(), threads);
      }
      else
      {
        host.resize(n);
        toPixelFrame(mGrid, sites, host.data(), threads);
      }
      const Point* points = large ? frame.data() : host.data();
      choice = chooseBuckets(mGrid, points, n, threads);
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
      // Overlapped wherever there are enough sites, spread out or crowded (H100, 2026-12-07: with the
      // pieces on four streams, 90 % of 4,000,000 sites in 1 % of 8192^2 started overlapped in 2.28 ms
      // against 3.21 ms in one piece; 1,000,000 in 1.81 against 1.92 ms; the same at 16384^2).
      if (large)
        mBands = planSiteBands(points, n, mView.width, mView.height, mView.shift, mView.maxTile, kBands, threads);
      if (mBands.count() > 0)
      {
        mHostBanded.resize(n);
        std::vector<int32_t> original = hugeVector<int32_t>(size_t(n));
        partitionSites(mBands, points, n, mHostBanded.data(), original.data(), threads);
        mGaps = planIndexGaps(mBands, original.data(), threads);
        mHostGaps.resize(size_t(mGaps.at.back()));
        writeIndexGaps(mBands, mGaps, original.data(), mHostGaps.data(), threads);
        // A bucket holding more than a tile's list (piles of copies; only possible where a root
        // does) needs the one-piece start, which drops the copies first.
        const bool bucketsWithinCells = mView.bucket <= kReachCell;
        if ((!bucketsWithinCells || mBands.fullestCell > g::kCap) &&
            detail::fullestBucket(mBands, mHostBanded.data(), threads) > g::kCap)
        {
          mBands = SiteBands{};
          mHostBanded.release();
          mHostGaps.release();
        }
      }
      if (mBands.count() == 0 && large)  // the one-piece start after all
      {
        host.resize(n);
        std::copy(frame.begin(), frame.end(), host.data());
      }
      mInput.resize(n);
      mKey.resize(n);
      mRank.resize(n);
      mCount.resize(buckets + 1);
      mStart.resize(buckets + 1);
      mSiteIndex.resize(n);
      mPoints.resize(n);
      mCounters.resize(g::kCounterCount);
      size_t scanBytes = 0, maxBytes = 0;
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, mCount.data(), mStart.data(), buckets + 1, mStream));
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, maxBytes, mCount.data(), mStart.data(), buckets, mStream));
      mScanTemp.resize(std::max(scanBytes, maxBytes));
      GPUGEO_CUDA_CHECK(cudaEventCreate(&mStartEvent));
      // The whole grid's work items now: no allocation (which may wait for the device) between the
      // index and the first labelling, or between the bands' labellings.
      const int64_t roots = rootsOf(mGrid.width, mGrid.height);
      mWork.resize(mBands.count() > 0 ? size_t(std::min(kLabelStreams, mBands.pieces())) : 1u);
      for (LabelWork& work : mWork)
        work.reserve(mLevels, roots);
      if (mBands.count() > 0)
      {
        mOriginal.resize(n);
        mGapBytes.resize(size_t(mGaps.at.back()));
        mHostPieceRoots.resize(mBands.pieceRoots.size());
        std::copy(mBands.pieceRoots.begin(), mBands.pieceRoots.end(), mHostPieceRoots.data());
        mPieceRoots.resize(mBands.pieceRoots.size());
        prepareBanded(n, buckets);
      }
    }
    if (control.isCanceled())
      throw Canceled();
    if (mBands.count() > 0)
      startBanded();
    else
      buildWhole(host, choice, n, buckets);
    mView.start = mStart.data();
    mView.points = mPoints.data();
    mView.index = mSiteIndex.data();
    mView.counters = mCounters.data();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCounters.data(), 0, sizeof(unsigned long long) * g::kCounterCount, mStream));
    if (mBands.count() == 0)
      GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
  }

  // The one-piece index: uploaded in chunks, each chunk's sites counted into their buckets while the
  // next is on its way, then the counting sort's scan, order and gather. Waits for it.
  void buildWhole(cuda::PinnedBuffer<Point>& host, const BucketChoice& choice, int32_t n, int buckets)
  {
    cudaStream_t copy = nullptr;
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> events;
    try
    {
      const int chunks = std::max(1, std::min(8, n / 65536));
      events.resize(size_t(chunks) + 2, nullptr);
      for (cudaEvent_t& e : events)
        GPUGEO_CUDA_CHECK(cudaEventCreate(&e));
      const cudaEvent_t cleared = events[0], indexed = events[1];
      const cudaEvent_t* arrivedChunk = events.data() + 2;
      GPUGEO_CUDA_CHECK(cudaEventRecord(mStartEvent, mStream));
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCount.data(), 0, sizeof(int32_t) * (buckets + 1), mStream));
      GPUGEO_CUDA_CHECK(cudaEventRecord(cleared, mStream));
      GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(copy, cleared, 0));
      auto chunkFirst = [&](int c) { return int(int64_t(n) * c / chunks); };
      // All the copies first (the copy engine never waits for the host), then the counts, each
      // after its chunk.
      for (int c = 0; c < chunks; ++c)
      {
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mInput.data() + chunkFirst(c), host.data() + chunkFirst(c),
                                          sizeof(Point) * size_t(chunkFirst(c + 1) - chunkFirst(c)),
                                          cudaMemcpyHostToDevice, copy));
        GPUGEO_CUDA_CHECK(cudaEventRecord(arrivedChunk[c], copy));
      }
      for (int c = 0; c < chunks; ++c)
      {
        GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mStream, arrivedChunk[c], 0));
        g::launchCount(mInput.data(), nullptr, chunkFirst(c), chunkFirst(c + 1) - chunkFirst(c), mView.shift, mView.bx,
                       mView.by, mKey.data(), mRank.data(), mCount.data(), mStream);
      }
      const cudaEvent_t arrived = arrivedChunk[chunks - 1];
      int32_t kept = n;
      DeviceBuffer<uint8_t> duplicate;
      // Piles of exact copies would make every pixel near them scan them all: where a bucket holds
      // more than a tile's list can (only possible where a root does), they are dropped first.
      if (choice.densestRoot > g::kCap && fullestBucket(mCount.data(), buckets) > g::kCap)
      {
        duplicate.resize(n);
        kept = markDuplicates(mInput.data(), n, duplicate.data());
        mStats.uniqueSites = kept;
        GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCount.data(), 0, sizeof(int32_t) * (buckets + 1), mStream));
        g::launchCount(mInput.data(), duplicate.data(), 0, n, mView.shift, mView.bx, mView.by, mKey.data(), mRank.data(),
                       mCount.data(), mStream);
      }
      size_t bytes = mScanTemp.size();
      GPUGEO_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(mScanTemp.data(), bytes, mCount.data(), mStart.data(), buckets + 1, mStream));
      g::launchOrder(mInput.data(), duplicate.size() ? duplicate.data() : nullptr, mKey.data(), mRank.data(),
                     mStart.data(), n, mSiteIndex.data(), mStream);
      g::launchGather(mInput.data(), mSiteIndex.data(), kept, mPoints.data(), mStream);
      GPUGEO_CUDA_CHECK(cudaEventRecord(indexed, mStream));
      GPUGEO_CUDA_CHECK(cudaEventSynchronize(indexed));
      float uploadMs = 0.f, indexMs = 0.f;
      GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&uploadMs, mStartEvent, arrived));
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
  }

  // The overlapped start: each band's upload on the copy stream and its index on the index stream
  // once it has arrived (its sites' buckets and ranks, the scan of its buckets from its first slot,
  // the points and input indices scattered to their slots), after the index is made empty (every
  // bucket at its band's first slot, every slot a site that never wins). Made here, in the prepare
  // stage, as one CUDA graph (a few hundred copies and launches, which the host would otherwise take
  // longer to enqueue than the copies take to run, holding back every labelling launched after
  // them); startBanded launches it. labelRowsOnDevice waits for the bands each labelling needs.
  void prepareBanded(int32_t n, int buckets)
  {
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&mCopyStream, cudaStreamNonBlocking));
    // The index ahead of the labelling: a band's index kernels would otherwise queue behind the
    // blocks of the pieces labelling already, and every later piece waits for its band (a graph runs
    // at the priority of the stream it is launched into).
    int leastPriority = 0, greatestPriority = 0;
    GPUGEO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithPriority(&mIndexStream, cudaStreamNonBlocking, greatestPriority));
    mSideStreams.assign(mWork.size() - 1, nullptr);
    for (cudaStream_t& side : mSideStreams)
      GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    GPUGEO_CUDA_CHECK(cudaEventCreateWithFlags(&mSideDone, cudaEventDisableTiming));
    GPUGEO_CUDA_CHECK(cudaEventCreate(&mUploaded));
    const int bands = mBands.count();
    mArrived.assign(size_t(bands), nullptr);
    mIndexed.assign(size_t(bands), nullptr);
    for (int b = 0; b < bands; ++b)
    {
      GPUGEO_CUDA_CHECK(cudaEventCreateWithFlags(&mArrived[size_t(b)], cudaEventDisableTiming));
      GPUGEO_CUDA_CHECK(cudaEventCreate(&mIndexed[size_t(b)]));
    }
    size_t scanBytes = 0;
    for (int b = 0; b < bands; ++b)
    {
      const auto [b0, b1] = bucketsOf(b);
      size_t need = 0;
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(nullptr, need, mCount.data() + b0, mStart.data() + b0,
                                                       ::cuda::std::plus<int32_t>{}, int32_t(0), b1 - b0, mIndexStream));
      scanBytes = std::max(scanBytes, need);
      scanBytes = std::max(scanBytes, restoreIndices(b, nullptr, need, nullptr));
    }
    mBandScanTemp.resize(std::max<size_t>(scanBytes, 1));

    cudaGraph_t graph = nullptr;
    GPUGEO_CUDA_CHECK(cudaStreamBeginCapture(mIndexStream, cudaStreamCaptureModeRelaxed));
    try
    {
      enqueueBanded(n, buckets);
    }
    catch (...)
    {
      if (cudaStreamEndCapture(mIndexStream, &graph) == cudaSuccess && graph)
        cudaGraphDestroy(graph);
      throw;
    }
    GPUGEO_CUDA_CHECK(cudaStreamEndCapture(mIndexStream, &graph));
    const cudaError_t made = cudaGraphInstantiate(&mStartGraph, graph, 0);
    cudaGraphDestroy(graph);
    GPUGEO_CUDA_CHECK(made);
    // The graph's first launch uploads it to the device; done here so that the start does not wait.
    GPUGEO_CUDA_CHECK(cudaGraphUpload(mStartGraph, mIndexStream));
  }

  // Starts the overlapped start (not waited for).
  void startBanded() { GPUGEO_CUDA_CHECK(cudaGraphLaunch(mStartGraph, mIndexStream)); }

  // Band b's bucket range (whole bucket rows).
  std::pair<int, int> bucketsOf(int b) const
  {
    return std::make_pair(mBands.row0[size_t(b)] * mView.bx, mBands.row0[size_t(b) + 1] * mView.bx);
  }

  // The overlapped start's copies and launches, captured into its graph: the events the labelling
  // and the times read (start, upload, each band indexed) as event nodes; the copy stream forked
  // from the index stream and joined back by the bands' arrivals.
  void enqueueBanded(int32_t n, int buckets)
  {
    const int bands = mBands.count();
    GPUGEO_CUDA_CHECK(cudaEventRecordWithFlags(mStartEvent, mIndexStream, cudaEventRecordExternal));
    GPUGEO_CUDA_CHECK(cudaEventRecord(mSideDone, mIndexStream));  // the fork (a plain event, reused)
    GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mCopyStream, mSideDone, 0));
    // The pieces' roots first (a few bytes a root): every labelling waits for a band after them.
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mPieceRoots.data(), mHostPieceRoots.data(), sizeof(int32_t) * mPieceRoots.size(),
                                      cudaMemcpyHostToDevice, mCopyStream));
    for (const int b : mBands.order)
    {
      const int32_t first = mBands.offset[size_t(b)], count = mBands.offset[size_t(b) + 1] - first;
      if (count > 0)
      {
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mInput.data() + first, mHostBanded.data() + first, sizeof(Point) * size_t(count),
                                          cudaMemcpyHostToDevice, mCopyStream));
        const int64_t at = mGaps.at[size_t(b)];
        GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mGapBytes.data() + at, mHostGaps.data() + at,
                                          size_t(mGaps.at[size_t(b) + 1] - at), cudaMemcpyHostToDevice, mCopyStream));
      }
      if (b == mBands.order.back())
        GPUGEO_CUDA_CHECK(cudaEventRecordWithFlags(mUploaded, mCopyStream, cudaEventRecordExternal));
      GPUGEO_CUDA_CHECK(cudaEventRecord(mArrived[size_t(b)], mCopyStream));
    }
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCount.data(), 0, sizeof(int32_t) * (buckets + 1), mIndexStream));
    for (int b = 0; b < bands; ++b)
    {
      const auto [b0, b1] = bucketsOf(b);
      g::launchFill(mStart.data(), b0, b1 - b0, mBands.offset[size_t(b)], mIndexStream);
    }
    g::launchFill(mStart.data(), buckets, 1, n, mIndexStream);
    g::launchFarSites(mPoints.data(), mSiteIndex.data(), n, mIndexStream);
    for (const int b : mBands.order)
    {
      const int32_t first = mBands.offset[size_t(b)], count = mBands.offset[size_t(b) + 1] - first;
      const auto [b0, b1] = bucketsOf(b);
      GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(mIndexStream, mArrived[size_t(b)], 0));
      size_t restoreBytes = mBandScanTemp.size();
      restoreIndices(b, mBandScanTemp.data(), restoreBytes, mIndexStream);
      g::launchCount(mInput.data(), nullptr, first, count, mView.shift, mView.bx, mView.by, mKey.data(), mRank.data(),
                     mCount.data(), mIndexStream);
      size_t bytes = mBandScanTemp.size();
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(mBandScanTemp.data(), bytes, mCount.data() + b0, mStart.data() + b0,
                                                       ::cuda::std::plus<int32_t>{}, first, b1 - b0, mIndexStream));
      g::launchScatter(mInput.data(), mOriginal.data(), mKey.data(), mRank.data(), mStart.data(), first, count,
                       mPoints.data(), mSiteIndex.data(), mIndexStream);
      GPUGEO_CUDA_CHECK(cudaEventRecordWithFlags(mIndexed[size_t(b)], mIndexStream, cudaEventRecordExternal));
    }
  }

  // Band b's input indices from their gaps (IndexGaps: a scan from the band's first index) into
  // mOriginal; with temp null, the scan's temporary bytes. Returns the temporary bytes.
  size_t restoreIndices(int b, void* temp, size_t& bytes, cudaStream_t stream)
  {
    const int32_t first = mBands.offset[size_t(b)], count = mBands.offset[size_t(b) + 1] - first;
    if (count <= 0)
      return bytes = 0;
    const uint8_t* gaps = temp ? mGapBytes.data() + mGaps.at[size_t(b)] : nullptr;
    int32_t* out = temp ? mOriginal.data() + first : nullptr;
    const int32_t start = mGaps.first[size_t(b)];
    const auto scan = [&](auto* typed) {
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(temp, bytes, typed, out, ::cuda::std::plus<int32_t>{}, start,
                                                       count, stream));
    };
    switch (mGaps.bytes[size_t(b)])
    {
    case 1:
      scan(gaps);
      break;
    case 2:
      scan(reinterpret_cast<const uint16_t*>(gaps));
      break;
    default:
      scan(reinterpret_cast<const int32_t*>(gaps));
    }
    return bytes;
  }

  // The overlapped start's times ("upload": to the last band's arrival, "index": from there to the
  // last band indexed), once it is done; waits for it.
  void settleStart() const
  {
    if (mBands.count() == 0 || mStartSettled)
      return;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mIndexStream));
    float uploadMs = 0.f, indexMs = 0.f;
    const size_t last = size_t(mBands.order.back());
    GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&uploadMs, mStartEvent, mUploaded));
    GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&indexMs, mUploaded, mIndexed[last]));  // the last band's arrival
    mTimes.add("upload", uploadMs);
    mTimes.add("index", indexMs);
    mStartSettled = true;
  }

  // The start's streams and events (after the index is done or abandoned).
  void releaseStart()
  {
    for (cudaStream_t stream : {mCopyStream, mIndexStream})
      if (stream)
        cudaStreamSynchronize(stream);
    for (const cudaStream_t side : mSideStreams)
      cudaStreamSynchronize(side);
    for (cudaEvent_t e : mArrived)
      if (e)
        cudaEventDestroy(e);
    for (cudaEvent_t e : mIndexed)
      if (e)
        cudaEventDestroy(e);
    mArrived.clear();
    mIndexed.clear();
    if (mStartEvent)
      cudaEventDestroy(mStartEvent);
    mStartEvent = nullptr;
    if (mSideDone)
      cudaEventDestroy(mSideDone);
    mSideDone = nullptr;
    if (mUploaded)
      cudaEventDestroy(mUploaded);
    mUploaded = nullptr;
    if (mStartGraph)
      cudaGraphExecDestroy(mStartGraph);
    mStartGraph = nullptr;
    for (cudaStream_t stream : {mCopyStream, mIndexStream})
      if (stream)
        cudaStreamDestroy(stream);
    for (const cudaStream_t side : mSideStreams)
      cudaStreamDestroy(side);
    mSideStreams.clear();
    mCopyStream = mIndexStream = nullptr;
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
      // Per pixel: the outputs, and the roots' work items (96 bytes a root of 4,096 pixels).
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

  // The outputs of a band (the work buffers, a few bytes a root, are kept: a band's labelling
  // allocates nothing).
  void releaseBandBuffers()
  {
    mSiteOut.release();
    mDistanceOut.release();
  }

  Grid mGrid;
  LabellerOptions mOptions;
  std::string mDeviceName;
  int mDevice = 0;
  int mMultiprocessors = 1;
  cudaStream_t mStream = nullptr;
  mutable StageTimes mTimes;
  mutable LabelStats mStats{-1};
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;
  bool mProfiling = false;
  std::vector<std::pair<const char*, cudaEvent_t>> mPhaseEvents;

  // The overlapped start (startBanded): the bands, its streams and events; what the index reads
  // (both starts: kept until the labeller goes, no free between the index and the labelling).
  SiteBands mBands;
  cudaStream_t mCopyStream = nullptr;
  cudaStream_t mIndexStream = nullptr;
  std::vector<cudaStream_t> mSideStreams;  // the other labelling streams of the pieces' turns
  cudaEvent_t mSideDone = nullptr;
  cudaEvent_t mUploaded = nullptr;  // after the last band's upload
  cudaGraphExec_t mStartGraph = nullptr;
  cudaEvent_t mStartEvent = nullptr;  // before the first upload (either start)
  std::vector<cudaEvent_t> mArrived, mIndexed;
  mutable bool mStartSettled = false;
  cuda::PinnedBuffer<Point> mHostWhole;  // the one-piece start's (freeing pinned memory takes a while)
  cuda::PinnedBuffer<Point> mHostBanded;
  cuda::PinnedBuffer<uint8_t> mHostGaps;  // the bands' input indices as gaps (IndexGaps)
  cuda::PinnedBuffer<int32_t> mHostPieceRoots;
  IndexGaps mGaps;
  DeviceBuffer<Point> mInput;
  DeviceBuffer<uint8_t> mGapBytes;
  DeviceBuffer<int32_t> mOriginal;
  DeviceBuffer<int32_t> mPieceRoots;  // SiteBands::pieceRoots
  DeviceBuffer<uint32_t> mKey;
  DeviceBuffer<int32_t> mRank;
  DeviceBuffer<int32_t> mCount;
  DeviceBuffer<unsigned char> mBandScanTemp;

  int32_t mSiteCount = 0;
  int mLevels = 5;
  g::GridView mView;
  DeviceBuffer<int32_t> mStart;
  DeviceBuffer<Point> mPoints;
  DeviceBuffer<int32_t> mSiteIndex;
  std::vector<LabelWork> mWork;  // a labelling stream's each: mStream's, then mSideStreams' in turn
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
