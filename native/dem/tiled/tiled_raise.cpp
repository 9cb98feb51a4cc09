// The tiled raising of flats (tiled_dem.h): dem.h's raiseFlats, tile by tile.
//
// Every flat cell is raised by its mask in float32 steps (a pass over the tiles, into the work
// raster); then cells left without a lower neighbour are raised, each to one step above its lowest
// neighbour, until none is left. dem.h shows that any order of those raises ends at the same DEM (the
// lowest in which those cells drain): so each tile raises its own cells against its halo as it
// stands (its neighbours' perimeters from the last round), and rounds over the tiles whose
// neighbours' perimeters rose go on until no perimeter rises.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <utility>
#include <vector>

#include "dem/detail/dem_math.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::isNoData;
using detail::forPerimeter;
using detail::TileLayout;

// The current (raised) elevations of every tile's perimeter cells, as the last round left them.
using PerimeterLevels = std::vector<std::vector<float>>;

// One tile with a halo of one: the filled elevations, the mask and the current elevations (the
// halo's from the neighbours' perimeters).
struct RaiseTile
{
  Window t;
  int64_t pw = 0;
  int64_t offset[8];
  std::vector<float> filled, current;
  std::vector<int32_t> mask;

  int64_t at(int64_t x, int64_t y) const { return (y + 1) * pw + x + 1; }
  bool inTile(int64_t p) const
  {
    const int64_t x = p % pw - 1, y = p / pw - 1;
    return x >= 0 && y >= 0 && x < t.width && y < t.height;
  }
  bool noLowerNeighbour(const std::vector<float>& z, int64_t p) const
  {
    const float v = z[std::size_t(p)];
    for (int d = 0; d < 8; ++d)
      if (z[std::size_t(p + offset[d])] < v)
        return false;
    return true;
  }
  // dem.h's cells to raise in turn: valid, not edge cells, no lower neighbour now, and draining in
  // the filled DEM (a lower neighbour there, or a mask).
  bool undrained(int64_t p) const
  {
    if (isNoData(current[std::size_t(p)]))
      return false;
    for (int d = 0; d < 8; ++d)
      if (isNoData(filled[std::size_t(p + offset[d])]))
        return false;  // an edge cell (a neighbour off the grid or on nodata)
    return noLowerNeighbour(current, p) && (mask[std::size_t(p)] > 0 || !noLowerNeighbour(filled, p));
  }
};

void readRaiseTile(const RasterSource<float>& filled, const RasterSource<int32_t>& mask, const Window& t,
                   RaiseTile& r)
{
  r.t = t;
  r.pw = t.width + 2;
  for (int d = 0; d < 8; ++d)
    r.offset[d] = kDy[d] * r.pw + kDx[d];
  detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), r.filled);
  detail::readWithHalo(mask, t, int32_t(0), r.mask);
}

// The halo of `r.current` from the neighbours' perimeter levels on its ring (detail::ringOf's, NaN off
// the grid).
void haloFromRing(RaiseTile& r, const std::vector<float>& ring)
{
  detail::forRing(r.t, ring, [&](int64_t x, int64_t y, float level) { r.current[std::size_t(r.at(x, y))] = level; });
}

// Raises the tile's undrained cells, lowest first, each to one step above its lowest neighbour,
// until none is left (the halo held as it is). Returns whether any cell rose.
bool drainTile(RaiseTile& r)
{
  using Entry = std::pair<float, int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> open;
  for (int64_t y = 0; y < r.t.height; ++y)
    for (int64_t x = 0; x < r.t.width; ++x)
      if (r.undrained(r.at(x, y)))
        open.emplace(r.current[std::size_t(r.at(x, y))], r.at(x, y));
  bool rose = false;
  while (!open.empty())
  {
    const auto [level, p] = open.top();
    open.pop();
    if (level != r.current[std::size_t(p)] || !r.undrained(p))
      continue;
    float lowest = std::numeric_limits<float>::infinity();
    for (int d = 0; d < 8; ++d)
      lowest = std::min(lowest, r.current[std::size_t(p + r.offset[d])]);
    const float raisedTo = raiseBySteps(lowest, 1);
    if (!(raisedTo > r.current[std::size_t(p)]))
      continue;  // at the largest finite float: nothing above to raise it to
    r.current[std::size_t(p)] = raisedTo;
    rose = true;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t n = p + r.offset[d];
      if (r.inTile(n) && r.current[std::size_t(n)] <= raisedTo && r.undrained(n))
        open.emplace(r.current[std::size_t(n)], n);
    }
  }
  return rose;
}

std::vector<float> perimeterLevels(const RaiseTile& r)
{
  std::vector<float> out(std::size_t(detail::perimeterSize(r.t)));
  forPerimeter(r.t, [&](int64_t x, int64_t y, int64_t k) { out[std::size_t(k)] = r.current[std::size_t(r.at(x, y))]; });
  return out;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b)
{
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return x == y || (isNoData(x) && isNoData(y));
         });
}

}  // namespace

