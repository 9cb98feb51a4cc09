// Breaching depressions on the GPU (dem/breach.h, breach_cuda.cu): the same bits and counts as the
// CPU's on random DEMs with flats, nodata and one large, flat-bottomed basins, plateaus whose searches
// outgrow the device's windows, zeros of both signs; and dem.h's fillAndRaiseFlats, which finishes it,
// on its own. Skipped without a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "dem/breach.h"
#include "dem/dem.h"
#include "dem_cases.h"
#include "gpu_test_size.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;
constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Every count and every bit of the GPU's whole run against the CPU's (one thread's search).
void expectTheCpus(const TestDem& dem, const BreachLimits& limits, const std::string& where,
                   int64_t* hostSearches = nullptr)
{
  const BreachedDem cpu = breachDepressions(Backend::Cpu, dem.grid(), limits, 2, noCancel);
  const BreachedDem gpu = breachDepressions(Backend::Gpu, dem.grid(), limits, 2, noCancel);
  EXPECT_TRUE(sameBits(cpu.z, gpu.z)) << where;
  EXPECT_EQ(cpu.counts.pitsRaised, gpu.counts.pitsRaised) << where;
  EXPECT_EQ(cpu.counts.bottoms, gpu.counts.bottoms) << where;
  EXPECT_EQ(cpu.counts.breached, gpu.counts.breached) << where;
  EXPECT_EQ(cpu.counts.channelCells, gpu.counts.channelCells) << where;
  EXPECT_EQ(cpu.lowered, gpu.lowered) << where;
  EXPECT_EQ(cpu.raised, gpu.raised) << where;
  if (hostSearches)
    *hostSearches += gpu.counts.hostSearches;
}

// A depression of two cells in the middle of a plateau one metre above it, its outlet a cell one
// metre below it `reach` cells off: every way to it costs the same per cell, so the search weighs a
// great many paths of equal cost and ties; the plateau's cells `noise` steps of 0.25 m higher at
// random. The grid's edge lies further off than the outlet.
TestDem plateauDem(uint64_t seed, int64_t reach, int noise)
{
  const int64_t side = 2 * reach + 41;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> up(0, noise);
  TestDem d = randomDem(seed, side, side, 0.0, 0);
  const int64_t c = side / 2;
  for (int64_t y = 0; y < side; ++y)
    for (int64_t x = 0; x < side; ++x)
      d.z[std::size_t(y * side + x)] = 11.f + 0.25f * float(up(rng));
  d.z[std::size_t(c * side + c)] = d.z[std::size_t(c * side + c + 1)] = 10.f;
  d.z[std::size_t((c + reach / 2) * side + c + reach)] = 9.f;
  return d;
}

}  // namespace

// Random DEMs with flats (ties of cost), nodata and one large, at several limits.
TEST(BreachDepressionsGpu, SameAsTheCpu)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const int64_t big = gpugeo::testing::gpuSide(1500);
  struct Case
  {
    uint64_t seed;
    int64_t w, h;
    double step;
    int holes;
    BreachLimits limits;
  };
  const std::vector<Case> cases{{1, 60, 47, 0.0, 2, {10, 2.0}},          {2, 83, 71, 0.5, 3, {50, kInfinite}},
                                {4, 97, 64, 0.5, 2, {1, kInfinite}},     {5, 97, 64, 0.25, 2, {7, 0.0}},
                                {6, 120, 90, 1.0, 4, {200, kInfinite}}, {3, big, big + 7, 0.25, 5, {20, 5.0}},
                                {7, big, big, 0.5, 3, {50, kInfinite}}};
  for (const Case& k : cases)
    expectTheCpus(randomDem(k.seed, k.w, k.h, k.step, k.holes), k.limits, "seed " + std::to_string(k.seed));
}

// Bottoms of every size and searches of every reach: the flat-bottomed basins (52 cells across, behind
// walls), the plateaus whose channels reach 8 cells (the device's first window), 30 and 60 (its second)
// and 80 (more layers than the device keeps: searched on the host), zeros of both signs; the tiers all
// give the CPU's channels.
TEST(BreachDepressionsGpu, SearchesOfEveryReachAreTheCpus)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  int64_t host = 0;
  for (uint64_t seed = 21; seed <= 23; ++seed)
    for (const BreachLimits& limits : {BreachLimits{1, kInfinite}, BreachLimits{3, 2.0}, BreachLimits{40, 2.0},
                                       BreachLimits{40, kInfinite}, BreachLimits{5000, kInfinite}})
      expectTheCpus(basinsDem(seed, 60, 48), limits,
                    "basins " + std::to_string(seed) + " length " + std::to_string(limits.maxLength), &host);
  for (const int64_t reach : {8, 30, 60, 80})
    for (const int noise : {0, 2})
      for (const int64_t length : {int64_t(50), int64_t(70), reach})
        expectTheCpus(plateauDem(uint64_t(reach * 10 + noise), reach, noise), BreachLimits{length, kInfinite},
                      "plateau reach " + std::to_string(reach) + " noise " + std::to_string(noise) + " length " +
                        std::to_string(length),
                      &host);
  TestDem zeros = nearlyFlatDem(31, 140, 110, 0.0, 1.0, 0, 2);
  for (std::size_t c = 0; c < zeros.z.size(); c += 2)
    if (zeros.z[c] == 0.f)
      zeros.z[c] = -0.f;
  expectTheCpus(zeros, BreachLimits{50, kInfinite}, "zeros");
  expectTheCpus(zeros, BreachLimits{50, 0.0}, "zeros, depth 0");
  EXPECT_GT(host, 0) << "no search outgrew the device's windows";
}

