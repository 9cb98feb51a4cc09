// Exact Voronoi polygons clipped to a rectangle: distinct sites, their Delaunay neighbours (CGAL),
// each site's cell as the rectangle cut by the bisectors of its neighbours, in the site's own frame.
#include "voronoi_polygons.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/parallel_sort.h"
#include "detail/plane_delaunay.h"

namespace gpugeo::voronoi {

namespace {

struct Keyed
{
  double x, y;
  int64_t index;

  // By position, then input index: the first of a run of equal points is the lowest index.
  bool operator<(const Keyed& o) const
  {
    if (x != o.x)
      return x < o.x;
    if (y != o.y)
      return y < o.y;
    return index < o.index;
  }
};

// The distinct sites, in (x, y) order.
struct Sites
{
  std::vector<double> xy;        // x0, y0, x1, y1, ...
  std::vector<int64_t> point;    // input index of each site (the lowest of its duplicates)
  std::vector<int32_t> siteOf;   // per input point: its site
};

void validate(const PlanePoints& points, const ClipRectangle& r, double tolerance)
{
  if (!(tolerance >= 0.0) || !std::isfinite(tolerance))
    throw InvalidInput("The tolerance must be a finite number of at least 0.");
  if (points.count <= 0)
    throw InvalidInput("There are no points to build Voronoi polygons from.");
  if (points.count > kMaxPolygonSites)
    throw InvalidInput("There are " + std::to_string(points.count) + " points, more than the limit of " +
                       std::to_string(kMaxPolygonSites) + ".");
  if (!(std::isfinite(r.xMin) && std::isfinite(r.yMin) && std::isfinite(r.xMax) && std::isfinite(r.yMax)) ||
      !(r.xMax > r.xMin) || !(r.yMax > r.yMin))
    throw InvalidInput("The extent to clip the Voronoi polygons to has no area.");
  // Beyond 1e150 the squares of the bisectors' terms would overflow.
  for (int64_t i = 0; i < points.count; ++i)
    if (!(std::abs(points.x[i]) <= kMaxPolygonCoordinate) || !(std::abs(points.y[i]) <= kMaxPolygonCoordinate))
      throw InvalidInput("Point " + std::to_string(i) + " has a coordinate that is not a finite number or lies beyond " +
                         "the 1e+150 this tool can square.");
  if (!(std::abs(r.xMin) <= kMaxPolygonCoordinate && std::abs(r.xMax) <= kMaxPolygonCoordinate &&
        std::abs(r.yMin) <= kMaxPolygonCoordinate && std::abs(r.yMax) <= kMaxPolygonCoordinate))
    throw InvalidInput("The extent to clip the Voronoi polygons to reaches beyond the 1e+150 this tool can square.");
}

Sites distinctSites(const PlanePoints& points, int threads, const RunControl& control)
{
  const int64_t n = points.count;
  std::vector<Keyed> keyed(static_cast<std::size_t>(n));
  parallelFor(n, 1 << 16, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      keyed[std::size_t(i)] = Keyed{points.x[i], points.y[i], i};
  }, &control);
  parallelSort(keyed, threads, control);
  Sites sites;
  sites.siteOf.resize(std::size_t(n));
  for (int64_t k = 0; k < n; ++k)
  {
    const Keyed& p = keyed[std::size_t(k)];
    if (k == 0 || p.x != keyed[std::size_t(k - 1)].x || p.y != keyed[std::size_t(k - 1)].y)
    {
      sites.xy.push_back(p.x);
      sites.xy.push_back(p.y);
      sites.point.push_back(p.index);
    }
    sites.siteOf[std::size_t(p.index)] = static_cast<int32_t>(sites.point.size() - 1);
  }
  return sites;
}

// Merges every site within `tolerance` of an earlier kept site (in input order) into it, greedily
// through a hash grid of cells `tolerance` wide. A tolerance below the coordinates' precision
// (cells past 2^52) merges nothing more.
void mergeWithin(Sites& sites, double tolerance)
{
  const std::size_t count = sites.point.size();
  double reach = 0.0;
  for (double v : sites.xy)
    reach = std::max(reach, std::abs(v));
  if (!(tolerance > 0.0) || reach / tolerance > 0x1p52)
    return;
  std::vector<std::size_t> byInput(count);
  for (std::size_t s = 0; s < count; ++s)
    byInput[s] = s;
  std::sort(byInput.begin(), byInput.end(), [&](std::size_t a, std::size_t b) { return sites.point[a] < sites.point[b]; });
  auto cellKey = [](int64_t cx, int64_t cy) { return uint64_t(cx) * 0x9E3779B97F4A7C15ull ^ uint64_t(cy); };
  std::unordered_multimap<uint64_t, std::size_t> kept;
  kept.reserve(count);
  std::vector<int64_t> into(count, -1);  // the kept site a merged site went to
  const double t2 = tolerance * tolerance;
  for (std::size_t s : byInput)
  {
    const double x = sites.xy[2 * s], y = sites.xy[2 * s + 1];
    const int64_t cx = int64_t(std::floor(x / tolerance)), cy = int64_t(std::floor(y / tolerance));
    for (int64_t dy = -1; dy <= 1; ++dy)  // all nine cells: the lowest input index within reach wins
      for (int64_t dx = -1; dx <= 1; ++dx)
      {
        const auto range = kept.equal_range(cellKey(cx + dx, cy + dy));
        for (auto it = range.first; it != range.second; ++it)
        {
          const std::size_t k = it->second;
          const double ex = sites.xy[2 * k] - x, ey = sites.xy[2 * k + 1] - y;
          if (ex * ex + ey * ey <= t2 && (into[s] < 0 || sites.point[k] < sites.point[std::size_t(into[s])]))
            into[s] = int64_t(k);
        }
      }
    if (into[s] < 0)
      kept.emplace(cellKey(cx, cy), s);
  }
  // Renumber the kept sites (in their (x, y) order) and point every input point at its site.
  std::vector<int32_t> renumber(count, -1);
  Sites out;
  for (std::size_t s = 0; s < count; ++s)
    if (into[s] < 0)
    {
      renumber[s] = static_cast<int32_t>(out.point.size());
      out.point.push_back(sites.point[s]);
      out.xy.push_back(sites.xy[2 * s]);
      out.xy.push_back(sites.xy[2 * s + 1]);
    }
  out.siteOf = std::move(sites.siteOf);
  for (int32_t& s : out.siteOf)
    s = renumber[into[std::size_t(s)] < 0 ? std::size_t(s) : std::size_t(into[std::size_t(s)])];
  sites = std::move(out);
}

struct Vertex
{
  double x, y;
};

// In the site's own frame (the site at the origin): keeps the part of the convex polygon `in` where
// p . d <= |d|^2 / 2, i.e. the points at least as near to the site as to d; the result in `out`
// (which may then be empty).
void clipByBisector(const std::vector<Vertex>& in, double dx, double dy, std::vector<Vertex>& out)
{
  out.clear();
  const double half = 0.5 * (dx * dx + dy * dy);
  const std::size_t n = in.size();
  double fa = in[n - 1].x * dx + in[n - 1].y * dy - half;
  Vertex a = in[n - 1];
  for (std::size_t i = 0; i < n; ++i)
  {
    const Vertex b = in[i];
    const double fb = b.x * dx + b.y * dy - half;
    if ((fa < 0.0 && fb > 0.0) || (fa > 0.0 && fb < 0.0))
    {
      const double t = fa / (fa - fb);
      out.push_back(Vertex{a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)});
    }
    if (fb <= 0.0)
      out.push_back(b);
    a = b;
    fa = fb;
  }
}

