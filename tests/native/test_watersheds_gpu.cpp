// Watersheds of many outlets on the GPU (pointer jumping) against the CPU's walks: the same labels,
// cells, areas and downstream outlets, on random DEMs' directions with nested and shared outlets and
// loops, one of them large; tile by tile on the GPU. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "core/errors.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/watersheds.h"
#include "gpu_test_size.h"
#include "watershed_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

TEST(WatershedsGpu, SameAsTheCpu)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  RunControl noCancel;
  const int64_t big = gpugeo::testing::gpuSide(1500);
  struct Case
  {
    uint64_t seed;
    int64_t w, h;
    bool flats;
    int loops, outlets;
  };
  for (const Case& k : {Case{1, 41, 33, true, 0, 12}, Case{2, 57, 44, false, 5, 30}, Case{3, big, big + 7, true, 20, 500}})
  {
    const WatershedCase c = watershedCase(k.seed, k.w, k.h, k.flats, k.loops, k.outlets);
    const auto run = [&](Backend b) {
      return watersheds(b, c.directions, c.dem.width, c.dem.height, c.dem.cellWidth.data(), c.dem.cellHeight.data(),
                        c.outlets, b == Backend::Gpu ? 4 : 1, noCancel);
    };
    const Watersheds cpu = run(Backend::Cpu), gpu = run(Backend::Gpu);
    const std::string what = "seed " + std::to_string(k.seed);
    EXPECT_EQ(gpu.labels, cpu.labels) << what;
    EXPECT_EQ(gpu.ownCells, cpu.ownCells) << what;
    EXPECT_EQ(gpu.ownArea, cpu.ownArea) << what;
    EXPECT_EQ(gpu.totalCells, cpu.totalCells) << what;
    EXPECT_EQ(gpu.totalArea, cpu.totalArea) << what;
    EXPECT_EQ(gpu.downstream, cpu.downstream) << what;
    if (k.seed < 3)
      EXPECT_EQ(gpu.labels, watershedReference(c).labels) << what;
  }
}

// Tile by tile on the GPU (each tile labelled by the kernel): the in-memory CPU run's.
TEST(WatershedsGpu, TileByTileIsTheInMemoryRun)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  RunControl noCancel;
  const int64_t side = gpugeo::testing::gpuSide(700);
  const WatershedCase c = watershedCase(11, side, side - 13, true, 30, 300);
  const Watersheds want = watersheds(Backend::Cpu, c.directions, c.dem.width, c.dem.height, c.dem.cellWidth.data(),
                                     c.dem.cellHeight.data(), c.outlets, 1, noCancel);
  const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
  const tiled::MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
  for (const int64_t tile : {int64_t(64), int64_t(250)})
  {
    tiled::TiledOptions options = tiles(tile, tile, 4);
    options.backend = Backend::Gpu;
    options.gpuTiles = 2;
    tiled::MemoryRaster<int32_t> labels(c.dem.width, c.dem.height);
    const Watersheds got = tiled::watershedsTiled(dirs, rows, c.outlets, labels, options, noCancel);
    const std::string what = "tiles of " + std::to_string(tile);
    EXPECT_EQ(labels.cells(), want.labels) << what;
    EXPECT_EQ(got.ownArea, want.ownArea) << what;
    EXPECT_EQ(got.totalCells, want.totalCells) << what;
    EXPECT_EQ(got.downstream, want.downstream) << what;
  }
}
