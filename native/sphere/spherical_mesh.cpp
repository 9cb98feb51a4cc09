// The spherical Delaunay mesh: see detail/spherical_mesh.h and spherical_voronoi.h (step 4).
#include "sphere/detail/spherical_mesh.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "sphere/detail/sphere_hull.h"

namespace gpugeo::sphere::detail {
namespace {

// An edge is flipped when the opposite point lies inside a triangle's circumscribed cap by more than
// this, relative to the in-circle determinant's terms (Geometry::inCap; its rounding error is ~1e-15).
constexpr double kFlipRel = 1e-12;

// xyz replaced by the unit vectors of the sites under the map x -> S(x): stereographic projection
// from -p0 (p0 = site c) onto the plane tangent at p0 (coordinates from the accurate differences),
// scaled so that the `spread` sites nearest c land within radius 1, and projected back. Sites at
// -p0 stay there.
void magnify(const Geometry& g, int32_t c, int64_t spread, std::vector<double>& xyz)
{
  const int32_t k = g.count();
  const V3 p0 = g.p(c);
  const V3 e1 = perpendicular(p0);
  const V3 e2 = cross(p0, e1);
  std::vector<XY> plane(static_cast<size_t>(k));
  std::vector<char> antipode(static_cast<size_t>(k), 0);
  std::vector<double> radii;
  radii.reserve(static_cast<size_t>(k));
  for (int32_t i = 0; i < k; ++i)
  {
    const V3 d = g.diff(i, c);
    const double denominator = 2.0 + dot(d, p0);  // 1 + p_i . p0
    if (!(denominator > 1e-300))
    {
      antipode[static_cast<size_t>(i)] = 1;
      continue;
    }
    const XY q{2.0 * dot(d, e1) / denominator, 2.0 * dot(d, e2) / denominator};
    plane[static_cast<size_t>(i)] = q;
    radii.push_back(std::hypot(q.x, q.y));
  }
  const size_t nth = std::min(radii.size(), static_cast<size_t>(std::max<int64_t>(spread, 1))) - 1;
  std::nth_element(radii.begin(), radii.begin() + static_cast<std::ptrdiff_t>(nth), radii.end());
  const double radius = radii.empty() ? 0.0 : radii[nth];
  const double scale = radius > 0 ? 1.0 / radius : 1.0;
  for (int32_t i = 0; i < k; ++i)
  {
    V3 p = -1.0 * p0;
    if (!antipode[static_cast<size_t>(i)])
    {
      const double x = scale * plane[static_cast<size_t>(i)].x, y = scale * plane[static_cast<size_t>(i)].y;
      const double r2 = x * x + y * y;
      p = normalized((4.0 - r2) / (4.0 + r2) * p0 + (4.0 / (4.0 + r2)) * (x * e1 + y * e2));
    }
    xyz[3 * static_cast<size_t>(i)] = p.x;
    xyz[3 * static_cast<size_t>(i) + 1] = p.y;
    xyz[3 * static_cast<size_t>(i) + 2] = p.z;
  }
}

// The convex hull of the sites (detail/sphere_hull.h), triangulated and oriented counter-clockwise
// from outside. hint[i]: for a site the hull left out (on the ray of another), a triangle near it
// (else -1).
HullResult hullMesh(const Geometry& g, const FlatArray<V3>& d0, Mesh& mesh, std::vector<int32_t>& hint,
                    const RunControl& control)
{
  const int32_t k = g.count();
  std::vector<double> xyz(3 * static_cast<size_t>(k));
  // Relative to site 0 (differences to full relative precision, step 1).
  for (int32_t i = 0; i < k; ++i)
  {
    const V3 d = d0[static_cast<size_t>(i)];
    xyz[3 * static_cast<size_t>(i)] = d.x;
    xyz[3 * static_cast<size_t>(i) + 1] = d.y;
    xyz[3 * static_cast<size_t>(i) + 2] = d.z;
  }
  if (control.isCanceled())
    throw Canceled();
  const V3 p0 = g.p(0);
  const double centre[3] = {-p0.x, -p0.y, -p0.z};
  detail::SphereHull hull = detail::sphereHull(xyz.data(), k, centre);
  // CGAL keeps no two points closer than 2^-23 rad (its double-precision bound; the repair below
  // inserts the sites it leaves out, one by one). When nearly all sites lie closer than that (a
  // cluster a metre across), or many do, the sites are magnified about one of them by a conformal
  // map, which keeps circles circles and so the Delaunay triangulation: the stereographic projection
  // from its antipode, scaled so that as many sites as were left out land within radius 1, and back
  // (the far sites then crowd near the antipode, and are the ones left out).
  const auto leftOut = [](const detail::SphereHull& h) {
    return std::count_if(h.hint.begin(), h.hint.end(), [](int32_t t) { return t >= 0; });
  };
  const int64_t many = std::max<int64_t>(1000, k / 100);
  if (hull.flat || leftOut(hull) > many)
  {
    const int32_t c = hull.flat ? 0
                                : int32_t(std::find_if(hull.hint.begin(), hull.hint.end(), [](int32_t t) { return t >= 0; }) -
                                          hull.hint.begin());
    magnify(g, c, hull.flat ? k : leftOut(hull) + 1, xyz);
    const double origin[3] = {0, 0, 0};
    detail::SphereHull magnified = detail::sphereHull(xyz.data(), k, origin);
    if (hull.flat || (!magnified.flat && leftOut(magnified) < leftOut(hull)))
      hull = std::move(magnified);
    if (hull.flat)
      return HullResult::Flat;
  }
  mesh.tri.assign(hull.tri.begin(), hull.tri.end());
  mesh.nbr.assign(hull.nbr.begin(), hull.nbr.end());
  hint = std::move(hull.hint);
  return HullResult::Ok;
}

class MeshRepair
{
public:
  MeshRepair(const Geometry& g, Mesh& mesh, const RunControl& control) : g_(g), mesh_(mesh), control_(control)
  {
    mesh_.vertexTri.assign(static_cast<size_t>(g_.count()), -1);
    for (size_t t = 0; t < mesh_.tri.size(); ++t)
      for (int32_t v : mesh_.tri[t])
        mesh_.vertexTri[static_cast<size_t>(v)] = static_cast<int32_t>(t);
  }

