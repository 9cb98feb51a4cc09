// The memory plan: in memory within the budget, tiled past it (or when forced) with the largest tiles
// that fit, a multiple of 256 cells a side where the budget allows, else of 16; a budget that cannot
// hold 16 x 16 tiles says what it would need; GDAL's cache limit given back.
#include <gtest/gtest.h>

#include <gdal.h>

#include "gdal/tiling_plan.h"

using namespace gpugeo;
using namespace gpugeo::gdal;

TEST(TilingPlanTest, InMemoryWithinTheBudgetTiledPastIt)
{
  const TilingPlan inMemory = planTiling(1024, false, 1000, 1000, 20, 24, 4);
  EXPECT_FALSE(inMemory.tiled);
  EXPECT_TRUE(inMemory.fits);
  EXPECT_EQ(inMemory.budgetBytes, int64_t(1024) << 20);
  EXPECT_EQ(inMemory.budgetSource, "given");
  EXPECT_EQ(inMemory.inMemoryBytes, 1000 * 1000 * 20 + 1000 * 1000 * 8);

  const TilingPlan forced = planTiling(1024, true, 1000, 1000, 20, 24, 4);
  EXPECT_TRUE(forced.tiled);
  EXPECT_TRUE(forced.fits);
  EXPECT_EQ(forced.options.tileWidth, 4096);  // the largest: the tools cut it to the DEM
  EXPECT_EQ(forced.options.threads, 4);
  EXPECT_EQ(forced.gdalCacheBytes, int64_t(128) << 20);

  // 20,000^2 cells in 256 MiB on 2 threads: tiles of 1,536 (a multiple of 256). 600^2 cells in 2 MiB
  // on 4 threads: of 64 (a multiple of 16), as the perimeters' graph grows with smaller tiles: 4 x
  // 66^2 x 32 + 10^2 x 256 x 48 bytes (1.70 MiB) within the 1.75 MiB GDAL's cache leaves; 80 is too
  // large.
  const TilingPlan large = planTiling(256, false, 20000, 20000, 20, 24, 2);
  EXPECT_TRUE(large.tiled);
  EXPECT_EQ(large.options.tileWidth, 1536);
  EXPECT_EQ(large.options.tileHeight, 1536);
  EXPECT_EQ(large.gdalCacheBytes, int64_t(32) << 20);
  const TilingPlan small = planTiling(2, false, 600, 600, 20, 24, 4);
  EXPECT_TRUE(small.tiled);
  EXPECT_TRUE(small.fits);
  EXPECT_EQ(small.options.tileWidth, 64);
  EXPECT_EQ(small.gdalCacheBytes, int64_t(256) << 10);
}

// A tool whose tiles' windows hold a wide margin (breaching's): the margin counts in every tile in
// flight. 20,000² in 256 MiB on 2 threads with a margin of 152: 2 x (1,280 + 304)² x 32 bytes and the
// graph, 16² x 4 x 1,280 x 48 bytes, 213 MiB in all, fit the 224 MiB GDAL's cache leaves; 1,536 (as
// without the margin) would not.
TEST(TilingPlanTest, AWideHaloCountsInEveryTile)
{
  const TilingPlan halo = planTiling(256, false, 20000, 20000, 20, 24, 2, Backend::Cpu, 0, 152);
  EXPECT_TRUE(halo.tiled);
  EXPECT_LT(halo.options.tileWidth, planTiling(256, false, 20000, 20000, 20, 24, 2).options.tileWidth);
  EXPECT_EQ(halo.options.tileWidth, 1280);
}

TEST(TilingPlanTest, ABudgetTooSmallForAnyTileSaysWhatItNeeds)
{
  const TilingPlan plan = planTiling(1, false, 100000, 100000, 20, 24, 8);
  EXPECT_TRUE(plan.tiled);
  EXPECT_FALSE(plan.fits);
  EXPECT_GT(plan.neededBytes, plan.budgetBytes);
  EXPECT_EQ(plan.options.tileWidth, 1024);  // TiledOptions' default: no tiles chosen
}

TEST(TilingPlanTest, WithoutABudgetHalfTheAvailableMemory)
{
  const TilingPlan plan = planTiling(0, false, 100, 100, 20, 24, 1);
  EXPECT_GT(plan.budgetBytes, 0);
  EXPECT_NE(plan.budgetSource.find("MiB"), std::string::npos) << plan.budgetSource;
}

TEST(TilingPlanTest, MebibytesAndTheCacheLimit)
{
  EXPECT_EQ(mebibytes(int64_t(1) << 20), "1");
  EXPECT_EQ(mebibytes(int64_t(3) << 19), "1.5");
  EXPECT_EQ(mebibytes(int64_t(4096) << 20), "4096");
  const int64_t before = GDALGetCacheMax64();
  {
    const GdalCacheLimit limit(int64_t(1) << 20);
    EXPECT_EQ(GDALGetCacheMax64(), int64_t(1) << 20);
    limit.shrink(int64_t(1) << 19);
    EXPECT_EQ(GDALGetCacheMax64(), int64_t(1) << 19);
  }
  EXPECT_EQ(GDALGetCacheMax64(), before);
}
