// Spherical Voronoi with the Delaunay mesh from the GPU's clipped cells against the CPU's (CGAL's
// hull): every region, area, vertex, neighbour and lon/lat polygon bit for bit, whether the GPU's mesh
// is taken (uniform sites) or refused (ties, clusters, too few sites). Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend.h"
#include "sphere/spherical_voronoi.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

namespace {

struct Sites
{
  std::vector<double> lon, lat;
  void add(double x, double y)
  {
    lon.push_back(x);
    lat.push_back(y);
  }
  int64_t size() const { return static_cast<int64_t>(lon.size()); }
};

Sites uniform(int64_t n, uint32_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Sites s;
  for (int64_t i = 0; i < n; ++i)
    s.add(180.0 * u(rng), std::asin(u(rng)) * 180.0 / 3.14159265358979323846);
  return s;
}

std::vector<SphericalRegion> run(const Sites& s, Backend backend, SphericalVoronoiReport& report)
{
  SphericalVoronoiOptions options;
  options.backend = backend;
  return sphericalVoronoi(s.lon.data(), s.lat.data(), s.size(), options, RunControl{}, &report);
}

void expectSameBits(const std::vector<SphericalRegion>& gpu, const std::vector<SphericalRegion>& cpu)
{
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i)
  {
    ASSERT_EQ(gpu[i].duplicateOf, cpu[i].duplicateOf) << "site " << i;
    ASSERT_EQ(gpu[i].areaSteradians, cpu[i].areaSteradians) << "site " << i;
    ASSERT_EQ(gpu[i].vertices, cpu[i].vertices) << "site " << i;
    ASSERT_EQ(gpu[i].neighbors, cpu[i].neighbors) << "site " << i;
    ASSERT_EQ(gpu[i].parts.size(), cpu[i].parts.size()) << "site " << i;
    for (size_t p = 0; p < gpu[i].parts.size(); ++p)
    {
      ASSERT_EQ(gpu[i].parts[p].outer.lon, cpu[i].parts[p].outer.lon) << "site " << i;
      ASSERT_EQ(gpu[i].parts[p].outer.lat, cpu[i].parts[p].outer.lat) << "site " << i;
    }
  }
}

#define REQUIRE_GPU()                                                  \
  if (!probeGpu().usable)                                              \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

}  // namespace

TEST(SphericalVoronoiGpu, UniformSitesTakeTheCellsMesh)
{
  REQUIRE_GPU();
  for (const int64_t n : {5000, 60000})
  {
    Sites s = uniform(n, uint32_t(n));
    // Exact duplicates stay duplicates (the first keeps the region); lon 180 and -180 are one site.
    s.add(s.lon[3], s.lat[3]);
    s.add(180.0, 10.5);
    s.add(-180.0, 10.5);
    SphericalVoronoiReport gpuReport, cpuReport;
    const auto gpu = run(s, Backend::Gpu, gpuReport);
    const auto cpu = run(s, Backend::Cpu, cpuReport);
    EXPECT_TRUE(gpuReport.gpuMesh) << n << " sites: " << gpuReport.gpuMeshRefused;
    EXPECT_FALSE(cpuReport.gpuMesh);
    EXPECT_EQ(gpu[size_t(n)].duplicateOf, 3);
    EXPECT_EQ(gpu[size_t(n) + 2].duplicateOf, n + 1);
    expectSameBits(gpu, cpu);
  }
}

// The grid's mesh is refused (ties); the cluster's and the few sites' may or may not be taken: the
// regions are the same either way.
TEST(SphericalVoronoiGpu, TiesClustersAndFewSitesGiveTheSameRegions)
{
  REQUIRE_GPU();
  // A 2-degree lon/lat grid: every site co-circular with its neighbours.
  Sites grid;
  for (int lat = -88; lat <= 88; lat += 2)
    for (int lon = -180; lon < 180; lon += 2)
      grid.add(lon, lat);
  grid.add(0, 90);
  grid.add(0, -90);
  // A cluster 1 cm across among uniform sites.
  Sites cluster = uniform(20000, 5);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> tiny(-5e-8, 5e-8);
  for (int i = 0; i < 3000; ++i)
    cluster.add(12.5 + tiny(rng), -33.25 + tiny(rng));
  const Sites few = uniform(100, 3);
  for (const Sites* s : {static_cast<const Sites*>(&grid), static_cast<const Sites*>(&cluster), &few})
  {
    SphericalVoronoiReport gpuReport, cpuReport;
    const auto gpu = run(*s, Backend::Gpu, gpuReport);
    const auto cpu = run(*s, Backend::Cpu, cpuReport);
    if (s == &grid)
    {
      EXPECT_FALSE(gpuReport.gpuMesh);
      EXPECT_FALSE(gpuReport.gpuMeshRefused.empty());
    }
    expectSameBits(gpu, cpu);
  }
}
