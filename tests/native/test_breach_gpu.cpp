// Breaching depressions with the fill and the flats on the GPU (dem/breach.h): the same bits as the
// CPU's on random DEMs with flats, nodata and one large. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "dem/breach.h"
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
