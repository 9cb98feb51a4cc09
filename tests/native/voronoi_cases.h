// Inputs for the plane Voronoi tests: random and degenerate site sets on small grids, each named
// with its seed so that a failure says which input broke.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "voronoi/voronoi_raster.h"

namespace gpugeo::testing {

struct VoronoiCase
{
  std::string name;
  voronoi::Grid grid;
  std::vector<double> x;
  std::vector<double> y;

  voronoi::Sites sites() const { return voronoi::Sites{x.data(), y.data(), static_cast<int64_t>(x.size())}; }
};

inline VoronoiCase uniformCase(uint32_t seed, int64_t width, int64_t height, int sites, double originX = 0.0,
                               double originY = 0.0, double pixelSize = 1.0, double margin = 0.0)
{
  std::mt19937_64 rng(seed);
  VoronoiCase c;
  c.name = "uniform seed=" + std::to_string(seed) + " grid=" + std::to_string(width) + "x" + std::to_string(height) +
           " sites=" + std::to_string(sites) + " origin=(" + std::to_string(originX) + "," + std::to_string(originY) +
           ") pixel=" + std::to_string(pixelSize);
  c.grid = voronoi::Grid{originX, originY, pixelSize, width, height};
  std::uniform_real_distribution<double> ux(originX - margin * pixelSize, originX + (width + margin) * pixelSize);
  std::uniform_real_distribution<double> uy(originY - (height + margin) * pixelSize, originY + margin * pixelSize);
  for (int i = 0; i < sites; ++i)
  {
    c.x.push_back(ux(rng));
    c.y.push_back(uy(rng));
  }
  return c;
}

// Sites on whole and half pixel coordinates, many repeated: exact ties between distinct sites
// (pixel centres on the bisector) and exact duplicates.
inline VoronoiCase latticeCase(uint32_t seed, int64_t width, int64_t height, int sites)
{
  std::mt19937_64 rng(seed);
  VoronoiCase c;
  c.name = "lattice seed=" + std::to_string(seed) + " grid=" + std::to_string(width) + "x" + std::to_string(height) +
           " sites=" + std::to_string(sites);
  c.grid = voronoi::Grid{0.0, double(height), 1.0, width, height};
  std::uniform_int_distribution<int> ix(0, int(2 * width)), iy(0, int(2 * height));
  for (int i = 0; i < sites; ++i)
  {
    c.x.push_back(0.5 * ix(rng));
    c.y.push_back(0.5 * iy(rng));
  }
  // Explicit duplicates of earlier sites, so ties by index are exercised.
  for (int i = 0; i < sites / 4; ++i)
  {
    c.x.push_back(c.x[i]);
    c.y.push_back(c.y[i]);
  }
  return c;
}

// Most sites in a tiny cluster, so the tiles near it have long candidate lists (the dense path).
inline VoronoiCase clusteredCase(uint32_t seed, int64_t width, int64_t height, int sites)
{
  std::mt19937_64 rng(seed);
  VoronoiCase c;
  c.name = "clustered seed=" + std::to_string(seed) + " grid=" + std::to_string(width) + "x" + std::to_string(height) +
           " sites=" + std::to_string(sites);
  c.grid = voronoi::Grid{0.0, double(height), 1.0, width, height};
  std::uniform_real_distribution<double> ux(0.0, double(width)), uy(0.0, double(height));
  std::normal_distribution<double> blob(0.0, 0.7);
  const double cx = 0.37 * width, cy = 0.61 * height;
  for (int i = 0; i < sites; ++i)
  {
    if (i % 10 == 0)
    {
      c.x.push_back(ux(rng));
      c.y.push_back(uy(rng));
    }
    else
    {
      c.x.push_back(cx + blob(rng));
      c.y.push_back(cy + blob(rng));
    }
  }
  return c;
}

inline std::vector<VoronoiCase> standardCases()
{
  std::vector<VoronoiCase> cases;
  for (uint32_t seed = 1; seed <= 6; ++seed)
    cases.push_back(uniformCase(seed, 97 + 13 * seed, 61 + 29 * seed, int(3 * seed * seed * seed)));
  cases.push_back(uniformCase(11, 200, 150, 1));
  cases.push_back(uniformCase(12, 256, 256, 2000));
  cases.push_back(uniformCase(13, 300, 40, 50000));
  // Sites well outside the grid on every side.
  cases.push_back(uniformCase(14, 120, 90, 40, 0.0, 0.0, 1.0, 300.0));
  cases.push_back(uniformCase(15, 64, 64, 3, 0.0, 0.0, 1.0, 5000.0));
  // UTM-sized coordinates with a small and a fractional pixel size.
  cases.push_back(uniformCase(16, 180, 140, 300, 512345.25, 4123456.75, 0.5));
  cases.push_back(uniformCase(17, 150, 150, 100, 734012.0, 9876543.0, 0.01));
  cases.push_back(uniformCase(18, 100, 100, 40, -2.0e7, 1.0e7, 30.0));
  for (uint32_t seed = 21; seed <= 24; ++seed)
    cases.push_back(latticeCase(seed, 40 + seed, 30 + seed, int(seed * 3)));
  cases.push_back(latticeCase(25, 64, 64, 900));
  cases.push_back(clusteredCase(31, 160, 120, 4000));
  cases.push_back(clusteredCase(32, 97, 203, 20000));
  // All sites identical.
  VoronoiCase same = uniformCase(41, 70, 50, 1);
  same.name = "identical sites";
  for (int i = 0; i < 999; ++i)
  {
    same.x.push_back(same.x[0]);
    same.y.push_back(same.y[0]);
  }
  cases.push_back(same);
  // Collinear sites (a vertical line) and a one-pixel-wide and one-pixel-tall grid.
  VoronoiCase line = uniformCase(42, 80, 60, 0);
  line.name = "collinear sites";
  for (int i = 0; i < 50; ++i)
  {
    line.x.push_back(33.3);
    line.y.push_back(0.9 + i * 1.17);
  }
  cases.push_back(line);
  cases.push_back(uniformCase(43, 1, 300, 20));
  cases.push_back(uniformCase(44, 300, 1, 20));
  // Equal sites apart in the curve order (a site 1e-9 pixel away sorts between them).
  cases.push_back(VoronoiCase{"duplicates apart", voronoi::Grid{0.0, 50.0, 1.0, 50, 50},
                              {10.0, 10.0 + 1e-9, 10.0, 40.0, 10.0 + 1e-9}, {10.0, 10.0, 10.0, 40.0, 10.0}});
  return cases;
}

}  // namespace gpugeo::testing
