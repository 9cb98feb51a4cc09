// The plane Delaunay triangulation from CGAL: see detail/plane_delaunay.h.
#include "voronoi/detail/plane_delaunay.h"

#include <CGAL/Delaunay_triangulation_2.h>
#include <CGAL/Exact_predicates_inexact_constructions_kernel.h>
#include <CGAL/Triangulation_vertex_base_with_info_2.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/parallel.h"

namespace gpugeo::voronoi::detail {

namespace {

using Kernel = CGAL::Exact_predicates_inexact_constructions_kernel;
using VertexBase = CGAL::Triangulation_vertex_base_with_info_2<int32_t, Kernel>;
using DataStructure = CGAL::Triangulation_data_structure_2<VertexBase>;
using Delaunay = CGAL::Delaunay_triangulation_2<Kernel, DataStructure>;
using Point = Kernel::Point_2;

// Collinear points: each one's neighbours are the next ones along the line (sorted by x, then y).
PlaneNeighbours alongTheLine(const double* xy, int32_t count)
{
  std::vector<int32_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::make_pair(xy[2 * a], xy[2 * a + 1]) < std::make_pair(xy[2 * b], xy[2 * b + 1]);
  });
  PlaneNeighbours out;
  out.dimension = 1;
  std::vector<std::vector<int32_t>> lists(static_cast<std::size_t>(count));
  for (int32_t k = 0; k + 1 < count; ++k)
  {
    lists[std::size_t(order[k])].push_back(order[k + 1]);
    lists[std::size_t(order[k + 1])].push_back(order[k]);
  }
  out.start.assign(std::size_t(count) + 1, 0);
  for (int32_t i = 0; i < count; ++i)
    out.start[std::size_t(i) + 1] = out.start[std::size_t(i)] + int64_t(lists[std::size_t(i)].size());
  for (const auto& list : lists)
    out.neighbour.insert(out.neighbour.end(), list.begin(), list.end());
  return out;
}

}  // namespace

PlaneNeighbours planeDelaunayNeighbours(const double* xy, int32_t count, int threads)
{
  PlaneNeighbours out;
  if (count <= 1)
  {
    out.start.assign(std::size_t(count) + 1, 0);
    return out;
  }
  std::vector<std::pair<Point, int32_t>> points;
  points.reserve(std::size_t(count));
  for (int32_t i = 0; i < count; ++i)
    points.emplace_back(Point(xy[2 * std::size_t(i)], xy[2 * std::size_t(i) + 1]), i);
  Delaunay dt;
  dt.insert(points.begin(), points.end());  // spatially sorted, then inserted one by one
  if (dt.dimension() < 2)
    return alongTheLine(xy, count);

  out.dimension = 2;
  std::vector<Delaunay::Vertex_handle> vertex(static_cast<std::size_t>(count));
  for (auto v = dt.finite_vertices_begin(); v != dt.finite_vertices_end(); ++v)
    vertex[std::size_t(v->info())] = v;
  // Reading the triangulation changes nothing in it, so the vertices are shared out over threads.
  out.start.assign(std::size_t(count) + 1, 0);
  parallelFor(count, 4096, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
    {
      int64_t degree = 0;
      auto c = dt.incident_vertices(vertex[std::size_t(i)]), done = c;
      do
        degree += dt.is_infinite(c) ? 0 : 1;
      while (++c != done);
      out.start[std::size_t(i) + 1] = degree;
    }
  });
  for (int32_t i = 0; i < count; ++i)
    out.start[std::size_t(i) + 1] += out.start[std::size_t(i)];
  out.neighbour.resize(std::size_t(out.start.back()));
  parallelFor(count, 4096, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
    {
      int64_t at = out.start[std::size_t(i)];
      auto c = dt.incident_vertices(vertex[std::size_t(i)]), done = c;
      do
        if (!dt.is_infinite(c))
          out.neighbour[std::size_t(at++)] = c->info();
      while (++c != done);
    }
  });
  return out;
}

}  // namespace gpugeo::voronoi::detail