  // Whether any edge of the mesh is reflex (flipAll would flip it), the edges checked on all cores.
  // Mostly none is: the hull's own predicates are exact.
  bool anyToFlip(int threads) const
  {
    std::atomic<bool> any{false};
    parallelFor(static_cast<int64_t>(mesh_.tri.size()), 4096, threads, [&](int64_t begin, int64_t end) {
      for (int32_t t = int32_t(begin); t < int32_t(end) && !any.load(std::memory_order_relaxed); ++t)
        for (int i = 0; i < 3; ++i)
        {
          const int32_t c = vtx(t, i), a = vtx(t, i + 1), b = vtx(t, i + 2);
          const int32_t u = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>(i)];
          const int j = mesh_.slotOfNeighbor(u, t);
          if (j < 0)
            continue;
          const int32_t d = vtx(u, j);
          if (vtx(u, j + 1) == b && vtx(u, j + 2) == a && c != d && g_.holds(c, a, b, d, kFlipRel))
            any = true;
        }
    }, &control_);
    return any;
  }

  // Flips every reflex edge until none is left (each flip adds a tetrahedron to the hull's volume, so
  // this ends; a cap guards against a predicate that contradicts itself).
  void flipAll()
  {
    for (int32_t t = 0; t < static_cast<int32_t>(mesh_.tri.size()); ++t)
      for (int i = 0; i < 3; ++i)
        stack_.push_back({t, i});
    legalize();
  }

  // Inserts a site that is no vertex yet (Bowyer-Watson): the triangles whose circumscribed caps hold
  // it (by more than kFlipRel: ties stay out) are the hull facets it sees; together with the triangle
  // it lies in they are replaced by the fan from it to their boundary. If rounding makes that region
  // other than a disk whose vertices all lie on its boundary, the site goes into the one triangle it
  // lies in, and flips restore the Delaunay property.
  void insert(int32_t q, int32_t hintTri)
  {
    const int32_t t = locate(q, hintTri);
    if (!fillCavity(t, q))
      split(t, q);
    legalize();
  }

private:
  struct EdgeRef
  {
    int32_t t;
    int i;
  };

