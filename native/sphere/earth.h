// The sphere the spherical family measures on: the IUGG mean Earth radius R1.
#pragma once

namespace gpugeo::sphere {

constexpr double kEarthRadiusM = 6371008.8;
constexpr double kEarthRadiusKm = kEarthRadiusM / 1000.0;

}  // namespace gpugeo::sphere