// Twice the signed area (counter-clockwise positive).
double twiceArea(const std::vector<Vertex>& ring)
{
  double sum = 0.0;
  for (std::size_t i = 0, n = ring.size(); i < n; ++i)
  {
    const Vertex& a = ring[i];
    const Vertex& b = ring[(i + 1) % n];
    sum += a.x * b.y - b.x * a.y;
  }
  return sum;
}

// One site's cell, in the site's own frame (so that the vertices of a cell a millimetre wide keep
// their precision wherever the site is): the rectangle cut by each neighbour's bisector; repeated
// vertices (closer than `merge`) dropped. Empty when it has no area.
void cellOf(const Sites& sites, const detail::PlaneNeighbours& nb, int32_t s, const std::vector<Vertex>& rectangle,
            double merge, std::vector<Vertex>& cell, std::vector<Vertex>& scratch)
{
  const double sx = sites.xy[2 * std::size_t(s)], sy = sites.xy[2 * std::size_t(s) + 1];
  cell.clear();
  for (const Vertex& corner : rectangle)
    cell.push_back(Vertex{corner.x - sx, corner.y - sy});
  for (int64_t k = nb.start[std::size_t(s)]; k < nb.start[std::size_t(s) + 1] && !cell.empty(); ++k)
  {
    const int32_t t = nb.neighbour[std::size_t(k)];
    clipByBisector(cell, sites.xy[2 * std::size_t(t)] - sx, sites.xy[2 * std::size_t(t) + 1] - sy, scratch);
    cell.swap(scratch);
  }
  scratch.clear();
  for (const Vertex& v : cell)
    if (scratch.empty() || std::abs(v.x - scratch.back().x) > merge || std::abs(v.y - scratch.back().y) > merge)
      scratch.push_back(v);
  while (scratch.size() > 1 && std::abs(scratch.front().x - scratch.back().x) <= merge &&
         std::abs(scratch.front().y - scratch.back().y) <= merge)
    scratch.pop_back();
  cell.swap(scratch);
  if (cell.size() < 3 || !(twiceArea(cell) > 0.0))
    cell.clear();
}

}  // namespace

