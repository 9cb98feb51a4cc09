// Spherical Voronoi with the Delaunay mesh from the GPU's clipped cells against the CPU's (CGAL's
// hull): every region, area, vertex, neighbour and lon/lat polygon bit for bit, whether the GPU's mesh
// is taken (uniform sites) or refused (ties, clusters, too few sites). Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "core/backend.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/detail/spherical_cells.h"
#include "sphere/spherical_voronoi.h"
#include "spherical_sites.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

namespace {

using cases::Sites;
using cases::randomSites;

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
    Sites s = randomSites(n, uint32_t(n));
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
  Sites cluster = randomSites(20000, 5);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> tiny(-5e-8, 5e-8);
  for (int i = 0; i < 3000; ++i)
    cluster.add(12.5 + tiny(rng), -33.25 + tiny(rng));
  const Sites few = randomSites(100, 3);
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

// The kernel against its host build (the same per-site code): every cell's neighbours the same, in
// the same order, on uniform sites and on half of them in a 1-metre cluster (complete or failed, both
// the same).
TEST(SphericalVoronoiGpu, TheCellsKernelIsItsHostBuild)
{
  REQUIRE_GPU();
  for (const bool clustered : {false, true})
  {
    std::mt19937_64 rng(clustered ? 21 : 20);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<std::pair<uint64_t, std::array<double, 3>>> sites;
    for (int i = 0; i < 200000; ++i)
    {
      std::array<double, 3> p{normal(rng), normal(rng), normal(rng)};
      if (clustered && i % 2)
        p = {1.0 + 1e-7 * normal(rng), 1e-7 * normal(rng), 1e-7 * normal(rng)};
      const double r = std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
      p = {p[0] / r, p[1] / r, p[2] / r};
      sites.push_back({sphere::detail::mortonKey(sphere::detail::Vec3{p[0], p[1], p[2]}), p});
    }
    std::sort(sites.begin(), sites.end());
    std::vector<double> xyz;
    std::vector<uint64_t> key;
    for (const auto& [k, p] : sites)
    {
      key.push_back(k);
      xyz.insert(xyz.end(), p.begin(), p.end());
    }
    StageTimes times;
    const auto gpu = sphere::detail::deviceCells(xyz.data(), key.data(), int32_t(key.size()), RunControl{}, times);
    const auto host = sphere::detail::hostCells(xyz.data(), key.data(), int32_t(key.size()), 0, RunControl{});
    if (!clustered)
      EXPECT_TRUE(gpu.complete) << gpu.failure;
    EXPECT_EQ(gpu.complete, host.complete);
    EXPECT_EQ(gpu.failure, host.failure);
    EXPECT_EQ(gpu.start, host.start);
    EXPECT_TRUE(gpu.neighbor == host.neighbor);
  }
}
