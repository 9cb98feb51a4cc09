// Height above the nearest drainage (dem/hand.h) on the CPU against a walk down every cell's whole
// path in float64 (hand_cases.h): the same stream cell (the heights exactly), the distances within
// float32's rounding; a hand-made valley with known values; loops, pits and nodata reaching no
// stream; tile by tile (tiles down to one cell) and on threads against the in-memory run, bit for
// bit; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "dem/hand.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "hand_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

DrainageHeights run(const HandCase& c, Backend backend = Backend::Cpu)
{
  return heightAboveDrainage(backend, c.dem.grid(), c.directions, c.streams, noCancel);
}

void expectReference(const HandCase& c, const DrainageHeights& got, const std::string& what)
{
  const HandReference want = handReference(c);
  int64_t drained = 0, wrong = 0;
  for (std::size_t i = 0; i < want.height.size(); ++i)
  {
    if (std::isnan(want.height[i]))
    {
      wrong += !std::isnan(got.height[i]) || !std::isnan(got.distance[i]);
      continue;
    }
    ++drained;
    wrong += got.height[i] != float(want.height[i]);
    wrong += !(std::fabs(double(got.distance[i]) - want.distance[i]) <= 1.2e-7 * want.distance[i]);
  }
  EXPECT_EQ(wrong, 0) << what;
  EXPECT_EQ(got.drained, drained) << what;
  EXPECT_GT(drained, 0) << what;
}

}  // namespace

TEST(HeightAboveDrainage, EveryCellIsTheWalkDownItsPath)
{
  for (uint64_t seed = 1; seed <= 8; ++seed)
  {
    const HandCase c = handCase(seed, 37 + int64_t(seed) * 5, 29 + int64_t(seed) * 3, seed % 2 == 0, int(seed % 4) * 3,
                                int(3 + seed * 7));
    const DrainageHeights got = run(c);
    expectReference(c, got, "seed " + std::to_string(seed));
    int64_t streams = 0, valid = 0;
    for (std::size_t i = 0; i < c.streams.size(); ++i)
    {
      const bool ok = std::isfinite(c.dem.z[i]) && c.directions[i] != kNoData;
      valid += ok;
      streams += ok && c.streams[i] != 0;
    }
    EXPECT_EQ(got.streamCells, streams);
    EXPECT_EQ(got.drained + got.undrained, valid);
  }
}

TEST(HeightAboveDrainage, KnownValley)
{
  // One row of five cells 10 m wide draining east into a stream cell, a second row draining
  // south-east onto the first, a third that loops and a fourth that ends in a pit.
  const int64_t w = 5, h = 4;
  std::vector<float> z = {4, 3, 2, 1, 0,  //
                          9, 8, 7, 6, 5,  //
                          1, 1, 1, 1, 1,  //
                          2, 2, 2, 2, 2};
  std::vector<uint8_t> dirs = {0, 0, 0, 0, kNoFlow,  //
                               7, 7, 7, 7, 6,        //
                               0, 4, 0, 4, kNoData,  //
                               0, 0, 0, 0, kNoFlow};
  std::vector<uint8_t> streams(std::size_t(w * h), 0);
  streams[4] = 1;
  const std::vector<double> cw(std::size_t(h), 10.0), ch(std::size_t(h), 20.0);
  Grid g;
  g.z = z.data();
  g.width = w;
  g.height = h;
  g.cellWidth = cw.data();
  g.cellHeight = ch.data();
  const DrainageHeights got = heightAboveDrainage(Backend::Cpu, g, dirs, streams, noCancel);
  const double diag = std::sqrt(500.0);
  const std::vector<double> heights = {4, 3, 2, 1, 0, 9, 8, 7, 6, 5};
  const std::vector<double> distances = {40, 30, 20, 10, 0, diag + 30, diag + 20, diag + 10, diag, 20};
  for (int64_t i = 0; i < 10; ++i)
  {
    EXPECT_EQ(got.height[std::size_t(i)], float(heights[std::size_t(i)])) << i;
    EXPECT_EQ(got.distance[std::size_t(i)], float(distances[std::size_t(i)])) << i;
  }
  for (int64_t i = 10; i < w * h; ++i)
    EXPECT_TRUE(std::isnan(got.height[std::size_t(i)]) && std::isnan(got.distance[std::size_t(i)])) << i;
  EXPECT_EQ(got.streamCells, 1);
  EXPECT_EQ(got.drained, 10);
  EXPECT_EQ(got.undrained, 9);
}