  const Geometry& g_;
  Mesh& mesh_;
  const RunControl& control_;
  std::vector<EdgeRef> stack_;
  int64_t work_ = 0;
  std::vector<uint32_t> mark_;  // mark_[t] == stamp_: t is in the current cavity
  uint32_t stamp_ = 0;

  struct BoundaryEdge
  {
    int32_t a, b;     // the cavity triangle's edge a -> b
    int32_t outside;  // the triangle across it
  };

  bool fillCavity(int32_t t0, int32_t q)
  {
    mark_.resize(mesh_.tri.size(), 0);
    if (++stamp_ == 0)
    {
      std::fill(mark_.begin(), mark_.end(), 0u);
      stamp_ = 1;
    }
    std::vector<int32_t> cavity{t0};
    mark_[static_cast<size_t>(t0)] = stamp_;
    for (size_t k = 0; k < cavity.size(); ++k)
      for (int i = 0; i < 3; ++i)
      {
        const int32_t u = mesh_.nbr[static_cast<size_t>(cavity[k])][static_cast<size_t>(i)];
        if (mark_[static_cast<size_t>(u)] != stamp_ && g_.holds(vtx(u, 0), vtx(u, 1), vtx(u, 2), q, kFlipRel))
        {
          mark_[static_cast<size_t>(u)] = stamp_;
          cavity.push_back(u);
        }
      }
    std::vector<BoundaryEdge> boundary;
    for (const int32_t t : cavity)
      for (int i = 0; i < 3; ++i)
      {
        const int32_t u = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>(i)];
        if (mark_[static_cast<size_t>(u)] != stamp_)
          boundary.push_back({vtx(t, i + 1), vtx(t, i + 2), u});
      }
    // A disk: the boundary is one cycle through every vertex of the cavity once.
    if (boundary.size() != cavity.size() + 2)
      return false;
    std::vector<std::pair<int32_t, size_t>> from;  // a -> boundary index
    for (size_t k = 0; k < boundary.size(); ++k)
      from.push_back({boundary[k].a, k});
    std::sort(from.begin(), from.end());
    for (size_t k = 1; k < from.size(); ++k)
      if (from[k].first == from[k - 1].first)
        return false;
    auto next = [&](int32_t b) {
      const auto it = std::lower_bound(from.begin(), from.end(), std::make_pair(b, size_t(0)));
      return it != from.end() && it->first == b ? static_cast<int64_t>(it->second) : int64_t(-1);
    };
    size_t steps = 0;
    for (int64_t k = 0; steps < boundary.size(); ++steps)
    {
      k = next(boundary[static_cast<size_t>(k)].b);
      if (k < 0)
        return false;
      if (k == 0)
        break;
    }
    if (steps + 1 != boundary.size())
      return false;
    for (const int32_t t : cavity)
      for (int i = 0; i < 3; ++i)
        if (next(vtx(t, i)) < 0)
          return false;  // a vertex inside the cavity would lose all its triangles

