// Spherical Voronoi polygons: see spherical_voronoi.h for the method and the guarantees.
#include "sphere/spherical_voronoi.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "sphere/detail/sphere_hull.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;
constexpr double kDegPerRad = 180.0 / kPi;
constexpr double kRadPerDeg = kPi / 180.0;

// Unique sites whose spread-relative distance from a common plane is at most this are coplanar.
constexpr double kCoplanarRel = 1e-12;
// An edge is flipped when the opposite point lies inside a triangle's circumscribed cap by more than
// this, relative to the in-circle determinant's terms (Geometry::inCap; its rounding error is ~1e-15).
constexpr double kFlipRel = 1e-12;
// Voronoi vertices of adjacent triangles closer than this (chord, radians) are one vertex.
constexpr double kMergeChord = 1e-13;
// A ring point whose distance from the polar axis is at most this is the pole itself.
constexpr double kPoleSnap = 1e-12;
// The most unique sites: the mesh uses int32 triangle indices.
constexpr int64_t kMaxUniqueSites = int64_t(1) << 29;

void pollCancel(const RunControl& control, int64_t i)
{
  if ((i & 1023) == 0 && control.isCanceled())
    throw Canceled();
}

// ---------------------------------------------------------------------------------------------
// Vectors

struct V3
{
  double x = 0, y = 0, z = 0;
};

V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
V3 operator-(V3 a) { return {-a.x, -a.y, -a.z}; }
V3 operator*(double s, V3 a) { return {s * a.x, s * a.y, s * a.z}; }
double dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
V3 cross(V3 a, V3 b) { return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }

// Unit vector along a, scaled first so that tiny or huge vectors neither underflow nor overflow;
// the zero vector stays zero.
V3 normalized(V3 a)
{
  const double l2 = dot(a, a);
  if (l2 > 1e-200 && l2 < 1e200)
    return (1.0 / std::sqrt(l2)) * a;
  const double m = std::max({std::fabs(a.x), std::fabs(a.y), std::fabs(a.z)});
  if (!(m > 0))
    return {0, 0, 0};
  a = (1.0 / m) * a;
  return (1.0 / std::sqrt(dot(a, a))) * a;
}

double chord(V3 a, V3 b)
{
  const V3 d = a - b;
  return std::sqrt(dot(d, d));
}

// sin and cos of an angle in degrees, reduced exactly (std::remainder is exact) so that multiples
// of 90 degrees give exact zeros and ones, and x and x + 360 k give the same values.
void sinCosDeg(double deg, double& s, double& c)
{
  const double r = std::fabs(deg) <= 180.0 ? deg : std::remainder(deg, 360.0);  // [-180, 180]
  const double q = std::nearbyint(r / 90.0);                                     // -2 .. 2
  const double a = (r - 90.0 * q) * kRadPerDeg;  // exact subtraction (Sterbenz); |a| <= 45 degrees
  const double sa = std::sin(a);
  const double ca = std::cos(a);
  switch ((static_cast<int>(q) + 4) % 4)
  {
    case 0: s = sa; c = ca; break;
    case 1: s = ca; c = -sa; break;
    case 2: s = -sa; c = -ca; break;
    default: s = -ca; c = sa; break;
  }
}

// Some unit vector perpendicular to m.
V3 perpendicular(V3 m)
{
  const V3 ax = std::fabs(m.x) <= std::fabs(m.y) && std::fabs(m.x) <= std::fabs(m.z) ? V3{1, 0, 0}
                : std::fabs(m.y) <= std::fabs(m.z)                                   ? V3{0, 1, 0}
                                                                                     : V3{0, 0, 1};
  return normalized(cross(m, ax));
}

struct XY
{
  double x, y;
};

// ---------------------------------------------------------------------------------------------
// Sites

struct Site
{
  double lon = 0, lat = 0;  // degrees; lon reduced to [-180, 180]
  double sinLon = 0, cosLon = 1, sinLat = 0, cosLat = 1;
  V3 p;
  int64_t input = 0;  // index in the caller's arrays
};

Site makeSite(double lonDeg, double latDeg, int64_t input)
{
  Site s;
  s.lon = std::remainder(lonDeg, 360.0);
  s.lat = latDeg;
  sinCosDeg(s.lon, s.sinLon, s.cosLon);
  sinCosDeg(s.lat, s.sinLat, s.cosLat);
  s.p = {s.cosLat * s.cosLon, s.cosLat * s.sinLon, s.sinLat};
  s.input = input;
  return s;
}

