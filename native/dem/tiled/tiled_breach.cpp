// Breaching tile by tile (tiled_dem.h): breach.h's channels, then the tiled fill, flat mask and raise.
//
// A channel lowers only cells within maxLength of its bottom, so a tile's cut needs the bottoms within
// maxLength of it. Small bottoms (at most S cells across, S = max(maxLength, 32)) are found and
// searched again by each tile they may reach, in the tile's window with a margin of 2 maxLength + S + 2
// cells (clipped to the raster and a ring of nodata around it): such a bottom lies whole in the window
// and its search never leaves it. Large bottoms are found by a first pass: each tile labels its sets of
// equal raised elevation, and the sets that reach its perimeter are joined across the tiles' borders by
// a union-find on the coordinator, which thus knows every set's bounding box and whether any of its
// cells is an edge cell or has a lower neighbour. Each large bottom is searched once, in a window of its
// bounding box with a margin of maxLength + 2, and its channel handed to the tiles it crosses. Every
// search is breach.h's, in an area whose row-major order is the grid's: the cut DEM is the in-memory
// one, bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/breach_area.h"
#include "dem/detail/dem_math.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::BreachArea;
using dem::detail::CountRegion;
using dem::detail::EqualSet;
using detail::TileLayout;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// A set of equal raised elevation as the first pass sees it within one tile (or, joined, the whole).
struct SetSummary
{
  uint8_t notBottom = 0;
  int64_t minCell = std::numeric_limits<int64_t>::max();
  int64_t x0 = std::numeric_limits<int64_t>::max(), y0 = std::numeric_limits<int64_t>::max();
  int64_t x1 = -1, y1 = -1;

  void merge(const SetSummary& o)
  {
    notBottom = notBottom || o.notBottom;
    minCell = std::min(minCell, o.minCell);
    x0 = std::min(x0, o.x0);
    y0 = std::min(y0, o.y0);
    x1 = std::max(x1, o.x1);
    y1 = std::max(y1, o.y1);
  }
  int64_t extent() const { return std::max(x1 - x0, y1 - y0) + 1; }
};

// What the first pass keeps of a tile: its perimeter cells' sets (-1: nodata) and raised elevations,
// the summaries of the sets that reach the perimeter, and the large bottoms that lie inside it.
struct TileSets
{
  std::vector<int32_t> label;
  std::vector<float> level;
  std::vector<SetSummary> perimeterSets;
  std::vector<SetSummary> innerLarge;
};

// An area's set in grid coordinates, the area's cell (0, 0) being the grid's (ox, oy).
SetSummary summaryOf(const EqualSet& set, int64_t areaWidth, int64_t ox, int64_t oy, int64_t gridWidth)
{
  SetSummary s;
  s.notBottom = !set.bottom();
  const int64_t first = *std::min_element(set.cells.begin(), set.cells.end());
  s.minCell = (oy + first / areaWidth) * gridWidth + ox + first % areaWidth;
  s.x0 = ox + set.x0;
  s.y0 = oy + set.y0;
  s.x1 = ox + set.x1;
  s.y1 = oy + set.y1;
  return s;
}

