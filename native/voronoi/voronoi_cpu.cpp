// The CPU backend of the plane Voronoi raster: root tiles handed out to a pool of std::threads,
// each refined depth first (detail/nearest_site.h, "The tile quadtree").
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "site_tree.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;

namespace {

// One worker's scratch: a candidate list per quadtree level (a parent's list stays while its
// children are processed), the leaf's candidate arrays, and its counters.
struct Worker
{
  int32_t slots[kTileLevels][kMaxGathered];
  LocalPoint local[kMaxGathered];
  Point point[kMaxGathered];
  int32_t site[kMaxGathered];
  LabelStats stats;
};

class CpuLabeller final : public Labeller
{
public:
  CpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options)
    : mGrid(grid), mThreads(options.threads > 0 ? options.threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "prepare");
    mTree = buildHostTree(toPixelFrame(grid, sites), mThreads);
    mView = mTree.view();
    mStats.uniqueSites = mView.pointCount;
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
    ScopedStage stage(mTimes, "compute");
    const int64_t rootsX = (mGrid.width + kRootSpan - 1) / kRootSpan;
    const int64_t rootsY = (rows + kRootSpan - 1) / kRootSpan;
    Band band{row0, row0 + rows, site, distance};
    std::atomic<int64_t> tiles{0}, split{0}, dense{0}, candidates{0}, refined{0};
    parallelFor(
      rootsX * rootsY, 4, mThreads,
      [&](int64_t first, int64_t last) {
        // One scratch per thread, kept between calls.
        thread_local std::unique_ptr<Worker> scratch;
        if (!scratch)
          scratch = std::make_unique<Worker>();
        Worker& worker = *scratch;
        worker.stats = LabelStats();
        for (int64_t root = first; root < last; ++root)
          tile(worker, band, 0, (root % rootsX) * kRootSpan, row0 + (root / rootsX) * kRootSpan, -1);
        tiles += worker.stats.tiles;
        split += worker.stats.splitTiles;
        dense += worker.stats.denseTiles;
        candidates += worker.stats.candidates;
        refined += worker.stats.refinedPixels;
      },
      &control);
    mStats.tiles += tiles;
    mStats.splitTiles += split;
    mStats.denseTiles += dense;
    mStats.candidates += candidates;
    mStats.refinedPixels += refined;
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string deviceName() const override { return cpuDescription(mThreads); }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override { return mStats; }
  std::vector<std::string> warnings() const override { return {}; }

private:
  struct Band
  {
    int64_t row0, rowEnd;
    int32_t* site;
    float* distance;
  };

  // Tile of side 64 >> level at (c0, r0); its parent's list is the worker's list at level - 1, of
  // parentCount sites (-1: the parent had none).
  void tile(Worker& w, const Band& band, int level, int64_t c0, int64_t r0, int parentCount)
  {
    const int64_t span = kRootSpan >> level;
    const int64_t c1 = std::min(mGrid.width, c0 + span);
    const int64_t r1 = std::min(band.rowEnd, r0 + span);
    if (c0 >= c1 || r0 >= r1)
      return;
    const Box region = pixelCentreBox(c0, c1, r0, r1);
    int32_t* list = w.slots[level];
    int count;
    if (parentCount >= 0)
    {
      const int32_t* parent = w.slots[level - 1];
      const auto pointAt = [&](int k) { return mView.points[parent[k]]; };
      const double bound = boundFromList(pointAt, parentCount, region);
      count = filterList(pointAt, parentCount, region, bound, [&](int k, int at) { list[at] = parent[k]; });
    }
    else
    {
      RegionBoundVisitor bound(&mView, region);
      traverse(mView, bound);
      auto emit = [list](int k, int32_t slot) { list[k] = slot; };
      RegionCandidateVisitor<decltype(emit)> gather{&mView, region, bound.bound, kMaxGathered, emit};
      traverse(mView, gather);
      count = gather.count > kMaxGathered ? -1 : gather.count;
    }

    if (shouldSplit(static_cast<int>(span), count))
    {
      ++w.stats.splitTiles;
      const int64_t half = span / 2;
      for (int q = 0; q < 4; ++q)
        tile(w, band, level + 1, c0 + (q & 1) * half, r0 + (q >> 1) * half, count);
      return;
    }

    ++w.stats.tiles;
    const float span2 = float(span * span);
    if (count < 0)
      ++w.stats.denseTiles;
    else
    {
      w.stats.candidates += count;
      for (int k = 0; k < count; ++k)
      {
        w.point[k] = mView.points[list[k]];
        w.site[k] = mView.siteIndex[list[k]];
        w.local[k] = toLocal(w.point[k], c0, r0);
      }
    }
    const CandidateArrays candidates{w.local, w.point, w.site, count};
    for (int64_t r = r0; r < r1; ++r)
    {
      const int64_t rowOffset = (r - band.row0) * mGrid.width;
      for (int64_t c = c0; c < c1; ++c)
      {
        const PixelAnswer answer = count < 0 ? nearestByTree(mView, c, r) : nearestCandidate(candidates, c, r, c0, r0, span2);
        w.stats.refinedPixels += answer.refined;
        band.site[rowOffset + c] = answer.site;
        if (band.distance)
          band.distance[rowOffset + c] = distanceValue(answer.squared, mGrid.pixelSize);
      }
    }
  }

  Grid mGrid;
  int mThreads;
  HostTree mTree;
  TreeView mView;
  StageTimes mTimes;
  LabelStats mStats;
};

}  // namespace

std::unique_ptr<Labeller> makeCpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options)
{
  return std::make_unique<CpuLabeller>(grid, sites, options);
}

}  // namespace gpugeo::voronoi