RaisedCounts raiseFlatsTiled(const RasterSource<float>& filled, const RasterSource<int32_t>& mask,
                             const RowSizes& rows, RawFileRaster<float>& work, RasterSink<float>& raised,
                             const TiledOptions& options, const RunControl& control, TiledReport* report,
                             const RasterSource<float>* original, const FilledTileObserver& observe)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(filled.width(), filled.height(), rows, options, kRaiseBytesPerTileCell, 1, out);
  const int64_t count = layout.count();
  PerimeterLevels levels(static_cast<std::size_t>(count));
  int64_t perimeterCells = 0;
  for (int64_t i = 0; i < count; ++i)
    perimeterCells += detail::perimeterSize(layout.tile(i));
  out.graphBytes = perimeterCells * int64_t(2 * sizeof(float));

  // Pass 1: each cell raised by its mask, into the work raster; the perimeters kept.
  std::vector<int64_t> tileCounts(std::size_t(count), 0);  // raised by the mask, then in turn
  detail::forEachTile(layout, 1, "raise: by the mask", options, control, out, [&](int64_t i) {
    RaiseTile r;
    readRaiseTile(filled, mask, layout.tile(i), r);
    std::vector<float> cells(std::size_t(r.t.cells()));
    int64_t raisedByMask = 0;
    for (int64_t y = 0; y < r.t.height; ++y)
      for (int64_t x = 0; x < r.t.width; ++x)
      {
        const std::size_t p = std::size_t(r.at(x, y));
        const int32_t m = r.mask[p];
        const float v = r.filled[p];
        raisedByMask += m > 0 && !isNoData(v);
        cells[std::size_t(y * r.t.width + x)] = m > 0 ? raiseBySteps(v, m) : v;
      }
    work.write(r.t, cells.data());
    std::vector<float> perimeter(std::size_t(detail::perimeterSize(r.t)));
    forPerimeter(r.t, [&](int64_t x, int64_t y, int64_t k) {
      perimeter[std::size_t(k)] = cells[std::size_t(y * r.t.width + x)];
    });
    levels[std::size_t(i)] = std::move(perimeter);
    tileCounts[std::size_t(i)] = raisedByMask;
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    a.vector(levels[std::size_t(i)]);
    a.value(tileCounts[std::size_t(i)]);
  }});
  out.passes = 1;
  RaisedCounts counts;
  for (const int64_t raised : tileCounts)
    counts.raised += raised;

  // Rounds: each active tile drained against its neighbours' perimeters on its ring, until none rises
  // (in a distributed run the coordinator chooses each round's tiles and shares whether another
  // round follows).
  std::vector<uint8_t> active(std::size_t(count), 1);
  {
    ScopedStage timing(out.times, "raise: overtaken cells (rounds)");
    detail::ToTiles<std::vector<float>> rings(
      options, count,
      [&](int64_t i) { return detail::ringOf(layout, layout.tile(i), levels, std::numeric_limits<float>::quiet_NaN()); },
      detail::visitVector<float>);
    for (bool changed = true; changed;)
    {
      ++out.passes;
      std::vector<int64_t> jobs;
      for (int64_t i = 0; i < count; ++i)
        if (active[std::size_t(i)])
          jobs.push_back(i);
      std::vector<std::vector<float>> fresh(static_cast<std::size_t>(count));  // the risen tiles' new perimeters
      std::vector<uint8_t> rose(std::size_t(count), 0);
      TileTraffic traffic;
      traffic.in = [&](int64_t i, Archive& a) { rings.traffic(i, a); };
      traffic.out = [&](int64_t i, Archive& a) {
        a.value(rose[std::size_t(i)]);
        a.vector(fresh[std::size_t(i)]);
      };
      detail::forTiles(layout, jobs, out.passes, "raise: overtaken cells (rounds)", options, control, out,
                       [&](int64_t i) {
                         RaiseTile r;
                         readRaiseTile(filled, mask, layout.tile(i), r);
                         detail::readWithHalo(static_cast<const RasterSource<float>&>(work), r.t,
                                              std::numeric_limits<float>::quiet_NaN(), r.current);
                         haloFromRing(r, rings.get(i));
                         if (drainTile(r))
                         {
                           rose[std::size_t(i)] = 1;
                           work.write(r.t, detail::withoutHalo(r.current, r.t).data());
                           fresh[std::size_t(i)] = perimeterLevels(r);
                         }
                       }, traffic);
      std::fill(active.begin(), active.end(), 0);
      changed = false;
      if (detail::holdsGraph(options))
        for (const int64_t i : jobs)
        {
          if (!rose[std::size_t(i)] || sameBits(fresh[std::size_t(i)], levels[std::size_t(i)]))
            continue;
          levels[std::size_t(i)] = std::move(fresh[std::size_t(i)]);
          changed = true;
          detail::markNeighbours(layout, i, active);
        }
      detail::share(options, [&](Archive& a) { a.value(changed); });
    }
  }

  // The last pass: the raised DEM written, the cells raised in turn counted (those above their
  // mask's raise).
  std::mutex observing;
  detail::forEachTile(layout, out.passes + 1, "raise: write", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    RaiseTile r;
    readRaiseTile(filled, mask, t, r);
    std::vector<float> cells(std::size_t(t.cells()));
    work.read(t, cells.data());
    int64_t inTurn = 0;
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
      {
        const std::size_t p = std::size_t(r.at(x, y));
        const float byMask = r.mask[p] > 0 ? raiseBySteps(r.filled[p], r.mask[p]) : r.filled[p];
        inTurn += !isNoData(byMask) && cells[std::size_t(y * t.width + x)] != byMask;
      }
    if (observe)
    {
      std::vector<float> input(std::size_t(t.cells()));
      (original ? *original : filled).read(t, input.data());
      std::lock_guard<std::mutex> lock(observing);
      observe(t, input.data(), cells.data());
    }
    raised.write(t, cells.data());
    tileCounts[std::size_t(i)] = inTurn;
  }, detail::sendBack(tileCounts));
  ++out.passes;
  for (const int64_t inTurn : tileCounts)
    counts.raisedInTurn += inTurn;
  return counts;
}

}  // namespace gpugeo::dem::tiled