    // The fan: boundary edge k becomes triangle (a, b, q) in slot k.
    std::vector<int32_t> slot(cavity);
    slot.push_back(static_cast<int32_t>(mesh_.tri.size()));
    slot.push_back(static_cast<int32_t>(mesh_.tri.size()) + 1);
    mesh_.tri.resize(mesh_.tri.size() + 2);
    mesh_.nbr.resize(mesh_.nbr.size() + 2);
    mark_.resize(mesh_.tri.size(), 0);
    std::vector<size_t> endingAt(boundary.size());  // the boundary edge that ends at boundary[k].a
    for (size_t k = 0; k < boundary.size(); ++k)
      endingAt[static_cast<size_t>(next(boundary[k].b))] = k;
    for (size_t k = 0; k < boundary.size(); ++k)
    {
      const BoundaryEdge& e = boundary[k];
      const int32_t t = slot[k];
      mesh_.tri[static_cast<size_t>(t)] = {e.a, e.b, q};
      mesh_.nbr[static_cast<size_t>(t)] = {slot[static_cast<size_t>(next(e.b))], slot[endingAt[k]], e.outside};
      const int j = edgeSlot(e.outside, e.b, e.a);
      mesh_.nbr[static_cast<size_t>(e.outside)][static_cast<size_t>(j)] = t;
      mesh_.vertexTri[static_cast<size_t>(e.a)] = t;
      stack_.push_back({t, 2});
    }
    mesh_.vertexTri[static_cast<size_t>(q)] = slot[0];
    return true;
  }

  // The slot of triangle t opposite its edge from a to b.
  int edgeSlot(int32_t t, int32_t a, int32_t b) const
  {
    for (int i = 0; i < 3; ++i)
      if (vtx(t, i + 1) == a && vtx(t, i + 2) == b)
        return i;
    throw Error("spherical Voronoi: internal error: broken triangle neighbours");
  }

  int32_t vtx(int32_t t, int i) const { return mesh_.tri[static_cast<size_t>(t)][static_cast<size_t>(((i % 3) + 3) % 3)]; }

  // How far inside triangle t q projects along the triangle's normal: the smallest of the sines of
  // its angles inside the three edges (negative outside), and which edge that is.
  double inside(int32_t t, int32_t q, int& worst) const
  {
    const V3 n = g_.normal(vtx(t, 0), vtx(t, 1), vtx(t, 2));
    double in = std::numeric_limits<double>::infinity();
    worst = 0;
    for (int i = 0; i < 3; ++i)
    {
      const int32_t from = vtx(t, i + 1);
      const int32_t to = vtx(t, i + 2);
      const double side = dot(cross(g_.dir(to, from), g_.dir(q, from)), n);
      if (side < in)
      {
        in = side;
        worst = i;
      }
    }
    return in;
  }

  double capOf(int32_t t, int32_t q) const { return g_.inCap(vtx(t, 0), vtx(t, 1), vtx(t, 2), q); }