VoronoiPolygons voronoiPolygons(const PlanePoints& points, const ClipRectangle& r, const VoronoiPolygonsOptions& options,
                                const RunControl& control)
{
  validate(points, r, options.tolerance);
  const int threads = options.threads;
  VoronoiPolygons out;
  Sites sites;
  {
    ScopedStage stage(out.times, "unique");
    sites = distinctSites(points, threads, control);
    mergeWithin(sites, options.tolerance);
  }
  const int32_t count = static_cast<int32_t>(sites.point.size());
  out.duplicates = points.count - count;
  if (control.isCanceled())
    throw Canceled();
  detail::PlaneNeighbours nb;
  {
    ScopedStage stage(out.times, "delaunay");
    nb = detail::planeDelaunayNeighbours(sites.xy.data(), count, threads);
  }
  out.dimension = nb.dimension;
  if (control.isCanceled())
    throw Canceled();

  ScopedStage stage(out.times, "cells");
  const std::vector<Vertex> rectangle = {{r.xMin, r.yMin}, {r.xMax, r.yMin}, {r.xMax, r.yMax}, {r.xMin, r.yMax}};
  const double merge = 1e-12 * std::max(r.xMax - r.xMin, r.yMax - r.yMin);
  // Chunks of sites, each with its own vertex arrays, joined in site order afterwards.
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  struct Chunk
  {
    std::vector<double> x, y;
    std::vector<int32_t> size;  // vertices of each of the chunk's sites' cells (0: none)
  };
  std::vector<Chunk> parts(static_cast<std::size_t>(chunks));
  parallelFor(chunks, 1, threads, [&](int64_t first, int64_t last) {
    std::vector<Vertex> cell, scratch;
    for (int64_t c = first; c < last; ++c)
    {
      Chunk& part = parts[std::size_t(c)];
      for (int64_t s = c * kChunk; s < std::min<int64_t>(count, (c + 1) * kChunk); ++s)
      {
        cellOf(sites, nb, static_cast<int32_t>(s), rectangle, merge, cell, scratch);
        part.size.push_back(static_cast<int32_t>(cell.size()));
        // Back to the CRS from the site's frame: one rounding.
        for (const Vertex& v : cell)
        {
          part.x.push_back(sites.xy[2 * std::size_t(s)] + v.x);
          part.y.push_back(sites.xy[2 * std::size_t(s) + 1] + v.y);
        }
      }
    }
  }, &control);

  std::vector<int64_t> cellOfSite(static_cast<std::size_t>(count), -1);
  out.ringStart.push_back(0);
  for (const Chunk& part : parts)
  {
    out.x.insert(out.x.end(), part.x.begin(), part.x.end());
    out.y.insert(out.y.end(), part.y.begin(), part.y.end());
  }
  int64_t site = 0;
  for (const Chunk& part : parts)
    for (int32_t size : part.size)
    {
      if (size > 0)
      {
        cellOfSite[std::size_t(site)] = int64_t(out.pointOfCell.size());
        out.pointOfCell.push_back(sites.point[std::size_t(site)]);
        out.ringStart.push_back(out.ringStart.back() + size);
      }
      ++site;
    }
  out.cellOfPoint.resize(static_cast<std::size_t>(points.count));
  for (int64_t i = 0; i < points.count; ++i)
  {
    const int32_t s = sites.siteOf[std::size_t(i)];
    out.cellOfPoint[std::size_t(i)] = sites.point[std::size_t(s)] == i ? cellOfSite[std::size_t(s)] : -1;
  }
  return out;
}

}  // namespace gpugeo::voronoi