// a.p - b.p to full relative precision, from the degrees by sum-to-product identities:
// sin A - sin B = 2 cos((A+B)/2) sin((A-B)/2), cos A - cos B = -2 sin((A+B)/2) sin((A-B)/2), and
// cos a cos b - cos c cos d = (cos a - cos c) cos b + cos c (cos b - cos d).
// Across the antimeridian the longitude difference is taken as (a - 180) - (b + 180) (or mirrored):
// both inner subtractions are exact there (Sterbenz), so a small true difference keeps its relative
// precision instead of being the rounded complement of 360. Shifting the half difference by 180
// while shifting the half sum by 180 the other way leaves both half-angle identities intact.
V3 accurateDiff(const Site& a, const Site& b)
{
  double lonDif = a.lon - b.lon;
  double lonSum = a.lon + b.lon;
  if (lonDif > 180.0)
  {
    lonDif = (a.lon - 180.0) - (b.lon + 180.0);
    lonSum += 360.0;
  }
  else if (lonDif < -180.0)
  {
    lonDif = (a.lon + 180.0) - (b.lon - 180.0);
    lonSum -= 360.0;
  }
  double sLatSum, cLatSum, sLatDif, cLatDif, sLonSum, cLonSum, sLonDif, cLonDif;
  sinCosDeg(0.5 * (a.lat + b.lat), sLatSum, cLatSum);
  sinCosDeg(0.5 * (a.lat - b.lat), sLatDif, cLatDif);
  sinCosDeg(0.5 * lonSum, sLonSum, cLonSum);
  sinCosDeg(0.5 * lonDif, sLonDif, cLonDif);
  const double dSinLat = 2.0 * cLatSum * sLatDif;
  const double dCosLat = -2.0 * sLatSum * sLatDif;
  const double dCosLon = -2.0 * sLonSum * sLonDif;
  const double dSinLon = 2.0 * cLonSum * sLonDif;
  return {dCosLat * a.cosLon + b.cosLat * dCosLon, dCosLat * a.sinLon + b.cosLat * dSinLon, dSinLat};
}

class Geometry
{
public:
  explicit Geometry(std::vector<Site> sites) : sites_(std::move(sites)) {}

  int32_t count() const { return static_cast<int32_t>(sites_.size()); }
  const Site& site(int32_t i) const { return sites_[static_cast<size_t>(i)]; }
  V3 p(int32_t i) const { return site(i).p; }
  V3 diff(int32_t a, int32_t b) const { return accurateDiff(site(a), site(b)); }
  V3 dir(int32_t a, int32_t b) const { return normalized(diff(a, b)); }

  // Unit normal of triangle (a, b, c), outward when it is counter-clockwise seen from outside. The
  // cross product is taken at the vertex opposite the longest edge (the largest angle): at a vertex
  // with a tiny angle (two long, nearly parallel edges) it would lose precision.
  V3 normal(int32_t a, int32_t b, int32_t c) const { return normalFromEdges(diff(b, a), diff(c, b), diff(a, c)); }

  // The same from the triangle's edge vectors b - a, c - b and a - c.
  static V3 normalFromEdges(V3 ab, V3 bc, V3 ca)
  {
    const double lab = dot(ab, ab), lbc = dot(bc, bc), lca = dot(ca, ca);
    if (lbc >= lab && lbc >= lca)
      return normalized(cross(normalized(ab), -normalized(ca)));
    if (lca >= lab)
      return normalized(cross(normalized(bc), -normalized(ab)));
    return normalized(cross(normalized(ca), -normalized(bc)));
  }

