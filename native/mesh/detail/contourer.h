// What the mesh-contour backends share on the host: input checks, the prepared mesh (triangles
// counter-clockwise, the opposite half-edge of each edge), and the last steps that turn the
// backends' linked rings into polygons.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/polygon_rings.h"
#include "core/run_control.h"
#include "mesh/detail/contour_math.h"
#include "mesh/mesh_contours.h"

namespace gpugeo::mesh::detail {

// Counts and arrays; the corners are checked by the backends as they prepare the triangles
// (checkCorners() throws with the count of triangles whose corners are not vertices).
void validateMesh(const Mesh& mesh);
void checkCorners(int64_t badTriangles, int64_t vertexCount);
void validateLevels(const std::vector<double>& levels);
void checkSegmentCount(int64_t segments);

// The mesh with its triangles made counter-clockwise (a triangle with a repeated vertex is kept but
// marked unusable) and the neighbours across its edges. Two half-edges are opposite when they join
// the same two vertices in opposite directions and no other half-edge joins them.
struct PreparedMesh
{
  Mesh source;
  std::vector<int32_t> triangles;  // 3 per triangle
  std::vector<int32_t> twin;       // 3 per triangle, -1 on the boundary
  std::vector<uint8_t> usable;     // per triangle: distinct vertices with finite coordinates
};

PreparedMesh prepareMesh(const Mesh& mesh, int threads, const RunControl& control);

// Per triangle: whether it takes part for this field (usable, active, finite values).
void markValid(const PreparedMesh& mesh, const Field& field, std::vector<uint8_t>& valid, int threads,
               const RunControl& control);

MeshArrays meshArrays(const PreparedMesh& mesh);

// The rings go to polygons through core/polygon_rings.h.
using gpugeo::RawRings;

std::unique_ptr<MeshContourer> makeCpuContourer(const Mesh& mesh, int threads, const RunControl& control);
std::unique_ptr<MeshContourer> makeCudaContourer(const Mesh& mesh, const RunControl& control);

}  // namespace gpugeo::mesh::detail
