// The Voronoi regions as spherical polygons with their areas: see detail/spherical_regions.h and
// spherical_voronoi.h (steps 3 to 5).
#include "sphere/detail/spherical_regions.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "core/errors.h"
#include "core/parallel.h"

namespace gpugeo::sphere::detail {
namespace {

// Unique sites whose spread-relative distance from a common plane is at most this are coplanar.
constexpr double kCoplanarRel = 1e-12;
// Voronoi vertices of adjacent triangles closer than this (chord, radians) are one vertex.
constexpr double kMergeChord = 1e-13;

// Area of a region on the unit sphere (see the header, step 5).
double ringArea(V3 s, const RingView& ring)
{
  const size_t k = ring.size();
  bool near = true;
  for (size_t i = 0; i < k; ++i)
    near = near && dot(s, ring.vert[i]) >= 0;
  if (near)
  {
    double area = 0;
    for (size_t i = 0; i < k; ++i)
    {
      const V3 u = ring.vert[i];
      const V3 v = ring.vert[(i + 1) % k];
      // An edge whose ends are clearly less than 90 degrees apart is one piece (its arc is the short
      // one, or a zero-length edge fallen behind), without finding its arc.
      Arc arc;
      int pieces = 1;
      if (!(dot(u, v) > 1e-9))
      {
        arc = makeArc(u, v, ring.unit[i]);
        pieces = std::max(1, static_cast<int>(std::ceil(arc.sweep / (0.5 * kPi))));
      }
      V3 a = u;
      for (int j = 1; j <= pieces; ++j)
      {
        const V3 b = j == pieces ? v : arc.at(arc.sweep * j / pieces);
        // s.(a x b) = s.((a - s) x (b - s)): the differences keep small triangles precise.
        const double num = dot(s, cross(a - s, b - s));
        const double den = 1.0 + dot(s, a) + dot(a, b) + dot(b, s);
        area += 2.0 * std::atan2(num, den);
        a = b;
      }
    }
    return area;
  }
  // Gauss-Bonnet: the exterior angle at vertex i+1 is the angle between the bisector normals of the
  // edges meeting there. A convex polygon turns by (0, pi); near pi (a sharp spike) the sign of the
  // tiny cross product is rounding, so there the angle is taken unsigned.
  double turning = 0;
  for (size_t i = 0; i < k; ++i)
  {
    const V3 m0 = ring.unit[i];
    const V3 m1 = ring.unit[(i + 1) % k];
    const double c = dot(cross(m0, m1), ring.vert[(i + 1) % k]);
    const double d = dot(m0, m1);
    turning += d < 0 ? std::atan2(std::fabs(c), d) : std::atan2(c, d);
  }
  return kTwoPi - turning;
}

// Every mesh edge's accurate difference (step 1), made once and shared by the two triangles on it and
// the two regions it separates: edge[3 t + i] = p(b) - p(a) for triangle t's edge from
// a = tri[t][i + 1] to b = tri[t][i + 2] (the edge opposite slot i); the triangle across it holds the
// negation.
FlatArray<V3> edgeDiffs(const Geometry& g, const Mesh& mesh, int threads, const RunControl& control)
{
  const size_t nt = mesh.tri.size();
  FlatArray<V3> edge(3 * nt);
  auto from = [&](size_t t, int i) { return mesh.tri[t][static_cast<size_t>((i + 1) % 3)]; };
  auto to = [&](size_t t, int i) { return mesh.tri[t][static_cast<size_t>((i + 2) % 3)]; };
  parallelFor(int64_t(nt), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
      for (int i = 0; i < 3; ++i)
        if (int64_t(t) < mesh.nbr[t][static_cast<size_t>(i)])
          edge[3 * t + static_cast<size_t>(i)] = g.diff(to(t, i), from(t, i));
  }, &control);
  parallelFor(int64_t(nt), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
      for (int i = 0; i < 3; ++i)
      {
        const size_t u = static_cast<size_t>(mesh.nbr[t][static_cast<size_t>(i)]);
        if (u >= t)
          continue;
        int j = 0;
        while (j < 3 && !(from(u, j) == to(t, i) && to(u, j) == from(t, i)))
          ++j;
        if (j == 3)
          throw Error("spherical Voronoi: internal error: broken triangle neighbours");
        edge[3 * t + static_cast<size_t>(i)] = -edge[3 * u + static_cast<size_t>(j)];
      }
  }, &control);
  return edge;
}

}  // namespace

// Every site's accurate difference from site 0 (step 1), made once on all cores: the plane test and
// the hull both take the sites relative to site 0.
FlatArray<V3> diffsFromFirst(const Geometry& g, int threads, const RunControl& control)
{
  FlatArray<V3> d(static_cast<size_t>(g.count()));
  parallelFor(g.count(), 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      d[static_cast<size_t>(i)] = g.diff(static_cast<int32_t>(i), 0);
  }, &control);
  return d;
}