// Infinite elevations (the native API takes them; QGIS's reader makes them nodata): channels whose cost
// is infinite are still channels, ordered by their steps, as on the CPU. A bottom of two cells walled
// by +inf inside a ring of edge cells; the same with the bottom at -inf; random terrain with both.
TEST(BreachDepressionsGpu, InfiniteElevationsAreTheCpus)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (const float bottom : {1.f, -std::numeric_limits<float>::infinity()})
  {
    TestDem walled = randomDem(1, 6, 5, 0.0, 0);
    for (int64_t y = 0; y < 5; ++y)
      for (int64_t x = 0; x < 6; ++x)
        walled.z[std::size_t(y * 6 + x)] =
          x == 0 || y == 0 || x == 5 || y == 4 ? 5.f : std::numeric_limits<float>::infinity();
    walled.z[2 * 6 + 2] = walled.z[2 * 6 + 3] = bottom;
    const BreachedDem cpu = breachDepressions(Backend::Cpu, walled.grid(), BreachLimits{}, 1, noCancel);
    EXPECT_EQ(cpu.counts.breached, 1);
    expectTheCpus(walled, BreachLimits{}, "walled, bottom " + std::to_string(bottom));
  }
  TestDem spiked = randomDem(41, 90, 70, 0.5, 2);
  std::mt19937_64 rng(41);
  std::uniform_int_distribution<std::size_t> cell(0, spiked.z.size() - 1);
  for (int k = 0; k < 60; ++k)
    spiked.z[cell(rng)] = k % 6 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  for (const BreachLimits& limits : {BreachLimits{}, BreachLimits{5, kInfinite}, BreachLimits{50, 3.0}})
    expectTheCpus(spiked, limits, "spiked, length " + std::to_string(limits.maxLength));
}

// The fill, the flat mask and the raise in one call on the device: the CPU's bits and counts, on
// nearly flat DEMs whose rims lie a few float steps above their flats (cells overtaken by the mask's
// raise, raised in turn), at 0, negative and positive bases, with nodata; random terrain; both gradients.
TEST(BreachDepressionsGpu, FillAndRaiseFlatsIsTheCpus)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  int64_t overtaken = 0;
  std::vector<TestDem> dems;
  for (uint64_t seed = 1; seed <= 9; ++seed)
  {
    const double base = seed % 3 == 0 ? 0.0 : (seed % 3 == 1 ? 312.5 : -4.0);
    dems.push_back(nearlyFlatDem(seed, 90 + int64_t(seed) * 7, 70 + int64_t(seed) * 5, base, 1.0, int(seed % 4) + 1,
                                 seed % 2 ? 6 : 0));
  }
  const int64_t big = gpugeo::testing::gpuSide(1200);
  dems.push_back(randomDem(11, big, big + 5, 0.5, 4));
  dems.push_back(nearlyFlatDem(12, big + 3, big, 20.0, 1.0, 3, 3));
  for (std::size_t k = 0; k < dems.size(); ++k)
    for (FlatGradient gradient : {FlatGradient::Combined, FlatGradient::TowardsOutlet})
    {
      const RaisedFlats cpu = fillAndRaiseFlats(Backend::Cpu, dems[k].grid(), gradient, 2, noCancel);
      const RaisedFlats gpu = fillAndRaiseFlats(Backend::Gpu, dems[k].grid(), gradient, 2, noCancel);
      const std::string where = "dem " + std::to_string(k) + " gradient " + std::to_string(int(gradient));
      EXPECT_TRUE(sameBits(cpu.z, gpu.z)) << where;
      EXPECT_EQ(cpu.raised, gpu.raised) << where;
      EXPECT_EQ(cpu.raisedInTurn, gpu.raisedInTurn) << where;
      overtaken += cpu.raisedInTurn;
    }
  EXPECT_GT(overtaken, 0) << "the DEMs no longer make a raised flat overtake its rim";
}
