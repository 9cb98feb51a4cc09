// The tiled fill (tiled_dem.h): Barnes's (2016) Priority-Flood in two passes over the tiles, with
// the in-memory fill's queue, spill table and graph solution (dem/detail/priority_flood.h). On the
// GPU, pass 1's flood is a relaxation (tiled_cuda.cu) whose labels may differ from the queue's where
// levels tie but give the same label levels, and pass 2 is the GPU's in-memory fill of the tile with
// its perimeter held at those levels: the filled DEM is unique, so both give it bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "dem/detail/dem_math.h"
#include "dem/detail/priority_flood.h"
#include "dem/detail/dem_cuda.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::isNoData;
using dem::detail::kOcean;
using dem::detail::kUnlabelled;
using dem::detail::labelLevels;
using dem::detail::OpenCells;
using dem::detail::pairKey;
using dem::detail::Spill;
using dem::detail::SpillTable;
using detail::forPerimeter;
using detail::TileLayout;

constexpr int32_t kHalo = -2;  // a halo cell's label: not the tile's, never flooded

// One tile's Priority-Flood from its perimeter cells (each its own label, firstLabel + its place) and
// its edge cells (the ocean), on the tile with its halo (NaN off the raster: an edge cell is a valid
// cell with a NaN neighbour, as on the whole grid). Leaves each cell's flooded level and label in
// `level` and `label` (padded like z); records the lowest spill between labels when `spills` is given.
// The same tile always floods the same way, so pass 2 finds pass 1's labels.
void floodTile(const std::vector<float>& z, const Window& t, int32_t firstLabel, std::vector<float>& level,
               std::vector<int32_t>& label, SpillTable* spills)
{
  const int64_t pw = t.width + 2;
  level = z;
  label.assign(z.size(), kHalo);
  for (int64_t y = 1; y <= t.height; ++y)
    std::fill(label.begin() + y * pw + 1, label.begin() + y * pw + 1 + t.width, kUnlabelled);
  int64_t offset[8];
  for (int d = 0; d < 8; ++d)
    offset[d] = kDy[d] * pw + kDx[d];
  OpenCells open;
  std::vector<uint32_t> pit;
  // The seeds: the perimeter cells (their own labels, or the ocean's) and the edge cells inside.
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const int64_t p = (y + 1) * pw + x + 1;
      const int32_t own = detail::seedLabel(z.data(), pw, t.height + 2, x + 1, y + 1, firstLabel);
      if (own == kUnlabelled || own == detail::kNotSeeded)
        continue;
      label[std::size_t(p)] = own;
      open.push(level[std::size_t(p)], p);
    }
  while (!open.empty() || !pit.empty())
  {
    int64_t p;
    if (!pit.empty())
    {
      p = pit.back();
      pit.pop_back();
    }
    else
      p = open.pop();
    const float wc = level[std::size_t(p)];
    const int32_t lc = label[std::size_t(p)];
    for (int d = 0; d < 8; ++d)
    {
      const int64_t n = p + offset[d];
      const int32_t labelN = label[std::size_t(n)];
      const float ln = level[std::size_t(n)];
      if (labelN == kHalo || isNoData(ln))
        continue;
      if (labelN != kUnlabelled)
      {
        if (labelN != lc && spills)
          spills->lower(pairKey(lc, labelN), std::max(wc, ln));
        continue;
      }
      label[std::size_t(n)] = lc;
      if (ln <= wc)
      {
        level[std::size_t(n)] = wc;
        pit.push_back(uint32_t(n));
      }
      else
        open.push(ln, n);
    }
  }
}

// The label of each perimeter cell of a tile (with its halo, as floodTile takes it): kUnlabelled on
// nodata, the ocean for an edge cell, else its own (floodTile's seeds; floodSpillsCuda's).
std::vector<int32_t> perimeterLabels(const std::vector<float>& z, const Window& t, int32_t firstLabel)
{
  std::vector<int32_t> labels(std::size_t(detail::perimeterSize(t)));
  forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
    labels[std::size_t(k)] = detail::seedLabel(z.data(), t.width + 2, t.height + 2, x + 1, y + 1, firstLabel);
  });
  return labels;
}

