// The spherical Delaunay mesh of the unique sites (spherical_voronoi.h, step 4): the hull from CGAL
// (sphere_hull.h), repaired with this module's own in-cap predicate, left-out sites inserted.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/run_control.h"
#include "sphere/detail/spherical_cells.h"
#include "sphere/detail/spherical_geometry.h"

namespace gpugeo::sphere::detail {


struct Mesh
{
  FlatArray<std::array<int32_t, 3>> tri;  // counter-clockwise seen from outside
  FlatArray<std::array<int32_t, 3>> nbr;  // nbr[t][i]: the triangle across the edge opposite tri[t][i]
  std::vector<int32_t> vertexTri;           // a triangle incident to each site, -1 if none

  int slot(int32_t t, int32_t v) const
  {
    const auto& x = tri[static_cast<size_t>(t)];
    return x[0] == v ? 0 : x[1] == v ? 1 : x[2] == v ? 2 : -1;
  }
  int slotOfNeighbor(int32_t t, int32_t u) const
  {
    const auto& x = nbr[static_cast<size_t>(t)];
    return x[0] == u ? 0 : x[1] == u ? 1 : x[2] == u ? 2 : -1;
  }
};

enum class HullResult
{
  Ok,
  Flat
};

// Builds the Delaunay mesh of the sites (d0: their accurate differences from site 0, which the hull
// is given); Flat when the hull finds the sites on one plane through the centre. With cells (the
// GPU's, complete), the mesh is made from them when it passes every check (a closed, consistent
// triangulation, every facet facing out, every edge clearly Delaunay by this module's predicates:
// then it is the only Delaunay triangulation, the one the hull would give); else from the hull, and
// cellsRefused (if given) says why. Either way the triangles are in canonical order (each from its
// lowest site, sorted), so both ways give the same mesh bit for bit.
HullResult delaunay(const Geometry& g, const FlatArray<V3>& d0, const SphereCells* cells, Mesh& mesh, int threads,
                    const RunControl& control, std::string* cellsRefused = nullptr);

}  // namespace gpugeo::sphere::detail
