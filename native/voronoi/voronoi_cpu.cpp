// The CPU backend of the plane Voronoi raster: tiles handed out to a pool of std::threads.
#include <algorithm>
#include <atomic>
#include <memory>

#include "core/parallel.h"
#include "site_tree.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;

namespace {

class CpuLabeller final : public Labeller
{
public:
  CpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options)
    : mGrid(grid), mThreads(options.threads > 0 ? options.threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "prepare");
    mTree = buildHostTree(toPixelFrame(grid, sites));
    mView = mTree.view();
    mStats.uniqueSites = mView.pointCount;
    mStats.tileSpan = chooseTileSpan(mView.pointCount, grid.width, grid.height, options.tileSpan);
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    ScopedStage stage(mTimes, "compute");
    const int64_t span = mStats.tileSpan;
    const int64_t width = mGrid.width;
    const int64_t tilesX = (width + span - 1) / span;
    const int64_t tilesY = (rows + span - 1) / span;
    const float span2 = float(span * span);
    const double pixelSize = mGrid.pixelSize;
    std::atomic<int64_t> denseTiles{0}, candidates{0}, refined{0};

    const int64_t grain = std::max<int64_t>(1, 4096 / (span * span));
    parallelFor(
      tilesX * tilesY, grain, mThreads,
      [&](int64_t firstTile, int64_t lastTile) {
        int32_t slots[kMaxTileCandidates];
        LocalPoint local[kMaxTileCandidates];
        Point point[kMaxTileCandidates];
        int32_t siteOf[kMaxTileCandidates];
        int64_t chunkDense = 0, chunkCandidates = 0, chunkRefined = 0;
        for (int64_t tile = firstTile; tile < lastTile; ++tile)
        {
          const int64_t c0 = (tile % tilesX) * span;
          const int64_t c1 = std::min(width, c0 + span);
          const int64_t r0 = row0 + (tile / tilesX) * span;
          const int64_t r1 = std::min(row0 + rows, r0 + span);
          const Box region = pixelCentreBox(c0, c1, r0, r1);

          RegionBoundVisitor bound{&mView, region, 1.79769313486231570e308};
          traverse(mView, bound);
          auto emit = [&](int k, int32_t slot) { slots[k] = slot; };
          RegionCandidateVisitor<decltype(emit)> gather{&mView, region, bound.bound, kMaxTileCandidates, emit};
          traverse(mView, gather);

          const bool dense = gather.count > kMaxTileCandidates;
          if (dense)
            ++chunkDense;
          else
          {
            chunkCandidates += gather.count;
            for (int k = 0; k < gather.count; ++k)
            {
              point[k] = mView.points[slots[k]];
              siteOf[k] = mView.siteIndex[slots[k]];
              local[k] = toLocal(point[k], c0, r0);
            }
          }
          const CandidateList tileList{local, point, siteOf, dense ? 0 : gather.count};
          for (int64_t r = r0; r < r1; ++r)
          {
            const int64_t rowOffset = (r - row0) * width;
            for (int64_t c = c0; c < c1; ++c)
            {
              const PixelAnswer answer = dense ? nearestByTree(mView, c, r)
                                               : nearestCandidate(tileList, c, r, c0, r0, span2);
              chunkRefined += answer.refined;
              site[rowOffset + c] = answer.site;
              if (distance)
                distance[rowOffset + c] = distanceValue(answer.squared, pixelSize);
            }
          }
        }
        denseTiles += chunkDense;
        candidates += chunkCandidates;
        refined += chunkRefined;
      },
      &control);

    mStats.tiles += tilesX * tilesY;
    mStats.denseTiles += denseTiles;
    mStats.candidates += candidates;
    mStats.refinedPixels += refined;
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string deviceName() const override { return cpuDescription(mThreads); }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override { return mStats; }
  std::vector<std::string> warnings() const override { return {}; }

private:
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
