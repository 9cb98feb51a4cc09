// The brute-force reference of the plane Voronoi raster, for the tests: every pixel against every
// site, in input order, under the contract of voronoi_raster.h.
#pragma once

#include <cstdint>
#include <vector>

#include "voronoi_raster.h"

namespace gpugeo::voronoi {

struct ReferenceLabels
{
  std::vector<int32_t> site;
  std::vector<float> distance;
};

ReferenceLabels referenceLabels(const Grid& grid, const Sites& sites, int64_t row0, int64_t rows);

}  // namespace gpugeo::voronoi
