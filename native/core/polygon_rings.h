// From linked rings to polygons with holes, for every family that traces region boundaries (mesh
// isobands, DEM isochrone bands and watersheds): rings that touch themselves are split at the node
// they pass twice, rings left without area are dropped, shells (counter-clockwise) and holes
// (clockwise) are told apart by their signed area, and each hole goes to the smallest shell that
// holds it. The work is proportional to the output, so it runs on the host for every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"

namespace gpugeo {

// Polygons by band: band k has polygons bandPolygon[k] .. bandPolygon[k + 1] - 1; polygon q has
// rings polygonRing[q] .. polygonRing[q + 1] - 1, the shell first, then its holes; ring r has the
// points ringPoint[r] .. ringPoint[r + 1] - 1, its first point repeated at its end. z is empty for
// flat rings (RawRings without z).
struct BandPolygons
{
  std::vector<int64_t> bandPolygon;
  std::vector<int64_t> polygonRing;
  std::vector<int64_t> ringPoint;
  std::vector<double> x, y, z;
};

// A band's rings as a backend linked them, before splitting and hole assignment: band k has rings
// bandRing[k] .. bandRing[k + 1] - 1; ring r has the nodes ringNode[r] .. ringNode[r + 1] - 1 (not
// repeated at the end), with their keys (equal keys: the same node) and coordinates (z may be empty:
// flat rings).
struct RawRings
{
  int64_t vertexCount = 0;  // keys below it are the nodes a ring may pass twice
  std::vector<int64_t> bandRing;
  std::vector<int64_t> ringNode;
  std::vector<int64_t> key;
  std::vector<double> x, y, z;
};

// Splits rings that touch themselves, drops rings without area (counted in droppedRings), sorts
// them into shells and holes and gives each hole to the smallest shell that holds it. The bands are
// assembled on `threads` threads (0: the default count, as parallelFor), with the same result on any.
BandPolygons assembleRings(const RawRings& rings, int64_t& droppedRings, const RunControl& control, int threads);

}  // namespace gpugeo
