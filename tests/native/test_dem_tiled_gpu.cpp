// The tiled DEM tools with their tiles on the GPU (TiledOptions::backend) against the in-memory CPU
// tools, bit for bit: the fill (the GPU's flood of pass 1 and its fill of pass 2), the flat masks,
// the directions with and without a flat mask, the travel times (within 1e-12 relative of the
// in-memory chain's, the three velocity models), and the accumulation's two passes, on the tiled CPU tests' cases
// and tile sizes, and on tiles of hundreds of cells a side (many 32 x 32 blocks relaxing across each
// other). Each test skips itself where no GPU can be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/isochrone_chain.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;
using namespace gpugeo::dem::tiled;

namespace {

RunControl noCancel;

bool gpuUsable()
{
  return probeGpu().usable;
}

struct Expected
{
  std::vector<float> filled;
  std::vector<uint8_t> directions, resolved;
  std::vector<int32_t> mask, towards;
  std::vector<int64_t> cells, area;
};

Expected inMemory(const TestDem& d)
{
  Expected e;
  e.filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
  const Grid filled = d.gridWith(e.filled);
  e.directions = flowDirections(Backend::Cpu, filled, false, 2, noCancel);
  e.resolved = flowDirections(Backend::Cpu, filled, true, 2, noCancel);
  e.mask = flatMask(Backend::Cpu, filled, 2, noCancel, nullptr, FlatGradient::Combined);
  e.towards = flatMask(Backend::Cpu, filled, 2, noCancel, nullptr, FlatGradient::TowardsOutlet);
  const Accumulation acc = flowAccumulation(Backend::Cpu, filled, e.resolved, 2, noCancel);
  e.cells = acc.cells;
  e.area = acc.area;
  return e;
}

TiledOptions onGpu(int64_t w, int64_t h, int threads)
{
  TiledOptions options = tiles(w, h, threads);
  options.backend = Backend::Gpu;
  options.gpuTiles = threads;  // the threads' tiles on the device together
  return options;
}

// The GPU's tiled fill, flat masks (both gradients), directions (plain, and with the in-memory flat
// mask) and accumulation (along the in-memory resolved directions) against `e`.
void expectTheCpus(const TestDem& d, const Expected& e, const TiledOptions& options)
{
  const RowSizes rows{d.cellWidth, d.cellHeight};
  MemoryRaster<float> dem(d.width, d.height, d.z), filled(d.width, d.height);
  fillTiled(dem, rows, filled, options, noCancel);
  EXPECT_TRUE(sameBits(filled.cells(), e.filled));
  MemoryRaster<float> expectedFilled(d.width, d.height, e.filled);
  ScratchFolder scratch(testing::TempDir());
  // The flats' tiles kept on the device between rounds: none, two tiles' worth, all of them.
  const int64_t keptTile = kFlatsKeptBytesPerTileCell * (options.tileWidth + 4) * (options.tileHeight + 4);
  for (const int64_t keep : {int64_t(0), 2 * keptTile, int64_t(1) << 40})
  {
    SCOPED_TRACE("flats' tiles kept on the GPU: " + std::to_string(keep) + " bytes");
    TiledOptions keeping = options;
    keeping.gpuKeepBytes = keep;
    MemoryRaster<int32_t> combined(d.width, d.height), towards(d.width, d.height);
    flatMaskTiled(expectedFilled, rows, combined, FlatGradient::Combined, scratch.path(), keeping, noCancel);
    EXPECT_EQ(combined.cells(), e.mask);
    flatMaskTiled(expectedFilled, rows, towards, FlatGradient::TowardsOutlet, scratch.path(), keeping, noCancel);
    EXPECT_EQ(towards.cells(), e.towards);
  }
  MemoryRaster<uint8_t> directions(d.width, d.height), resolved(d.width, d.height);
  directionsTiled(expectedFilled, rows, directions, options, noCancel);
  EXPECT_EQ(directions.cells(), e.directions);
  MemoryRaster<int32_t> mask(d.width, d.height, e.mask);
  directionsTiled(expectedFilled, rows, resolved, options, noCancel, nullptr, &mask);
  EXPECT_EQ(resolved.cells(), e.resolved);
  MemoryRaster<uint8_t> along(d.width, d.height, e.resolved);
  MemoryRaster<int64_t> cells(d.width, d.height), area(d.width, d.height);
  accumulationTiled(along, rows, cells, area, options, noCancel);
  EXPECT_EQ(cells.cells(), e.cells);
  EXPECT_EQ(area.cells(), e.area);
}

std::vector<std::pair<std::string, TestDem>> cases()
{
  std::vector<std::pair<std::string, TestDem>> all;
  for (const uint64_t seed : {1u, 2u, 3u})
    all.emplace_back("random " + std::to_string(seed),
                     randomDem(seed, 61 + int64_t(seed) * 7, 47 + int64_t(seed) * 5, seed == 2 ? 0.0 : 2.0,
                               int(6 * seed), 30, 30, seed == 3));
  all.emplace_back("spiral valley", spiralValley(57));
  TestDem winding = spiralValley(45);
  for (float& v : winding.z)
    if (v < 500.f && v > 0.f)
      v = 7.f;
  all.emplace_back("winding flat", winding);
  TestDem corner = randomDem(7, 40, 40, 0.0, 0);
  for (int64_t y = 4; y < 13; ++y)
    for (int64_t x = 3; x < 14; ++x)
      corner.z[std::size_t(y * 40 + x)] = -20.f;
  all.emplace_back("flat across a corner", corner);
  TestDem flat = randomDem(8, 33, 21, 0.0, 0);
  std::fill(flat.z.begin(), flat.z.end(), 12.5f);
  all.emplace_back("all flat", flat);
  TestDem holes = randomDem(9, 40, 30, 1.0, 3);
  for (int64_t y = 0; y < 30; ++y)
    for (int64_t x = 8; x < 24; ++x)
      holes.z[std::size_t(y * 40 + x)] = std::nanf("");
  all.emplace_back("nodata tiles", holes);
  TestDem none = randomDem(10, 12, 9, 0.0, 0);
  std::fill(none.z.begin(), none.z.end(), std::nanf(""));
  all.emplace_back("all nodata", none);
  all.emplace_back("one row", randomDem(11, 80, 1, 0.0, 0));
  all.emplace_back("one column", randomDem(12, 1, 70, 0.0, 0));
  return all;
}

// The GPU's tiled travel times from the in-memory CPU chain's filled DEM, directions and accumulation
// against its times (within 1e-12 relative), watershed and speeds, on each tile size.
void expectTheChainsTimes(const TestDem& d, VelocityModel::Kind kind, const std::string& what,
                          const std::vector<std::pair<int64_t, int64_t>>& sizes)
{
  const std::vector<float> manning = manningOf(d);
  ChainOptions o;
  o.model.kind = kind;
  o.model.channelArea = 0.05;
  o.model.mixedArea = 2e4;
  o.model.channelAreaManning = 8e4;
  o.model.rainfall = 30;
  o.model.manning = kind == VelocityModel::Kind::Manning ? manning.data() : nullptr;
  o.maxBands = 100000;
  o.keepFilled = o.keepDirections = o.keepAccumulation = true;
  const ChainResult e = isochroneChain(Backend::Cpu, d.grid(), o, 2, noCancel);
  ASSERT_GT(e.travel.watershedCells, 1) << what;
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> filled(d.width, d.height, e.filled), n(d.width, d.height, manning);
  const MemoryRaster<uint8_t> directions(d.width, d.height, e.directions);
  const MemoryRaster<int64_t> area(d.width, d.height, e.accumulation.area);
  for (const auto& [tw, th] : sizes)
  {
    const std::string at = what + ", tiles " + std::to_string(tw) + " x " + std::to_string(th);
    MemoryRaster<double> minutes(d.width, d.height);
    const TravelSummary s = travelTimeTiled(filled, directions, area, o.model.manning ? &n : nullptr, rows, e.outlet,
                                            o.model, minutes, onGpu(tw, th, 3), noCancel);
    EXPECT_EQ(s.watershedCells, e.travel.watershedCells) << at;
    EXPECT_EQ(s.watershedArea, e.travel.watershedArea) << at;
    EXPECT_EQ(s.minSpeed, e.minSpeed) << at;
    EXPECT_EQ(s.maxSpeed, e.maxSpeed) << at;
    int64_t off = 0;
    double longest = 0;
    for (std::size_t i = 0; i < d.z.size(); ++i)
    {
      const double want = e.travel.minutes[i], got = minutes.cells()[i];
      if (std::isnan(want) != std::isnan(got) || (!std::isnan(want) && !(std::fabs(got - want) <= 1e-12 * want)))
        ++off;
      if (!std::isnan(want))
        longest = std::max(longest, want);
    }
    EXPECT_EQ(off, 0) << at;
    EXPECT_NEAR(s.maxTime, longest, 1e-12 * longest) << at;
  }
}

}  // namespace