  // > 0 when d lies inside the circumscribed cap of the counter-clockwise triangle (a, b, c) (beyond
  // its plane): the in-circle determinant of a, b, c, d after the stereographic projection from d's
  // antipode onto the tangent plane at d, which maps circles to circles. In that plane d inside the
  // cap is exactly det > 0 whether or not the cap contains the antipode (if it does, its image is the
  // outside of the circle and a, b, c turn clockwise; the two sign changes cancel). The determinant
  // is taken relative to one of the two closest of the four points, from projected differences that
  // are themselves computed from accurate differences: so it keeps full relative precision however
  // small the configuration, or a part of it, is (the 3D test, elevation above the plane, would lose
  // it to the sphere's curvature, the square of the configuration's size). Returns the determinant
  // relative to the sum of its terms' magnitudes, in [-1, 1].
  double inCap(int32_t a, int32_t b, int32_t c, int32_t d) const
  {
    const V3 pd = p(d);
    const V3 e1 = perpendicular(pd);
    const V3 e2 = cross(pd, e1);
    const int32_t v[4] = {a, b, c, d};
    V3 delta[4];    // v - d
    double den[4];  // 1 + v.d: twice the projection's scale factor
    for (int i = 0; i < 4; ++i)
    {
      delta[i] = i == 3 ? V3{0, 0, 0} : diff(v[i], d);
      den[i] = 2.0 + dot(delta[i], pd);
      if (!(den[i] > 0.02))  // within about 10 degrees of d's antipode the projection loses precision
        return beyond(a, b, c, d);
    }
    // The base: an end of the closest pair.
    int base = 3;
    double closest = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 4; ++i)
      for (int j = i + 1; j < 4; ++j)
      {
        const V3 dij = i == 3 || j == 3 ? delta[i] - delta[j] : diff(v[i], v[j]);
        const double l = dot(dij, dij);
        if (l < closest)
        {
          closest = l;
          base = i;
        }
      }
    // Projected v[i] - v[base]: (T(x - y) D_y - T(y - d) (x - y).d) / (D_x D_y) with T the tangent
    // coordinates; every factor is accurate.
    auto projectedDiff = [&](int i, int j) {
      const V3 dxy = i == 3 || j == 3 ? delta[i] - delta[j] : diff(v[i], v[j]);
      const double t = dot(dxy, pd);
      const double sx = dot(dxy, e1) * den[j] - dot(delta[j], e1) * t;
      const double sy = dot(dxy, e2) * den[j] - dot(delta[j], e2) * t;
      const double k = 1.0 / (den[i] * den[j]);
      return XY{sx * k, sy * k};
    };
    // Rows in the order that keeps the orientation: incircle(a, b, c, d) equals the 3x3 determinant
    // on base d of (a, b, c), on base b of (a, c, d), minus that on base a of (b, c, d), minus that
    // on base c of (a, b, d) (the 4x4 form is alternating).
    static const int kRows[4][3] = {{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}};
    auto l3d = [&](int row) {
      const int x = kRows[base][row];
      const V3 dxy = x == 3 || base == 3 ? delta[x] - delta[base] : diff(v[x], v[base]);
      return dot(dxy, dxy);
    };
    static const double kSign[4] = {-1.0, 1.0, -1.0, 1.0};
    XY r[3];
    double l[3];
    for (int i = 0; i < 3; ++i)
    {
      r[i] = projectedDiff(kRows[base][i], base);
      l[i] = r[i].x * r[i].x + r[i].y * r[i].y;
    }
    // When two of the other points are closer to each other than to the base (two separate close
    // pairs), the row of the later one is replaced by its difference from the earlier one (the 4x4
    // form's rows minus each other: the determinant is unchanged), computed directly, so that their
    // small separation is not lost in the difference of two long rows.
    double pairLen[3];
    for (int i = 0; i < 3; ++i)
    {
      const int x = kRows[base][(i + 1) % 3], y = kRows[base][(i + 2) % 3];
      const V3 dxy = x == 3 || y == 3 ? delta[x] - delta[y] : diff(v[x], v[y]);
      pairLen[i] = dot(dxy, dxy);
    }
    const int skip = static_cast<int>(std::min_element(pairLen, pairLen + 3) - pairLen);  // the row not in the pair
    const int first = std::min((skip + 1) % 3, (skip + 2) % 3);
    const int second = std::max((skip + 1) % 3, (skip + 2) % 3);
    if (pairLen[skip] < std::min(l3d(first), l3d(second)))
    {
      const XY dr = projectedDiff(kRows[base][second], kRows[base][first]);
      l[second] = dr.x * (r[second].x + r[first].x) + dr.y * (r[second].y + r[first].y);
      r[second] = dr;
    }
    const double l0 = l[0], l1 = l[1], l2 = l[2];
    const double det = r[0].x * (r[1].y * l2 - r[2].y * l1) - r[0].y * (r[1].x * l2 - r[2].x * l1) +
                       l0 * (r[1].x * r[2].y - r[2].x * r[1].y);
    const double mag = std::fabs(r[0].x) * (std::fabs(r[1].y * l2) + std::fabs(r[2].y * l1)) +
                       std::fabs(r[0].y) * (std::fabs(r[1].x * l2) + std::fabs(r[2].x * l1)) +
                       std::fabs(l0) * (std::fabs(r[1].x * r[2].y) + std::fabs(r[2].x * r[1].y));
    return mag > 0 ? kSign[base] * det / mag : 0.0;
  }

  // The in-cap question first in plain float64 on the rounded vectors, with a bound on the error of
  // that determinant (each vector is within 6e-16 of the exact one, and the arithmetic): +1 or -1
  // when it settles the question (and clearly beyond kFlipRel), 0 when inCap must decide. Most
  // questions in a mesh are not close, and this is some twenty times cheaper.
  int inCapQuick(int32_t a, int32_t b, int32_t c, int32_t d) const
  {
    const V3 pa = p(a);
    const V3 u = p(b) - pa, v = p(c) - pa, w = p(d) - pa;
    const double det = dot(w, cross(u, v));
    const double lu = std::sqrt(dot(u, u)), lv = std::sqrt(dot(v, v)), lw = std::sqrt(dot(w, w));
    const double bound = 4e-15 * (lu * lv + lv * lw + lw * lu) + 1e-15 * lu * lv * lw;
    if (det > bound + 1e-9 * lu * lv * lw)
      return 1;
    if (det < -bound)
      return -1;
    return 0;
  }

  // Whether d is inside the cap by more than tolerance: the quick test, else inCap.
  bool holds(int32_t a, int32_t b, int32_t c, int32_t d, double tolerance) const
  {
    const int quick = inCapQuick(a, b, c, d);
    return quick > 0 || (quick == 0 && inCap(a, b, c, d) > tolerance);
  }

  // The same question in 3D, for configurations that reach d's antipode: the sine of d's elevation
  // above the triangle's plane seen from the triangle's vertex nearest to it.
  double beyond(int32_t a, int32_t b, int32_t c, int32_t d) const
  {
    const V3 n = normal(a, b, c);
    V3 best = diff(d, a);
    for (const int32_t v : {b, c})
    {
      const V3 e = diff(d, v);
      if (dot(e, e) < dot(best, best))
        best = e;
    }
    return dot(n, normalized(best));
  }

