// The Voronoi regions of the unique sites as spherical polygons with their areas (spherical_voronoi.h,
// steps 3 to 5): lunes when the sites lie on one plane, else from the Delaunay mesh.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "sphere/detail/spherical_geometry.h"
#include "sphere/detail/spherical_mesh.h"

namespace gpugeo::sphere::detail {


struct Plane
{
  bool coplanar = false;
  V3 axis;         // unit normal of the sites' plane
  int32_t i1 = 0;  // with site 0, two well-spread sites spanning it
  int32_t i2 = 0;
};

// Every site's accurate difference from site 0 (step 1), made once on all cores: the plane test and
// the hull both take the sites relative to site 0.
FlatArray<V3> diffsFromFirst(const Geometry& g, int threads, const RunControl& control);

// The plane through site 0, the site farthest from it and the site farthest from their line; the
// sites are coplanar when none is farther from it than 1e-12 times the spread. d0: diffsFromFirst.
Plane findPlane(const Geometry& g, const FlatArray<V3>& d0, const RunControl& control);

// The regions of coplanar sites: lunes between the plane's poles (two hemispheres for two sites).
void lunes(const Geometry& g, const Plane& pl, SphereRings& rings, std::vector<double>& areas,
           const RunControl& control);

// The Voronoi polygon of every site from the mesh, consecutive coincident vertices merged, and its
// area.
void meshRegions(const Geometry& g, const Mesh& mesh, SphereRings& rings, std::vector<double>& areas,
                 int threads, const RunControl& control);

}  // namespace gpugeo::sphere::detail