TEST(HeightAboveDrainage, TileByTileIsTheInMemoryRun)
{
  for (uint64_t seed = 1; seed <= 4; ++seed)
  {
    const HandCase c = handCase(seed + 20, 53, 41, seed % 2 == 1, int(seed) * 2, int(5 + seed * 9));
    const DrainageHeights want = run(c);
    const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
    const tiled::MemoryRaster<float> z(c.dem.width, c.dem.height, c.dem.z);
    const tiled::MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
    const tiled::MemoryRaster<uint8_t> marks(c.dem.width, c.dem.height, c.streams);
    for (const auto& [tw, th] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {5, 4}, {7, 7}, {16, 9}, {64, 64}})
    {
      tiled::MemoryRaster<float> heights(c.dem.width, c.dem.height), distances(c.dem.width, c.dem.height);
      tiled::TiledReport report;
      const tiled::HandSummary sum =
        tiled::handTiled(z, dirs, marks, rows, heights, &distances, tiles(tw, th), noCancel, &report);
      const std::string what = "seed " + std::to_string(seed) + ", tiles " + std::to_string(tw) + "x" + std::to_string(th);
      EXPECT_TRUE(sameBits(heights.cells(), want.height)) << what;
      EXPECT_TRUE(sameBits(distances.cells(), want.distance)) << what;
      EXPECT_EQ(sum.streamCells, want.streamCells) << what;
      EXPECT_EQ(sum.drained, want.drained) << what;
      EXPECT_EQ(sum.undrained, want.undrained) << what;
      EXPECT_EQ(report.passes, 2);
    }
  }
}

TEST(HeightAboveDrainage, ThreadsGiveTheOneThreadsResult)
{
  const HandCase c = handCase(41, 1500, 1100, true, 30, 40);
  const DrainageHeights want = run(c);
  const DrainageHeights got = tiled::handOnThreads(c.dem.grid(), c.directions, c.streams, 3, noCancel);
  EXPECT_TRUE(sameBits(got.height, want.height));
  EXPECT_TRUE(sameBits(got.distance, want.distance));
  EXPECT_EQ(got.drained, want.drained);
  EXPECT_EQ(got.undrained, want.undrained);
}

TEST(HeightAboveDrainage, BadInput)
{
  const HandCase c = handCase(5, 9, 7, true, 0, 5);
  std::vector<uint8_t> shortStreams(c.streams.begin(), c.streams.end() - 1);
  EXPECT_THROW(heightAboveDrainage(Backend::Cpu, c.dem.grid(), c.directions, shortStreams, noCancel), InvalidInput);
  std::vector<uint8_t> shortDirs(c.directions.begin(), c.directions.end() - 1);
  EXPECT_THROW(heightAboveDrainage(Backend::Cpu, c.dem.grid(), shortDirs, c.streams, noCancel), InvalidInput);
  const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
  const tiled::MemoryRaster<float> z(9, 7, c.dem.z);
  const tiled::MemoryRaster<uint8_t> dirs(9, 7, c.directions), marks(8, 7, std::vector<uint8_t>(56, 0));
  tiled::MemoryRaster<float> out(9, 7);
  EXPECT_THROW(tiled::handTiled(z, dirs, marks, rows, out, nullptr, tiles(4, 4), noCancel), InvalidInput);
}

TEST(HeightAboveDrainage, NoStreamLeavesEveryCellWithout)
{
  HandCase c = handCase(6, 30, 20, true, 0, 5);
  std::fill(c.streams.begin(), c.streams.end(), uint8_t(0));
  const DrainageHeights got = run(c);
  EXPECT_EQ(got.drained, 0);
  EXPECT_EQ(got.streamCells, 0);
  for (const float v : got.height)
    EXPECT_TRUE(std::isnan(v));
}