// Pass 1 for tile t: the tile with a halo of two (its cells' and its ring's pits decided), its sets.
TileSets tileSets(const RasterSource<float>& dem, const Window& t, int64_t largeExtent, const RunControl& control)
{
  std::vector<float> z;
  detail::readWithHalo(dem, t, kNan, z, 2);
  const int64_t pw = t.width + 4;
  const BreachArea area = dem::detail::prepareBreachArea(z.data(), pw, t.height + 4, true, CountRegion{}, nullptr);
  TileSets out;
  out.label.assign(std::size_t(detail::perimeterSize(t)), -1);
  out.level.assign(out.label.size(), kNan);
  const CountRegion tile{2, 2, t.width + 2, t.height + 2};
  // The sets reaching the perimeter, whole; then the bottoms inside the tile.
  std::vector<int64_t> perimeter;
  detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t) { perimeter.push_back((y + 2) * pw + x + 2); });
  dem::detail::forEachEqualSet(area, tile, control, [&](const EqualSet& set) {
    const int32_t label = int32_t(out.perimeterSets.size());
    out.perimeterSets.push_back(summaryOf(set, pw, t.x0 - 2, t.y0 - 2, dem.width()));
    for (const int64_t c : set.cells)
    {
      const int64_t x = c % pw - 2, y = c / pw - 2;
      if (x == 0 || y == 0 || x == t.width - 1 || y == t.height - 1)
      {
        const int64_t k = detail::perimeterIndex(t, x, y);
        out.label[std::size_t(k)] = label;
        out.level[std::size_t(k)] = area.raised[std::size_t(c)];
      }
    }
  }, &perimeter);
  dem::detail::forEachBottom(area, tile, control, [&](const EqualSet& set) {
    if (!set.touchesBorder && set.extent() > largeExtent)
      out.innerLarge.push_back(summaryOf(set, pw, t.x0 - 2, t.y0 - 2, dem.width()));
  });
  return out;
}

int64_t findRoot(std::vector<int64_t>& parent, int64_t a)
{
  while (parent[std::size_t(a)] != a)
  {
    parent[std::size_t(a)] = parent[std::size_t(parent[std::size_t(a)])];
    a = parent[std::size_t(a)];
  }
  return a;
}

// The large bottoms: the inner ones, and the sets joined across the tiles' borders that are bottoms
// and more than largeExtent across; in the order of their lowest cells.
std::vector<SetSummary> largeBottoms(const TileLayout& layout, const std::vector<TileSets>& sets, int64_t largeExtent)
{
  std::vector<int64_t> offset(sets.size() + 1, 0);
  for (std::size_t i = 0; i < sets.size(); ++i)
    offset[i + 1] = offset[i] + int64_t(sets[i].perimeterSets.size());
  std::vector<int64_t> parent(std::size_t(offset.back()));
  std::iota(parent.begin(), parent.end(), 0);
  for (int64_t i = 0; i < layout.count(); ++i)
  {
    const Window t = layout.tile(i);
    const TileSets& own = sets[std::size_t(i)];
    detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const int32_t a = own.label[std::size_t(k)];
      if (a < 0)
        return;
      detail::forNeighboursInOtherTiles(layout, t, x, y, [&](int64_t j, int64_t kj, int64_t, int64_t) {
        const TileSets& other = sets[std::size_t(j)];
        const int32_t b = other.label[std::size_t(kj)];
        if (b >= 0 && other.level[std::size_t(kj)] == own.level[std::size_t(k)])
        {
          const int64_t ra = findRoot(parent, offset[std::size_t(i)] + a), rb = findRoot(parent, offset[std::size_t(j)] + b);
          if (ra != rb)
            parent[std::size_t(std::max(ra, rb))] = std::min(ra, rb);
        }
      });
    });
  }
  std::vector<SetSummary> joined(parent.size());
  for (std::size_t i = 0; i < sets.size(); ++i)
    for (std::size_t a = 0; a < sets[i].perimeterSets.size(); ++a)
      joined[std::size_t(findRoot(parent, offset[i] + int64_t(a)))].merge(sets[i].perimeterSets[a]);
  std::vector<SetSummary> large;
  for (std::size_t r = 0; r < parent.size(); ++r)
    if (parent[r] == int64_t(r) && !joined[r].notBottom && joined[r].extent() > largeExtent)
      large.push_back(joined[r]);
  for (const TileSets& s : sets)
    large.insert(large.end(), s.innerLarge.begin(), s.innerLarge.end());
  std::sort(large.begin(), large.end(), [](const SetSummary& a, const SetSummary& b) { return a.minCell < b.minCell; });
  return large;
}

// A channel's cells in grid indices with the elevations they are cut to.
struct ChannelCell
{
  int64_t cell;
  float z;
};

