// The tiled isochrones (dem/tiled: travel times, bands and their polygons, the outlet) against the
// in-memory chain (isochrone_chain.h): travel times within 1e-12 relative, the watershed, the bands'
// counts and polygons identical, on tile sizes from one cell wide to larger than the DEM; random
// terrains with nodata blobs and cells that change size by row, the three velocity models, a spiral
// valley whose one path crosses every tile, nodata tiles; bad input and loops across tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "dem/isochrone_chain.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;
using namespace gpugeo::dem::tiled;

namespace {

RunControl noCancel;

void expectSamePolygons(const BandPolygons& a, const BandPolygons& b, const std::string& what)
{
  EXPECT_EQ(a.bandPolygon, b.bandPolygon) << what;
  EXPECT_EQ(a.polygonRing, b.polygonRing) << what;
  EXPECT_EQ(a.ringPoint, b.ringPoint) << what;
  EXPECT_EQ(a.x, b.x) << what;
  EXPECT_EQ(a.y, b.y) << what;
}

struct Expected
{
  ChainResult chain;
  std::vector<int64_t> bandCells;
  std::vector<double> bandArea;  // per row: the count times the row's cell area, summed top down
};

Expected inMemory(const TestDem& d, const ChainOptions& options)
{
  Expected e;
  ChainOptions o = options;
  o.keepFilled = o.keepDirections = o.keepAccumulation = true;
  e.chain = isochroneChain(Backend::Cpu, d.grid(), o, 2, noCancel);
  e.bandCells.assign(std::size_t(e.chain.bands), 0);
  e.bandArea.assign(std::size_t(e.chain.bands), 0.0);
  for (int64_t y = 0; y < d.height; ++y)
  {
    std::vector<int64_t> inRow(std::size_t(e.chain.bands), 0);
    for (int64_t x = 0; x < d.width; ++x)
    {
      const double t = e.chain.travel.minutes[std::size_t(y * d.width + x)];
      if (!std::isnan(t))
        ++inRow[std::size_t(std::floor(t / e.chain.interval))];
    }
    for (std::size_t k = 0; k < inRow.size(); ++k)
      if (inRow[k] > 0)
      {
        e.bandCells[k] += inRow[k];
        e.bandArea[k] += double(inRow[k]) * (d.cellWidth[std::size_t(y)] * d.cellHeight[std::size_t(y)]);
      }
  }
  return e;
}

// The tiled travel times and bands from the in-memory chain's filled DEM, directions and
// accumulation, against its times and polygons.
void expectSameIsochrones(const TestDem& d, const ChainOptions& options, const std::vector<float>* manning,
                          const std::string& what, const std::vector<std::pair<int64_t, int64_t>>& sizes)
{
  ChainOptions withManning = options;
  withManning.model.manning = manning ? manning->data() : nullptr;
  const Expected e = inMemory(d, withManning);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> filled(d.width, d.height, e.chain.filled);
  const MemoryRaster<uint8_t> directions(d.width, d.height, e.chain.directions);
  const MemoryRaster<int64_t> cells(d.width, d.height, e.chain.accumulation.cells);
  const MemoryRaster<int64_t> area(d.width, d.height, e.chain.accumulation.area);
  std::unique_ptr<MemoryRaster<float>> n;
  if (manning)
    n = std::make_unique<MemoryRaster<float>>(d.width, d.height, *manning);
  ASSERT_GT(e.chain.travel.watershedCells, 1) << what;
  for (const auto& [tw, th] : sizes)
  {
    const std::string at = what + ", tiles " + std::to_string(tw) + " x " + std::to_string(th);
    const TiledOptions opts = tiles(tw, th);
    // The outlet: the largest basin's (accumulationTiled's summary) or the snapped one.
    int64_t outlet = -1;
    if (options.automaticOutlet)
    {
      MemoryRaster<int64_t> c2(d.width, d.height), a2(d.width, d.height);
      outlet = accumulationTiled(directions, rows, c2, a2, opts, noCancel).largestCell;
    }
    else
      outlet = snapOutletTiled(filled, &cells, rows, options.outletColumn, options.outletRow, options.snapDistance,
                               std::max<int64_t>(1, tw / 2));
    ASSERT_EQ(outlet, e.chain.outlet) << at;
    MemoryRaster<double> minutes(d.width, d.height);
    TiledReport report;
    const TravelSummary s =
      travelTimeTiled(filled, directions, area, n.get(), rows, outlet, options.model, minutes, opts, noCancel, &report);
    EXPECT_EQ(report.passes, 2) << at;
    EXPECT_EQ(s.watershedCells, e.chain.travel.watershedCells) << at;
    EXPECT_EQ(s.watershedArea, e.chain.travel.watershedArea) << at;
    EXPECT_EQ(s.minSpeed, e.chain.minSpeed) << at;
    EXPECT_EQ(s.maxSpeed, e.chain.maxSpeed) << at;
    std::vector<double> got(d.z.size());
    minutes.read(Window{0, 0, d.width, d.height}, got.data());
    int64_t off = 0;
    double longest = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
    {
      const double want = e.chain.travel.minutes[i];
      if (std::isnan(want) != std::isnan(got[i]) ||
          (!std::isnan(want) && !(std::fabs(got[i] - want) <= 1e-12 * std::fabs(want))))
        ++off;
      if (!std::isnan(want))
        longest = std::max(longest, want);
    }
    EXPECT_EQ(off, 0) << at;
    EXPECT_NEAR(s.maxTime, longest, 1e-12 * longest) << at;
    MemoryRaster<double> copy(d.width, d.height);
    const TiledBands b = bandsTiled(minutes, rows, e.chain.interval, e.chain.bands, &copy, opts, noCancel);
    EXPECT_EQ(b.bandCells, e.bandCells) << at;
    EXPECT_EQ(b.bandArea, e.bandArea) << at;
    expectSamePolygons(b.bands, e.chain.bandPolygons, at + ", bands");
    // Pass 2 wrote NaN without reading the tiles it marked without a time: none of them has one.
    ASSERT_EQ(int64_t(s.tilesWithTimes.size()), (d.width + tw - 1) / tw * ((d.height + th - 1) / th)) << at;
    for (int64_t i = 0; i < int64_t(s.tilesWithTimes.size()); ++i)
    {
      const int64_t columns = (d.width + tw - 1) / tw, x0 = i % columns * tw, y0 = i / columns * th;
      bool any = false;
      for (int64_t y = y0; y < std::min(d.height, y0 + th); ++y)
        for (int64_t x = x0; x < std::min(d.width, x0 + tw); ++x)
          any = any || !std::isnan(e.chain.travel.minutes[std::size_t(y * d.width + x)]);
      EXPECT_EQ(s.tilesWithTimes[std::size_t(i)], uint8_t(any)) << at << ", tile " << i;
    }
    // One band at a time, the tiles without a time skipped: each the in-memory band's polygons.
    int32_t next = 0;
    const TiledBands streamed =
      bandsTiled(minutes, rows, e.chain.interval, e.chain.bands, nullptr, opts, noCancel, nullptr,
                 [&](int32_t k, int64_t cells, double area, const BandPolygons& one) {
                   ASSERT_EQ(k, next++);
                   EXPECT_EQ(cells, e.bandCells[std::size_t(k)]);
                   EXPECT_EQ(area, e.bandArea[std::size_t(k)]);
                   const BandPolygons& all = e.chain.bandPolygons;
                   const int64_t p0 = all.bandPolygon[std::size_t(k)], p1 = all.bandPolygon[std::size_t(k) + 1];
                   ASSERT_EQ(one.bandPolygon, (std::vector<int64_t>{0, p1 - p0})) << at;
                   if (p1 == p0)
                     return;
                   const int64_t r0 = all.polygonRing[std::size_t(p0)], x0 = all.ringPoint[std::size_t(r0)];
                   const int64_t x1 = all.ringPoint[std::size_t(all.polygonRing[std::size_t(p1)])];
                   EXPECT_EQ(one.x, std::vector<double>(all.x.begin() + x0, all.x.begin() + x1)) << at;
                   EXPECT_EQ(one.y, std::vector<double>(all.y.begin() + x0, all.y.begin() + x1)) << at;
                 },
                 &s.tilesWithTimes);
    EXPECT_EQ(next, e.chain.bands) << at;
    EXPECT_TRUE(streamed.bands.x.empty()) << at;
    expectSamePolygons(b.watershed, e.chain.watershed, at + ", watershed");
    std::vector<double> copied(d.z.size());
    copy.read(Window{0, 0, d.width, d.height}, copied.data());
    EXPECT_EQ(0, std::memcmp(copied.data(), got.data(), got.size() * sizeof(double))) << at;
  }
}

std::vector<std::pair<int64_t, int64_t>> sizesFor(const TestDem& d)
{
  return {{7, 5}, {1, d.height}, {d.width, 1}, {16, 16}, {d.width + 3, d.height + 3}};
}

}  // namespace

