#include "adapters/mesh_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QVector>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeedback.h>
#include <qgsmesh3daveraging.h>
#include <qgsmeshdataprovider.h>
#include <qgsmeshdataset.h>
#include <qgsmeshlayer.h>
#include <qgsmeshlayerutils.h>
#include <qgsmeshrenderersettings.h>

namespace gpugeo {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr int kTransformBatch = 65536;

// Transforms vertices [first, first + count) in place, x and y only. A batch that fails as a whole is
// done again one vertex at a time, so only the vertices that fail get NaN.
void transformBatch(const QgsCoordinateTransform& transform, MeshTriangles& out, std::size_t first, int count)
{
  QVector<double> x(count), y(count), z(count, 0.0);
  std::copy_n(out.x.begin() + std::ptrdiff_t(first), count, x.begin());
  std::copy_n(out.y.begin() + std::ptrdiff_t(first), count, y.begin());
  bool whole = true;
  try
  {
    transform.transformInPlace(x, y, z);
  }
  catch (const QgsCsException&)
  {
    whole = false;
  }
  for (int i = 0; i < count; ++i)
  {
    const std::size_t v = first + std::size_t(i);
    double vx = out.x[v], vy = out.y[v], vz = 0.0;
    if (whole)
    {
      vx = x[i];
      vy = y[i];
    }
    else
    {
      try
      {
        transform.transformInPlace(vx, vy, vz);
      }
      catch (const QgsCsException&)
      {
        vx = vy = kNan;
      }
    }
    if (!std::isfinite(vx) || !std::isfinite(vy))
    {
      vx = vy = kNan;
      ++out.failedVertices;
    }
    out.x[v] = vx;
    out.y[v] = vy;
  }
}

}  // namespace

MeshTriangles triangulateMesh(const QgsMesh& mesh, const QgsCoordinateTransform& transform, QgsFeedback* feedback)
{
  MeshTriangles out;
  const int vertexCount = mesh.vertexCount();
  out.x.resize(std::size_t(vertexCount));
  out.y.resize(std::size_t(vertexCount));
  out.z.resize(std::size_t(vertexCount));
  for (int v = 0; v < vertexCount; ++v)
  {
    const QgsMeshVertex& vertex = mesh.vertices.at(v);
    out.x[std::size_t(v)] = vertex.x();
    out.y[std::size_t(v)] = vertex.y();
    const double z = vertex.z();
    out.z[std::size_t(v)] = std::isfinite(z) ? z : 0.0;
  }
  if (transform.isValid() && !transform.isShortCircuited())
    for (int first = 0; first < vertexCount; first += kTransformBatch)
    {
      if (feedback && feedback->isCanceled())
      {
        out.canceled = true;
        return out;
      }
      transformBatch(transform, out, std::size_t(first), std::min(kTransformBatch, vertexCount - first));
    }

  const int faceCount = mesh.faceCount();
  out.faceCount = faceCount;
  std::size_t triangleCount = 0;
  for (int f = 0; f < faceCount; ++f)
  {
    const QgsMeshFace& face = mesh.faces.at(f);
    if (std::any_of(face.begin(), face.end(), [vertexCount](int v) { return v < 0 || v >= vertexCount; }))
      ++out.badFaces;
    else if (face.size() >= 3)
      triangleCount += std::size_t(face.size() - 2);
    else
      ++out.facesTooSmall;
  }
  if (out.badFaces > 0)
    return out;
  out.triangles.reserve(3 * triangleCount);
  out.faceOfTriangle.reserve(triangleCount);
  for (int f = 0; f < faceCount; ++f)
  {
    if ((f & 0xffff) == 0 && feedback && feedback->isCanceled())
    {
      out.canceled = true;
      return out;
    }
    const QgsMeshFace& face = mesh.faces.at(f);
    int n = face.size();
    if (n < 3)
      continue;
    for (; n > 3; --n)
    {
      out.triangles.insert(out.triangles.end(), {face[n - 2], face[n - 1], face[0]});
      out.faceOfTriangle.push_back(f);
    }
    out.triangles.insert(out.triangles.end(), {face[1], face[2], face[0]});
    out.faceOfTriangle.push_back(f);
  }
  return out;
}

VertexField readVertexField(const QgsMeshLayer& layer, const QgsMesh& mesh, const MeshTriangles& triangles,
                            const QgsMeshDatasetIndex& index, const QgsMesh3dAveragingMethod* averaging)
{
  const QgsMeshDatasetGroupMetadata metadata = layer.datasetGroupMetadata(index);
  const bool onVertices = metadata.dataType() == QgsMeshDatasetGroupMetadata::DataOnVertices;
  const int count = onVertices ? mesh.vertexCount() : mesh.faceCount();
  QgsMeshDataBlock block;
  if (metadata.dataType() == QgsMeshDatasetGroupMetadata::DataOnVolumes)
  {
    const QgsMesh3dDataBlock stacked = layer.dataset3dValues(index, 0, count);
    if (stacked.isValid() && averaging)
      block = averaging->calculate(stacked);
  }
  else
    block = layer.datasetValues(index, 0, count);
  const QgsMeshDataBlock activeFaces = layer.areFacesActive(index, 0, mesh.faceCount());

  QVector<double> values(count, kNan);
  if (block.isValid())
  {
    const QVector<double> magnitudes = QgsMeshLayerUtils::calculateMagnitudes(block);
    std::copy_n(magnitudes.constBegin(), std::min(magnitudes.size(), count), values.begin());
  }
  if (!onVertices)
    values = QgsMeshLayerUtils::interpolateFromFacesData(values, mesh, activeFaces,
                                                         QgsMeshRendererScalarSettings::NeighbourAverage);
  VertexField field;
  field.values.assign(values.constBegin(), values.constEnd());
  field.values.resize(std::size_t(mesh.vertexCount()), kNan);

  field.active.resize(std::size_t(triangles.triangleCount()));
  for (std::size_t t = 0; t < field.active.size(); ++t)
    field.active[t] = activeFaces.active(triangles.faceOfTriangle[t]) ? 1 : 0;
  return field;
}

}  // namespace gpugeo
