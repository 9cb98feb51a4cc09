// The convex hull of points on the unit sphere, which is their spherical Delaunay triangulation
// (Brown 1979), from CGAL's Delaunay_triangulation_on_sphere_2 (Caroli et al. 2010): exact
// predicates on the points' rays, about 1.2 s a million points on one core (Qhull, used before, took
// some 10 s). Kept in a file of its own: CGAL's headers are heavy, and its filtered predicates need
// -frounding-math, which only this file is compiled with.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace gpugeo::sphere::detail {

struct SphereHull
{
  bool flat = false;                         // the points span no more than a plane through the centre
  std::vector<std::array<int32_t, 3>> tri;   // point indices, counter-clockwise seen from outside the hull
  std::vector<std::array<int32_t, 3>> nbr;   // nbr[t][i]: the triangle across the edge opposite tri[t][i]
  // For a point left out (it lies on the ray of an earlier point: unequal unit vectors that round to
  // one direction), a triangle near it; -1 for the points that are vertices.
  std::vector<int32_t> hint;
};

// xyz: count distinct points (x, y, z) on or near the sphere of radius 1 about `centre`; count >= 4.
// (A caller gives the points relative to one of them, taken to full relative precision, and the
// centre in that frame: then the hull sees sites centimetres apart as they are, not as their rounded
// unit vectors.) The hull holds every point but those left out above: 2 v - 4 triangles for its v
// vertices, all sites in one hemisphere included (the far side is then the hull's facets that face
// the centre).
SphereHull sphereHull(const double* xyz, int32_t count, const double centre[3]);

}  // namespace gpugeo::sphere::detail