// One tile's filled cells on the GPU: the fill of the tile alone with each perimeter cell held at
// its level (its elevation raised to its label's level), since a filled cell's level is the lowest
// over its paths to the tile's perimeter and edge cells of their levels and the path's elevations.
// Into `cells`; `raised` holds the tile so raised on its way to the device.
void fillTileOnGpu(const std::vector<float>& z, const Window& t, const std::vector<int32_t>& labels,
                   const std::vector<float>& labelLevel, int gpuTiles, const RunControl& control,
                   std::vector<float>& raised, std::vector<float>& cells)
{
  detail::withoutHalo(z, t, raised);
  forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
    const int32_t label = labels[std::size_t(k)];
    float& v = raised[std::size_t(y * t.width + x)];
    if (label > kOcean)
      v = std::max(v, labelLevel[std::size_t(label)]);
  });
  Grid grid;
  grid.z = raised.data();
  grid.width = t.width;
  grid.height = t.height;
  const detail::GpuTurn turn(gpuTiles);
  dem::detail::fillCuda(grid, control, cells);
}

// One tile's filled cells on the CPU: flooded again as in pass 1 (the same labels), each cell raised
// to its label's level.
std::vector<float> raisedTile(const std::vector<float>& z, const Window& t, int32_t firstLabel,
                              const std::vector<float>& labelLevel)
{
  std::vector<float> level;
  std::vector<int32_t> label;
  floodTile(z, t, firstLabel, level, label, nullptr);
  const int64_t pw = t.width + 2;
  std::vector<float> cells(std::size_t(t.cells()));
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const std::size_t p = std::size_t((y + 1) * pw + x + 1);
      float v = level[p];
      if (label[p] > kOcean)
        v = std::max(v, labelLevel[std::size_t(label[p])]);
      if (!isNoData(v))
        v += 0.0f;  // -0 as +0 (dem.h)
      cells[std::size_t(y * t.width + x)] = v;
    }
  return cells;
}

// What pass 1 keeps of a tile: its perimeter cells' elevations and labels (kUnlabelled on nodata)
// and the spills between its labels.
struct TilePerimeter
{
  std::vector<float> z;
  std::vector<int32_t> label;
  std::vector<Spill> spills;
};

// The graph: the tiles' spills, and the facing perimeter cells of neighbouring tiles (each pair
// once, from its lower cell), solved for each label's level (the perimeters are dropped).
std::vector<float> solveFillGraph(const TileLayout& layout, std::vector<TilePerimeter>& perimeters, int32_t labels,
                                  const TiledOptions& options, const RunControl& control, TiledReport& out)
{
  ScopedStage graphTiming(out.times, "fill graph");
  std::vector<std::vector<Spill>> spills(std::size_t(layout.count()));
  parallelFor(layout.count(), 1, options.threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      const Window t = layout.tile(i);
      const TilePerimeter& mine = perimeters[std::size_t(i)];
      std::vector<Spill>& list = spills[std::size_t(i)];
      list = mine.spills;
      forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
        const float zc = mine.z[std::size_t(k)];
        if (isNoData(zc))
          return;
        const int64_t c = (t.y0 + y) * layout.width + t.x0 + x;
        detail::forNeighboursInOtherTiles(layout, t, x, y, [&](int64_t j, int64_t kn, int64_t nx, int64_t ny) {
          const TilePerimeter& theirs = perimeters[std::size_t(j)];
          const float zn = theirs.z[std::size_t(kn)];
          if (ny * layout.width + nx < c || isNoData(zn) || mine.label[std::size_t(k)] == theirs.label[std::size_t(kn)])
            return;
          list.push_back(Spill{mine.label[std::size_t(k)], theirs.label[std::size_t(kn)], std::max(zc, zn)});
        });
      });
    }
  }, &control);
  if (control.isCanceled())
    throw Canceled();
  int64_t edges = 0;
  for (const auto& list : spills)
    edges += int64_t(list.size());
  out.graphBytes = int64_t(labels) * int64_t(sizeof(float) + sizeof(int32_t) + sizeof(int64_t)) +
                   edges * int64_t(sizeof(Spill) + 2 * (sizeof(int32_t) + sizeof(float)));
  perimeters.clear();
  perimeters.shrink_to_fit();
  return labelLevels(labels, spills);
}

}  // namespace