  // The triangle to start q's cavity from: one that q projects into (along its normal) and whose
  // circumscribed cap holds q or passes through it (a tie: q co-circular with its vertices), found by
  // a visibility walk from the hint, else by a search of all triangles for the one whose cap holds q
  // most among those q projects into. Off the end of a thin hull q may project into no facet it
  // sees: then the triangle whose cap holds q most; if none does (q within rounding of the hull),
  // the one q projects into most deeply.
  int32_t locate(int32_t q, int32_t start)
  {
    const int32_t nt = static_cast<int32_t>(mesh_.tri.size());
    int32_t t = start >= 0 && start < nt ? start : 0;
    const int32_t maxSteps = std::min<int32_t>(nt, 100000) + 10;
    for (int32_t step = 0; step < maxSteps; ++step)
    {
      int worst;
      if (inside(t, q, worst) >= 0)
      {
        if (capOf(t, q) >= -kFlipRel)
          return t;
        break;
      }
      t = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>(worst)];
    }
    int32_t within = -1, best = 0, deepest = 0;
    double withinCap = -kFlipRel, bestCap = -std::numeric_limits<double>::infinity();
    double bestInside = -std::numeric_limits<double>::infinity();
    for (int32_t u = 0; u < nt; ++u)
    {
      pollCancel(control_, u);
      const double cap = capOf(u, q);
      int worst;
      const double in = inside(u, q, worst);
      if (in >= -1e-15 && cap >= withinCap)
      {
        withinCap = cap;
        within = u;
      }
      if (cap > bestCap)
      {
        bestCap = cap;
        best = u;
      }
      if (in > bestInside)
      {
        bestInside = in;
        deepest = u;
      }
    }
    return within >= 0 ? within : bestCap > 0 ? best : deepest;
  }

  void setNeighborLink(int32_t t, int32_t oldNbr, int32_t newNbr)
  {
    if (t < 0)
      return;
    const int s = mesh_.slotOfNeighbor(t, oldNbr);
    if (s >= 0)
      mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>(s)] = newNbr;
  }

  // (a, b, c) -> (a, b, q), (b, c, q), (c, a, q); pushes the three outer edges.
  void split(int32_t t, int32_t q)
  {
    const auto v = mesh_.tri[static_cast<size_t>(t)];
    const auto nb = mesh_.nbr[static_cast<size_t>(t)];
    const int32_t a = v[0], b = v[1], c = v[2];
    const int32_t na = nb[0], nbB = nb[1], nc = nb[2];
    const int32_t t1 = static_cast<int32_t>(mesh_.tri.size());
    const int32_t t2 = t1 + 1;
    mesh_.tri[static_cast<size_t>(t)] = {a, b, q};
    mesh_.nbr[static_cast<size_t>(t)] = {t1, t2, nc};
    mesh_.tri.push_back({b, c, q});
    mesh_.nbr.push_back({t2, t, na});
    mesh_.tri.push_back({c, a, q});
    mesh_.nbr.push_back({t, t1, nbB});
    setNeighborLink(na, t, t1);
    setNeighborLink(nbB, t, t2);
    mesh_.vertexTri[static_cast<size_t>(q)] = t;
    mesh_.vertexTri[static_cast<size_t>(a)] = t;
    mesh_.vertexTri[static_cast<size_t>(b)] = t;
    mesh_.vertexTri[static_cast<size_t>(c)] = t1;
    stack_.push_back({t, 2});
    stack_.push_back({t1, 2});
    stack_.push_back({t2, 2});
  }

  // Whether sites c and d are already joined by an edge (then a flip would duplicate it).
  bool joined(int32_t c, int32_t d) const
  {
    const int32_t t0 = mesh_.vertexTri[static_cast<size_t>(c)];
    int32_t t = t0;
    for (size_t guard = 0; guard <= mesh_.tri.size(); ++guard)
    {
      const int i = mesh_.slot(t, c);
      if (vtx(t, i + 1) == d || vtx(t, i + 2) == d)
        return true;
      t = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>((i + 1) % 3)];
      if (t == t0)
        return false;
    }
    return false;
  }

  void legalize()
  {
    const int64_t cap = 64 * static_cast<int64_t>(mesh_.tri.size()) + 1000;
    int64_t flips = 0;
    while (!stack_.empty())
    {
      const EdgeRef e = stack_.back();
      stack_.pop_back();
      pollCancel(control_, ++work_);
      // Triangle t = (c, a, b) with c opposite the edge (a, b); neighbour u = (d, b, a).
      const int32_t t = e.t;
      const int32_t c = vtx(t, e.i), a = vtx(t, e.i + 1), b = vtx(t, e.i + 2);
      const int32_t u = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>(e.i)];
      const int j = mesh_.slotOfNeighbor(u, t);
      if (j < 0)
        continue;
      const int32_t d = vtx(u, j);
      if (vtx(u, j + 1) != b || vtx(u, j + 2) != a || c == d)
        continue;
      if (!g_.holds(c, a, b, d, kFlipRel) || flips >= cap || joined(c, d))
        continue;
      ++flips;
      const int32_t tBC = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>((e.i + 1) % 3)];  // across (b, c)
      const int32_t tCA = mesh_.nbr[static_cast<size_t>(t)][static_cast<size_t>((e.i + 2) % 3)];  // across (c, a)
      const int32_t uAD = mesh_.nbr[static_cast<size_t>(u)][static_cast<size_t>((j + 1) % 3)];    // across (a, d)
      const int32_t uDB = mesh_.nbr[static_cast<size_t>(u)][static_cast<size_t>((j + 2) % 3)];    // across (d, b)
      // t becomes (c, a, d), u becomes (d, b, c).
      mesh_.tri[static_cast<size_t>(t)] = {c, a, d};
      mesh_.nbr[static_cast<size_t>(t)] = {uAD, u, tCA};
      mesh_.tri[static_cast<size_t>(u)] = {d, b, c};
      mesh_.nbr[static_cast<size_t>(u)] = {tBC, t, uDB};
      setNeighborLink(tBC, t, u);
      setNeighborLink(uAD, u, t);
      mesh_.vertexTri[static_cast<size_t>(a)] = t;
      mesh_.vertexTri[static_cast<size_t>(b)] = u;
      mesh_.vertexTri[static_cast<size_t>(c)] = t;
      mesh_.vertexTri[static_cast<size_t>(d)] = t;
      stack_.push_back({t, 0});
      stack_.push_back({t, 2});
      stack_.push_back({u, 0});
      stack_.push_back({u, 2});
    }
  }
};

