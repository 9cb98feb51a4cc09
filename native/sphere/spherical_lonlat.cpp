// The lon/lat polygons of the regions: see detail/spherical_lonlat.h and spherical_voronoi.h (step 6).
#include "sphere/detail/spherical_lonlat.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"

namespace gpugeo::sphere::detail {
namespace {

// A ring point whose distance from the polar axis is at most this is the pole itself.
constexpr double kPoleSnap = 1e-12;


struct RingPoint
{
  V3 p;
  V3 m;  // unit normal of the great circle of the piece from this point to the next
};

double horizontal(V3 p) { return std::sqrt(p.x * p.x + p.y * p.y); }

bool isPolePoint(V3 p) { return horizontal(p) <= kPoleSnap; }

// How far the straight lon/lat segment from pa to pb passes from the arc's point pc between them, at
// its middle: the lon/lat difference converted to radians on the ground.
double chordDeviation(V3 pa, V3 pb, V3 pc)
{
  const double la = std::atan2(pa.y, pa.x);
  auto unwrap = [la](double l) { return l - la > kPi ? l - kTwoPi : l - la < -kPi ? l + kTwoPi : l; };
  const double lb = unwrap(std::atan2(pb.y, pb.x));
  const double lc = unwrap(std::atan2(pc.y, pc.x));
  const double fa = std::atan2(pa.z, horizontal(pa));
  const double fb = std::atan2(pb.z, horizontal(pb));
  const double fc = std::atan2(pc.z, horizontal(pc));
  const double dx = (lc - 0.5 * (la + lb)) * std::cos(fc);
  const double dy = fc - 0.5 * (fa + fb);
  return std::sqrt(dx * dx + dy * dy);
}

// How one Voronoi edge is cut beyond its uniform and graded pieces. All of it depends on the edge
// alone (its two sites, its ends, and the other edges of the two regions it separates), and it is
// always computed in the direction that has the lower-indexed site on its left: so the two regions
// sharing an edge get bitwise the same points, and the polygons form a clean coverage.
struct EdgeRefinement
{
  Arc arc;
  double tanStep2 = 0;     // tan^2 of the most longitude a piece may span
  double floor = 0;        // pieces shorter than this are not cut
  int64_t budget = 0;      // the most points refinement may add to this edge
  double foot = 0;         // arc parameter of the bisector's point nearest to the two sites
  double halfSpacing = 0;  // their distance from it there (chord)
  std::vector<V3> others;  // unit normals of the other edges' great circles of both regions
  std::vector<std::pair<double, V3>> breaks;  // densifyEdge's scratch
};

// How far the lon/lat chord of the piece [a, b] (middle p) may stray from its arc: a fifth of the
// smaller of the regions' width there (the distance to the other edges' great circles, so that a
// ring cannot cross itself near a vertex with a small angle, along a thin region, or where lon/lat
// curvature is large near a pole) and the distance from the two sites (so that they stay inside
// their polygons; at least their distance from the piece along the bisector).
double chordTolerance(const EdgeRefinement& e, double a, double b, V3 p)
{
  double w = 1.0;
  for (const V3& n : e.others)
    w = std::min(w, std::fabs(dot(p, n)));
  double alongToFoot = kPi;
  for (const double f : {e.foot, e.foot - kTwoPi})
    alongToFoot = std::min(alongToFoot, std::max({0.0, a - f, f - b}));
  return 0.2 * std::min(w, std::max(e.halfSpacing, alongToFoot));
}

// Appends the points strictly inside [a, b] of the arc, cutting while a piece spans more than the
// step in longitude or its lon/lat chord strays from the arc by more than chordTolerance. The
// deviation is at most L^2 / (4 cos^2 lat) for a piece of length L (a checked bound, about 3.5 times
// the worst case), which settles most pieces without trigonometry.
void refinePiece(EdgeRefinement& e, double a, V3 pa, double b, V3 pb, std::vector<V3>& out, int depth)
{
  if (depth > 60 || b - a <= e.floor || e.budget <= 0 || isPolePoint(pa) || isPolePoint(pb))
    return;
  const double c = 0.5 * (a + b);
  const V3 pc = e.arc.at(c);
  const double dotH = pa.x * pb.x + pa.y * pb.y;
  const double crossH = pa.x * pb.y - pa.y * pb.x;
  bool fine = dotH > 0 && crossH * crossH <= e.tanStep2 * dotH * dotH;
  if (fine)
  {
    const double tol = chordTolerance(e, a, b, pc);
    const double cosLat = std::min({horizontal(pa), horizontal(pb), horizontal(pc)});
    const double l = b - a;
    fine = l * l <= 4.0 * tol * cosLat * cosLat || chordDeviation(pa, pb, pc) <= tol;
  }
  if (fine)
    return;
  --e.budget;
  refinePiece(e, a, pa, c, pc, out, depth + 1);
  out.push_back(pc);
  refinePiece(e, c, pc, b, pb, out, depth + 1);
}

// The interior points of an edge from u to v: pieces of at most stepRad, graded towards both ends
// (next to a vertex they halve down to about the sites' half spacing, where a region has its small
// features), then refinePiece. An edge whose great circle passes through a pole (within kPoleSnap)
// gets the pole itself as a point: both regions then meet the pole on their boundary, and in lon/lat
// both run along lat +-90 there, leaving no sliver under the pole uncovered.
void densifyEdge(EdgeRefinement& e, V3 u, V3 v, double stepRad, std::vector<V3>& out)
{
  if (e.arc.sweep <= 0)
    return;
  const double sweep = e.arc.sweep;
  const double finest = std::max(e.halfSpacing, 1e-12);
  const int pieces = std::max(1, static_cast<int>(std::ceil(sweep / stepRad)));
  const double first = sweep / pieces;
  std::vector<std::pair<double, V3>>& breaks = e.breaks;  // (arc parameter, point), the end last
  breaks.clear();
  for (double h = 0.5 * first; h > finest; h *= 0.5)
    breaks.push_back({h, e.arc.at(h)});
  std::reverse(breaks.begin(), breaks.end());
  for (int j = 1; j < pieces; ++j)
    breaks.push_back({sweep * j / pieces, e.arc.at(sweep * j / pieces)});
  for (double h = 0.5 * first; h > finest; h *= 0.5)
    if (breaks.empty() || sweep - h > breaks.back().first)  // one piece: both gradings meet at its middle
      breaks.push_back({sweep - h, e.arc.at(sweep - h)});
  const V3 n = normalized(cross(e.arc.u, e.arc.w));
  if (std::fabs(n.z) <= kPoleSnap)
    for (const double pole : {1.0, -1.0})
    {
      double phi = std::atan2(pole * e.arc.w.z, pole * e.arc.u.z);  // where the circle is nearest the pole
      if (phi < 0)
        phi += kTwoPi;
      if (phi > 0 && phi < sweep)
        breaks.push_back({phi, V3{0.0, 0.0, pole}});
    }
  std::stable_sort(breaks.begin(), breaks.end(),
                   [](const std::pair<double, V3>& x, const std::pair<double, V3>& y) { return x.first < y.first; });
  breaks.push_back({sweep, v});
  double a = 0;
  V3 pa = u;
  for (size_t j = 0; j < breaks.size(); ++j)
  {
    const auto& [b, pb] = breaks[j];
    refinePiece(e, a, pa, b, pb, out, 0);
    if (j + 1 < breaks.size())
      out.push_back(pb);
    a = b;
    pa = pb;
  }
}

constexpr size_t kNoEdge = static_cast<size_t>(-1);

// Where edge j of site s's ring is computed once: its index in the lower site's ring, where that
// ring holds the edge exactly once (else kNoEdge: the edge is computed by each side, as for two
// hemispheres).
size_t lowerEdge(const SphereRings& rings, int32_t s, size_t j)
{
  const int32_t t = rings[static_cast<size_t>(s)].neighbor[j];
  const int32_t lo = std::min(s, t), other = s == lo ? t : s;
  const RingView low = rings[static_cast<size_t>(lo)];
  const int32_t* end = low.neighbor + low.size();
  if (std::count(low.neighbor, end, other) != 1)
    return kNoEdge;
  return static_cast<size_t>(std::find(low.neighbor, end, other) - low.neighbor);
}

// lowerEdge of every edge of every ring, made once on all cores: edge j of site s at rings.at(s) + j.
struct LowerEdges
{
  const SphereRings& rings;
  FlatArray<size_t> lower;
  size_t at(int32_t s, size_t j) const { return lower[rings.at(static_cast<size_t>(s)) + j]; }
};

LowerEdges lowerEdges(const SphereRings& rings, int threads, const RunControl& control)
{
  LowerEdges l{rings, {}};
  l.lower.resize(static_cast<size_t>(rings.start.back()));
  parallelFor(static_cast<int64_t>(rings.size()), 1024, threads, [&](int64_t begin, int64_t end) {
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
      for (size_t j = 0; j < rings[static_cast<size_t>(s)].size(); ++j)
        l.lower[rings.at(static_cast<size_t>(s)) + j] = lowerEdge(rings, s, j);
  }, &control);
  return l;
}

// Edge j of site s's ring (to neighbour t): its inner points in the ring's direction (appended to
// `inner`), and m, its unit normal seen from s. The points depend on the edge alone: they are
// computed from the lower site's side, the higher site's being their reverse. q: the edge's index in
// the lower site's ring (lowerEdge), or kNoEdge. e: scratch, with tanStep2 set.
void densifyRingEdge(const Geometry& g, const SphereRings& rings, int32_t s, size_t j, size_t q, double stepRad,
                     EdgeRefinement& e, std::vector<V3>& inner, V3& m)
{
  const RingView ring = rings[static_cast<size_t>(s)];
  const size_t k = ring.size();
  const int32_t t = ring.neighbor[j];
  const int32_t lo = std::min(s, t), hi = std::max(s, t);
  const V3 u = ring.vert[j];
  const V3 v = ring.vert[(j + 1) % k];
  // The edge's bisector normal from the lower site's side, diff(lo, hi), as its ring holds it.
  V3 mc, mUnit;
  const RingView low = rings[static_cast<size_t>(lo)];
  if (q == kNoEdge)
    q = s == lo ? j : static_cast<size_t>(std::find(low.neighbor, low.neighbor + low.size(), hi) - low.neighbor);
  if (q < low.size())
  {
    mc = low.normal[q];
    mUnit = low.unit[q];
  }
  else
  {
    mc = g.diff(lo, hi);
    mUnit = normalized(mc);
  }
  e.arc = s == lo ? makeArc(u, v, mUnit) : makeArc(v, u, mUnit);
  e.halfSpacing = 0.5 * std::sqrt(dot(mc, mc));
  e.floor = std::min(1e-9, 1e-3 * std::max(e.halfSpacing, 1e-12));
  e.budget = int64_t(1) << 14;
  const V3 foot = normalized(g.p(lo) + g.p(hi));
  e.foot = std::atan2(dot(foot, e.arc.w), dot(foot, e.arc.u));
  if (e.foot < 0)
    e.foot += kTwoPi;
  e.others.clear();
  for (const int32_t side : {lo, hi})
  {
    const RingView r = rings[static_cast<size_t>(side)];
    for (size_t i = 0; i < r.size(); ++i)
      if (r.neighbor[i] != lo + hi - side)  // not this edge (nor, for two hemispheres, its other half)
        e.others.push_back(r.unit[i]);
  }
  const size_t first = inner.size();
  if (s == lo)
    densifyEdge(e, u, v, stepRad, inner);
  else
  {
    densifyEdge(e, v, u, stepRad, inner);
    std::reverse(inner.begin() + static_cast<std::ptrdiff_t>(first), inner.end());
  }
  m = s == lo ? mUnit : -mUnit;
}

// A thread's scratch for densifying: kept across sites so that no edge or region allocates.
struct DensifyScratch
{
  EdgeRefinement edge;
  std::vector<V3> inner;
  std::vector<RingPoint> ring;
  explicit DensifyScratch(double stepRad)
  {
    const double tanStep = std::tan(stepRad);
    edge.tanStep2 = tanStep * tanStep;
  }
};

// The inner points of the edges each site computes for both sides (lowerEdge): those of the sites
// of one block of kEdgeBlock in one array (no allocation per site); ring edge e (rings.at(s) + j) has
// points[s / kEdgeBlock][from[e], to[e]).
constexpr int32_t kEdgeBlock = 256;

struct EdgePoints
{
  std::vector<std::vector<V3>> points;
  FlatArray<uint32_t> from, to;
};

EdgePoints densifyEdges(const Geometry& g, const SphereRings& rings, const LowerEdges& lower, double stepRad,
                        int threads, const RunControl& control)
{
  EdgePoints edges;
  const int32_t sites = static_cast<int32_t>(rings.size());
  edges.points.resize(static_cast<size_t>((sites + kEdgeBlock - 1) / kEdgeBlock));
  edges.from.resize(static_cast<size_t>(rings.start.back()));
  edges.to.resize(static_cast<size_t>(rings.start.back()));
  parallelFor(static_cast<int64_t>(edges.points.size()), 1, threads, [&](int64_t begin, int64_t end) {
    DensifyScratch scratch(stepRad);
    for (int64_t block = begin; block < end; ++block)
    {
      std::vector<V3>& points = edges.points[static_cast<size_t>(block)];
      for (int32_t s = int32_t(block) * kEdgeBlock; s < std::min(sites, int32_t(block + 1) * kEdgeBlock); ++s)
      {
        const RingView ring = rings[static_cast<size_t>(s)];
        const size_t e0 = rings.at(static_cast<size_t>(s));
        for (size_t j = 0; j < ring.size(); ++j)
        {
          edges.from[e0 + j] = static_cast<uint32_t>(points.size());
          if (ring.neighbor[j] > s && lower.at(s, j) == j)
          {
            V3 m;
            densifyRingEdge(g, rings, s, j, j, stepRad, scratch.edge, points, m);
            if (points.size() > UINT32_MAX)
              throw Error("spherical Voronoi: too many polygon points for 256 regions (a larger step is needed)");
          }
          edges.to[e0 + j] = static_cast<uint32_t>(points.size());
        }
      }
    }
  }, &control);
  return edges;
}

// Site s's ring with every edge densified (densifyEdge) into scratch.ring: the points from `edges`
// where computed there, else computed here.
const std::vector<RingPoint>& densifyRegion(const Geometry& g, const SphereRings& rings, const LowerEdges& lower,
                                            const EdgePoints& edges, int32_t s, double stepRad,
                                            DensifyScratch& scratch)
{
  std::vector<RingPoint>& out = scratch.ring;
  out.clear();
  const RingView ring = rings[static_cast<size_t>(s)];
  for (size_t j = 0; j < ring.size(); ++j)
  {
    const int32_t t = ring.neighbor[j];
    const int32_t lo = std::min(s, t);
    const size_t q = lower.at(s, j);
    if (q == kNoEdge)
    {
      scratch.inner.clear();
      V3 m;
      densifyRingEdge(g, rings, s, j, kNoEdge, stepRad, scratch.edge, scratch.inner, m);
      out.push_back({ring.vert[j], m});
      for (const V3& p : scratch.inner)
        out.push_back({p, m});
      continue;
    }
    const std::vector<V3>& points = edges.points[static_cast<size_t>(lo / kEdgeBlock)];
    const size_t e = rings.at(static_cast<size_t>(lo)) + q;
    const V3 mLow = rings[static_cast<size_t>(lo)].unit[q];
    const V3 m = s == lo ? mLow : -mLow;
    out.push_back({ring.vert[j], m});
    if (s == lo)
      for (uint32_t i = edges.from[e]; i < edges.to[e]; ++i)
        out.push_back({points[i], m});
    else
      for (uint32_t i = edges.to[e]; i > edges.from[e]; --i)
        out.push_back({points[i - 1], m});
  }
  return out;
}

// Signed area, taken relative to the first point so that tiny rings far from (0, 0) keep their sign.
double shoelace(const std::vector<XY>& r)
{
  double s = 0;
  const XY o = r.front();
  for (size_t i = 1; i + 1 < r.size(); ++i)
    s += (r[i].x - o.x) * (r[i + 1].y - o.y) - (r[i + 1].x - o.x) * (r[i].y - o.y);
  return 0.5 * s;
}

// Clamps a ring into the lon/lat rectangle, drops consecutive duplicates and closes it; appends it
// to out when it still has an area.
void emitPolygon(const std::vector<XY>& ring, std::vector<LonLatPolygon>& out, std::vector<XY>& r)
{
  r.clear();
  for (const XY& p : ring)
  {
    const XY q{std::clamp(p.x, -180.0, 180.0), std::clamp(p.y, -90.0, 90.0)};
    if (r.empty() || q.x != r.back().x || q.y != r.back().y)
      r.push_back(q);
  }
  while (r.size() > 1 && r.front().x == r.back().x && r.front().y == r.back().y)
    r.pop_back();
  if (r.size() < 3 || !(shoelace(r) > 0))
    return;
  LonLatPolygon poly;
  poly.outer.lon.reserve(r.size() + 1);
  poly.outer.lat.reserve(r.size() + 1);
  for (const XY& p : r)
  {
    poly.outer.lon.push_back(p.x);
    poly.outer.lat.push_back(p.y);
  }
  poly.outer.lon.push_back(r.front().x);
  poly.outer.lat.push_back(r.front().y);
  out.push_back(std::move(poly));
}

// A ring point with its longitude unwrapped as lon + 360 k: kept apart so that a point shifted back
// by exactly the turns it was unwrapped by gets its longitude back bitwise.
struct Unwrapped
{
  double lon;
  int64_t k;
  double lat;
  double x() const { return lon + 360.0 * static_cast<double>(k); }
  XY shifted(int64_t turns) const { return {lon + 360.0 * static_cast<double>(k - turns), lat}; }
};

// The latitude where a piece crosses the antimeridian, given its end east of it (lon near 180) and its
// end west of it (lon near -180). Both ends lie on the piece's great circle, so the crossing is the
// point of that circle on the antimeridian: b e + a w, for the ends' unit vectors e and w and their
// distances a and b from the antimeridian's plane. Those come from the raw longitudes, whose
// distances to the antimeridian are exact (Sterbenz); the order is fixed, so that the regions sharing
// the piece get the same point.
double antimeridianLat(const Unwrapped& east, const Unwrapped& west)
{
  const double de = (180.0 - east.lon) * kRadPerDeg;
  const double dw = (west.lon + 180.0) * kRadPerDeg;
  const double ce = std::cos(east.lat * kRadPerDeg), cw = std::cos(west.lat * kRadPerDeg);
  const double a = ce * std::sin(de), b = cw * std::sin(dw);
  if (!(a + b > 0))
    return east.lat;
  const double x = b * ce * std::cos(de) + a * cw * std::cos(dw);  // minus the x of b e + a w
  const double z = b * std::sin(east.lat * kRadPerDeg) + a * std::sin(west.lat * kRadPerDeg);
  return std::atan2(z, x) * kDegPerRad;  // x > 0: the crossing is within 90 degrees of both ends
}

// A ring point being clipped: shifted coordinates, and the ring point it is (-1: a cut point).
struct ClipPoint
{
  XY xy;
  int64_t src;
};

// Sutherland-Hodgman against the vertical line x = c (+-180 in shifted coordinates), keeping
// x <= c (keepLeft) or x >= c. A ring that spans less than 360 degrees crosses at most one of the two
// lines in each piece, so every piece cut here joins two ring points; its end with the smaller x is
// east of the antimeridian.
std::vector<ClipPoint> clipVertical(const std::vector<ClipPoint>& in, const std::vector<Unwrapped>& u, double c,
                                    bool keepLeft)
{
  std::vector<ClipPoint> out;
  const size_t n = in.size();
  auto inside = [&](const ClipPoint& p) { return keepLeft ? p.xy.x <= c : p.xy.x >= c; };
  for (size_t i = 0; i < n; ++i)
  {
    const ClipPoint& a = in[i];
    const ClipPoint& b = in[(i + 1) % n];
    const bool ia = inside(a);
    if (ia)
      out.push_back(a);
    if (ia == inside(b) || a.xy.x == c || b.xy.x == c)
      continue;
    const ClipPoint& east = a.xy.x < b.xy.x ? a : b;
    const ClipPoint& west = a.xy.x < b.xy.x ? b : a;
    const double lat = east.src >= 0 && west.src >= 0
                           ? antimeridianLat(u[static_cast<size_t>(east.src)], u[static_cast<size_t>(west.src)])
                           : east.xy.y + (c - east.xy.x) * (west.xy.y - east.xy.y) / (west.xy.x - east.xy.x);
    out.push_back({{c, lat}, -1});
  }
  return out;
}

// A pole-containing ring (winding +1: north, -1: south), monotonic over 360 degrees of longitude:
// re-started where it crosses the antimeridian, shifted into [-180, 180] and closed along the pole's
// latitude, one polygon.
void emitPolarRing(const std::vector<Unwrapped>& ring, int winding, std::vector<LonLatPolygon>& out,
                   std::vector<XY>& scratch)
{
  const size_t n = ring.size();
  auto at = [&](size_t i) {
    Unwrapped p = ring[i % n];
    p.k += i >= n ? winding : 0;
    return p;
  };
  // The ring starts within [-180, 180]; its first crossing of 180 going east (north) or of -180 going
  // west (south) becomes the start, at -180 (north) or 180 (south) after the shift.
  const double X = winding > 0 ? 180.0 : -180.0;
  auto reached = [&](double x) { return winding > 0 ? x >= X : x <= X; };
  size_t i = 0;
  while (i < 2 * n && !reached(at(i).x()))
    ++i;
  if (i == 2 * n)
    return;  // cannot happen: a polar ring spans 360 degrees
  const double startLat = at(i).x() == X ? at(i).lat
                         : winding > 0  ? antimeridianLat(at(i - 1), at(i))
                                        : antimeridianLat(at(i), at(i - 1));
  const double startX = -X;
  std::vector<XY> r{{startX, startLat}};  // once a region at most: the poles
  for (size_t j = i; j < i + n; ++j)
  {
    const Unwrapped p = at(j);
    if (reached(p.x() - 360.0 * winding))
      break;
    r.push_back(p.shifted(winding));
  }
  const double pole = winding > 0 ? 90.0 : -90.0;
  r.push_back({X, startLat});
  r.push_back({X, pole});
  r.push_back({startX, pole});
  emitPolygon(r, out, scratch);
}

// A thread's scratch for ringToLonLat: kept across regions so that a region allocates only its output.
struct LonLatScratch
{
  std::vector<RingPoint> pts;
  std::vector<double> lon, lat;
  std::vector<Unwrapped> u;
  std::vector<ClipPoint> shifted;
  std::vector<XY> ring, emitted;
};

std::vector<LonLatPolygon> ringToLonLat(const std::vector<RingPoint>& raw, LonLatScratch& scratch)
{
  // Drop consecutive duplicates (and consecutive points at the same pole).
  std::vector<RingPoint>& pts = scratch.pts;
  pts.clear();
  for (const RingPoint& q : raw)
  {
    if (!pts.empty())
    {
      const V3 b = pts.back().p;
      const bool samePole = isPolePoint(b) && isPolePoint(q.p) && (b.z > 0) == (q.p.z > 0);
      if (samePole || (b.x == q.p.x && b.y == q.p.y && b.z == q.p.z))
      {
        pts.back().m = q.m;
        continue;
      }
    }
    pts.push_back(q);
  }
  while (pts.size() > 1)
  {
    const V3 a = pts.front().p;
    const V3 b = pts.back().p;
    const bool samePole = isPolePoint(a) && isPolePoint(b) && (a.z > 0) == (b.z > 0);
    if (!samePole && !(a.x == b.x && a.y == b.y && a.z == b.z))
      break;
    pts.pop_back();
  }
  const size_t n = pts.size();
  if (n < 2)
    return {};
  size_t s0 = 0;
  while (s0 < n && isPolePoint(pts[s0].p))
    ++s0;
  if (s0 == n)
    return {};

  std::vector<double>& lon = scratch.lon;
  std::vector<double>& lat = scratch.lat;
  lon.resize(n);
  lat.resize(n);
  for (size_t i = 0; i < n; ++i)
  {
    const V3 p = pts[i].p;
    lon[i] = std::clamp(std::atan2(p.y, p.x) * kDegPerRad, -180.0, 180.0);
    lat[i] = std::atan2(p.z, horizontal(p)) * kDegPerRad;
  }
  auto wrap180 = [](double d) { return d > 180.0 ? d - 360.0 : d < -180.0 ? d + 360.0 : d; };

  std::vector<Unwrapped>& u = scratch.u;
  u.clear();
  size_t prev = s0;
  int64_t prevK = 0;
  u.push_back({lon[s0], 0, lat[s0]});
  int pendingPole = 0;
  auto kFor = [](double target, double l) { return static_cast<int64_t>(std::llround((target - l) / 360.0)); };
  for (size_t j = 1; j <= n; ++j)
  {
    const size_t idx = (s0 + j) % n;
    const V3 p = pts[idx].p;
    if (isPolePoint(p))
    {
      pendingPole = p.z > 0 ? 1 : -1;
      continue;
    }
    const double lonP = lon[prev];
    const double lonI = lon[idx];
    const double lPrev = lonP + 360.0 * static_cast<double>(prevK);
    int64_t k;
    if (pendingPole != 0)
    {
      // Through a pole: the ring arrives on one meridian and leaves on another. A region is convex, so
      // seen from outside it turns by at most 180 degrees there, west at the north pole, east at the south.
      double turn = wrap180(lonI - lonP);
      if (pendingPole > 0 && turn > 90.0)
        turn -= 360.0;
      if (pendingPole < 0 && turn < -90.0)
        turn += 360.0;
      const double polarLat = 90.0 * pendingPole;
      u.push_back({lonP, prevK, polarLat});
      k = kFor(lPrev + turn, lonI);
      u.push_back({lonI, k, polarLat});
      pendingPole = 0;
    }
    else
    {
      // The longitude of a point moving along a great circle of normal m always turns with sign
      // m.z; only a piece passing (almost) through a pole has a step near +-180 whose sign rounding
      // could flip. On a meridian (m.z == 0) the pole is on the boundary: west at north, east at south.
      double step = wrap180(lonI - lonP);
      if (std::fabs(step) > 90.0)
      {
        const double mz = pts[prev].m.z;
        const int want = mz > 0 ? 1 : mz < 0 ? -1 : (pts[prev].p.z + p.z > 0 ? -1 : 1);
        if (step > 0 && want < 0)
          step -= 360.0;
        else if (step < 0 && want > 0)
          step += 360.0;
      }
      k = kFor(lPrev + step, lonI);
    }
    u.push_back({lonI, k, lat[idx]});
    prev = idx;
    prevK = k;
  }
  // The last point is the first one again, after one trip around the ring.
  const int64_t winding = u.back().k - u.front().k;
  u.pop_back();

  std::vector<LonLatPolygon> out;
  if (winding == 1 || winding == -1)
  {
    emitPolarRing(u, static_cast<int>(winding), out, scratch.emitted);
    return out;
  }
  if (winding != 0)
    return out;  // a folded ring (sites too close to order in float64): no valid polygon exists
  int64_t minK = u.front().k, maxK = u.front().k;
  for (const Unwrapped& q : u)
  {
    minK = std::min(minK, q.k);
    maxK = std::max(maxK, q.k);
  }
  // The ring spans less than 360 degrees: cut it at the antimeridian into the windows it reaches,
  // each shifted by whole turns into [-180, 180].
  std::vector<ClipPoint>& shifted = scratch.shifted;
  shifted.resize(u.size());
  std::vector<XY>& ring = scratch.ring;
  for (int64_t turns = minK - 1; turns <= maxK + 1; ++turns)
  {
    double minX = std::numeric_limits<double>::infinity(), maxX = -minX;
    for (size_t i = 0; i < u.size(); ++i)
    {
      shifted[i] = {u[i].shifted(turns), static_cast<int64_t>(i)};
      minX = std::min(minX, shifted[i].xy.x);
      maxX = std::max(maxX, shifted[i].xy.x);
    }
    if (maxX <= -180.0 || minX >= 180.0)
      continue;
    ring.clear();
    if (minX >= -180.0 && maxX <= 180.0)
      for (const ClipPoint& q : shifted)
        ring.push_back(q.xy);
    else
      for (const ClipPoint& q : clipVertical(clipVertical(shifted, u, -180.0, false), u, 180.0, true))
        ring.push_back(q.xy);
    emitPolygon(ring, out, scratch.emitted);
  }
  return out;
}

}  // namespace

std::vector<LonLatPolygon> wholeSphere()
{
  LonLatPolygon poly;
  poly.outer.lon = {-180.0, 180.0, 180.0, -180.0, -180.0};
  poly.outer.lat = {-90.0, -90.0, 90.0, 90.0, -90.0};
  return {poly};
}

void regionPolygons(const Geometry& g, const SphereRings& rings, double stepRad, int threads,
                    const RunControl& control,
                    const std::function<void(int32_t, std::vector<LonLatPolygon>&&)>& emit)
{
  const LowerEdges lower = lowerEdges(rings, threads, control);
  const EdgePoints edges = densifyEdges(g, rings, lower, stepRad, threads, control);
  parallelFor(g.count(), 256, threads, [&](int64_t begin, int64_t end) {
    DensifyScratch scratch(stepRad);
    LonLatScratch lonLat;
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
      if (!rings[static_cast<size_t>(s)].empty())
        emit(s, ringToLonLat(densifyRegion(g, rings, lower, edges, s, stepRad, scratch), lonLat));
  }, &control);
}

}  // namespace gpugeo::sphere::detail
