// Spherical labelling on the GPU against the CPU: every method, bit for bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/backend.h"
#include "core/errors.h"
#include "sphere/detail/site_prep.h"
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

// The tree built on the device is the host's, array for array and bit for bit: on the standard
// cases, on a tight cluster where every site shares a Morton key and exact duplicates (and -0 against
// +0) are interleaved, and on 200,000 random sites with duplicates.
TEST(SphereGpu, TheDeviceTreeIsTheHostTree)
{
  REQUIRE_GPU();
  auto cases = cases::standardCases();
  cases::SiteCase dup;
  dup.name = "tight cluster with interleaved duplicates and signed zeros";
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> tiny(-1e-8, 1e-8);
  for (int i = 0; i < 3000; ++i)
  {
    if (i % 3 == 2)
    {
      const std::size_t earlier = std::size_t(rng() % dup.lon.size());
      dup.lon.push_back(dup.lon[earlier]);
      dup.lat.push_back(dup.lat[earlier]);
    }
    else
    {
      dup.lon.push_back(-20.0 + tiny(rng));
      dup.lat.push_back(40.0 + tiny(rng));
    }
  }
  dup.lon.insert(dup.lon.end(), {0.0, -0.0, 0.0, -0.0, 90.0});
  dup.lat.insert(dup.lat.end(), {0.0, 0.0, -0.0, -0.0, -0.0});
  cases.push_back(dup);
  cases.push_back(cases::randomSites("random", 200000, 23));
  for (const auto& c : cases)
  {
    const detail::PreparedSites host = detail::prepareSites(c.sites(), 0, RunControl{});
    const detail::PreparedSites device = detail::prepareSitesOnDevice(c.sites(), 0, RunControl{});
    ASSERT_EQ(device.treeCount, host.treeCount) << c.name;
    ASSERT_EQ(device.treeOriginal, host.treeOriginal) << c.name;
    ASSERT_EQ(0, std::memcmp(device.treeSites.data(), host.treeSites.data(), host.treeSites.size() * sizeof(detail::Vec3)))
      << c.name;
    ASSERT_EQ(device.boxCount, host.boxCount) << c.name;
    ASSERT_EQ(0, std::memcmp(device.boxes.data(), host.boxes.data(), host.boxes.size() * sizeof(detail::Box))) << c.name;
    ASSERT_EQ(device.levels, host.levels) << c.name;
    for (int l = 0; l < host.levels; ++l)
    {
      EXPECT_EQ(device.levelOffset[l], host.levelOffset[l]) << c.name;
      EXPECT_EQ(device.levelSize[l], host.levelSize[l]) << c.name;
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
