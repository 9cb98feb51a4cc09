// The stream network on the GPU (streams_cuda.cu: marks, gathered inflows, a scan for the starts'
// numbers, pointer jumping up the chains, integer sums per segment) against the CPU's walks: every
// field the same, the lengths and drops bit for bit. Random filled DEMs with per-row cell sizes and
// nodata, thresholds from one cell up and by area, no stream at all, pits (unfilled directions),
// nodata elevations under valid directions, long chains (a spiral valley), made-up directions with
// loops and odd codes under made-up accumulations, and a large DEM. Skipped without a GPU (where a
// test checks that Backend::Gpu says so).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/streams.h"
#include "dem_cases.h"
#include "gpu_test_size.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

// The same values bit for bit (doubles included), else the first place that differs.
template <typename T>
::testing::AssertionResult sameValues(const char* what, const std::vector<T>& gpu, const std::vector<T>& cpu)
{
  if (gpu.size() != cpu.size())
    return ::testing::AssertionFailure() << what << ": " << gpu.size() << " values on the GPU, " << cpu.size()
                                         << " on the CPU";
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (std::memcmp(&gpu[i], &cpu[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure() << what << " [" << i << "]: " << gpu[i] << " on the GPU, " << cpu[i]
                                           << " on the CPU";
  return ::testing::AssertionSuccess();
}

// Checks GPU against CPU; returns the CPU's number of segments.
std::size_t expectSame(const Grid& grid, const std::vector<uint8_t>& dirs, const Accumulation& acc,
                       const StreamThreshold& threshold, const std::string& what)
{
  const StreamNetwork cpu = streamNetwork(Backend::Cpu, grid, dirs, acc, threshold, 1, noCancel);
  const StreamNetwork gpu = streamNetwork(Backend::Gpu, grid, dirs, acc, threshold, 1, noCancel);
  EXPECT_TRUE(sameValues("segment", gpu.segment, cpu.segment)) << what;
  EXPECT_TRUE(sameValues("first", gpu.first, cpu.first)) << what;
  EXPECT_TRUE(sameValues("last", gpu.last, cpu.last)) << what;
  EXPECT_TRUE(sameValues("down", gpu.down, cpu.down)) << what;
  EXPECT_TRUE(sameValues("strahler", gpu.strahler, cpu.strahler)) << what;
  EXPECT_TRUE(sameValues("shreve", gpu.shreve, cpu.shreve)) << what;
  EXPECT_TRUE(sameValues("cells", gpu.cells, cpu.cells)) << what;
  EXPECT_TRUE(sameValues("length", gpu.length, cpu.length)) << what;
  EXPECT_TRUE(sameValues("drop", gpu.drop, cpu.drop)) << what;
  EXPECT_TRUE(sameValues("area", gpu.area, cpu.area)) << what;
  EXPECT_TRUE(sameValues("upstreamCells", gpu.upstreamCells, cpu.upstreamCells)) << what;
  EXPECT_EQ(gpu.streamCells, cpu.streamCells) << what;
  // Only the rasters' fields: the GPU's network as the CPU's Full one.
  const StreamNetwork orders = streamNetwork(Backend::Gpu, grid, dirs, acc, threshold, 2, noCancel, StreamFields::Orders);
  EXPECT_TRUE(sameValues("segment (orders)", orders.segment, cpu.segment)) << what;
  EXPECT_TRUE(sameValues("first (orders)", orders.first, cpu.first)) << what;
  EXPECT_TRUE(sameValues("down (orders)", orders.down, cpu.down)) << what;
  EXPECT_TRUE(sameValues("strahler (orders)", orders.strahler, cpu.strahler)) << what;
  EXPECT_EQ(orders.streamCells, cpu.streamCells) << what;
  EXPECT_TRUE(orders.last.empty() && orders.shreve.empty() && orders.cells.empty() && orders.length.empty()) << what;
  return cpu.first.size();
}

struct Flow
{
  TestDem dem;
  std::vector<uint8_t> dirs;
  Accumulation acc;
};

// A random DEM (per-row cell sizes, nodata blobs), filled or not, its directions (flats resolved
// where filled; pits and flats kNoFlow where not) and accumulation.
Flow randomFlow(uint64_t seed, int64_t w, int64_t h, bool filled, int threads = 2)
{
  Flow f;
  f.dem = randomDem(seed, w, h, seed % 2 ? 1.0 : 0.0, 2 + int(seed % 3), 30, 30, true);
  if (filled)
    f.dem.z = fillDepressions(Backend::Cpu, f.dem.grid(), threads, noCancel);
  f.dirs = flowDirections(Backend::Cpu, f.dem.grid(), filled, threads, noCancel);
  f.acc = flowAccumulation(Backend::Cpu, f.dem.grid(), f.dirs, threads, noCancel);
  return f;
}

int64_t mostCells(const Accumulation& acc)
{
  return *std::max_element(acc.cells.begin(), acc.cells.end());
}

}  // namespace

TEST(StreamNetworkGpu, SameAsTheCpuOnFilledDems)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (uint64_t seed = 1; seed <= 4; ++seed)
  {
    Flow f = randomFlow(seed, 40 + int64_t(seed) * 7, 33 + int64_t(seed) * 5, true);
    const std::string what = "seed " + std::to_string(seed);
    for (const int64_t cells : {int64_t(1), int64_t(3), int64_t(20), int64_t(200)})
    {
      const std::size_t segments =
        expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{cells, 0}, what + ", cells " + std::to_string(cells));
      if (cells == 1)
        EXPECT_GT(segments, 0u) << what;
    }
    // By area: about 15 cells' worth (the rows' cells differ in size).
    expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{1, int64_t(15 * 30.0 * 30.0 * 0.9 * 1e6)}, what + ", area");
    // No stream cell at all.
    EXPECT_EQ(expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{mostCells(f.acc) + 1, 0}, what + ", none"), 0u);
    // Nodata elevations under valid directions: NaN drops, the same bits.
    std::mt19937_64 random(seed * 5 + 2);
    for (int k = 0; k < int(f.dem.z.size() / 50); ++k)
      f.dem.z[std::size_t(random() % f.dem.z.size())] = std::nanf("");
    expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{3, 0}, what + ", nodata elevations");
  }
}

