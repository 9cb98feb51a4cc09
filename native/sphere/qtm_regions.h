// Region polygons of a labelled QTM grid: for each label, the union of its cells, built from the
// boundary edges between cells of different labels (never by unioning cells).
//
// Every QTM vertex lies on the integer lattice of 90/n degree steps (qtm.h), so the boundary is
// traced exactly in integers: a cell edge is emitted, oriented with its cell on the left, when the
// cell across carries another label, and always on the edge of the EPSG:4326 rectangle (the
// meridian +-180, where a region across the antimeridian is split, and the pole lines, where a
// region holding a pole is closed along lat = +-90). Edges are chained into rings, at a vertex
// where a region touches itself taking the first boundary edge clockwise from the way back, so
// rings never cross and touch only at single vertices (valid by OGC rules). Counter-clockwise rings
// are shells; clockwise ones are holes, each given to the smallest shell of its label around it.
// Collinear vertices are dropped. Areas come from the rings with lonLatPolygonArea (qtm.h): exact
// for edges straight in lon/lat, so equal to the sum of the region's cell areas.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"

namespace gpugeo::sphere {

struct LatticeRing
{
  std::vector<int32_t> lonUnits, latUnits;  // closed: the last point repeats the first
};

struct LatticePolygon
{
  LatticeRing shell;
  std::vector<LatticeRing> holes;
};

struct QtmRegion
{
  int32_t label = 0;
  int64_t cells = 0;
  double areaSteradians = 0.0;
  std::vector<LatticePolygon> polygons;
};

// labels: qtmCellCount(level) values, every one in [0, labelCount). Returns one region per label
// that has cells, in increasing label order. threads <= 0: defaultThreadCount().
std::vector<QtmRegion> qtmRegions(int level, const int32_t* labels, int32_t labelCount, int threads,
                                  const RunControl& control);

// Lattice units to degrees at `level`.
inline double qtmLonDegrees(int32_t lonUnits, int level)
{
  return -180.0 + 90.0 * double(lonUnits) / double(int64_t(1) << level);
}
inline double qtmLatDegrees(int32_t latUnits, int level)
{
  return 90.0 * double(latUnits) / double(int64_t(1) << level);
}

}  // namespace gpugeo::sphere