// The window `t` with a margin of `pad` cells a side, clipped to the raster and one ring of nodata
// around it (what lies further off the raster is nodata too, and no search or set needs it): its cells
// (NaN off the raster), its size and the grid's position of its cell (0, 0).
struct ClippedWindow
{
  std::vector<float> z;
  int64_t x0 = 0, y0 = 0, width = 0, height = 0;
};
ClippedWindow readClipped(const RasterSource<float>& dem, const Window& t, int64_t pad)
{
  ClippedWindow w;
  w.x0 = std::max(t.x0 - pad, int64_t(-1));
  w.y0 = std::max(t.y0 - pad, int64_t(-1));
  w.width = std::min(t.x0 + t.width + pad, dem.width() + 1) - w.x0;
  w.height = std::min(t.y0 + t.height + pad, dem.height() + 1) - w.y0;
  w.z.assign(std::size_t(w.width * w.height), kNan);
  const Window read{std::max<int64_t>(w.x0, 0), std::max<int64_t>(w.y0, 0),
                    std::min(w.x0 + w.width, dem.width()) - std::max<int64_t>(w.x0, 0),
                    std::min(w.y0 + w.height, dem.height()) - std::max<int64_t>(w.y0, 0)};
  dem.readStrided(read, w.z.data() + (read.y0 - w.y0) * w.width + (read.x0 - w.x0), w.width);
  return w;
}

// One large bottom searched in its bounding box with a margin of maxLength + 2: its channel's cells.
std::vector<ChannelCell> largeChannel(const RasterSource<float>& dem, const SetSummary& bottom,
                                      const BreachLimits& limits)
{
  const Window box{bottom.x0, bottom.y0, bottom.x1 - bottom.x0 + 1, bottom.y1 - bottom.y0 + 1};
  const ClippedWindow window = readClipped(dem, box, limits.maxLength + 2);
  const int64_t pw = window.width, ox = window.x0, oy = window.y0;
  const BreachArea area =
    dem::detail::prepareBreachArea(window.z.data(), pw, window.height, true, CountRegion{}, nullptr);
  const int64_t gw = dem.width();
  const int64_t start = (bottom.minCell / gw - oy) * pw + bottom.minCell % gw - ox;
  const EqualSet set = dem::detail::equalSetAt(area, start);
  if (!set.bottom() || set.touchesBorder)
    throw InvalidInput("breach depressions: a large depression's bottom was not found again in its window "
                       "(an internal error)");
  const float level = area.raised[std::size_t(start)];
  const std::vector<int64_t> path = dem::detail::ChannelSearch(area, limits).channel(set.cells, level);
  std::vector<ChannelCell> out;
  for (std::size_t i = 0; i < path.size(); ++i)
  {
    const int64_t c = path[i];
    out.push_back({(oy + c / pw) * gw + ox + c % pw, lowerBySteps(level, int64_t(i) + 1)});
  }
  return out;
}

// A grid in memory read as a raster (no copy).
class GridSource : public RasterSource<float>
{
public:
  explicit GridSource(const Grid& grid) : mGrid(grid) {}
  int64_t width() const override { return mGrid.width; }
  int64_t height() const override { return mGrid.height; }
  void read(const Window& window, float* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, float* out, int64_t stride) const override
  {
    for (int64_t y = 0; y < window.height; ++y)
    {
      const float* row = mGrid.z + (window.y0 + y) * mGrid.width + window.x0;
      std::copy(row, row + window.width, out + y * stride);
    }
  }

private:
  const Grid& mGrid;
};

}  // namespace

std::vector<std::pair<int64_t, float>> bottomChannel(const Grid& grid, int64_t x0, int64_t y0, int64_t x1, int64_t y1,
                                                     int64_t firstCell, const BreachLimits& limits)
{
  SetSummary bottom;
  bottom.minCell = firstCell;
  bottom.x0 = x0;
  bottom.y0 = y0;
  bottom.x1 = x1;
  bottom.y1 = y1;
  std::vector<std::pair<int64_t, float>> out;
  for (const ChannelCell& c : largeChannel(GridSource(grid), bottom, limits))
    out.emplace_back(c.cell, c.z);
  return out;
}

