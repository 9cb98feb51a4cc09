// The Delaunay neighbours of distinct points in the plane, from CGAL's Delaunay_triangulation_2
// (exact predicates, inexact constructions: the triangulation is the exact one of the given
// coordinates; spatially sorted insertion, about a second a million points on one core). Kept in a
// file of its own, like sphere_hull.cpp: CGAL's headers are heavy and its filtered predicates need
// -frounding-math, which only these files are compiled with.
#pragma once

#include <cstdint>
#include <vector>

namespace gpugeo::voronoi::detail {

struct PlaneNeighbours
{
  int dimension = 0;               // of the points' span: 0 (one point), 1 (collinear) or 2
  std::vector<int64_t> start;      // count + 1 offsets into `neighbour`
  std::vector<int32_t> neighbour;  // point i's Delaunay neighbours: neighbour[start[i] .. start[i + 1])
};

// xy: count distinct points (x0, y0, x1, y1, ...), count >= 1. Neighbours of a point are the points
// that share a Delaunay edge with it (for collinear points, the one or two next along the line).
// threads: for reading the triangulation out (0: all).
PlaneNeighbours planeDelaunayNeighbours(const double* xy, int32_t count, int threads);

}  // namespace gpugeo::voronoi::detail
