// Reads a QGIS mesh into plain arrays for the native mesh contours: the native mesh's faces cut into
// triangles exactly as QGIS's triangular mesh cuts them (without building QgsTriangularMesh, whose
// spatial index is slow on large meshes), the vertices in the output CRS, and one dataset's values on
// the vertices as QGIS's "Export contours" (native:meshcontours) computes them.
#pragma once

#include <cstdint>
#include <vector>

class QgsCoordinateTransform;
class QgsFeedback;
class QgsMesh;
class QgsMesh3dAveragingMethod;
class QgsMeshDatasetIndex;
class QgsMeshLayer;

namespace gpugeo {

struct MeshTriangles
{
  std::vector<double> x, y, z;          // per vertex, in the output CRS; x, y NaN where the transform failed
  std::vector<int32_t> triangles;       // three vertex indices per triangle
  std::vector<int32_t> faceOfTriangle;  // the native face each triangle comes from
  int64_t faceCount = 0;
  int64_t facesTooSmall = 0;            // faces of fewer than three vertices: no triangle
  int64_t failedVertices = 0;           // vertices the transform could not take to the output CRS
  int64_t badFaces = 0;                 // faces naming a vertex the mesh does not have: none is triangulated
  bool canceled = false;

  int64_t vertexCount() const { return static_cast<int64_t>(x.size()); }
  int64_t triangleCount() const { return static_cast<int64_t>(faceOfTriangle.size()); }
};

// QgsTriangularMesh's triangulation of each face f[0..n-1], n >= 3: while n > 3, the triangle
// {f[n-2], f[n-1], f[0]}, then n - 1; last {f[1], f[2], f[0]}; triangles in face order. Unlike QGIS,
// triangles with a vertex the transform could not reach are kept (with NaN coordinates, which the
// native core leaves out). When a face names a vertex the mesh does not have, badFaces counts them and
// nothing is triangulated. Vertices go through `transform` (when valid) one batch at a time, x and y
// only, as QgsPoint::transform takes them; z is the vertex's z (0 where it has none). Stops with
// canceled = true when `feedback` is canceled; reports no progress.
MeshTriangles triangulateMesh(const QgsMesh& mesh, const QgsCoordinateTransform& transform, QgsFeedback* feedback);

struct VertexField
{
  std::vector<double> values;    // per vertex; NaN: no value
  std::vector<uint8_t> active;   // per triangle: whether its native face is active
};

// The values of dataset `index` on the vertices, as native:meshcontours takes them: vector data as
// its magnitude; data on volumes averaged to the faces with `averaging` (the layer renderer's
// method); data on faces averaged to the vertices by the plain mean of the active faces with a
// value around each vertex (QgsMeshLayerUtils::interpolateFromFacesData); an invalid block as NaN.
// Each triangle is active when its face is (QgsMeshDataBlock::active: all inactive when the block is
// invalid). Data on edges is not supported: the caller skips such groups.
VertexField readVertexField(const QgsMeshLayer& layer, const QgsMesh& mesh, const MeshTriangles& triangles,
                            const QgsMeshDatasetIndex& index, const QgsMesh3dAveragingMethod* averaging);

}  // namespace gpugeo