// The plane through site 0, the site farthest from it and the site farthest from their line; the
// sites are coplanar when none is farther from it than kCoplanarRel times the spread. d0: the sites'
// differences from site 0 (diffsFromFirst).
Plane findPlane(const Geometry& g, const FlatArray<V3>& d0, const RunControl& control)
{
  Plane pl;
  const int32_t k = g.count();
  double best = -1;
  for (int32_t i = 1; i < k; ++i)
  {
    pollCancel(control, i);
    const V3 d = d0[static_cast<size_t>(i)];
    const double l = dot(d, d);
    if (l > best)
    {
      best = l;
      pl.i1 = i;
    }
  }
  const double spread = std::sqrt(best);
  const V3 e1 = normalized(d0[static_cast<size_t>(pl.i1)]);
  best = -1;
  pl.i2 = pl.i1;
  for (int32_t i = 1; i < k; ++i)
  {
    pollCancel(control, i);
    if (i == pl.i1)
      continue;
    const V3 c = cross(e1, normalized(d0[static_cast<size_t>(i)]));
    const double l = dot(c, c);
    if (l > best)
    {
      best = l;
      pl.i2 = i;
    }
  }
  pl.axis = g.normal(0, pl.i1, pl.i2);  // from the triangle's best-conditioned corner
  if (k <= 3)
  {
    pl.coplanar = true;
    return pl;
  }
  pl.coplanar = true;
  for (int32_t i = 1; i < k && pl.coplanar; ++i)
  {
    pollCancel(control, i);
    pl.coplanar = std::fabs(dot(d0[static_cast<size_t>(i)], pl.axis)) <= kCoplanarRel * spread;
  }
  return pl;
}

void lunes(const Geometry& g, const Plane& pl, SphereRings& rings, std::vector<double>& areas,
           const RunControl& control)
{
  const int32_t k = g.count();
  rings.shape(std::vector<int32_t>(static_cast<size_t>(k), 2));
  areas.assign(static_cast<size_t>(k), 0.0);
  // Site s's lune: from `from` along the bisector with site `up` to -from, back along the one with
  // site `down`.
  const auto setLune = [&](int32_t s, V3 from, int32_t up, int32_t down) {
    const size_t b = rings.at(static_cast<size_t>(s));
    rings.vert[b] = from;
    rings.vert[b + 1] = -from;
    rings.normal[b] = g.diff(s, up);
    rings.normal[b + 1] = g.diff(s, down);
    rings.neighbor[b] = up;
    rings.neighbor[b + 1] = down;
    rings.count[static_cast<size_t>(s)] = 2;
    rings.finish(static_cast<size_t>(s));
  };
  if (k == 2)
  {
    // Two hemispheres; their boundary is the bisector, drawn as two half circles between a pair of
    // antipodal points on it.
    const V3 a = perpendicular(g.diff(1, 0));
    for (int32_t s = 0; s < 2; ++s)
    {
      setLune(s, -a, 1 - s, 1 - s);
      areas[static_cast<size_t>(s)] = kTwoPi;
    }
    return;
  }
  // Azimuths around the axis (the centre of the sites' circle). The axis is accurate, so an azimuth's
  // error is about 1e-16 over the circle's radius: even on a tiny circle, far below the gaps between
  // distinct sites.
  const V3 a = pl.axis;
  const V3 e1 = perpendicular(a);
  const V3 e2 = cross(a, e1);
  std::vector<double> azimuth(static_cast<size_t>(k));
  for (int32_t i = 0; i < k; ++i)
  {
    pollCancel(control, i);
    azimuth[static_cast<size_t>(i)] = std::atan2(dot(g.p(i), e2), dot(g.p(i), e1));
  }
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return azimuth[static_cast<size_t>(x)] < azimuth[static_cast<size_t>(y)];
  });
  for (int32_t r = 0; r < k; ++r)
  {
    const int32_t s = order[static_cast<size_t>(r)];
    const int32_t next = order[static_cast<size_t>((r + 1) % k)];
    const int32_t prev = order[static_cast<size_t>((r + k - 1) % k)];
    auto gap = [&](int32_t from, int32_t to) {
      double d = azimuth[static_cast<size_t>(to)] - azimuth[static_cast<size_t>(from)];
      if (d < 0)
        d += kTwoPi;
      return d;
    };
    const double w = 0.5 * (gap(prev, s) + gap(s, next));
    // From -a up the bisector with the next site to a, back down the one with the previous site:
    // counter-clockwise around the lune seen from outside.
    setLune(s, -a, next, prev);
    areas[static_cast<size_t>(s)] = 2.0 * w;
  }
}

