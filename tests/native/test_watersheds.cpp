// Watersheds of many outlets (dem/watersheds.h) on the CPU against a walk down every cell's whole path
// (watershed_cases.h): the labels; each outlet's total cells against the cells whose path passes
// through it (what GRASS r.water.outlet gives per outlet); own and total areas; downstream outlets;
// outlets sharing a cell, in pits, nested; loops; bad input. Tile by tile (and on threads) against the
// in-memory run; the polygons tile by tile against traceRegions'.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "dem/regions.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/watersheds.h"
#include "watershed_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

Watersheds run(const WatershedCase& c, Backend backend = Backend::Cpu, int threads = 1)
{
  return watersheds(backend, c.directions, c.dem.width, c.dem.height, c.dem.cellWidth.data(), c.dem.cellHeight.data(),
                    c.outlets, threads, noCancel);
}

}  // namespace

TEST(Watersheds, EveryCellIsTheWalkDownItsPath)
{
  int64_t nested = 0, shared = 0, loopCells = 0;
  for (const uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u})
  {
    const WatershedCase c = watershedCase(seed, 37 + int64_t(seed) * 5, 29 + int64_t(seed) * 3, seed % 3 != 0,
                                          seed >= 5 ? 6 : 0, 4 + int(seed) * 3);
    const std::string what = "seed " + std::to_string(seed);
    const WatershedReference ref = watershedReference(c);
    const Watersheds got = run(c);
    ASSERT_EQ(got.labels, ref.labels) << what;
    const int64_t w = c.dem.width;
    for (std::size_t k = 0; k < c.outlets.size(); ++k)
    {
      nested += got.downstream[k] >= 0;
      shared += got.sameCellAs[k] >= 0;
    }
    for (std::size_t i = 0; i + 1 < c.directions.size(); ++i)
      loopCells += c.directions[i] == 0 && c.directions[i + 1] == 4 && got.labels[i] == 0;
    for (std::size_t k = 0; k < c.outlets.size(); ++k)
    {
      // Own cells and area: the labelled cells, the area per row.
      int64_t own = 0;
      double area = 0;
      for (int64_t y = 0; y < c.dem.height; ++y)
      {
        int64_t inRow = 0;
        for (int64_t x = 0; x < w; ++x)
          inRow += ref.labels[std::size_t(y * w + x)] == int32_t(k + 1);
        own += inRow;
        area += double(inRow) * c.dem.cellWidth[std::size_t(y)] * c.dem.cellHeight[std::size_t(y)];
      }
      EXPECT_EQ(got.ownCells[k], own) << what << ", outlet " << k;
      EXPECT_NEAR(got.ownArea[k], area, 1e-12 * area) << what << ", outlet " << k;
      // The earlier outlet on the same cell takes it; the later has nothing.
      int32_t earlier = -1;
      for (std::size_t j = 0; j < k && earlier < 0; ++j)
        if (c.outlets[j] == c.outlets[k])
          earlier = int32_t(j);
      EXPECT_EQ(got.sameCellAs[k], earlier) << what << ", outlet " << k;
      if (earlier >= 0)
      {
        EXPECT_EQ(got.ownCells[k], 0) << what;
        EXPECT_EQ(got.totalCells[k], 0) << what;
        EXPECT_EQ(got.downstream[k], -1) << what;
        continue;
      }
      // Total: the cells whose path passes through the outlet's cell, as r.water.outlet counts them
      // (loops aside: a cell on a loop through an outlet is labelled by it but counted once here too).
      EXPECT_EQ(got.totalCells[k], ref.throughCells[k]) << what << ", outlet " << k;
      // Downstream: the first outlet below the outlet cell.
      const int64_t cell = c.outlets[k];
      const uint8_t d = c.directions[std::size_t(cell)];
      int32_t below = -1;
      if (d < 8)
      {
        const int64_t x = cell % w + kDx[d], y = cell / w + kDy[d];
        if (x >= 0 && y >= 0 && x < w && y < c.dem.height)
        {
          const int32_t l = ref.labels[std::size_t(y * w + x)];
          if (l > 0 && l != int32_t(k + 1))
            below = l - 1;
        }
      }
      EXPECT_EQ(got.downstream[k], below) << what << ", outlet " << k;
    }
    // The union of every outlet's own cells nested under an outermost outlet is its total.
    for (std::size_t k = 0; k < c.outlets.size(); ++k)
    {
      if (got.downstream[k] >= 0 || got.sameCellAs[k] >= 0)
        continue;
      double inside = 0;
      for (std::size_t j = 0; j < c.outlets.size(); ++j)
      {
        int32_t i = int32_t(j);
        for (int steps = 0; i >= 0 && i != int32_t(k) && steps < 1000; ++steps)
          i = got.downstream[std::size_t(i)];
        if (i == int32_t(k))
          inside += got.ownArea[j];
      }
      EXPECT_NEAR(got.totalArea[k], inside, 1e-12 * inside) << what << ", outlet " << k;
    }
  }
  // The cases hold what they are meant to: nested outlets, shared cells, loops reaching no outlet.
  EXPECT_GT(nested, 10);
  EXPECT_GT(shared, 3);
  EXPECT_GT(loopCells, 3);
}

