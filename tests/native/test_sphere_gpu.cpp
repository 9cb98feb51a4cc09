// Spherical labelling on the GPU against the CPU: every method, bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "core/errors.h"
#include "sphere/qtm.h"
#include "sphere/sphere_nearest.h"
#include "sphere_cases.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

#define REQUIRE_GPU()                                     \
  if (!probeGpu().usable)                                 \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

namespace {

const NearestMethod kMethods[] = {NearestMethod::Indexed, NearestMethod::BruteGlobal, NearestMethod::BruteShared,
                                  NearestMethod::BruteConstant, NearestMethod::BruteRegister};

}  // namespace

TEST(SphereGpu, QtmEveryMethodEqualsTheCpu)
{
  REQUIRE_GPU();
  auto cases = cases::standardCases();
  cases.push_back(cases::randomSites("random", 5000, 21));  // more than one constant-memory chunk
  for (const auto& c : cases)
    for (int level : {0, 2, 5, 8})
    {
      const int64_t count = int64_t(qtmCellCount(level));
      std::vector<int32_t> cpu(static_cast<std::size_t>(count)), gpu(cpu.size());
      std::vector<float> cpuKm(cpu.size()), gpuKm(cpu.size());
      SphereOptions options;
      options.method = NearestMethod::Indexed;
      auto cpuLabeller = makeSphereLabeller(Backend::Cpu, c.sites(), options, RunControl{});
      cpuLabeller->labelQtm(level, 0, count, cpu.data(), cpuKm.data(), RunControl{});
      for (NearestMethod m : kMethods)
      {
        options.method = m;
        auto labeller = makeSphereLabeller(Backend::Gpu, c.sites(), options, RunControl{});
        labeller->labelQtm(level, 0, count, gpu.data(), gpuKm.data(), RunControl{});
        ASSERT_EQ(cpu, gpu) << c.name << " level " << level << " " << methodName(m);
        for (std::size_t i = 0; i < cpu.size(); ++i)
          ASSERT_NEAR(cpuKm[i], gpuKm[i], 1e-6 * cpuKm[i] + 1e-6) << c.name << " cell " << i << " " << methodName(m);
        if (m == NearestMethod::Indexed)
          EXPECT_EQ(labeller->stats(), cpuLabeller->stats()) << c.name << " level " << level;
      }
    }
}

TEST(SphereGpu, QtmRangesAtLevel13)
{
  REQUIRE_GPU();
  const auto c = cases::randomSites("random", 100000, 22, false);
  SphereOptions options;
  options.method = NearestMethod::Indexed;
  auto cpu = makeSphereLabeller(Backend::Cpu, c.sites(), options, RunControl{});
  auto gpu = makeSphereLabeller(Backend::Gpu, c.sites(), options, RunControl{});
  for (uint64_t first : {uint64_t(0), uint64_t(123456789), qtmCellCount(13) - 1000000})
  {
    std::vector<int32_t> a(1000000), b(1000000);
    cpu->labelQtm(13, first, 1000000, a.data(), nullptr, RunControl{});
    gpu->labelQtm(13, first, 1000000, b.data(), nullptr, RunControl{});
    ASSERT_EQ(a, b) << "first " << first;
  }
}

TEST(SphereGpu, GridEveryMethodEqualsTheCpu)
{
  REQUIRE_GPU();
  LonLatGrid grid;
  grid.pixelWidth = grid.pixelHeight = 0.5;
  grid.width = 720;
  grid.height = 360;
  for (const auto& c : cases::standardCases())
  {
    std::vector<int32_t> cpu(std::size_t(grid.width * grid.height)), gpu(cpu.size());
    SphereOptions options;
    options.method = NearestMethod::Indexed;
    makeSphereLabeller(Backend::Cpu, c.sites(), options, RunControl{})
      ->labelGridRows(grid, 0, grid.height, cpu.data(), nullptr, RunControl{});
    for (NearestMethod m : kMethods)
    {
      options.method = m;
      makeSphereLabeller(Backend::Gpu, c.sites(), options, RunControl{})
        ->labelGridRows(grid, 0, grid.height, gpu.data(), nullptr, RunControl{});
      ASSERT_EQ(cpu, gpu) << c.name << " " << methodName(m);
    }
  }
}

TEST(SphereGpu, WithoutAGpuTheReasonIsGiven)
{
  if (probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  const double lon[] = {0.0}, lat[] = {0.0};
  try
  {
    makeSphereLabeller(Backend::Gpu, {lon, lat, 1}, {}, RunControl{});
    FAIL();
  }
  catch (const DeviceUnavailable& e)
  {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}