int64_t breachMargin(const BreachLimits& limits)
{
  return 2 * limits.maxLength + std::max<int64_t>(limits.maxLength, 32) + 2;
}

BreachCounts cutChannelsTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& cut,
                              const BreachLimits& limits, const TiledOptions& options, const RunControl& control,
                              TiledReport* report)
{
  dem::detail::checkBreachLimits(limits);
  if (detail::distributedRun(options))
    throw InvalidInput("breach depressions: a run across processes is not supported; run it in one process");
  TiledReport local;
  TiledReport& rep = report ? *report : local;
  const int64_t margin = breachMargin(limits), largeExtent = std::max<int64_t>(limits.maxLength, 32);
  const TileLayout layout = detail::beginTiledRun(dem.width(), dem.height(), rows, options, kBreachBytesPerWindowCell,
                                                  margin, rep);
  const int64_t gw = dem.width();

  // Pass 1: the sets reaching each tile's perimeter, joined; the large bottoms and their channels.
  std::vector<TileSets> sets(std::size_t(layout.count()));
  detail::forEachTile(layout, 1, "breach pass 1 (sets)", options, control, rep,
                      [&](int64_t i) { sets[std::size_t(i)] = tileSets(dem, layout.tile(i), largeExtent, control); });
  for (const TileSets& s : sets)
    rep.graphBytes += int64_t(s.label.size() * (sizeof(int32_t) + sizeof(float)) +
                              (s.perimeterSets.size() + s.innerLarge.size()) * sizeof(SetSummary));
  std::vector<SetSummary> large;
  {
    ScopedStage stage(rep.times, "breach (large bottoms)");
    large = largeBottoms(layout, sets, largeExtent);
    std::vector<TileSets>().swap(sets);
  }
  std::vector<std::vector<ChannelCell>> channels(large.size());
  parallelFor(int64_t(large.size()), 1, options.threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e && !control.isCanceled(); ++k)
      channels[std::size_t(k)] = largeChannel(dem, large[std::size_t(k)], limits);
  }, &control);
  if (control.isCanceled())
    throw Canceled();
  // The large channels' cells by tile.
  std::vector<std::vector<ChannelCell>> largeCuts(std::size_t(layout.count()));
  BreachCounts total;
  for (std::size_t k = 0; k < large.size(); ++k)
  {
    total.bottoms += 1;
    total.breached += !channels[k].empty();
    for (const ChannelCell& c : channels[k])
      largeCuts[std::size_t(layout.tileOf(c.cell % gw, c.cell / gw))].push_back(c);
  }
  channels.clear();

  // Pass 2: each tile's window, its small bottoms searched, the large channels added.
  std::vector<BreachCounts> counts(std::size_t(layout.count()));  // pass 2's, per tile
  detail::forEachTile(layout, 2, "breach pass 2 (channels)", options, control, rep, [&](int64_t i) {
    const Window t = layout.tile(i);
    const ClippedWindow window = readClipped(dem, t, margin);
    const int64_t pw = window.width, ph = window.height;
    const int64_t tx = t.x0 - window.x0, ty = t.y0 - window.y0;  // the tile within the window
    BreachCounts& c = counts[std::size_t(i)];
    const CountRegion tile{tx, ty, tx + t.width, ty + t.height};
    const BreachArea area = dem::detail::prepareBreachArea(window.z.data(), pw, ph, true, tile, &c.pitsRaised);
    std::vector<float> out(std::size_t(t.cells()));
    for (int64_t y = 0; y < t.height; ++y)
      std::copy_n(area.raised.begin() + (y + ty) * pw + tx, t.width, out.begin() + y * t.width);
    const auto inTile = [&](int64_t a) -> float* {
      const int64_t x = a % pw - tx, y = a / pw - ty;
      return x >= 0 && y >= 0 && x < t.width && y < t.height ? &out[std::size_t(y * t.width + x)] : nullptr;
    };
    dem::detail::ChannelSearch search(area, limits);
    const CountRegion known{1, 1, pw - 1, ph - 1};
    dem::detail::forEachBottom(area, known, control, [&](const EqualSet& set) {
      if (set.touchesBorder || set.extent() > largeExtent || set.x1 < tx - limits.maxLength ||
          set.y1 < ty - limits.maxLength || set.x0 >= tx + t.width + limits.maxLength ||
          set.y0 >= ty + t.height + limits.maxLength)
        return;
      const float level = area.raised[std::size_t(set.cells.front())];
      const std::vector<int64_t> path = search.channel(set.cells, level);
      const int64_t first = set.cells.front();
      if (tile.contains(first % pw, first / pw))
      {
        ++c.bottoms;
        c.breached += !path.empty();
      }
      dem::detail::cutChannel(path, level, inTile);
    });
    for (const ChannelCell& cell : largeCuts[std::size_t(i)])
    {
      float& v = out[std::size_t((cell.cell / gw - t.y0) * t.width + cell.cell % gw - t.x0)];
      v = std::min(v, cell.z);
    }
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
        c.channelCells += out[std::size_t(y * t.width + x)] < area.raised[std::size_t((y + ty) * pw + x + tx)];
    cut.write(t, out.data());
  });
  for (const BreachCounts& c : counts)
  {
    total.pitsRaised += c.pitsRaised;
    total.bottoms += c.bottoms;
    total.breached += c.breached;
    total.channelCells += c.channelCells;
  }
  rep.passes = 2;
  return total;
}

