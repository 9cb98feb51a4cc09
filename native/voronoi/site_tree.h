// The host side of the site tree: taking the sites to the pixel frame (both backends), and building
// the tree for the CPU backend (the CUDA backend puts the sites in a bucket grid: voronoi_cuda.cu).
#pragma once

#include <vector>

#include "detail/nearest_site.h"
#include "voronoi_raster.h"

namespace gpugeo::voronoi {

// Sites in the grid's pixel frame, in input order (validate() first).
std::vector<detail::Point> toPixelFrame(const Grid& grid, const Sites& sites);
// The same into `out` (sites.count points), on `threads` threads (0: all).
void toPixelFrame(const Grid& grid, const Sites& sites, detail::Point* out, int threads);

// The bounding box of points (at least one).
detail::Box boundsOf(const std::vector<detail::Point>& points);

struct HostTree
{
  std::vector<detail::Point> points;
  std::vector<int32_t> siteIndex;
  std::vector<detail::Box> boxes;
  int levelCount = 0;
  int32_t levelStart[detail::kMaxLevels + 1] = {};

  detail::TreeView view() const;
};

// Sorts the sites along the Hilbert curve (ties by input index), drops each exact duplicate of an
// earlier site (the lowest index is kept), and builds the boxes level by level.
HostTree buildHostTree(const std::vector<detail::Point>& points, int threads = 0);

}  // namespace gpugeo::voronoi