private:
  std::vector<Site> sites_;
};

// ---------------------------------------------------------------------------------------------
// A spherical polygon: vertex i to vertex i+1 runs along the great circle of normal[i], with the
// region on the side normal[i] points to (normal[i] = site - neighbour).

struct SphereRing
{
  std::vector<V3> vert;
  std::vector<V3> normal;         // normal[i] = diff(site, neighbor[i]): edge i's bisector plane
  std::vector<int32_t> neighbor;  // unique-site index
  std::vector<V3> unit;           // normalized(normal[i]), made once (setUnitNormals)

  void setUnitNormals()
  {
    unit.resize(normal.size());
    for (size_t i = 0; i < normal.size(); ++i)
      unit[i] = normalized(normal[i]);
  }
};

// The arc from u to v on the great circle of unit normal m, leaving u towards the side the region
// is on the left of: tangent w = m x u; sweep in [0, 2 pi). Voronoi edges are at most pi long, so a
// sweep above 1.5 pi is a zero-length edge whose end fell a rounding error behind its start.
struct Arc
{
  V3 u, w;
  double sweep = 0;
  V3 at(double phi) const { return normalized(std::cos(phi) * u + std::sin(phi) * w); }
};

Arc makeArc(V3 u, V3 v, V3 mUnit)
{
  Arc arc;
  arc.u = u;
  arc.w = normalized(cross(mUnit, u));
  double sweep = std::atan2(dot(v, arc.w), dot(v, u));
  if (sweep < 0)
    sweep += kTwoPi;
  if (sweep > 1.5 * kPi)
    sweep = 0;
  arc.sweep = sweep;
  return arc;
}

