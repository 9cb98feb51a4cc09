// The sphere the spherical family measures on: the IUGG mean Earth radius R1.
#pragma once

#include <array>
#include <cmath>

namespace gpugeo::sphere {

constexpr double kEarthRadiusM = 6371008.8;
constexpr double kEarthRadiusKm = kEarthRadiusM / 1000.0;

// The unit vector (x towards lon 0, z towards the north pole) of a longitude and latitude in degrees.
inline std::array<double, 3> unitVector(double lonDeg, double latDeg)
{
  constexpr double toRad = M_PI / 180.0;
  const double lat = latDeg * toRad, lon = lonDeg * toRad;
  return {std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), std::sin(lat)};
}

}  // namespace gpugeo::sphere
