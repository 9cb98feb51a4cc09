// The spherical Delaunay triangulation from CGAL: see detail/sphere_hull.h.
#include "sphere/detail/sphere_hull.h"

#include <CGAL/Delaunay_triangulation_on_sphere_2.h>
#include <CGAL/Exact_predicates_inexact_constructions_kernel.h>
#include <CGAL/Projection_on_sphere_traits_3.h>
#include <CGAL/Triangulation_face_base_with_info_2.h>
#include <CGAL/Triangulation_vertex_base_with_info_2.h>

#include <cstring>
#include <unordered_map>

namespace gpugeo::sphere::detail {

namespace {

using Kernel = CGAL::Exact_predicates_inexact_constructions_kernel;
using Traits = CGAL::Projection_on_sphere_traits_3<Kernel>;
using VertexBase =
  CGAL::Triangulation_vertex_base_with_info_2<int32_t, Traits, CGAL::Triangulation_on_sphere_vertex_base_2<Traits>>;
using FaceBase =
  CGAL::Triangulation_face_base_with_info_2<int32_t, Traits, CGAL::Triangulation_on_sphere_face_base_2<Traits>>;
using Delaunay =
  CGAL::Delaunay_triangulation_on_sphere_2<Traits, CGAL::Triangulation_data_structure_2<VertexBase, FaceBase>>;
using Point = Kernel::Point_3;

// A point's coordinates as a key (the triangulation keeps each vertex's point as given).
struct Coordinates
{
  uint64_t bits[3];
  bool operator==(const Coordinates& o) const { return std::memcmp(bits, o.bits, sizeof bits) == 0; }
};

Coordinates coordinatesOf(double x, double y, double z)
{
  Coordinates c;
  std::memcpy(&c.bits[0], &x, 8);
  std::memcpy(&c.bits[1], &y, 8);
  std::memcpy(&c.bits[2], &z, 8);
  return c;
}

struct CoordinatesHash
{
  std::size_t operator()(const Coordinates& c) const
  {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t b : c.bits)
      h = (h ^ (b + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
    return std::size_t(h ^ (h >> 33));
  }
};

}  // namespace

SphereHull sphereHull(const double* xyz, int32_t count, const double centre[3])
{
  SphereHull hull;
  std::vector<Point> points;
  points.reserve(std::size_t(count));
  std::unordered_map<Coordinates, int32_t, CoordinatesHash> index;
  index.reserve(2 * std::size_t(count));
  for (int32_t i = 0; i < count; ++i)
  {
    const double* p = xyz + 3 * std::size_t(i);
    points.emplace_back(p[0], p[1], p[2]);
    index.emplace(coordinatesOf(p[0], p[1], p[2]), i);
  }
  const Traits traits(Point(centre[0], centre[1], centre[2]), 1.0);
  Delaunay dt(traits);
  dt.insert(points.begin(), points.end());  // spatially sorted, then inserted one by one
  if (dt.dimension() < 2)
  {
    hull.flat = true;
    return hull;
  }
  hull.hint.assign(std::size_t(count), -1);
  std::vector<char> isVertex(std::size_t(count), 0);
  for (auto v = dt.vertices_begin(); v != dt.vertices_end(); ++v)
  {
    const Point& p = v->point();
    v->info() = index.at(coordinatesOf(p.x(), p.y(), p.z()));
    isVertex[std::size_t(v->info())] = 1;
  }
  int32_t t = 0;
  for (auto f = dt.all_faces_begin(); f != dt.all_faces_end(); ++f)
    f->info() = t++;
  hull.tri.reserve(std::size_t(t));
  hull.nbr.reserve(std::size_t(t));
  for (auto f = dt.all_faces_begin(); f != dt.all_faces_end(); ++f)
  {
    hull.tri.push_back({f->vertex(0)->info(), f->vertex(1)->info(), f->vertex(2)->info()});
    hull.nbr.push_back({f->neighbor(0)->info(), f->neighbor(1)->info(), f->neighbor(2)->info()});
  }
  for (int32_t i = 0; i < count; ++i)
    if (!isVertex[std::size_t(i)])
      hull.hint[std::size_t(i)] = dt.locate(points[std::size_t(i)], Delaunay::Face_handle())->info();
  return hull;
}

}  // namespace gpugeo::sphere::detail