int64_t fillTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& filled,
                  const TiledOptions& options, const RunControl& control, TiledReport* report,
                  const FilledTileObserver& observe)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(dem.width(), dem.height(), rows, options, kFillBytesPerTileCell, 1, out);

  // Each tile's labels start after the previous tiles' perimeters (0 is the ocean).
  std::vector<int32_t> firstLabel(std::size_t(layout.count()));
  int64_t labels = 1;
  for (int64_t i = 0; i < layout.count(); ++i)
  {
    firstLabel[std::size_t(i)] = int32_t(std::min<int64_t>(labels, std::numeric_limits<int32_t>::max()));
    labels += detail::perimeterSize(layout.tile(i));
    if (labels > std::numeric_limits<int32_t>::max())
      throw InvalidInput("tiles of " + std::to_string(layout.tileWidth) + " x " + std::to_string(layout.tileHeight) +
                         " cells are too small for a DEM of " + std::to_string(layout.width) + " x " +
                         std::to_string(layout.height) + ": their perimeters pass 2^31 cells; use larger tiles");
  }

  // Pass 1: each tile flooded on its own; its perimeter and spills kept.
  std::vector<TilePerimeter> perimeters(std::size_t(layout.count()));
  detail::Reused<std::vector<float>> elevations;
  detail::forEachTile(layout, 1, "fill pass 1 (flood the tiles)", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto held = elevations.take();
    std::vector<float>& z = *held;
    detail::readWithHalo(dem, t, std::numeric_limits<float>::quiet_NaN(), z);
    TilePerimeter& mine = perimeters[std::size_t(i)];
    const int32_t first = firstLabel[std::size_t(i)];
    mine.label = perimeterLabels(z, t, first);
    mine.z.resize(mine.label.size());
    forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      mine.z[std::size_t(k)] = z[std::size_t((y + 1) * (t.width + 2) + x + 1)];
    });
    if (options.backend == Backend::Gpu)
    {
      const detail::GpuTurn turn(options.gpuTiles);
      mine.spills = detail::floodSpillsCuda(z.data(), t.width, t.height, first, control);
      return;
    }
    std::vector<float> level;
    std::vector<int32_t> label;
    SpillTable lowest;
    floodTile(z, t, first, level, label, &lowest);
    lowest.forEach([&](uint64_t key, float spill) {
      mine.spills.push_back(Spill{int32_t(key >> 32), int32_t(key & 0xffffffffu), spill});
    });
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    TilePerimeter& p = perimeters[std::size_t(i)];
    a.vector(p.z);
    a.vector(p.label);
    a.vector(p.spills);
    if (!a.loading())  // a worker keeps no perimeter
      p = TilePerimeter();
  }});
  elevations.clear();
  ++out.passes;

  // The graph (on the coordinator of a distributed run; its solution is shared with the workers).
  std::vector<float> labelLevel;
  if (detail::holdsGraph(options))
    labelLevel = solveFillGraph(layout, perimeters, int32_t(labels), options, control, out);
  detail::share(options, [&](Archive& a) { a.vector(labelLevel); });

  // Pass 2: each tile flooded again, each cell raised to its label's level.
  std::mutex observing;
  struct Pass2
  {
    std::vector<float> z, raised, cells;
  };
  detail::Reused<Pass2> buffers;
  std::vector<int64_t> raised(std::size_t(layout.count()), 0);  // per tile: the cells the fill raised
  detail::forEachTile(layout, 2, "fill pass 2 (raise and write)", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto b = buffers.take();
    detail::readWithHalo(dem, t, std::numeric_limits<float>::quiet_NaN(), b->z);
    if (options.backend == Backend::Gpu)
      fillTileOnGpu(b->z, t, perimeterLabels(b->z, t, firstLabel[std::size_t(i)]), labelLevel, options.gpuTiles,
                    control, b->raised, b->cells);
    else
      b->cells = raisedTile(b->z, t, firstLabel[std::size_t(i)], labelLevel);
    if (observe)
    {
      const std::vector<float> input = detail::withoutHalo(b->z, t);
      std::lock_guard<std::mutex> lock(observing);
      observe(t, input.data(), b->cells.data());
    }
    filled.write(t, b->cells.data());
    int64_t mine = 0;
    const int64_t pw = t.width + 2;
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
        mine += b->cells[std::size_t(y * t.width + x)] > b->z[std::size_t((y + 1) * pw + x + 1)];
    raised[std::size_t(i)] = mine;
  }, detail::sendBack(raised));
  buffers.clear();
  ++out.passes;
  int64_t total = 0;
  for (const int64_t mine : raised)
    total += mine;
  return total;
}

}  // namespace gpugeo::dem::tiled