// The triangles in canonical order: each rotated to start at its lowest site, then sorted by their
// sites (owner by owner: a counting sort by the lowest site, then each owner's few sorted); the
// neighbour links follow. The order depends on the triangles alone, not on how they were found.
void canonicalize(Mesh& mesh, int threads, const RunControl& control)
{
  const size_t nt = mesh.tri.size();
  int32_t sites = 0;
  for (size_t t = 0; t < nt; ++t)
  {
    auto& x = mesh.tri[t];
    auto& y = mesh.nbr[t];
    const int r = x[0] < x[1] ? (x[0] < x[2] ? 0 : 2) : (x[1] < x[2] ? 1 : 2);
    x = {x[static_cast<size_t>(r)], x[static_cast<size_t>((r + 1) % 3)], x[static_cast<size_t>((r + 2) % 3)]};
    y = {y[static_cast<size_t>(r)], y[static_cast<size_t>((r + 1) % 3)], y[static_cast<size_t>((r + 2) % 3)]};
    sites = std::max(sites, x[2] + 1);
    sites = std::max(sites, x[1] + 1);
  }
  std::vector<size_t> first(static_cast<size_t>(sites) + 1, 0);
  for (size_t t = 0; t < nt; ++t)
    ++first[static_cast<size_t>(mesh.tri[t][0]) + 1];
  for (size_t i = 1; i < first.size(); ++i)
    first[i] += first[i - 1];
  std::vector<int32_t> order(nt);
  {
    std::vector<size_t> next(first.begin(), first.end() - 1);
    for (size_t t = 0; t < nt; ++t)
      order[next[static_cast<size_t>(mesh.tri[t][0])]++] = static_cast<int32_t>(t);
  }
  parallelFor(sites, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      std::sort(order.begin() + static_cast<std::ptrdiff_t>(first[size_t(o)]),
                order.begin() + static_cast<std::ptrdiff_t>(first[size_t(o) + 1]), [&](int32_t x, int32_t y) {
                  return mesh.tri[size_t(x)] < mesh.tri[size_t(y)];
                });
  }, &control);
  std::vector<int32_t> where(nt);
  for (size_t t = 0; t < nt; ++t)
    where[static_cast<size_t>(order[t])] = static_cast<int32_t>(t);
  FlatArray<std::array<int32_t, 3>> tri(nt), nbr(nt);
  parallelFor(int64_t(nt), 65536, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
    {
      const size_t old = static_cast<size_t>(order[t]);
      tri[t] = mesh.tri[old];
      for (size_t j = 0; j < 3; ++j)
        nbr[t][j] = where[static_cast<size_t>(mesh.nbr[old][j])];
    }
  }, &control);
  mesh.tri = std::move(tri);
  mesh.nbr = std::move(nbr);
}

