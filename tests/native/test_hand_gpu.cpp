// Height above the nearest drainage on the GPU (pointer jumping with fixed-point lengths) against the
// CPU's walks: the same heights and distances bit for bit, in memory and tile by tile, on random DEMs'
// directions with loops, pits and nodata, one of them large. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "dem/hand.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "gpu_test_size.h"
#include "hand_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

TEST(HeightAboveDrainageGpu, SameAsTheCpu)
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
    int loops, oneIn;
  };
  for (const Case& k : {Case{1, 41, 33, true, 0, 9}, Case{2, 57, 44, false, 5, 30}, Case{3, big, big + 7, true, 40, 200}})
  {
    const HandCase c = handCase(k.seed, k.w, k.h, k.flats, k.loops, k.oneIn);
    const DrainageHeights cpu = heightAboveDrainage(Backend::Cpu, c.dem.grid(), c.directions, c.streams, noCancel);
    const DrainageHeights gpu = heightAboveDrainage(Backend::Gpu, c.dem.grid(), c.directions, c.streams, noCancel);
    const std::string what = "seed " + std::to_string(k.seed);
    EXPECT_TRUE(sameBits(gpu.height, cpu.height)) << what;
    EXPECT_TRUE(sameBits(gpu.distance, cpu.distance)) << what;
    EXPECT_EQ(gpu.drained, cpu.drained) << what;
    EXPECT_EQ(gpu.undrained, cpu.undrained) << what;

    tiled::TiledOptions options = tiles(k.w / 3 + 1, k.h / 2 + 1);
    options.backend = Backend::Gpu;
    const tiled::RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
    const tiled::MemoryRaster<float> z(c.dem.width, c.dem.height, c.dem.z);
    const tiled::MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
    const tiled::MemoryRaster<uint8_t> marks(c.dem.width, c.dem.height, c.streams);
    tiled::MemoryRaster<float> heights(c.dem.width, c.dem.height), distances(c.dem.width, c.dem.height);
    tiled::handTiled(z, dirs, marks, rows, heights, &distances, options, noCancel);
    EXPECT_TRUE(sameBits(heights.cells(), cpu.height)) << what << " tiled";
    EXPECT_TRUE(sameBits(distances.cells(), cpu.distance)) << what << " tiled";
  }
}