TEST(StreamNetworkGpu, SameAsTheCpuWithPitsAndLongChains)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (uint64_t seed = 5; seed <= 7; ++seed)
  {
    const Flow f = randomFlow(seed, 61, 47, false);
    EXPECT_GT(std::count(f.dirs.begin(), f.dirs.end(), kNoFlow), 0) << "seed " << seed;
    for (const int64_t cells : {int64_t(1), int64_t(4)})
      expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{cells, 0},
                 "pits, seed " + std::to_string(seed) + ", cells " + std::to_string(cells));
  }
  // A valley spiralling through the whole grid: segments thousands of cells long.
  Flow f;
  f.dem = spiralValley(gpugeo::testing::gpuSide(301));
  f.dem.z = fillDepressions(Backend::Cpu, f.dem.grid(), 2, noCancel);
  f.dirs = flowDirections(Backend::Cpu, f.dem.grid(), true, 2, noCancel);
  f.acc = flowAccumulation(Backend::Cpu, f.dem.grid(), f.dirs, 2, noCancel);
  for (const int64_t cells : {int64_t(1), int64_t(2), int64_t(50)})
    expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{cells, 0}, "spiral, cells " + std::to_string(cells));
}

TEST(StreamNetworkGpu, SameAsTheCpuOnMadeUpDirections)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  // Random codes (0..7 mostly, pits, nodata and codes past 8 that mean none too), so loops and
  // junctions of up to eight everywhere; made-up accumulations, some cells with none.
  for (uint64_t seed = 1; seed <= 3; ++seed)
  {
    const int64_t w = 57 + int64_t(seed), h = 43;
    TestDem dem = randomDem(seed, w, h, 0.0, 0, 10, 12, true);
    std::mt19937_64 random(seed * 13 + 7);
    std::vector<uint8_t> dirs(std::size_t(w * h));
    Accumulation acc;
    for (std::size_t c = 0; c < dirs.size(); ++c)
    {
      const uint64_t r = random() % 40;
      dirs[c] = r < 36 ? uint8_t(r % 8) : (r == 36 ? kNoFlow : (r == 37 ? kNoData : uint8_t(9 + random() % 200)));
      acc.cells.push_back(int64_t(random() % 30));
      acc.area.push_back(int64_t(random() % 2000) * 1000000);
    }
    for (const StreamThreshold t : {StreamThreshold{1, 0}, StreamThreshold{5, 0}, StreamThreshold{1, 900000000}})
      expectSame(dem.grid(), dirs, acc, t, "made up, seed " + std::to_string(seed) + ", cells " +
                                               std::to_string(t.minCells) + ", area " + std::to_string(t.minArea));
  }
  // A ring of 2w cells round rows 0 and 1 under a row of pits: with nothing flowing into it, a loop of
  // single-inflow cells that no segment reaches (while the pits are segments); with row 2's first
  // cell flowing into it, one segment from there round to the cell before, flowing into itself.
  const int64_t w = gpugeo::testing::gpuSide(1200), h = 3;
  TestDem dem = randomDem(9, w, h, 0.0, 0);
  std::vector<uint8_t> dirs(std::size_t(w * h), kNoFlow);
  for (int64_t x = 0; x < w; ++x)
  {
    dirs[std::size_t(x)] = x == w - 1 ? 2 : 0;   // east, then south at the end
    dirs[std::size_t(w + x)] = x == 0 ? 6 : 4;   // west, then north at the start
  }
  Accumulation acc;
  acc.cells.assign(std::size_t(w * h), 1);
  acc.area.assign(std::size_t(w * h), 1);
  EXPECT_EQ(expectSame(dem.grid(), dirs, acc, StreamThreshold{1, 0}, "a ring"), std::size_t(w));
  dirs[std::size_t(2 * w)] = 6;  // north, into the ring
  EXPECT_EQ(expectSame(dem.grid(), dirs, acc, StreamThreshold{1, 0}, "a ring with an inflow"), std::size_t(w + 1));
}