// Each site's triangle to start its ring from: its lowest-indexed one (the triangles on all cores,
// each site's lowest kept by an atomic compare-and-swap: GCC's builtins, as C++17 has no atomic_ref).
void setVertexTriangles(Mesh& mesh, int32_t sites, int threads, const RunControl& control)
{
  mesh.vertexTri.assign(static_cast<size_t>(sites), std::numeric_limits<int32_t>::max());
  parallelFor(static_cast<int64_t>(mesh.tri.size()), 65536, threads, [&](int64_t begin, int64_t end) {
    for (int32_t t = int32_t(begin); t < int32_t(end); ++t)
      for (const int32_t v : mesh.tri[size_t(t)])
      {
        int32_t* lowest = &mesh.vertexTri[static_cast<size_t>(v)];
        int32_t seen = __atomic_load_n(lowest, __ATOMIC_RELAXED);
        while (t < seen && !__atomic_compare_exchange_n(lowest, &seen, t, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        {
        }
      }
  }, &control);
  for (int32_t& t : mesh.vertexTri)
    if (t == std::numeric_limits<int32_t>::max())
      t = -1;
}

// The mesh from the GPU's cells: site i's triangles (i, n_k, n_k+1) for consecutive neighbours,
// each kept by its lowest site, in canonical order. False (with the reason) unless the cycles make a
// closed triangulation, each triangle in all three of its sites' cycles, 2 n - 4 of them, every one
// facing out.
bool meshFromCells(const Geometry& g, const SphereCells& cells, Mesh& mesh, int threads, const RunControl& control,
                   std::string& why)
{
  const int32_t k = g.count();
  const auto cycle = [&](int32_t s) {
    return std::make_pair(cells.neighbor.data() + cells.start[size_t(s)],
                          cells.neighbor.data() + cells.start[size_t(s) + 1]);
  };
  // The site after u in w's cycle, or -1.
  const auto after = [&](int32_t w, int32_t u) {
    const auto [b, e] = cycle(w);
    for (const int32_t* x = b; x != e; ++x)
      if (*x == u)
        return x + 1 == e ? *b : x[1];
    return int32_t(-1);
  };
  if (cells.start.size() != size_t(k) + 1 || cells.start.back() != 6 * (int64_t(k) - 2))
  {
    why = "the cells' edges do not add up to a closed triangulation";
    return false;
  }
  std::vector<int64_t> owned(size_t(k) + 1, 0);
  std::atomic<bool> bad{false};
  parallelFor(k, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int32_t i = int32_t(begin); i < int32_t(end); ++i)
    {
      const auto [b, e] = cycle(i);
      const int64_t m = e - b;
      if (m < 3 || std::find(b, e, i) != e)
        bad = true;
      for (int64_t q = 0; q < m; ++q)
      {
        owned[size_t(i) + 1] += i < b[q] && i < b[(q + 1) % m];
        if (std::find(b + q + 1, e, b[q]) != e)
          bad = true;  // a neighbour twice
      }
    }
  }, &control);
  for (size_t i = 1; i < owned.size(); ++i)
    owned[i] += owned[i - 1];
  if (bad || owned.back() != 2 * (int64_t(k) - 2))
  {
    why = "the cells' triangles do not add up to a closed triangulation";
    return false;
  }
  mesh.tri.resize(size_t(owned.back()));  // every one written below
  mesh.nbr.resize(size_t(owned.back()));
  parallelFor(k, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int32_t i = int32_t(begin); i < int32_t(end); ++i)
    {
      const auto [b, e] = cycle(i);
      const int64_t m = e - b;
      int64_t at = owned[size_t(i)];
      for (int64_t q = 0; q < m; ++q)
      {
        const int32_t j = b[q], l = b[(q + 1) % m];
        if (i < j && i < l)
          mesh.tri[size_t(at++)] = {i, j, l};
        // In all three cycles, and facing out (seen from outside, counter-clockwise).
        if (i < j && i < l && (after(j, l) != i || after(l, i) != j ||
                               !(dot(cross(g.p(j) - g.p(i), g.p(l) - g.p(i)), g.p(i)) > 0)))
          bad = true;
      }
      std::sort(mesh.tri.begin() + static_cast<std::ptrdiff_t>(owned[size_t(i)]),
                mesh.tri.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }, &control);
  if (bad)
  {
    why = "the cells disagree about a triangle";
    return false;
  }
  // The triangle across edge u -> w of a triangle: (w, u, the site after u in w's cycle).
  const auto find = [&](int32_t a, int32_t b, int32_t c) {
    const int32_t o = std::min({a, b, c});
    const std::array<int32_t, 3> key = o == a ? std::array<int32_t, 3>{a, b, c}
                                       : o == b ? std::array<int32_t, 3>{b, c, a}
                                                : std::array<int32_t, 3>{c, a, b};
    const auto from = mesh.tri.begin() + static_cast<std::ptrdiff_t>(owned[size_t(o)]);
    const auto to = mesh.tri.begin() + static_cast<std::ptrdiff_t>(owned[size_t(o) + 1]);
    const auto it = std::lower_bound(from, to, key);
    return it != to && *it == key ? int32_t(it - mesh.tri.begin()) : int32_t(-1);
  };
  parallelFor(int64_t(mesh.tri.size()), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
      for (size_t i = 0; i < 3; ++i)
      {
        const int32_t u = mesh.tri[t][(i + 1) % 3], w = mesh.tri[t][(i + 2) % 3];
        const int32_t across = find(w, u, after(w, u));
        if (across < 0)
          bad = true;
        mesh.nbr[t][i] = across;
      }
  }, &control);
  if (bad)
  {
    why = "the cells' triangles do not join up";
    return false;
  }
  return true;
}

