#include "mesh/mesh_contours.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "mesh/detail/contourer.h"

namespace gpugeo::mesh {

namespace {

std::string number(double v)
{
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace

namespace detail {

void validateMesh(const Mesh& mesh)
{
  if (mesh.triangleCount < 1)
    throw InvalidInput("the mesh has no triangle");
  if (mesh.triangleCount > kMaxTriangles)
    throw InvalidInput("too many triangles: " + std::to_string(mesh.triangleCount) + " (at most " +
                       std::to_string(kMaxTriangles) + ")");
  if (mesh.vertexCount < 3 || mesh.vertexCount > kMaxVertices)
    throw InvalidInput("the mesh must have between 3 and " + std::to_string(kMaxVertices) + " vertices (it has " +
                       std::to_string(mesh.vertexCount) + ")");
  if (!mesh.x || !mesh.y || !mesh.triangles)
    throw InvalidInput("the mesh arrays must not be null");
}

void checkCorners(int64_t badTriangles, int64_t vertexCount)
{
  if (badTriangles > 0)
    throw InvalidInput(std::to_string(badTriangles) + " triangles refer to a vertex that does not exist (the mesh has " +
                       std::to_string(vertexCount) + " vertices)");
}

void validateLevels(const std::vector<double>& levels)
{
  if (levels.size() > std::size_t(kMaxLevels))
    throw InvalidInput("too many levels: " + std::to_string(levels.size()) + " (at most " +
                       std::to_string(kMaxLevels) + ")");
  for (std::size_t i = 0; i < levels.size(); ++i)
  {
    if (!std::isfinite(levels[i]))
      throw InvalidInput("level " + std::to_string(i + 1) + " is not a finite number");
    if (i > 0 && !(levels[i - 1] < levels[i]))
      throw InvalidInput("the levels must be different numbers in increasing order (" + number(levels[i - 1]) +
                         " is followed by " + number(levels[i]) + ")");
  }
}

void checkSegmentCount(int64_t segments)
{
  if (segments > kMaxSegments)
    throw InvalidInput("the contours would have " + std::to_string(segments) + " segments, more than the " +
                       std::to_string(kMaxSegments) + " one run can hold; use fewer levels or a smaller mesh");
}

PreparedMesh prepareMesh(const Mesh& mesh, int threads, const RunControl& control)
{
  const int64_t nt = mesh.triangleCount, nv = mesh.vertexCount;
  PreparedMesh p;
  p.source = mesh;
  p.triangles.assign(mesh.triangles, mesh.triangles + 3 * nt);
  p.twin.assign(std::size_t(3 * nt), -1);
  p.usable.assign(std::size_t(nt), 0);
  std::atomic<int64_t> bad{0};
  parallelFor(nt, 1 << 14, threads, [&](int64_t b, int64_t e) {
    int64_t badHere = 0;
    for (int64_t t = b; t < e; ++t)
    {
      const int r = prepareTriangle(mesh.x, mesh.y, mesh.z, nv, &p.triangles[std::size_t(3 * t)]);
      p.usable[std::size_t(t)] = r > 0;
      badHere += r < 0;
    }
    bad += badHere;
  }, &control);
  checkCorners(bad, nv);
  // Half-edges bucketed by their lower vertex (a counting sort), then matched within each bucket.
  std::vector<int64_t> start(static_cast<std::size_t>(nv + 1), 0);
  for (int64_t h = 0; h < 3 * nt; ++h)
  {
    const int64_t t = h / 3;
    const int32_t a = p.triangles[std::size_t(h)], b = p.triangles[std::size_t(3 * t + (h % 3 + 1) % 3)];
    ++start[std::size_t(std::min(a, b)) + 1];
  }
  for (int64_t v = 0; v < nv; ++v)
    start[std::size_t(v + 1)] += start[std::size_t(v)];
  std::vector<int32_t> bucket(static_cast<std::size_t>(3 * nt));
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t h = 0; h < 3 * nt; ++h)
    {
      const int64_t t = h / 3;
      const int32_t a = p.triangles[std::size_t(h)], b = p.triangles[std::size_t(3 * t + (h % 3 + 1) % 3)];
      bucket[std::size_t(fill[std::size_t(std::min(a, b))]++)] = int32_t(h);
    }
  }
  if (control.isCanceled())
    throw Canceled();
  auto other = [&](int32_t h) { return p.triangles[std::size_t(3 * (h / 3) + (h % 3 + 1) % 3)]; };
  parallelFor(nv, 1 << 14, threads, [&](int64_t b, int64_t e) {
    for (int64_t v = b; v < e; ++v)
    {
      // The bucket in order of the upper vertex, then the half-edge: each run is one edge.
      const auto first = bucket.begin() + start[std::size_t(v)], last = bucket.begin() + start[std::size_t(v + 1)];
      auto upper = [&](int32_t h) { return std::max(p.triangles[std::size_t(h)], other(h)); };
      std::sort(first, last, [&](int32_t g, int32_t h) {
        const int32_t ug = upper(g), uh = upper(h);
        return ug != uh ? ug < uh : g < h;
      });
      for (auto run = first; run != last;)
      {
        auto end = run + 1;
        while (end != last && upper(*end) == upper(*run))
          ++end;
        if (end - run == 2 && p.triangles[std::size_t(run[0])] == other(run[1]) &&
            p.triangles[std::size_t(run[1])] == other(run[0]))
        {
          p.twin[std::size_t(run[0])] = run[1];
          p.twin[std::size_t(run[1])] = run[0];
        }
        run = end;
      }
    }
  }, &control);
  return p;
}

void markValid(const PreparedMesh& mesh, const Field& field, std::vector<uint8_t>& valid, int threads,
               const RunControl& control)
{
  const int64_t nt = mesh.source.triangleCount;
  valid.resize(std::size_t(nt));
  parallelFor(nt, 1 << 15, threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
    {
      const int32_t* c = &mesh.triangles[std::size_t(3 * t)];
      valid[std::size_t(t)] = takesPart(mesh.usable[std::size_t(t)], field.active, t, field.values, c);
    }
  }, &control);
}

MeshArrays meshArrays(const PreparedMesh& mesh)
{
  MeshArrays m;
  m.x = mesh.source.x;
  m.y = mesh.source.y;
  m.z = mesh.source.z;
  m.vertexCount = mesh.source.vertexCount;
  m.triangles = mesh.triangles.data();
  m.twin = mesh.twin.data();
  m.triangleCount = mesh.source.triangleCount;
  return m;
}

}  // namespace detail