TEST(StreamNetworkGpu, SameAsTheCpuOnALargeDem)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const int64_t side = gpugeo::testing::gpuSide(1500);
  const Flow f = randomFlow(21, side, side + 7, true, 8);
  for (const int64_t cells : {int64_t(1), int64_t(20), int64_t(200)})
    expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{cells, 0}, "large, cells " + std::to_string(cells));
  expectSame(f.dem.grid(), f.dirs, f.acc, StreamThreshold{1, int64_t(100 * 30.0 * 30.0 * 0.9 * 1e6)}, "large, area");
}

TEST(StreamNetworkGpu, WithoutAGpuItSaysSo)
{
  if (probeGpu().usable)
    GTEST_SKIP() << "a GPU is usable";
  const Flow f = randomFlow(3, 20, 16, true);
  EXPECT_THROW(streamNetwork(Backend::Gpu, f.dem.grid(), f.dirs, f.acc, StreamThreshold{}, 1, noCancel), DeviceUnavailable);
  // Auto is the caller's to resolve: here it runs on the CPU.
  EXPECT_EQ(streamNetwork(Backend::Auto, f.dem.grid(), f.dirs, f.acc, StreamThreshold{3, 0}, 2, noCancel).segment,
            streamNetwork(f.dem.grid(), f.dirs, f.acc, StreamThreshold{3, 0}, 2, noCancel).segment);
}