// Area of a region on the unit sphere (see the header, step 5).
double ringArea(V3 s, const SphereRing& ring)
{
  const size_t k = ring.vert.size();
  bool near = true;
  for (const V3& v : ring.vert)
    near = near && dot(s, v) >= 0;
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

// ---------------------------------------------------------------------------------------------
// Lon/lat polygons

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
size_t lowerEdge(const std::vector<SphereRing>& rings, int32_t s, size_t j)
{
  const int32_t t = rings[static_cast<size_t>(s)].neighbor[j];
  const int32_t lo = std::min(s, t), other = s == lo ? t : s;
  const std::vector<int32_t>& n = rings[static_cast<size_t>(lo)].neighbor;
  if (std::count(n.begin(), n.end(), other) != 1)
    return kNoEdge;
  return static_cast<size_t>(std::find(n.begin(), n.end(), other) - n.begin());
}

// lowerEdge of every edge of every ring, made once on all cores: edge j of site s at start[s] + j.
struct LowerEdges
{
  std::vector<size_t> start;
  std::vector<size_t> lower;
  size_t at(int32_t s, size_t j) const { return lower[start[static_cast<size_t>(s)] + j]; }
};

LowerEdges lowerEdges(const std::vector<SphereRing>& rings, int threads, const RunControl& control)
{
  LowerEdges l;
  l.start.resize(rings.size() + 1, 0);
  for (size_t s = 0; s < rings.size(); ++s)
    l.start[s + 1] = l.start[s] + rings[s].neighbor.size();
  l.lower.resize(l.start.back());
  parallelFor(static_cast<int64_t>(rings.size()), 1024, threads, [&](int64_t begin, int64_t end) {
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
      for (size_t j = 0; j < rings[static_cast<size_t>(s)].neighbor.size(); ++j)
        l.lower[l.start[static_cast<size_t>(s)] + j] = lowerEdge(rings, s, j);
  }, &control);
  return l;
}

// Edge j of site s's ring (to neighbour t): its inner points in the ring's direction (appended to
// `inner`), and m, its unit normal seen from s. The points depend on the edge alone: they are
// computed from the lower site's side, the higher site's being their reverse. q: the edge's index in
// the lower site's ring (lowerEdge), or kNoEdge. e: scratch, with tanStep2 set.
void densifyRingEdge(const Geometry& g, const std::vector<SphereRing>& rings, int32_t s, size_t j, size_t q,
                     double stepRad, EdgeRefinement& e, std::vector<V3>& inner, V3& m)
{
  const SphereRing& ring = rings[static_cast<size_t>(s)];
  const size_t k = ring.vert.size();
  const int32_t t = ring.neighbor[j];
  const int32_t lo = std::min(s, t), hi = std::max(s, t);
  const V3 u = ring.vert[j];
  const V3 v = ring.vert[(j + 1) % k];
  // The edge's bisector normal from the lower site's side, diff(lo, hi), as its ring holds it.
  V3 mc, mUnit;
  const SphereRing& low = rings[static_cast<size_t>(lo)];
  if (q == kNoEdge)
    q = s == lo ? j : static_cast<size_t>(std::find(low.neighbor.begin(), low.neighbor.end(), hi) -
                                          low.neighbor.begin());
  if (q < low.neighbor.size())
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
    const SphereRing& r = rings[static_cast<size_t>(side)];
    for (size_t i = 0; i < r.neighbor.size(); ++i)
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

// The inner points of the edges each site computes for both sides (lowerEdge), flat with offsets.
struct EdgePoints
{
  std::vector<V3> points;
  std::vector<uint32_t> start;  // edge j: points[start[j], start[j + 1])
};

std::vector<EdgePoints> densifyEdges(const Geometry& g, const std::vector<SphereRing>& rings,
                                     const LowerEdges& lower, double stepRad, int threads,
                                     const RunControl& control)
{
  std::vector<EdgePoints> edges(rings.size());
  parallelFor(static_cast<int64_t>(rings.size()), 256, threads, [&](int64_t begin, int64_t end) {
    DensifyScratch scratch(stepRad);
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      const SphereRing& ring = rings[static_cast<size_t>(s)];
      EdgePoints& mine = edges[static_cast<size_t>(s)];
      mine.start.reserve(ring.vert.size() + 1);
      mine.start.push_back(0);
      for (size_t j = 0; j < ring.vert.size(); ++j)
      {
        if (ring.neighbor[j] > s && lower.at(s, j) == j)
        {
          V3 m;
          densifyRingEdge(g, rings, s, j, j, stepRad, scratch.edge, mine.points, m);
        }
        mine.start.push_back(static_cast<uint32_t>(mine.points.size()));
      }
    }
  }, &control);
  return edges;
}

// Site s's ring with every edge densified (densifyEdge) into scratch.ring: the points from `edges`
// where computed there, else computed here.
const std::vector<RingPoint>& densifyRegion(const Geometry& g, const std::vector<SphereRing>& rings,
                                            const LowerEdges& lower, const std::vector<EdgePoints>& edges,
                                            int32_t s, double stepRad, DensifyScratch& scratch)
{
  std::vector<RingPoint>& out = scratch.ring;
  out.clear();
  const SphereRing& ring = rings[static_cast<size_t>(s)];
  for (size_t j = 0; j < ring.vert.size(); ++j)
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
    const EdgePoints& at = edges[static_cast<size_t>(lo)];
    const V3 mLow = rings[static_cast<size_t>(lo)].unit[q];
    const V3 m = s == lo ? mLow : -mLow;
    out.push_back({ring.vert[j], m});
    if (s == lo)
      for (uint32_t i = at.start[q]; i < at.start[q + 1]; ++i)
        out.push_back({at.points[i], m});
    else
      for (uint32_t i = at.start[q + 1]; i > at.start[q]; --i)
        out.push_back({at.points[i - 1], m});
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

std::vector<LonLatPolygon> wholeSphere()
{
  LonLatPolygon poly;
  poly.outer.lon = {-180.0, 180.0, 180.0, -180.0, -180.0};
  poly.outer.lat = {-90.0, -90.0, 90.0, 90.0, -90.0};
  return {poly};
}

// ---------------------------------------------------------------------------------------------
// Coplanar sites: lunes

struct Plane
{
  bool coplanar = false;
  V3 axis;         // unit normal of the sites' plane
  int32_t i1 = 0;  // with site 0, two well-spread sites spanning it
  int32_t i2 = 0;
};

// Every site's accurate difference from site 0 (step 1), made once on all cores: the plane test and
// the hull both take the sites relative to site 0.
std::vector<V3> diffsFromFirst(const Geometry& g, int threads, const RunControl& control)
{
  std::vector<V3> d(static_cast<size_t>(g.count()));
  parallelFor(g.count(), 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      d[static_cast<size_t>(i)] = g.diff(static_cast<int32_t>(i), 0);
  }, &control);
  return d;
}

// The plane through site 0, the site farthest from it and the site farthest from their line; the
// sites are coplanar when none is farther from it than kCoplanarRel times the spread. d0: the sites'
// differences from site 0 (diffsFromFirst).
Plane findPlane(const Geometry& g, const std::vector<V3>& d0, const RunControl& control)
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

void lunes(const Geometry& g, const Plane& pl, std::vector<SphereRing>& rings, std::vector<double>& areas,
           const RunControl& control)
{
  const int32_t k = g.count();
  rings.assign(static_cast<size_t>(k), {});
  areas.assign(static_cast<size_t>(k), 0.0);
  if (k == 2)
  {
    // Two hemispheres; their boundary is the bisector, drawn as two half circles between a pair of
    // antipodal points on it.
    const V3 a = perpendicular(g.diff(1, 0));
    for (int32_t s = 0; s < 2; ++s)
    {
      const V3 m = g.diff(s, 1 - s);
      rings[static_cast<size_t>(s)] = {{-a, a}, {m, m}, {1 - s, 1 - s}, {}};
      rings[static_cast<size_t>(s)].setUnitNormals();
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
    rings[static_cast<size_t>(s)] = {{-a, a}, {g.diff(s, next), g.diff(s, prev)}, {next, prev}, {}};
    rings[static_cast<size_t>(s)].setUnitNormals();
    areas[static_cast<size_t>(s)] = 2.0 * w;
  }
}

// ---------------------------------------------------------------------------------------------
// The Delaunay mesh: the hull, repaired with this module's predicates

struct Mesh
{
  std::vector<std::array<int32_t, 3>> tri;  // counter-clockwise seen from outside
  std::vector<std::array<int32_t, 3>> nbr;  // nbr[t][i]: the triangle across the edge opposite tri[t][i]
  std::vector<int32_t> vertexTri;           // a triangle incident to each site, -1 if none

  int slot(int32_t t, int32_t v) const
  {
    const auto& x = tri[static_cast<size_t>(t)];
    return x[0] == v ? 0 : x[1] == v ? 1 : x[2] == v ? 2 : -1;
  }
  int slotOfNeighbor(int32_t t, int32_t u) const
  {
    const auto& x = nbr[static_cast<size_t>(t)];
    return x[0] == u ? 0 : x[1] == u ? 1 : x[2] == u ? 2 : -1;
  }
};

enum class HullResult
{
  Ok,
  Flat
};

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
HullResult hullMesh(const Geometry& g, const std::vector<V3>& d0, Mesh& mesh, std::vector<int32_t>& hint,
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
  mesh.tri = std::move(hull.tri);
  mesh.nbr = std::move(hull.nbr);
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

// Builds the Delaunay mesh; Flat when the hull finds the sites on one plane through the centre.
HullResult delaunay(const Geometry& g, const std::vector<V3>& d0, Mesh& mesh, int threads, const RunControl& control)
{
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
  return HullResult::Ok;
}

// Every mesh edge's accurate difference (step 1), made once and shared by the two triangles on it and
// the two regions it separates: edge[3 t + i] = p(b) - p(a) for triangle t's edge from
// a = tri[t][i + 1] to b = tri[t][i + 2] (the edge opposite slot i); the triangle across it holds the
// negation.
std::vector<V3> edgeDiffs(const Geometry& g, const Mesh& mesh, int threads, const RunControl& control)
{
  const size_t nt = mesh.tri.size();
  std::vector<V3> edge(3 * nt);
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

// The Voronoi polygon of every site from the mesh, consecutive coincident vertices merged.
void meshRegions(const Geometry& g, const Mesh& mesh, std::vector<SphereRing>& rings, std::vector<double>& areas,
                 int threads, const RunControl& control)
{
  const int32_t k = g.count();
  const size_t nt = mesh.tri.size();
  const std::vector<V3> edge = edgeDiffs(g, mesh, threads, control);
  std::vector<V3> centre(nt);
  parallelFor(int64_t(nt), 4096, threads, [&](int64_t begin, int64_t end) {
    for (size_t t = size_t(begin); t < size_t(end); ++t)
      centre[t] = Geometry::normalFromEdges(edge[3 * t + 2], edge[3 * t], edge[3 * t + 1]);
  }, &control);
  // Adjacent triangles whose centres lie within kMergeChord (co-circular sites: cube faces, grids)
  // share one Voronoi vertex: every triangle of such a group takes the centre of its lowest-indexed
  // triangle, so that all the regions around it see bitwise the same vertex.
  std::vector<int32_t> root(nt);
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int32_t t) {
    while (root[static_cast<size_t>(t)] != t)
      t = root[static_cast<size_t>(t)] = root[static_cast<size_t>(root[static_cast<size_t>(t)])];
    return t;
  };
  for (size_t t = 0; t < nt; ++t)
    for (const int32_t u : mesh.nbr[t])
      if (chord(centre[t], centre[static_cast<size_t>(u)]) <= kMergeChord)
      {
        const int32_t a = find(static_cast<int32_t>(t)), b = find(u);
        root[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
      }
  for (size_t t = 0; t < nt; ++t)
    centre[t] = centre[static_cast<size_t>(find(static_cast<int32_t>(t)))];
  rings.assign(static_cast<size_t>(k), {});
  areas.assign(static_cast<size_t>(k), 0.0);
  // Each site's ring from the triangles around it (read only): the sites in parallel.
  parallelFor(k, 1024, threads, [&](int64_t begin, int64_t end) {
    SphereRing raw;
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      raw.vert.clear();
      raw.normal.clear();
      raw.neighbor.clear();
      const int32_t t0 = mesh.vertexTri[static_cast<size_t>(s)];
      int32_t t = t0;
      do
      {
        const int i = mesh.slot(t, s);
        const int32_t c = mesh.tri[static_cast<size_t>(t)][static_cast<size_t>((i + 2) % 3)];
        raw.vert.push_back(centre[static_cast<size_t>(t)]);
        raw.normal.push_back(edge[3 * static_cast<size_t>(t) + static_cast<size_t>((i + 1) % 3)]);  // s - c
        raw.neighbor.push_back(c);
        t = mesh.nbr[static_cast<size_t>(t)][static_cast<size_t>((i + 1) % 3)];
        if (raw.vert.size() > mesh.tri.size())
          throw Error("spherical Voronoi: internal error: the triangles around a site do not close");
      } while (t != t0);

      // Merge runs of equal vertices: a run keeps its vertex and the edge leaving its last member.
      auto same = [](V3 a, V3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
      const size_t n = raw.vert.size();
      size_t start = 0;  // a vertex that differs from its predecessor, so no run wraps around
      while (start < n && same(raw.vert[start], raw.vert[(start + n - 1) % n]))
        ++start;
      SphereRing& ring = rings[static_cast<size_t>(s)];
      if (start == n)
        continue;  // every vertex the same point: no area left (degenerate beyond float64)
      ring.vert.reserve(n);
      ring.normal.reserve(n);
      ring.neighbor.reserve(n);
      for (size_t j = 0; j < n; ++j)
      {
        const size_t idx = (start + j) % n;
        if (j > 0 && same(raw.vert[idx], ring.vert.back()))
        {
          ring.normal.back() = raw.normal[idx];
          ring.neighbor.back() = raw.neighbor[idx];
          continue;
        }
        ring.vert.push_back(raw.vert[idx]);
        ring.normal.push_back(raw.normal[idx]);
        ring.neighbor.push_back(raw.neighbor[idx]);
      }
      if (ring.vert.size() < 2 || (ring.vert.size() == 2 && dot(ring.vert[0], ring.vert[1]) > -0.5))
      {
        ring = {};
        continue;
      }
      ring.setUnitNormals();
      areas[static_cast<size_t>(s)] = ringArea(g.p(s), ring);
    }
  }, &control);
}

void validate(const double* lonDeg, const double* latDeg, int64_t n, const SphericalVoronoiOptions& options)
{
  if (n < 1)
    throw InvalidInput("spherical Voronoi: there must be at least one site (got " + std::to_string(n) + ")");
  if (!lonDeg || !latDeg)
    throw InvalidInput("spherical Voronoi: the longitude and latitude arrays must not be null");
  if (!(options.densifyStepDeg > 0 && options.densifyStepDeg <= 10))
    throw InvalidInput("spherical Voronoi: the densification step must be in (0, 10] degrees (got " +
                       std::to_string(options.densifyStepDeg) + ")");
  requireValidSites(SiteSet{lonDeg, latDeg, n});
}

}  // namespace

std::vector<SphericalRegion> sphericalVoronoi(const double* lonDeg, const double* latDeg, int64_t n,
                                              const SphericalVoronoiOptions& options, const RunControl& control)
{
  validate(lonDeg, latDeg, n, options);
  std::vector<SphericalRegion> result(static_cast<size_t>(n));

  // Unit vectors, and exact duplicates: the lowest index of each group of equal vectors is unique.
  const int threads = options.threads > 0 ? options.threads : defaultThreadCount();
  std::vector<Site> all(static_cast<size_t>(n));
  parallelFor(n, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      all[static_cast<size_t>(i)] = makeSite(lonDeg[i], latDeg[i], i);
  }, &control);
  // The unique sites in Morton order of their unit vectors, so that sites near each other on the
  // sphere sit near each other in memory (every per-site step reads a site's neighbours): sorted by
  // Morton key, then vector (-0 equal to +0), then index. Equal vectors have equal keys, so each run
  // of them is together, its lowest index first: that one is unique, the others its duplicates.
  struct Keyed
  {
    uint64_t morton;
    V3 p;
    int64_t i;
  };
  std::vector<Keyed> keyed(static_cast<size_t>(n));
  parallelFor(n, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
    {
      const V3 p = all[static_cast<size_t>(i)].p;
      keyed[static_cast<size_t>(i)] = {detail::mortonKey(detail::Vec3{p.x, p.y, p.z}), p, i};
    }
  }, &control);
  auto key = [](const Keyed& k) { return std::make_tuple(k.morton, k.p.x, k.p.y, k.p.z); };
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    const auto ka = key(a), kb = key(b);
    return ka < kb || (ka == kb && a.i < b.i);
  });
  std::vector<Site> unique;
  int64_t first = -1;
  for (size_t r = 0; r < keyed.size(); ++r)
  {
    if (r > 0 && key(keyed[r - 1]) == key(keyed[r]))
    {
      result[static_cast<size_t>(keyed[r].i)].duplicateOf = first;
      continue;
    }
    first = keyed[r].i;
    unique.push_back(all[static_cast<size_t>(first)]);
  }
  keyed = {};
  all.clear();
  all.shrink_to_fit();
  if (static_cast<int64_t>(unique.size()) > kMaxUniqueSites)
    throw InvalidInput("spherical Voronoi: too many distinct sites (" + std::to_string(unique.size()) +
                       ", at most " + std::to_string(kMaxUniqueSites) + ")");

  if (unique.size() == 1)
  {
    SphericalRegion& r = result[static_cast<size_t>(unique[0].input)];
    r.parts = wholeSphere();
    r.areaSteradians = 2.0 * kTwoPi;
    return result;
  }

  const Geometry g(std::move(unique));
  std::vector<SphereRing> rings;
  std::vector<double> areas;
  const std::vector<V3> d0 = diffsFromFirst(g, threads, control);
  const Plane plane = findPlane(g, d0, control);
  bool flat = plane.coplanar;
  if (!flat)
  {
    Mesh mesh;
    flat = delaunay(g, d0, mesh, threads, control) == HullResult::Flat;
    if (!flat)
      meshRegions(g, mesh, rings, areas, threads, control);
  }
  if (flat)
    lunes(g, plane, rings, areas, control);

  // Each edge's points once, then each region's polygons from its own ring and its neighbours' (read
  // only): the regions in parallel.
  const double stepRad = options.densifyStepDeg * kRadPerDeg;
  const LowerEdges lower = lowerEdges(rings, threads, control);
  const std::vector<EdgePoints> edges = densifyEdges(g, rings, lower, stepRad, threads, control);
  parallelFor(g.count(), 256, threads, [&](int64_t begin, int64_t end) {
    DensifyScratch scratch(stepRad);
    LonLatScratch lonLat;
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      const SphereRing& ring = rings[static_cast<size_t>(s)];
      SphericalRegion& r = result[static_cast<size_t>(g.site(s).input)];
      r.areaSteradians = areas[static_cast<size_t>(s)];
      r.vertices.reserve(ring.vert.size());
      r.neighbors.reserve(ring.vert.size());
      for (size_t i = 0; i < ring.vert.size(); ++i)
      {
        r.vertices.push_back({ring.vert[i].x, ring.vert[i].y, ring.vert[i].z});
        r.neighbors.push_back(g.site(ring.neighbor[i]).input);
      }
      if (!ring.vert.empty())
        r.parts = ringToLonLat(densifyRegion(g, rings, lower, edges, s, stepRad, scratch), lonLat);
    }
  }, &control);
  return result;
}

}  // namespace gpugeo::sphere