// Whether every edge of the mesh is clearly Delaunay both ways (Geometry::clearlyOutside): then the
// mesh is the one Delaunay triangulation of the sites.
bool clearlyDelaunay(const Geometry& g, const Mesh& mesh, int threads, const RunControl& control)
{
  std::atomic<bool> bad{false};
  parallelFor(int64_t(mesh.tri.size()), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end) && !bad.load(std::memory_order_relaxed); ++t)
      for (size_t i = 0; i < 3; ++i)
      {
        const size_t u = static_cast<size_t>(mesh.nbr[t][i]);
        if (u < t)
          continue;
        const int32_t c = mesh.tri[t][i], a = mesh.tri[t][(i + 1) % 3], b = mesh.tri[t][(i + 2) % 3];
        size_t j = 0;
        while (j < 3 && static_cast<size_t>(mesh.nbr[u][j]) != t)
          ++j;
        if (j == 3 || !g.clearlyOutside(c, a, b, mesh.tri[u][j]) || !g.clearlyOutside(mesh.tri[u][j], b, a, c))
          bad = true;
      }
  }, &control);
  return !bad;
}

}  // namespace

HullResult delaunay(const Geometry& g, const FlatArray<V3>& d0, const SphereCells* cells, Mesh& mesh, int threads,
                    const RunControl& control, std::string* cellsRefused)
{
  if (cells && cells->complete)
  {
    std::string why;
    if (meshFromCells(g, *cells, mesh, threads, control, why))
    {
      if (clearlyDelaunay(g, mesh, threads, control))
      {
        setVertexTriangles(mesh, g.count(), threads, control);
        return HullResult::Ok;
      }
      why = "an edge of the cells' mesh is too close to a tie to be sure of";
    }
    if (cellsRefused)
      *cellsRefused = why;
    mesh = {};
  }
  else if (cells && cellsRefused)
    *cellsRefused = cells->failure;
  std::vector<int32_t> hint;
  if (hullMesh(g, d0, mesh, hint, control) == HullResult::Flat)
    return HullResult::Flat;
  if (control.isCanceled())
    throw Canceled();
  MeshRepair repair(g, mesh, control);
  if (repair.anyToFlip(threads))
    repair.flipAll();
  bool inserted = false;
  for (int32_t i = 0; i < g.count(); ++i)
    if (mesh.vertexTri[static_cast<size_t>(i)] < 0 && (inserted = true))
      repair.insert(i, hint[static_cast<size_t>(i)]);
  if (inserted)
    repair.flipAll();  // insertion legalizes around each new site; this catches what a thin hull left
  if (mesh.tri.size() != 2 * static_cast<size_t>(g.count()) - 4)
    throw Error("spherical Voronoi: internal error: the Delaunay mesh does not cover every site");
  canonicalize(mesh, threads, control);
  setVertexTriangles(mesh, g.count(), threads, control);
  return HullResult::Ok;
}

}  // namespace gpugeo::sphere::detail
