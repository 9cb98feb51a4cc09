// Watersheds of many outlets tile by tile (dem/watersheds.h's labels, cells and areas). A tile is
// labelled as a whole grid with its one-cell halo ring held fixed: pass 1 holds each ring cell at a
// label of its own (past the outlets'), so that the tile's perimeter cells learn where their paths
// end: at an outlet or a terminal within the tile, or at the ring cell where they leave it, which is
// a neighbour tile's perimeter cell. The coordinator follows those links from perimeter to perimeter
// to each perimeter cell's final label (a chain that comes back on itself is a loop: 0). Pass 2 holds
// the ring at its final labels and labels the tile again, now for good, counting each outlet's cells
// per row and each outlet's downstream outlet. The labelling of a tile is watersheds.h's, on the
// options' backend, so both backends and the in-memory run give the same labels.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/errors.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"
#include "dem/detail/watershed_labels.h"
#include "dem/watersheds.h"

namespace gpugeo::dem::tiled {

namespace {

using detail::perimeterCell;
using detail::perimeterCount;
using detail::perimeterPlace;
using detail::TileLayout;

// The tile's outlets: (cell within the padded tile, outlet index), the first outlet of a cell only.
using TileOutlets = std::vector<std::pair<int64_t, int32_t>>;

// A tile labelled as a grid with its halo, every ring cell on the raster held at ringLabel(place)
// and every cell off the raster at 0; the outlets at their labels.
struct TileWork
{
  std::vector<uint8_t> directions;  // padded
  std::vector<int32_t> labels;      // padded
};

template <typename RingLabel>
void labelTile(const RasterSource<uint8_t>& directions, const TileLayout& layout, const Window& t,
               const TileOutlets& outlets, Backend backend, int gpuTiles, const RunControl& control,
               RingLabel ringLabel, TileWork& work)
{
  const int64_t pw = t.width + 2, ph = t.height + 2;
  detail::readWithHalo(directions, t, kNoData, work.directions);
  work.labels.assign(std::size_t(pw * ph), -1);
  // The ring: off the raster 0, else the caller's label.
  for (int64_t k = 0; k < perimeterCount(pw, ph); ++k)
  {
    int64_t x = 0, y = 0;
    perimeterCell(pw, ph, k, x, y);
    const int64_t gx = t.x0 + x - 1, gy = t.y0 + y - 1;
    const bool on = gx >= 0 && gy >= 0 && gx < layout.width && gy < layout.height;
    work.labels[std::size_t(y * pw + x)] = on ? ringLabel(k) : 0;
  }
  for (const auto& [cell, k] : outlets)
    work.labels[std::size_t(cell)] = k + 1;
  if (backend == Backend::Gpu)
  {
    const detail::GpuTurn turn(gpuTiles);
    dem::detail::labelWatershedsCuda(work.directions.data(), pw, ph, work.labels.data(), control);
  }
  else
    dem::detail::labelWatershedsCpu(work.directions.data(), pw, ph, work.labels.data(), control);
}

// A label raster as bandsTiled's times: label k + 1 at k (bands of 1), 0 (none) as NaN.
class LabelsAsTimes : public RasterSource<double>
{
public:
  explicit LabelsAsTimes(const RasterSource<int32_t>& labels) : mLabels(labels) {}
  int64_t width() const override { return mLabels.width(); }
  int64_t height() const override { return mLabels.height(); }
  void read(const Window& window, double* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, double* out, int64_t stride) const override
  {
    std::vector<int32_t> in(std::size_t(window.cells()));
    mLabels.read(window, in.data());
    for (int64_t y = 0; y < window.height; ++y)
    {
      const int32_t* row = in.data() + y * window.width;
      double* o = out + y * stride;
      for (int64_t x = 0; x < window.width; ++x)
        o[x] = row[x] > 0 ? double(row[x] - 1) : std::numeric_limits<double>::quiet_NaN();
    }
  }

private:
  const RasterSource<int32_t>& mLabels;
};

// What pass 2 sends back of a tile: its outlets' cells per row (label, row, count) and downstream
// outlets (outlet, downstream).
struct TileCounts
{
  std::vector<int32_t> label, row;
  std::vector<int64_t> cells;
  std::vector<int32_t> outlet, downstream;
};

}  // namespace

Watersheds watershedsTiled(const RasterSource<uint8_t>& directions, const RowSizes& rows,
                           const std::vector<int64_t>& outlets, RasterSink<int32_t>& labels,
                           const TiledOptions& options, const RunControl& control, TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout = detail::beginTiledRun(directions.width(), directions.height(), rows, options,
                                                  kWatershedsBytesPerTileCell, 1, out);
  const int64_t w = layout.width, h = layout.height;
  if (outlets.size() > std::size_t(std::numeric_limits<int32_t>::max() / 2))
    throw InvalidInput("watersheds: too many outlets");
  const int32_t count = int32_t(outlets.size());
  const int64_t ringMost = perimeterCount(layout.tileWidth + 2, layout.tileHeight + 2);
  if (int64_t(count) + 1 + ringMost >= std::numeric_limits<int32_t>::max())
    throw InvalidInput("watersheds: too many outlets for tiles of this size");
  for (int32_t k = 0; k < count; ++k)
  {
    const int64_t c = outlets[std::size_t(k)];
    if (c < 0 || c >= w * h)
      throw InvalidInput("outlet " + std::to_string(k + 1) + " lies outside the grid");
    uint8_t d = kNoData;
    directions.read(Window{c % w, c / w, 1, 1}, &d);
    if (d == kNoData)
      throw InvalidInput("outlet " + std::to_string(k + 1) + " lies on a nodata cell (column " +
                         std::to_string(c % w) + ", row " + std::to_string(c / w) + ")");
  }
  Watersheds result;
  result.sameCellAs = dem::detail::sameCellAs(outlets);
  std::vector<TileOutlets> tileOutlets(std::size_t(layout.count()));
  for (int32_t k = 0; k < count; ++k)
  {
    if (result.sameCellAs[std::size_t(k)] >= 0)
      continue;
    const int64_t c = outlets[std::size_t(k)], x = c % w, y = c / w;
    const int64_t i = layout.tileOf(x, y);
    const Window t = layout.tile(i);
    tileOutlets[std::size_t(i)].push_back({(y - t.y0 + 1) * (t.width + 2) + (x - t.x0 + 1), k});
  }

  // Pass 1: where each perimeter cell's path ends: -1 - label (an outlet's k + 1, or 0), or the
  // perimeter node (first node of its tile + place) where it enters another tile.
  std::vector<int64_t> firstNode(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    firstNode[std::size_t(i) + 1] = firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = firstNode.back();
  std::vector<int64_t> to(std::size_t(nodes), -1);
  out.graphBytes = nodes * int64_t(sizeof(int64_t) + sizeof(int32_t));
  detail::Reused<TileWork> works;
  detail::forEachTile(layout, 1, "watersheds pass 1 (perimeter paths)", options, control, out, [&](int64_t i) {
    const auto held = works.take();
    TileWork& work = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2;
    labelTile(directions, layout, t, tileOutlets[std::size_t(i)], options.backend, options.gpuTiles, control,
              [&](int64_t place) { return count + 1 + int32_t(place); }, work);
    // Ring places to the neighbours' perimeter nodes.
    std::vector<int64_t> ringNode(std::size_t(perimeterCount(pw, t.height + 2)), -1);
    detail::forHaloRing(layout, t, [&](int64_t x, int64_t y, int64_t j, int64_t k) {
      ringNode[std::size_t(perimeterPlace(pw, t.height + 2, x + 1, y + 1))] = firstNode[std::size_t(j)] + k;
    });
    detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const int32_t label = work.labels[std::size_t((y + 1) * pw + x + 1)];
      to[std::size_t(firstNode[std::size_t(i)] + k)] =
        label <= count ? -1 - int64_t(label) : ringNode[std::size_t(label - count - 1)];
    });
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    a.span(to.data() + firstNode[std::size_t(i)], firstNode[std::size_t(i) + 1] - firstNode[std::size_t(i)]);
  }});

  // The coordinator: each node's final label, following the links (a chain that meets itself: 0).
  std::vector<int32_t> final;
  if (detail::holdsGraph(options))
  {
    ScopedStage timing(out.times, "watersheds graph");
    constexpr int32_t kUnknown = -1, kOnChain = -2;
    final.assign(std::size_t(nodes), kUnknown);
    std::vector<int64_t> chain;
    for (int64_t start = 0; start < nodes; ++start)
    {
      int64_t n = start;
      int32_t label = 0;
      while (final[std::size_t(n)] == kUnknown)
      {
        const int64_t next = to[std::size_t(n)];
        if (next < 0)
        {
          final[std::size_t(n)] = int32_t(-1 - next);
          break;
        }
        final[std::size_t(n)] = kOnChain;
        chain.push_back(n);
        n = next;
      }
      label = final[std::size_t(n)] == kOnChain ? 0 : final[std::size_t(n)];
      for (const int64_t c : chain)
        final[std::size_t(c)] = label;
      chain.clear();
    }
  }

  // Pass 2: each tile with its ring at the final labels.
  detail::ToTiles<std::vector<int32_t>> rings(
    options, layout.count(),
    [&](int64_t i) {
      return detail::ringOf(layout, layout.tile(i), int32_t(0), [&](int64_t j, int64_t k) {
        return final[std::size_t(firstNode[std::size_t(j)] + k)];
      });
    },
    detail::visitVector<int32_t>);
  std::vector<TileCounts> counts(std::size_t(layout.count()));
  TileTraffic traffic;
  traffic.in = [&](int64_t i, Archive& a) { rings.traffic(i, a); };
  traffic.out = [&](int64_t i, Archive& a) {
    TileCounts& c = counts[std::size_t(i)];
    a.vector(c.label);
    a.vector(c.row);
    a.vector(c.cells);
    a.vector(c.outlet);
    a.vector(c.downstream);
  };
  detail::forEachTile(layout, 2, "watersheds pass 2 (labels; write)", options, control, out, [&](int64_t i) {
    const auto held = works.take();
    TileWork& work = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2;
    const std::vector<int32_t> ring = rings.get(i);
    labelTile(directions, layout, t, tileOutlets[std::size_t(i)], options.backend, options.gpuTiles, control,
              [&](int64_t place) { return ring[std::size_t(place)]; }, work);
    std::vector<int32_t> own(std::size_t(t.cells()));
    TileCounts& c = counts[std::size_t(i)];
    std::map<int32_t, int64_t> inRow;
    for (int64_t y = 0; y < t.height; ++y)
    {
      for (int64_t x = 0; x < t.width; ++x)
      {
        const int32_t label = work.labels[std::size_t((y + 1) * pw + x + 1)];
        own[std::size_t(y * t.width + x)] = label;
        if (label > 0)
          ++inRow[label];
      }
      for (const auto& [label, n] : inRow)
      {
        c.label.push_back(label - 1);
        c.row.push_back(int32_t(t.y0 + y));
        c.cells.push_back(n);
      }
      inRow.clear();
    }
    labels.write(t, own.data());
    // The outlets' downstream outlets: the label where each outlet cell drains (the ring included).
    for (const auto& [cell, k] : tileOutlets[std::size_t(i)])
    {
      const uint8_t d = work.directions[std::size_t(cell)];
      if (d >= 8)
        continue;
      const int32_t below = work.labels[std::size_t(cell + kDy[d] * pw + kDx[d])];
      if (below > 0 && below - 1 != k)
      {
        c.outlet.push_back(k);
        c.downstream.push_back(below - 1);
      }
    }
  }, traffic);
  works.clear();
  out.passes = 2;
  if (!detail::holdsGraph(options))
    return result;

  // Own cells per outlet and row (tiles side by side add up), then the areas row by row, top down.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> byOutlet;
  byOutlet.resize(std::size_t(count));
  for (const TileCounts& c : counts)
    for (std::size_t e = 0; e < c.label.size(); ++e)
      byOutlet[std::size_t(c.label[e])].push_back({c.row[e], c.cells[e]});
  result.ownCells.assign(std::size_t(count), 0);
  result.ownArea.assign(std::size_t(count), 0.0);
  for (int32_t k = 0; k < count; ++k)
  {
    auto& rowsOf = byOutlet[std::size_t(k)];
    std::sort(rowsOf.begin(), rowsOf.end());
    for (std::size_t e = 0; e < rowsOf.size();)
    {
      const int32_t y = rowsOf[e].first;
      int64_t n = 0;
      for (; e < rowsOf.size() && rowsOf[e].first == y; ++e)
        n += rowsOf[e].second;
      result.ownCells[std::size_t(k)] += n;
      result.ownArea[std::size_t(k)] += double(n) * (rows.cellWidth[std::size_t(y)] * rows.cellHeight[std::size_t(y)]);
    }
  }
  result.downstream.assign(std::size_t(count), -1);
  for (const TileCounts& c : counts)
    for (std::size_t e = 0; e < c.outlet.size(); ++e)
      result.downstream[std::size_t(c.outlet[e])] = c.downstream[e];
  dem::detail::addNestedTotals(result);
  return result;
}

