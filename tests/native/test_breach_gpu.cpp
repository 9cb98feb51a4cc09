// Breaching depressions with the fill and the flats on the GPU (dem/breach.h): the same bits as the
// CPU's on random DEMs with flats, nodata and one large; and dem.h's fillAndRaiseFlats, which finishes
// it, on its own. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "dem/breach.h"
#include "dem/dem.h"
#include "dem_cases.h"
#include "gpu_test_size.h"

using namespace gpugeo;
using namespace gpugeo::dem;

TEST(BreachDepressionsGpu, SameAsTheCpu)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  RunControl noCancel;
  const int64_t big = gpugeo::testing::gpuSide(1500);
  struct Case
  {
    uint64_t seed;
    int64_t w, h;
    double step;
    int holes;
    BreachLimits limits;
  };
  const std::vector<Case> cases{{1, 60, 47, 0.0, 2, {10, 2.0}},
                                {2, 83, 71, 0.5, 3, {50, std::numeric_limits<double>::infinity()}},
                                {3, big, big + 7, 0.25, 5, {20, 5.0}}};
  for (const Case& k : cases)
  {
    const TestDem dem = randomDem(k.seed, k.w, k.h, k.step, k.holes);
    const BreachedDem cpu = breachDepressions(Backend::Cpu, dem.grid(), k.limits, 2, noCancel);
    const BreachedDem gpu = breachDepressions(Backend::Gpu, dem.grid(), k.limits, 2, noCancel);
    EXPECT_TRUE(sameBits(cpu.z, gpu.z)) << "seed " << k.seed;
    EXPECT_EQ(cpu.counts.breached, gpu.counts.breached);
    EXPECT_EQ(cpu.lowered, gpu.lowered);
    EXPECT_EQ(cpu.raised, gpu.raised);
  }
}

// The fill, the flat mask and the raise in one call on the device: the CPU's bits and counts, on
// nearly flat DEMs whose rims lie a few float steps above their flats (cells overtaken by the mask's
// raise, raised in turn), at 0, negative and positive bases, with nodata; random terrain; both gradients.
TEST(BreachDepressionsGpu, FillAndRaiseFlatsIsTheCpus)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  RunControl noCancel;
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