TEST(DemTiledGpu, TravelTimesAreTheInMemoryChains)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (const uint64_t seed : {1u, 2u, 3u})
  {
    const TestDem d = randomDem(seed, 53 + int64_t(seed) * 7, 41 + int64_t(seed) * 5, seed == 2 ? 0.0 : 1.0,
                                int(5 * seed), 30, 30, seed == 3);
    for (const VelocityModel::Kind kind :
         {VelocityModel::Kind::Constant, VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
      expectTheChainsTimes(d, kind, "seed " + std::to_string(seed) + " model " + std::to_string(int(kind)),
                           {{7, 5}, {1, d.height}, {d.width, 1}, {16, 16}, {d.width + 3, d.height + 3}});
  }
  // The spiral valley's one path through every tile; nodata tiles the watershed runs round; tiles of
  // many 32 x 32 blocks.
  expectTheChainsTimes(spiralValley(57), VelocityModel::Kind::Slope, "spiral", {{7, 5}, {1, 57}, {57, 1}, {20, 13}});
  TestDem holes = randomDem(5, 64, 48, 0.0, 0, 30, 30);
  for (int64_t y = 16; y < 32; ++y)
    for (int64_t x = 16; x < 48; ++x)
      holes.z[std::size_t(y * holes.width + x)] = std::nanf("");
  expectTheChainsTimes(holes, VelocityModel::Kind::Slope, "nodata tiles", {{16, 16}, {8, 16}, {7, 5}});
  const TestDem large = randomDem(14, 700, 520, 0.5, 20, 25, 25, true);
  expectTheChainsTimes(large, VelocityModel::Kind::Manning, "700 x 520", {{256, 200}, {333, 520}, {37, 23}});
}

TEST(DemTiledGpu, SmallCasesOnEveryTileSizeAreTheCpus)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (const auto& [what, d] : cases())
  {
    const Expected e = inMemory(d);
    const std::vector<std::pair<int64_t, int64_t>> sizes = {{7, 5}, {1, d.height}, {d.width, 1}, {3, 3},
                                                            {2, 9}, {16, 16}, {64, 40}, {d.width + 5, d.height + 5}};
    for (const auto& [tw, th] : sizes)
      for (const int threads : {1, 3})
      {
        SCOPED_TRACE(what + ": tiles " + std::to_string(tw) + " x " + std::to_string(th) + ", " +
                     std::to_string(threads) + " threads");
        expectTheCpus(d, e, onGpu(tw, th, threads));
      }
  }
}

