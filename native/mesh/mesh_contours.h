// Isolines and filled isobands of a scalar field on a triangle mesh (after the source paper's
// cell-sequence method: per-triangle segments and band pieces), joined into whole lines and
// polygons with holes by linking the pieces along the mesh's edges.
//
// The field has one value per vertex and is linear over each triangle. A triangle takes part when
// it is active, its three values are finite and its three vertices have finite coordinates.
//
// Lines. The line of level L is the set where the field equals L, taken triangle by triangle:
// - a triangle whose three values equal L (flat at the level) gives nothing; its edges come from
//   the triangles around it;
// - an edge whose two ends equal L is written once, by the lower-index triangle of the two that
//   hold it and are not flat;
// - elsewhere the segment joins the two points where L crosses the triangle's edges, found by linear
//   interpolation along each edge from its lower-index vertex (so the two triangles of an edge find
//   the same bits), or the vertex itself where a vertex value equals L; a segment that shrinks to
//   one point is dropped.
// Segments meet at nodes: a vertex, or the crossing of one level with one edge. They are joined
// through every node where exactly two segments meet (as GEOS's line merge does): one part per whole
// line, closed where the line closes, open where it reaches the mesh boundary, a data gap or a node
// where more than two segments meet (a saddle exactly at the level). Each segment is oriented with
// the higher values on its left; a part runs in the direction of its lowest-index segment.
//
// Bands. Band k covers the values lo = levels[k] <= v <= hi = levels[k + 1] (both ends included, as
// QGIS does: a triangle flat at a level belongs to both bands beside it). Each triangle's piece of
// the band (a triangle, quadrilateral or pentagon; pieces with fewer than three corners, i.e. no
// area, are left out) is walked counter-clockwise; edges shared by two pieces cancel, and what is left
// is linked into rings through the pieces around each node. A ring that touches itself at a vertex is
// split there; shells run counter-clockwise, holes clockwise, each hole in the smallest shell that
// holds it. The result is one valid multipolygon per band.
//
// z: the mesh's vertex z, interpolated along the edges like x and y (zero without z).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/polygon_rings.h"
#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::mesh {

// The most levels one call takes (QGIS states none; more lines than this are unreadable on a map
// and the output would grow without bound).
constexpr int32_t kMaxLevels = 10000;
// The most triangles and vertices a mesh may have (int32 indices on the device).
constexpr int64_t kMaxTriangles = (int64_t(1) << 31) / 3 - 1;
constexpr int64_t kMaxVertices = (int64_t(1) << 31) - 1;
// The most segments (line segments plus band boundary segments) one call may produce.
constexpr int64_t kMaxSegments = (int64_t(1) << 30) - 1;

// The caller's arrays, which must outlive the contourer: vertex coordinates (z may be null) and
// three vertex indices per triangle, in either winding (each triangle is made counter-clockwise).
struct Mesh
{
  const double* x = nullptr;
  const double* y = nullptr;
  const double* z = nullptr;
  int64_t vertexCount = 0;
  const int32_t* triangles = nullptr;
  int64_t triangleCount = 0;
};

// One value per vertex (NaN: no data) and, optionally, one flag per triangle (0: inactive).
struct Field
{
  const double* values = nullptr;
  const uint8_t* active = nullptr;
};

struct ContourOptions
{
  bool lines = true;
  bool bands = true;
};

// Lines by level: level k has parts levelPart[k] .. levelPart[k + 1] - 1; part p has the points
// partPoint[p] .. partPoint[p + 1] - 1; a closed part repeats its first point at its end.
struct ContourLines
{
  std::vector<int64_t> levelPart;
  std::vector<int64_t> partPoint;
  std::vector<double> x, y, z;
};

// Bands by band (core/polygon_rings.h): band k lies between levels k and k + 1.
using ContourBands = BandPolygons;

struct Contours
{
  ContourLines lines;  // empty (no levels) unless options.lines
  ContourBands bands;  // empty (no bands) unless options.bands
  int64_t trianglesUsed = 0;     // active, with finite values and coordinates
  int64_t droppedRings = 0;      // bits of rings with no area left after splitting (degenerate meshes)
};

// A mesh prepared for contouring (triangles made counter-clockwise, the neighbours across each
// edge found), for any number of fields and level lists. Use one from one thread at a time.
class MeshContourer
{
public:
  virtual ~MeshContourer() = default;
  virtual Backend backend() const = 0;
  // Stages of the preparation and of the last contour() call.
  virtual const StageTimes& times() const = 0;
  // Throws InvalidInput when values is null, or levels are not finite and strictly increasing, or
  // there are more than kMaxLevels, or the output would pass kMaxSegments; Canceled.
  virtual Contours contour(const Field& field, const std::vector<double>& levels, const ContourOptions& options,
                           const RunControl& control) = 0;
};

// Throws InvalidInput for a mesh with no triangle, more than kMaxTriangles or kMaxVertices, null
// arrays, or a vertex index out of range (with the count); DeviceUnavailable for Backend::Gpu without
// a usable GPU.
std::unique_ptr<MeshContourer> makeMeshContourer(Backend backend, const Mesh& mesh, int threads,
                                                 const RunControl& control);

// Band k's pieces triangle by triangle: the piece of each participating triangle (as above), one
// polygon of one counter-clockwise ring each, in triangle order, as one band of BandPolygons. For
// callers that join the pieces otherwise than along the mesh's edges: where triangles overlap (a
// mesh that is not a planar subdivision, which the bands' contract assumes), a union of the pieces
// gives the band's region. Throws InvalidInput as makeMeshContourer() and contour() do, and for a
// band outside the levels; Canceled.
ContourBands bandPieces(const Mesh& mesh, const Field& field, const std::vector<double>& levels, int32_t band,
                        const RunControl& control);

// The levels QGIS's "Export contours" would make from a minimum, maximum and increment, with the
// maximum included when it falls on the sequence: minimum + i * increment for i = 0, 1, ... while
// the value is <= maximum (compared with a tolerance of 1e-9 increments, so 0.1 steps reach 0.3).
// Throws InvalidInput, with QGIS's checks and messages: increment <= 0, minimum >= maximum,
// increment > maximum - minimum; also for values that are not finite and more than kMaxLevels levels.
std::vector<double> levelsFromRange(double minimum, double maximum, double increment);

}  // namespace gpugeo::mesh