std::unique_ptr<MeshContourer> makeMeshContourer(Backend backend, const Mesh& mesh, int threads,
                                                 const RunControl& control)
{
  detail::validateMesh(mesh);
  if (backend == Backend::Gpu)
    return detail::makeCudaContourer(mesh, control);
  return detail::makeCpuContourer(mesh, threads, control);
}

ContourBands bandPieces(const Mesh& mesh, const Field& field, const std::vector<double>& levels, int32_t band,
                        const RunControl& control)
{
  detail::validateMesh(mesh);
  detail::validateLevels(levels);
  if (!field.values)
    throw InvalidInput("the field has no values");
  if (band < 0 || std::size_t(band) + 1 >= levels.size())
    throw InvalidInput("band " + std::to_string(band) + " is not between two of the " + std::to_string(levels.size()) +
                       " levels");
  const double lo = levels[std::size_t(band)], hi = levels[std::size_t(band) + 1];
  const detail::FieldArrays f{field.values, nullptr, levels.data(), int32_t(levels.size())};
  ContourBands out;
  out.bandPolygon = {0};
  out.polygonRing = {0};
  out.ringPoint = {0};
  int64_t bad = 0;
  for (int64_t t = 0; t < mesh.triangleCount; ++t)
  {
    if ((t & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    int32_t c[3] = {mesh.triangles[3 * t], mesh.triangles[3 * t + 1], mesh.triangles[3 * t + 2]};
    const int usable = detail::prepareTriangle(mesh.x, mesh.y, mesh.z, mesh.vertexCount, c);
    bad += usable < 0;
    if (!detail::takesPart(usable == 1, field.active, t, field.values, c))
      continue;
    const double v[3] = {field.values[c[0]], field.values[c[1]], field.values[c[2]]};
    uint8_t nodes[detail::kMaxPieceNodes + 1];
    const int n = detail::pieceNodes(v, lo, hi, nodes);
    if (n < 3)
      continue;
    // This triangle alone, its corners counter-clockwise.
    const detail::MeshArrays one{mesh.x, mesh.y, mesh.z, mesh.vertexCount, c, nullptr, 1};
    for (int i = 0; i <= n; ++i)
    {
      double point[3];
      detail::nodePoint(one, f, 0, nodes[i % n], band, point);
      out.x.push_back(point[0]);
      out.y.push_back(point[1]);
      out.z.push_back(point[2]);
    }
    out.ringPoint.push_back(int64_t(out.x.size()));
    out.polygonRing.push_back(int64_t(out.ringPoint.size()) - 1);
  }
  detail::checkCorners(bad, mesh.vertexCount);
  out.bandPolygon.push_back(int64_t(out.polygonRing.size()) - 1);
  return out;
}

std::vector<double> levelsFromRange(double minimum, double maximum, double increment)
{
  if (!std::isfinite(minimum) || !std::isfinite(maximum) || !std::isfinite(increment))
    throw InvalidInput("the minimum, maximum and increment must be finite numbers");
  if (increment <= 0)
    throw InvalidInput("Invalid interval value, must be greater than zero");
  if (minimum >= maximum)
    throw InvalidInput("Invalid minimum and maximum values, minimum must be lesser than maximum");
  if (increment > maximum - minimum)
    throw InvalidInput("Invalid minimum, maximum and interval values, difference between minimum and maximum must "
                       "be greater or equal than interval");
  const double steps = std::floor((maximum - minimum) / increment + 1e-9);
  if (steps + 1 > double(kMaxLevels))
    throw InvalidInput("the minimum, maximum and increment give " + number(steps + 1) + " levels, more than " +
                       std::to_string(kMaxLevels) + "; use a larger increment");
  std::vector<double> levels;
  for (int64_t i = 0; i <= int64_t(steps); ++i)
  {
    const double v = minimum + double(i) * increment;
    if (!levels.empty() && !(v > levels.back()))
      continue;
    levels.push_back(v);
  }
  return levels;
}

}  // namespace gpugeo::mesh
