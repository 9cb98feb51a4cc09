// Site lists for the spherical Voronoi tests (CPU and GPU): lon/lat arrays, uniform random sites.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gpugeo::sphere::cases {

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

// n sites uniform on the sphere (fixed seed).
inline Sites randomSites(int64_t n, uint32_t seed)
{
  constexpr double kDeg = 3.14159265358979323846 / 180.0;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Sites s;
  for (int64_t i = 0; i < n; ++i)
    s.add(180.0 * u(rng), std::asin(u(rng)) / kDeg);
  return s;
}

}  // namespace gpugeo::sphere::cases
