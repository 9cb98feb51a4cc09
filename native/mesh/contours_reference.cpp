#include "contours_reference.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace gpugeo::mesh::reference {

namespace {

// A point of the plane with the field's value there.
struct Vertex
{
  double x, y, f;
};

bool takesPart(const Mesh& mesh, const Field& field, int64_t t)
{
  if (field.active && field.active[t] == 0)
    return false;
  for (int c = 0; c < 3; ++c)
  {
    const int32_t v = mesh.triangles[3 * t + c];
    if (!std::isfinite(field.values[v]) || !std::isfinite(mesh.x[v]) || !std::isfinite(mesh.y[v]))
      return false;
  }
  return true;
}

Vertex vertexOf(const Mesh& mesh, const Field& field, int32_t v)
{
  return {mesh.x[v], mesh.y[v], field.values[v]};
}

// The point of segment a-b where the field equals `level` (a.f != b.f).
Vertex crossing(const Vertex& a, const Vertex& b, double level)
{
  const double t = (level - a.f) / (b.f - a.f);
  return {a.x + t * (b.x - a.x), a.y + t * (b.y - a.y), level};
}

double distance(const Vertex& a, const Vertex& b)
{
  return std::hypot(b.x - a.x, b.y - a.y);
}

// The part of `polygon` where sign * (f - level) >= 0 (Sutherland-Hodgman).
std::vector<Vertex> clip(const std::vector<Vertex>& polygon, double level, double sign)
{
  std::vector<Vertex> out;
  const size_t n = polygon.size();
  for (size_t i = 0; i < n; ++i)
  {
    const Vertex& p = polygon[i];
    const Vertex& q = polygon[(i + 1) % n];
    const bool pIn = sign * (p.f - level) >= 0;
    const bool qIn = sign * (q.f - level) >= 0;
    if (pIn)
      out.push_back(p);
    if (pIn != qIn)
      out.push_back(crossing(p, q, level));
  }
  return out;
}

// Shoelace, relative to the first corner (precise far from the origin).
double area(const std::vector<Vertex>& polygon)
{
  const Vertex& o = polygon[0];
  double twice = 0;
  for (size_t i = 1; i + 1 < polygon.size(); ++i)
  {
    const Vertex& p = polygon[i];
    const Vertex& q = polygon[i + 1];
    twice += (p.x - o.x) * (q.y - o.y) - (q.x - o.x) * (p.y - o.y);
  }
  return 0.5 * std::fabs(twice);
}

}  // namespace

int64_t trianglesUsed(const Mesh& mesh, const Field& field)
{
  int64_t used = 0;
  for (int64_t t = 0; t < mesh.triangleCount; ++t)
    used += takesPart(mesh, field, t) ? 1 : 0;
  return used;
}

std::vector<double> lineLengths(const Mesh& mesh, const Field& field, const std::vector<double>& levels)
{
  std::vector<double> lengths(levels.size(), 0.0);
  for (size_t k = 0; k < levels.size(); ++k)
  {
    const double level = levels[k];
    std::set<std::pair<int32_t, int32_t>> edgesAtLevel;  // counted once each
    for (int64_t t = 0; t < mesh.triangleCount; ++t)
    {
      if (!takesPart(mesh, field, t))
        continue;
      const int32_t* v = mesh.triangles + 3 * t;
      Vertex p[3];
      int atLevel = 0;
      for (int c = 0; c < 3; ++c)
      {
        p[c] = vertexOf(mesh, field, v[c]);
        atLevel += p[c].f == level ? 1 : 0;
      }
      if (atLevel == 3)
        continue;  // flat at the level
      if (atLevel == 2)
      {
        for (int c = 0; c < 3; ++c)
        {
          const int d = (c + 1) % 3;
          if (p[c].f == level && p[d].f == level)
            edgesAtLevel.insert({std::min(v[c], v[d]), std::max(v[c], v[d])});
        }
        continue;
      }
      // The points of the triangle's boundary where f == level: its vertices at the level and the
      // strict crossings of its edges.
      std::vector<Vertex> points;
      for (int c = 0; c < 3; ++c)
      {
        const Vertex& a = p[c];
        const Vertex& b = p[(c + 1) % 3];
        if (a.f == level)
          points.push_back(a);
        else if ((a.f < level && level < b.f) || (b.f < level && level < a.f))
          points.push_back(crossing(a, b, level));
      }
      if (points.size() == 2)
        lengths[k] += distance(points[0], points[1]);
    }
    for (const auto& [a, b] : edgesAtLevel)
      lengths[k] += distance(vertexOf(mesh, field, a), vertexOf(mesh, field, b));
  }
  return lengths;
}

std::vector<double> bandAreas(const Mesh& mesh, const Field& field, const std::vector<double>& levels)
{
  const size_t bands = levels.size() < 2 ? 0 : levels.size() - 1;
  std::vector<double> areas(bands, 0.0);
  for (int64_t t = 0; t < mesh.triangleCount; ++t)
  {
    if (!takesPart(mesh, field, t))
      continue;
    const int32_t* v = mesh.triangles + 3 * t;
    const std::vector<Vertex> triangle{vertexOf(mesh, field, v[0]), vertexOf(mesh, field, v[1]),
                                       vertexOf(mesh, field, v[2])};
    for (size_t k = 0; k < bands; ++k)
    {
      const std::vector<Vertex> piece = clip(clip(triangle, levels[k], +1.0), levels[k + 1], -1.0);
      if (piece.size() >= 3)
        areas[k] += area(piece);
    }
  }
  return areas;
}

}  // namespace gpugeo::mesh::reference