// The Voronoi polygon of every site from the mesh, consecutive coincident vertices merged.
void meshRegions(const Geometry& g, const Mesh& mesh, SphereRings& rings, std::vector<double>& areas,
                 int threads, const RunControl& control)
{
  const int32_t k = g.count();
  const size_t nt = mesh.tri.size();
  const FlatArray<V3> edge = edgeDiffs(g, mesh, threads, control);
  FlatArray<V3> centre(nt);
  parallelFor(int64_t(nt), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
      centre[t] = Geometry::normalFromEdges(edge[3 * t + 2], edge[3 * t], edge[3 * t + 1]);
  }, &control);
  // Adjacent triangles whose centres lie within kMergeChord (co-circular sites: cube faces, grids)
  // share one Voronoi vertex: every triangle of such a group takes the centre of its lowest-indexed
  // triangle, so that all the regions around it see bitwise the same vertex.
  // Only triangles with such a neighbour take part (mostly none: found on all cores).
  std::vector<uint8_t> close(nt);
  std::atomic<bool> anyClose{false};
  parallelFor(int64_t(nt), 65536, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
    {
      close[t] = 0;
      for (const int32_t u : mesh.nbr[t])
        close[t] |= chord(centre[t], centre[static_cast<size_t>(u)]) <= kMergeChord;
      if (close[t])
        anyClose = true;
    }
  }, &control);
  if (anyClose)
  {
    std::vector<int32_t> root(nt);
    std::iota(root.begin(), root.end(), 0);
    auto find = [&](int32_t t) {
      while (root[static_cast<size_t>(t)] != t)
        t = root[static_cast<size_t>(t)] = root[static_cast<size_t>(root[static_cast<size_t>(t)])];
      return t;
    };
    for (size_t t = 0; t < nt; ++t)
      if (close[t])
        for (const int32_t u : mesh.nbr[t])
          if (chord(centre[t], centre[static_cast<size_t>(u)]) <= kMergeChord)
          {
            const int32_t a = find(static_cast<int32_t>(t)), b = find(u);
            root[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
          }
    for (size_t t = 0; t < nt; ++t)
      if (close[t])
        centre[t] = centre[static_cast<size_t>(find(static_cast<int32_t>(t)))];
  }
  // Each site's ring from the triangles around it (read only): the sites in parallel, first their
  // triangle counts (the room their rings get), then the rings.
  const auto around = [&](int32_t s, const auto& visit) {
    const int32_t t0 = mesh.vertexTri[static_cast<size_t>(s)];
    int32_t t = t0;
    size_t steps = 0;
    do
    {
      const int i = mesh.slot(t, s);
      visit(t, i);
      t = mesh.nbr[static_cast<size_t>(t)][static_cast<size_t>((i + 1) % 3)];
      if (++steps > mesh.tri.size())
        throw Error("spherical Voronoi: internal error: the triangles around a site do not close");
    } while (t != t0);
  };
  std::vector<int32_t> room(static_cast<size_t>(k));
  parallelFor(k, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      int32_t n = 0;
      around(s, [&](int32_t, int) { ++n; });
      room[static_cast<size_t>(s)] = n;
    }
  }, &control);
  rings.shape(room);
  areas.assign(static_cast<size_t>(k), 0.0);
  parallelFor(k, 1024, threads, [&](int64_t begin, int64_t end) {
    std::vector<V3> rawVert, rawNormal;
    std::vector<int32_t> rawNeighbor;
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      rawVert.clear();
      rawNormal.clear();
      rawNeighbor.clear();
      around(s, [&](int32_t t, int i) {
        rawVert.push_back(centre[static_cast<size_t>(t)]);
        rawNormal.push_back(edge[3 * static_cast<size_t>(t) + static_cast<size_t>((i + 1) % 3)]);  // s - c
        rawNeighbor.push_back(mesh.tri[static_cast<size_t>(t)][static_cast<size_t>((i + 2) % 3)]);
      });

      // Merge runs of equal vertices: a run keeps its vertex and the edge leaving its last member.
      auto same = [](V3 a, V3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
      const size_t n = rawVert.size();
      size_t start = 0;  // a vertex that differs from its predecessor, so no run wraps around
      while (start < n && same(rawVert[start], rawVert[(start + n - 1) % n]))
        ++start;
      if (start == n)
        continue;  // every vertex the same point: no area left (degenerate beyond float64)
      const size_t b = rings.at(static_cast<size_t>(s));
      size_t m = 0;
      for (size_t j = 0; j < n; ++j)
      {
        const size_t idx = (start + j) % n;
        if (m > 0 && same(rawVert[idx], rings.vert[b + m - 1]))
        {
          rings.normal[b + m - 1] = rawNormal[idx];
          rings.neighbor[b + m - 1] = rawNeighbor[idx];
          continue;
        }
        rings.vert[b + m] = rawVert[idx];
        rings.normal[b + m] = rawNormal[idx];
        rings.neighbor[b + m] = rawNeighbor[idx];
        ++m;
      }
      if (m < 2 || (m == 2 && dot(rings.vert[b], rings.vert[b + 1]) > -0.5))
        continue;
      rings.count[static_cast<size_t>(s)] = static_cast<int32_t>(m);
      rings.finish(static_cast<size_t>(s));
      areas[static_cast<size_t>(s)] = ringArea(g.p(s), rings[static_cast<size_t>(s)]);
    }
  }, &control);
}

}  // namespace gpugeo::sphere::detail