TEST(DemTiledIsochrones, RandomTerrainsEveryModelAreTheInMemoryChain)
{
  for (const uint64_t seed : {1u, 2u, 3u})
  {
    const TestDem d = randomDem(seed, 53 + int64_t(seed) * 7, 41 + int64_t(seed) * 5, seed == 2 ? 0.0 : 1.0,
                                int(5 * seed), 30, 30, seed == 3);
    const std::vector<float> manning = manningOf(d);
    for (const VelocityModel::Kind kind :
         {VelocityModel::Kind::Constant, VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
    {
      ChainOptions o;
      o.model.kind = kind;
      o.model.channelArea = 0.05;  // km²: channels and overland cells both
      o.model.mixedArea = 2e4;
      o.model.channelAreaManning = 8e4;
      o.model.rainfall = 30;
      o.interval = seed == 1 ? 0 : 0.5;
      o.maxBands = 100000;
      expectSameIsochrones(d, o, kind == VelocityModel::Kind::Manning ? &manning : nullptr,
                           "seed " + std::to_string(seed) + " model " + std::to_string(int(kind)), sizesFor(d));
    }
  }
}

TEST(DemTiledIsochrones, SnappedOutletsAreTheInMemoryOnes)
{
  const TestDem d = randomDem(9, 90, 70, 0.5, 12, 20, 25, true);
  for (const auto& [x, y, radius] : {std::tuple<int64_t, int64_t, double>{45, 35, 0.0}, {45, 35, 200.0},
                                     {0, 69, 130.0}, {89, 0, 1e300}})
  {
    ChainOptions o;
    o.automaticOutlet = false;
    o.outletColumn = x;
    o.outletRow = y;
    o.snapDistance = radius;
    o.model.kind = VelocityModel::Kind::Slope;
    o.maxBands = 100000;
    if (radius == 0 && std::isnan(d.z[std::size_t(y * d.width + x)]))
      continue;
    expectSameIsochrones(d, o, nullptr, "outlet " + std::to_string(x) + "," + std::to_string(y),
                         {{7, 5}, {13, 70}, {32, 32}});
  }
  // Without counts: whether a valid cell lies within the radius; none on an all-nodata window.
  TestDem holes = d;
  for (int64_t y = 0; y < 20; ++y)
    for (int64_t x = 0; x < 20; ++x)
      holes.z[std::size_t(y * d.width + x)] = std::nanf("");
  const MemoryRaster<float> z(d.width, d.height, holes.z);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  EXPECT_EQ(snapOutletTiled(z, nullptr, rows, 5, 5, 100.0, 7), -1);
  EXPECT_GE(snapOutletTiled(z, nullptr, rows, 5, 5, 400.0, 7), 0);
  EXPECT_THROW(snapOutletTiled(z, nullptr, rows, 90, 5, 1.0, 7), InvalidInput);
  EXPECT_THROW(snapOutletTiled(z, nullptr, rows, 5, 5, -1.0, 7), InvalidInput);
}

TEST(DemTiledIsochrones, ASpiralValleyAndNodataTiles)
{
  // The spiral valley's one path crosses every tile, again and again.
  const TestDem spiral = spiralValley(57);
  ChainOptions o;
  o.model.kind = VelocityModel::Kind::Slope;
  o.interval = 2;
  o.maxBands = 100000;
  expectSameIsochrones(spiral, o, nullptr, "spiral", {{7, 5}, {1, 57}, {57, 1}, {9, 9}, {20, 13}});
  // A terrain whose middle tiles are all nodata: the watershed runs round them.
  TestDem d = randomDem(5, 64, 48, 0.0, 0, 30, 30);
  for (int64_t y = 16; y < 32; ++y)
    for (int64_t x = 16; x < 48; ++x)
      d.z[std::size_t(y * d.width + x)] = std::nanf("");
  expectSameIsochrones(d, o, nullptr, "nodata tiles", {{16, 16}, {8, 16}, {7, 5}});
}

TEST(DemTiledIsochrones, BadInputAndLoopsAcrossTiles)
{
  const TestDem d = randomDem(6, 20, 10, 0.0, 0);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> filled(d.width, d.height, d.z);
  MemoryRaster<int64_t> area(d.width, d.height, int64_t(900e6));
  MemoryRaster<double> minutes(d.width, d.height);
  VelocityModel model;
  model.kind = VelocityModel::Kind::Constant;
  // Two cells of two tiles that drain into each other; the outlet elsewhere drains off the grid.
  std::vector<uint8_t> dirs(std::size_t(d.width * d.height), 4);  // all west
  dirs[std::size_t(5 * 20 + 9)] = 0;   // east, into the next tile
  dirs[std::size_t(5 * 20 + 10)] = 4;  // west, back
  const MemoryRaster<uint8_t> looped(d.width, d.height, dirs);
  EXPECT_THROW(travelTimeTiled(filled, looped, area, nullptr, rows, 0, model, minutes, tiles(10, 10), noCancel),
               LoopedDirections);
  dirs[std::size_t(5 * 20 + 10)] = 0;
  dirs[std::size_t(5 * 20 + 11)] = 4;  // a loop inside one tile, reached from its perimeter
  const MemoryRaster<uint8_t> inside(d.width, d.height, dirs);
  EXPECT_THROW(travelTimeTiled(filled, inside, area, nullptr, rows, 0, model, minutes, tiles(10, 10), noCancel),
               LoopedDirections);
  std::vector<uint8_t> plain(std::size_t(d.width * d.height), 4);
  plain[0] = kNoData;
  const MemoryRaster<uint8_t> west(d.width, d.height, plain);
  EXPECT_THROW(travelTimeTiled(filled, west, area, nullptr, rows, 0, model, minutes, tiles(4, 4), noCancel),
               InvalidInput);  // the outlet on nodata
  EXPECT_THROW(travelTimeTiled(filled, west, area, nullptr, rows, 200, model, minutes, tiles(4, 4), noCancel),
               InvalidInput);  // off the grid
  model.speed = -1;
  EXPECT_THROW(travelTimeTiled(filled, west, area, nullptr, rows, 20, model, minutes, tiles(4, 4), noCancel),
               InvalidInput);
  model.speed = 1;
  // Row 3, all west: 20 cells to the outlet in column 0 of the row, each step 30 m at 1 m/s.
  const TravelSummary s = travelTimeTiled(filled, west, area, nullptr, rows, 60, model, minutes, tiles(3, 4), noCancel);
  EXPECT_EQ(s.watershedCells, 20);
  EXPECT_DOUBLE_EQ(s.maxTime, 20 * 0.5);
  EXPECT_THROW(bandsTiled(minutes, rows, 0.0, 3, nullptr, tiles(4, 4), noCancel), InvalidInput);
  EXPECT_THROW(bandsTiled(minutes, rows, 1.0, 3, nullptr, tiles(4, 4), noCancel), InvalidInput);  // past band 3
  const TiledBands b = bandsTiled(minutes, rows, 1.0, 11, nullptr, tiles(4, 4), noCancel);
  EXPECT_EQ(b.bandCells, (std::vector<int64_t>{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(b.watershed.bandPolygon, (std::vector<int64_t>{0, 1}));
  // Cancel: a pass stops.
  RunControl cancel;
  cancel.canceled = [] { return true; };
  EXPECT_THROW(travelTimeTiled(filled, west, area, nullptr, rows, 60, model, minutes, tiles(4, 4), cancel), Canceled);
}