TEST(Watersheds, NestedOutletsAlongOneValley)
{
  // A 1-row valley draining west: outlets at columns 2, 5 and 8 of 10.
  TestDem d;
  d.width = 10;
  d.height = 1;
  d.cellWidth = {10};
  d.cellHeight = {20};
  const std::vector<uint8_t> west(10, 4);
  const Watersheds got = watersheds(Backend::Cpu, west, 10, 1, d.cellWidth.data(), d.cellHeight.data(), {5, 2, 8},
                                    1, noCancel);
  EXPECT_EQ(got.labels, (std::vector<int32_t>{0, 0, 2, 2, 2, 1, 1, 1, 3, 3}));
  EXPECT_EQ(got.ownCells, (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(got.totalCells, (std::vector<int64_t>{5, 8, 2}));
  EXPECT_EQ(got.downstream, (std::vector<int32_t>{1, -1, 0}));
  EXPECT_EQ(got.totalArea, (std::vector<double>{1000.0, 1600.0, 400.0}));
}

// Directions that go round through two outlets' cells: every cell that reaches the loop passes through
// both, so each counts them all (as the walk of watershedReference), in memory and tile by tile.
TEST(Watersheds, OutletsOnALoopEachCountWhatReachesIt)
{
  TestDem d;
  d.width = 5;
  d.height = 1;
  d.cellWidth = {10};
  d.cellHeight = {20};
  const std::vector<uint8_t> dirs{0, 0, 0, 4, 4};  // cells 2 and 3 point at each other
  const std::vector<int64_t> outlets{0, 2, 3};
  for (const int threads : {1, 2})
  {
    const Watersheds got = watersheds(Backend::Cpu, dirs, 5, 1, d.cellWidth.data(), d.cellHeight.data(), outlets,
                                      threads, noCancel);
    EXPECT_EQ(got.labels, (std::vector<int32_t>{1, 2, 2, 3, 3}));
    EXPECT_EQ(got.downstream, (std::vector<int32_t>{1, 2, 1}));
    EXPECT_EQ(got.ownCells, (std::vector<int64_t>{1, 2, 2}));
    EXPECT_EQ(got.ownArea, (std::vector<double>{200.0, 400.0, 400.0}));
    EXPECT_EQ(got.totalCells, (std::vector<int64_t>{1, 5, 5}));
    EXPECT_EQ(got.totalArea, (std::vector<double>{200.0, 1000.0, 1000.0}));
  }
  const tiled::MemoryRaster<uint8_t> raster(5, 1, dirs);
  tiled::MemoryRaster<int32_t> labels(5, 1);
  const Watersheds tiledRun =
    tiled::watershedsTiled(raster, tiled::RowSizes{d.cellWidth, d.cellHeight}, outlets, labels, tiles(2, 1), noCancel);
  EXPECT_EQ(tiledRun.totalCells, (std::vector<int64_t>{1, 5, 5}));
  EXPECT_EQ(tiledRun.totalArea, (std::vector<double>{200.0, 1000.0, 1000.0}));
}

TEST(Watersheds, BadInput)
{
  const std::vector<uint8_t> dirs{0, kNoData, 8, 4};
  const std::vector<double> size{30, 30};
  EXPECT_THROW(watersheds(Backend::Cpu, dirs, 2, 2, size.data(), size.data(), {4}, 1, noCancel), InvalidInput);
  EXPECT_THROW(watersheds(Backend::Cpu, dirs, 2, 2, size.data(), size.data(), {-1}, 1, noCancel), InvalidInput);
  EXPECT_THROW(watersheds(Backend::Cpu, dirs, 3, 2, size.data(), size.data(), {0}, 1, noCancel), InvalidInput);
  try
  {
    watersheds(Backend::Cpu, dirs, 2, 2, size.data(), size.data(), {0, 1}, 1, noCancel);
    FAIL();
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("outlet 2 lies on a nodata cell (column 1, row 0)"), std::string::npos)
      << e.what();
  }
  // No outlets: every cell 0.
  const Watersheds none = watersheds(Backend::Cpu, dirs, 2, 2, size.data(), size.data(), {}, 1, noCancel);
  EXPECT_EQ(none.labels, (std::vector<int32_t>(4, 0)));
  // An outlet in a pit takes what drains into it.
  const Watersheds pit = watersheds(Backend::Cpu, dirs, 2, 2, size.data(), size.data(), {2}, 1, noCancel);
  EXPECT_EQ(pit.labels, (std::vector<int32_t>{0, 0, 1, 1}));
}

// Tile by tile (tiled_watersheds.cpp): the in-memory labels, cells, areas and downstream outlets, on
// tiles from one cell wide to larger than the grid, with loops across tiles.
TEST(Watersheds, TileByTileIsTheInMemoryRun)
{
  for (const uint64_t seed : {7u, 8u, 9u})
  {
    const WatershedCase c = watershedCase(seed, 45 + int64_t(seed), 31 + int64_t(seed) * 2, seed != 8,
                                          seed == 9 ? 8 : 0, 25);
    const Watersheds want = run(c, Backend::Cpu, seed == 8 ? 3 : 1);
    const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
    const tiled::MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
    for (const auto& [tw, th] : std::vector<std::pair<int64_t, int64_t>>{
           {1, c.dem.height}, {c.dem.width, 1}, {2, 3}, {7, 5}, {16, 16}, {c.dem.width + 3, c.dem.height + 3}})
    {
      const std::string what = "seed " + std::to_string(seed) + ", tiles " + std::to_string(tw) + " x " +
                               std::to_string(th);
      tiled::MemoryRaster<int32_t> labels(c.dem.width, c.dem.height);
      tiled::TiledReport report;
      const Watersheds got = tiled::watershedsTiled(dirs, rows, c.outlets, labels, tiles(tw, th), noCancel, &report);
      std::vector<int32_t> written(c.directions.size());
      labels.read(tiled::Window{0, 0, c.dem.width, c.dem.height}, written.data());
      EXPECT_EQ(written, want.labels) << what;
      EXPECT_EQ(got.ownCells, want.ownCells) << what;
      EXPECT_EQ(got.ownArea, want.ownArea) << what;
      EXPECT_EQ(got.downstream, want.downstream) << what;
      EXPECT_EQ(got.totalCells, want.totalCells) << what;
      EXPECT_EQ(got.totalArea, want.totalArea) << what;
      EXPECT_EQ(got.sameCellAs, want.sameCellAs) << what;
      EXPECT_EQ(report.passes, 2) << what;
    }
  }
}

TEST(Watersheds, TiledBadInput)
{
  const std::vector<uint8_t> dirs{0, kNoData, 8, 4};
  const tiled::RowSizes rows{{30, 30}, {30, 30}};
  const tiled::MemoryRaster<uint8_t> raster(2, 2, dirs);
  tiled::MemoryRaster<int32_t> labels(2, 2);
  EXPECT_THROW(tiled::watershedsTiled(raster, rows, {4}, labels, tiles(1, 1), noCancel), InvalidInput);
  EXPECT_THROW(tiled::watershedsTiled(raster, rows, {1}, labels, tiles(1, 1), noCancel), InvalidInput);
}

// On several threads (tiles of 1,024² in memory; and the in-memory run's own cells and areas on the
// threads, bands of rows): the one thread's walks and sums.
TEST(Watersheds, ThreadsGiveTheOneThreadsResult)
{
  const WatershedCase c = watershedCase(12, 1100, 2100, true, 40, 400);
  const Watersheds one = run(c);
  const Watersheds four =
    tiled::watershedsOnThreads(c.directions, tiled::RowSizes{c.dem.cellWidth, c.dem.cellHeight}, c.outlets, 4, noCancel);
  EXPECT_EQ(four.labels, one.labels);
  EXPECT_EQ(four.ownArea, one.ownArea);
  EXPECT_EQ(four.totalCells, one.totalCells);
  EXPECT_EQ(four.downstream, one.downstream);
  EXPECT_EQ(four.sameCellAs, one.sameCellAs);
  for (const int threads : {2, 3, 16})
  {
    const Watersheds got = run(c, Backend::Cpu, threads);
    EXPECT_EQ(got.labels, one.labels) << threads;
    EXPECT_EQ(got.ownCells, one.ownCells) << threads;
    EXPECT_EQ(got.ownArea, one.ownArea) << threads;
    EXPECT_EQ(got.totalCells, one.totalCells) << threads;
    EXPECT_EQ(got.totalArea, one.totalArea) << threads;
    EXPECT_EQ(got.downstream, one.downstream) << threads;
  }
}

// The watersheds' polygons tile by tile: set k's cells, areas and polygons as traceRegions gives them
// for the labels in memory.
TEST(Watersheds, PolygonsTileByTileAreTheInMemoryOnes)
{
  const WatershedCase c = watershedCase(13, 61, 47, true, 3, 20);
  const Watersheds w = run(c);
  std::vector<int32_t> sets(w.labels.size());
  for (std::size_t i = 0; i < sets.size(); ++i)
    sets[i] = w.labels[i] - 1;
  const int32_t count = int32_t(c.outlets.size());
  const BandPolygons want = traceRegions(Backend::Cpu, sets.data(), c.dem.width, c.dem.height, count, 2, noCancel);
  const tiled::MemoryRaster<int32_t> labels(c.dem.width, c.dem.height, w.labels);
  const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
  for (const int64_t side : {int64_t(5), int64_t(16), int64_t(100)})
  {
    const tiled::TiledBands got = tiled::labelPolygonsTiled(labels, rows, count, tiles(side, side), noCancel);
    const std::string what = "tiles of " + std::to_string(side);
    EXPECT_EQ(got.bands.bandPolygon, want.bandPolygon) << what;
    EXPECT_EQ(got.bands.polygonRing, want.polygonRing) << what;
    EXPECT_EQ(got.bands.x, want.x) << what;
    EXPECT_EQ(got.bands.y, want.y) << what;
    EXPECT_EQ(got.bandCells, w.ownCells) << what;
    EXPECT_EQ(got.bandArea, w.ownArea) << what;
  }
  tiled::MemoryRaster<int32_t> none(3, 3, std::vector<int32_t>(9, 0));
  EXPECT_THROW(tiled::labelPolygonsTiled(none, tiled::RowSizes{{1, 1, 1}, {1, 1, 1}}, 0, tiles(2, 2), noCancel),
               InvalidInput);
}

// Pour points snapped onto a raster of any values (snapToHighestTiled): the brute-force highest within
// the radius (metres at the point's row; ties to the lowest index; NaN skipped), on windows of any
// size; the same cell as snapOutletTiled on counts.
TEST(Watersheds, SnapToTheHighestValueWithinTheRadius)
{
  std::mt19937_64 random(3);
  const int64_t w = 41, h = 37;
  std::vector<double> values(std::size_t(w * h));
  std::vector<int64_t> counts(values.size());
  std::vector<float> z(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
  {
    counts[i] = int64_t(random() % 6);  // many ties
    values[i] = double(counts[i]) * 0.25;
    z[i] = random() % 7 == 0 ? std::nanf("") : 1.f;
    if (std::isnan(z[i]))
      values[i] = std::nan("");
  }
  std::vector<double> cw(static_cast<std::size_t>(h)), ch(static_cast<std::size_t>(h), 30.0);
  for (int64_t y = 0; y < h; ++y)
    cw[std::size_t(y)] = 30.0 * std::cos(0.8 * double(y) / double(h));
  const tiled::RowSizes rows{cw, ch};
  const tiled::MemoryRaster<double> raster(w, h, values);
  const tiled::MemoryRaster<int64_t> countRaster(w, h, counts);
  const tiled::MemoryRaster<float> zRaster(w, h, z);
  for (int k = 0; k < 200; ++k)
  {
    const int64_t x = int64_t(random() % uint64_t(w)), y = int64_t(random() % uint64_t(h));
    const double radius = double(random() % 200);
    int64_t want = -1;
    for (int64_t yy = 0; yy < h; ++yy)
      for (int64_t xx = 0; xx < w; ++xx)
      {
        const int64_t c = yy * w + xx;
        const double dx = double(xx - x) * cw[std::size_t(y)], dy = double(yy - y) * 30.0;
        if (std::isnan(values[std::size_t(c)]) || dx * dx + dy * dy > radius * radius)
          continue;
        if (want < 0 || values[std::size_t(c)] > values[std::size_t(want)])
          want = c;
      }
    for (const int64_t side : {int64_t(1), int64_t(4), int64_t(64)})
    {
      EXPECT_EQ(tiled::snapToHighestTiled(raster, rows, x, y, radius, side), want) << x << ", " << y << ", " << radius;
      EXPECT_EQ(tiled::snapOutletTiled(zRaster, &countRaster, rows, x, y, radius, side), want);
    }
  }
  EXPECT_THROW(tiled::snapToHighestTiled(raster, rows, w, 0, 10, 4), InvalidInput);
  EXPECT_THROW(tiled::snapToHighestTiled(raster, rows, 0, 0, -1, 4), InvalidInput);
}
