#include "voronoi_reference.h"

#include "core/parallel.h"
#include "site_tree.h"

namespace gpugeo::voronoi {

ReferenceLabels referenceLabels(const Grid& grid, const Sites& sites, int64_t row0, int64_t rows)
{
  const std::vector<detail::Point> points = toPixelFrame(grid, sites);
  ReferenceLabels out;
  out.site.resize(static_cast<size_t>(rows * grid.width));
  out.distance.resize(out.site.size());
  parallelFor(rows, 1, 0, [&](int64_t first, int64_t last) {
    for (int64_t r = row0 + first; r < row0 + last; ++r)
      for (int64_t c = 0; c < grid.width; ++c)
      {
        double best = 0.0;
        int32_t bestSite = -1;
        for (int64_t s = 0; s < sites.count; ++s)
        {
          const double e = detail::squaredDistance(double(c) + 0.5, double(r) + 0.5, points[s]);
          if (bestSite < 0 || e < best)
          {
            best = e;
            bestSite = static_cast<int32_t>(s);
          }
        }
        const size_t i = static_cast<size_t>((r - row0) * grid.width + c);
        out.site[i] = bestSite;
        out.distance[i] = detail::distanceValue(best, grid.pixelSize);
      }
  });
  return out;
}

}  // namespace gpugeo::voronoi