TEST(DemTiledGpu, LargeTilesOfManyBlocksAreTheCpus)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  // Depressions, plateaus and paths across tiles of hundreds of cells (each many 32 x 32 blocks of
  // the relaxation), cells that change size by row.
  for (const uint64_t seed : {4u, 5u})
  {
    const TestDem d = randomDem(seed, 900 + int64_t(seed) * 13, 700 + int64_t(seed) * 11, seed == 4 ? 0.5 : 0.0,
                                40, 25, 25, true);
    const Expected e = inMemory(d);
    for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{256, 200}, {333, 777}, {37, 23}})
    {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", tiles " + std::to_string(tw) + " x " + std::to_string(th));
      expectTheCpus(d, e, onGpu(tw, th, 2));
    }
  }
  const TestDem spiral = spiralValley(301);
  const Expected e = inMemory(spiral);
  SCOPED_TRACE("spiral valley of 301 x 301 on tiles of 64 x 96");
  expectTheCpus(spiral, e, onGpu(64, 96, 3));
}

TEST(DemTiledGpu, LoopsAcrossTilesAreRefused)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (const int64_t tileSize : {int64_t(4), int64_t(64)})
  {
    MemoryRaster<uint8_t> directions(8, 8, loopAcrossTileCorners());
    MemoryRaster<int64_t> cells(8, 8), area(8, 8);
    const RowSizes rows{std::vector<double>(8, 10.0), std::vector<double>(8, 10.0)};
    EXPECT_THROW(accumulationTiled(directions, rows, cells, area, onGpu(tileSize, tileSize, 2), noCancel),
                 LoopedDirections)
      << "tiles of " << tileSize;
  }
}

TEST(DemTiledGpu, NoGpuIsDeviceUnavailable)
{
  if (gpuUsable())
    GTEST_SKIP() << "a GPU is usable here";
  const TestDem d = randomDem(13, 20, 20, 0.0, 0);
  MemoryRaster<float> dem(d.width, d.height, d.z), filled(d.width, d.height);
  EXPECT_THROW(fillTiled(dem, RowSizes{d.cellWidth, d.cellHeight}, filled, onGpu(8, 8, 1), noCancel),
               DeviceUnavailable);
}
