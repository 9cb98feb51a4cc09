// Brute-force reference for the spherical labelling, in long double from the exact lon/lat of the
// sites and of the cell corners (not from the float64 vectors the backends use), so the tests can
// check the near-tie bound stated in sphere_nearest.h.
#pragma once

#include <cstdint>
#include <vector>

#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere::reference {

struct Point
{
  long double x, y, z;
};

Point fromLonLat(long double lonDeg, long double latDeg);
std::vector<Point> siteVectors(const SiteSet& sites);
// The cell centre as defined in qtm.h, from its exact corners.
Point qtmCentre(uint64_t id, int level);
Point gridPoint(const LonLatGrid& grid, int64_t row, int64_t col);
// Great-circle angle in radians (atan2 of |a x b| and a . b, accurate at all angles).
long double angle(const Point& a, const Point& b);
// The site at the smallest angle; ties to the lowest index.
int32_t nearest(const std::vector<Point>& sites, const Point& p);

}  // namespace gpugeo::sphere::reference
