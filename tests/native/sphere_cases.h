// Site sets for the spherical labelling tests: random, with the awkward cases mixed in.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere::cases {

struct SiteCase
{
  std::string name;
  std::vector<double> lon, lat;
  SiteSet sites() const { return {lon.data(), lat.data(), int64_t(lon.size())}; }
};

// Random sites uniform on the sphere, with a share of them put on the poles, on +-180, on the
// equator, on cell corners, and duplicated.
inline SiteCase randomSites(const std::string& name, int count, uint32_t seed, bool awkward = true)
{
  SiteCase c;
  c.name = name + " (seed " + std::to_string(seed) + ", " + std::to_string(count) + " sites)";
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), lonDist(-180.0, 180.0);
  std::uniform_int_distribution<int> kind(0, 9);
  for (int i = 0; i < count; ++i)
  {
    double lon = lonDist(rng);
    double lat = std::asin(u(rng)) * 180.0 / M_PI;
    if (awkward && i > 0)
      switch (kind(rng))
      {
        case 0: lat = (i & 1) ? 90.0 : -90.0; break;
        case 1: lon = (i & 1) ? 180.0 : -180.0; break;
        case 2: lat = 0.0; break;
        case 3: lon = c.lon[std::size_t(i - 1)]; lat = c.lat[std::size_t(i - 1)]; break;  // duplicate
        case 4: lon = std::round(lon / 11.25) * 11.25; lat = std::round(lat / 11.25) * 11.25; break;
        default: break;
      }
    c.lon.push_back(lon);
    c.lat.push_back(lat);
  }
  return c;
}

inline std::vector<SiteCase> standardCases()
{
  std::vector<SiteCase> cases;
  cases.push_back({"one site", {12.5}, {-40.0}});
  cases.push_back({"both poles", {0.0, 77.0}, {90.0, -90.0}});
  cases.push_back({"antimeridian pair", {180.0, -180.0, 179.9999, -179.9999}, {10.0, -10.0, 0.0, 0.0}});
  cases.push_back({"all identical", std::vector<double>(50, 33.3), std::vector<double>(50, 44.4)});
  cases.push_back({"octahedron vertices (cell corners, many ties)", {0, 90, 180, -90, 0, 0}, {0, 0, 0, 0, 90, -90}});
  cases.push_back(randomSites("random", 40, 1));
  cases.push_back(randomSites("random", 300, 2));
  cases.push_back(randomSites("random", 3000, 3));
  SiteCase cluster;
  cluster.name = "tight cluster (1e-7 degree) plus far sites";
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> tiny(-1e-7, 1e-7);
  for (int i = 0; i < 200; ++i)
  {
    cluster.lon.push_back(5.0 + tiny(rng));
    cluster.lat.push_back(5.0 + tiny(rng));
  }
  cluster.lon.insert(cluster.lon.end(), {-100.0, 60.0, 170.0});
  cluster.lat.insert(cluster.lat.end(), {-30.0, 70.0, 1.0});
  cases.push_back(cluster);
  return cases;
}

}  // namespace gpugeo::sphere::cases
