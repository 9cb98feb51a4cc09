// Exact Voronoi polygons of points in the plane, clipped to a rectangle (gpugeo:voronoipolygons).
//
// Contract:
// - Exact duplicates (equal x and y) are one site, kept by the lowest input index; the others get no
//   polygon. With a tolerance, a point within that distance of an earlier site (in input order) is
//   merged into it as well.
// - Each site's polygon is the set of points of the rectangle that are at least as near to it as to
//   every other site: the rectangle clipped by the perpendicular bisector of the site and each of
//   its Delaunay neighbours (CGAL's Delaunay triangulation of the given coordinates, exact
//   predicates; detail/plane_delaunay.h). Polygons are convex, counter-clockwise (x right, y up),
//   without repeated vertices; a site whose polygon has no area in the rectangle gets none.
// - Each cell is computed in its site's own frame (the site at the origin), so that UTM-sized
//   coordinates and cells a millimetre wide keep their precision: a vertex is off by a few units in
//   the last place of the rectangle's size (its first cuts are of the rectangle's edges), then
//   rounded once to the CRS.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::voronoi {

struct PlanePoints
{
  const double* x = nullptr;
  const double* y = nullptr;
  int64_t count = 0;
};

struct ClipRectangle
{
  double xMin = 0.0, yMin = 0.0, xMax = 0.0, yMax = 0.0;
};

// The most points (int32 indices inside), and the largest coordinate (their squares must not overflow).
constexpr int64_t kMaxPolygonSites = (int64_t(1) << 31) - 1;
constexpr double kMaxPolygonCoordinate = 1e150;

struct VoronoiPolygonsOptions
{
  int threads = 0;         // 0: all cores
  double tolerance = 0.0;  // merge distance (0: exact duplicates only)
};

struct VoronoiPolygons
{
  std::vector<int64_t> cellOfPoint;  // per input point: its polygon, or -1 (a duplicate, or no area)
  std::vector<int64_t> pointOfCell;  // per polygon: the input index of its site
  std::vector<int64_t> ringStart;    // polygons + 1 offsets into x and y
  std::vector<double> x, y;          // the polygons' vertices, each ring not closed
  int64_t duplicates = 0;            // input points that repeat (or were merged into) an earlier one
  int dimension = 0;                 // of the distinct sites' span: 0, 1 (collinear) or 2
  StageTimes times;                  // unique, delaunay, cells
};

// Throws InvalidInput for no points, a coordinate that is not finite or beyond kMaxPolygonCoordinate,
// more than kMaxPolygonSites points, a rectangle without area or a negative tolerance; Canceled when
// control asks.
VoronoiPolygons voronoiPolygons(const PlanePoints& points, const ClipRectangle& rectangle,
                                const VoronoiPolygonsOptions& options, const RunControl& control);

}  // namespace gpugeo::voronoi