TiledBands labelPolygonsTiled(const RasterSource<int32_t>& labels, const RowSizes& rows, int32_t count,
                              const TiledOptions& options, const RunControl& control, TiledReport* report,
                              const BandObserver& onBand)
{
  if (count < 1)
    throw InvalidInput("watersheds: no outlet to trace");
  const LabelsAsTimes times(labels);
  return bandsTiled(times, rows, 1.0, count, nullptr, options, control, report, onBand);
}

Watersheds watershedsOnThreads(const std::vector<uint8_t>& directions, const RowSizes& rows,
                               const std::vector<int64_t>& outlets, int threads, const RunControl& control)
{
  const int64_t h = int64_t(rows.cellWidth.size());
  if (h < 1 || int64_t(directions.size()) % h != 0)
    throw InvalidInput("watersheds: the directions do not fill the grid");
  const int64_t w = int64_t(directions.size()) / h;
  TiledOptions options;
  options.tileWidth = options.tileHeight = 1024;
  options.threads = std::max(1, threads);
  const MemoryRaster<uint8_t> source(w, h, directions);
  MemoryRaster<int32_t> sink(w, h);
  Watersheds result = watershedsTiled(source, rows, outlets, sink, options, control);
  result.labels = sink.cells();
  return result;
}

}  // namespace gpugeo::dem::tiled