BreachCounts breachDepressionsTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& breached,
                                    const BreachLimits& limits, const std::string& scratchFolder,
                                    const TiledOptions& options, const RunControl& control, TiledReport* report,
                                    RaisedCounts* flats, const FilledTileObserver& observe)
{
  TiledReport local;
  TiledReport& rep = report ? *report : local;
  RawFileRaster<float> cut(scratchFolder + "/breach_cut.f32", dem.width(), dem.height());
  RawFileRaster<float> filled(scratchFolder + "/breach_filled.f32", dem.width(), dem.height());
  RawFileRaster<int32_t> mask(scratchFolder + "/breach_flat_mask.i32", dem.width(), dem.height());
  RawFileRaster<float> work(scratchFolder + "/breach_raised.f32", dem.width(), dem.height());
  TiledReport step;
  const BreachCounts counts = cutChannelsTiled(dem, rows, cut, limits, options, control, &step);
  rep = step;
  const auto add = [&](TiledReport& r) {
    rep.times.merge(r.times);
    rep.passes += r.passes;
    rep.graphBytes = std::max(rep.graphBytes, r.graphBytes);
    rep.tileBytes = std::max(rep.tileBytes, r.tileBytes);
    r = TiledReport();
  };
  step = TiledReport();
  fillTiled(cut, rows, filled, options, control, &step);
  add(step);
  flatMaskTiled(filled, rows, mask, FlatGradient::Combined, scratchFolder, options, control, &step);
  add(step);
  const RaisedCounts raised = raiseFlatsTiled(filled, mask, rows, work, breached, options, control, &step, &dem, observe);
  add(step);
  if (flats)
    *flats = raised;
  return counts;
}

std::vector<float> cutChannelsOnThreads(const Grid& grid, const BreachLimits& limits, int threads,
                                        const RunControl& control, BreachCounts* counts)
{
  validateGrid(grid);
  const int64_t w = grid.width, h = grid.height;
  TiledOptions options;
  options.tileWidth = options.tileHeight = 1024;
  options.threads = std::max(1, threads);
  const MemoryRaster<float> z(w, h, std::vector<float>(grid.z, grid.z + w * h));
  MemoryRaster<float> cut(w, h);
  const RowSizes rows{std::vector<double>(grid.cellWidth, grid.cellWidth + h),
                      std::vector<double>(grid.cellHeight, grid.cellHeight + h)};
  const BreachCounts c = cutChannelsTiled(z, rows, cut, limits, options, control);
  if (counts)
    *counts = c;
  return cut.cells();
}

}  // namespace gpugeo::dem::tiled
