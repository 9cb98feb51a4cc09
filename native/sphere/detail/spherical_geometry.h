// The spherical Voronoi module's shared geometry (spherical_voronoi.h describes the method): vectors,
// the sites with their accurate differences (step 1), the in-cap predicates on them (step 4), and a
// region's spherical polygon. Used by the mesh (spherical_mesh.cpp), the regions
// (spherical_regions.cpp) and the lon/lat polygons (spherical_lonlat.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/run_control.h"

namespace gpugeo::sphere::detail {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;
constexpr double kDegPerRad = 180.0 / kPi;
constexpr double kRadPerDeg = kPi / 180.0;

inline void pollCancel(const RunControl& control, int64_t i)
{
  if ((i & 1023) == 0 && control.isCanceled())
    throw Canceled();
}

// ---------------------------------------------------------------------------------------------
// Vectors

// A vector whose new elements are default-initialized, which for the plain types here means not
// written: a large array's pages are then first touched, and cleared by the kernel, in the threads
// that fill it, not by one thread beforehand.
template <typename T>
struct NoInitAllocator : std::allocator<T>
{
  template <typename U>
  struct rebind
  {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <typename U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept
  {
  }
  template <typename U>
  void construct(U* p) noexcept
  {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args)
  {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <typename T>
using FlatArray = std::vector<T, NoInitAllocator<T>>;

// A plain vector: not initialized by default (V3{} is zero), so that large arrays of them are written
// first by the threads that fill them (FlatArray).
struct V3
{
  double x, y, z;
};

inline V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline V3 operator-(V3 a) { return {-a.x, -a.y, -a.z}; }
inline V3 operator*(double s, V3 a) { return {s * a.x, s * a.y, s * a.z}; }
inline double dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline V3 cross(V3 a, V3 b) { return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }

// Unit vector along a, scaled first so that tiny or huge vectors neither underflow nor overflow;
// the zero vector stays zero.
inline V3 normalized(V3 a)
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

inline double chord(V3 a, V3 b)
{
  const V3 d = a - b;
  return std::sqrt(dot(d, d));
}

// sin and cos of an angle in degrees, reduced exactly (std::remainder is exact) so that multiples
// of 90 degrees give exact zeros and ones, and x and x + 360 k give the same values.
inline void sinCosDeg(double deg, double& s, double& c)
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
inline V3 perpendicular(V3 m)
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

// A site (made by makeSite; plain, so that arrays of them are not written before they are filled).
struct Site
{
  double lon, lat;  // degrees; lon reduced to [-180, 180]
  double sinLon, cosLon, sinLat, cosLat;
  V3 p;
  int64_t input;  // index in the caller's arrays
};

inline Site makeSite(double lonDeg, double latDeg, int64_t input)
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
inline V3 accurateDiff(const Site& a, const Site& b)
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
  explicit Geometry(FlatArray<Site> sites) : sites_(std::move(sites)) {}

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
    const QuickDeterminant q = quickDeterminant(a, b, c, d);
    if (q.det > q.bound + 1e-9 * q.scale)
      return 1;
    if (q.det < -q.bound)
      return -1;
    return 0;
  }

  // Whether d lies outside the circumscribed cap of the counter-clockwise triangle (a, b, c) by a clear
  // margin, 1e-10 relative to the determinant's terms: the quick test with its rounding bound, else
  // inCap. An edge whose opposite sites pass this both ways is in every Delaunay triangulation that
  // exact predicates, or these with their 1e-12 tolerance, can give.
  bool clearlyOutside(int32_t a, int32_t b, int32_t c, int32_t d) const
  {
    const QuickDeterminant q = quickDeterminant(a, b, c, d);
    if (q.det < -q.bound - 1e-10 * q.scale)
      return true;
    if (q.det > q.bound)
      return false;
    return inCap(a, b, c, d) < -1e-10;
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
  // The quick in-cap determinant: (d - a) . ((b - a) x (c - a)) on the rounded vectors, the bound on
  // its error, and the product of the three differences' lengths.
  struct QuickDeterminant
  {
    double det, bound, scale;
  };
  QuickDeterminant quickDeterminant(int32_t a, int32_t b, int32_t c, int32_t d) const
  {
    const V3 pa = p(a);
    const V3 u = p(b) - pa, v = p(c) - pa, w = p(d) - pa;
    const double lu = std::sqrt(dot(u, u)), lv = std::sqrt(dot(v, v)), lw = std::sqrt(dot(w, w));
    return {dot(w, cross(u, v)), 4e-15 * (lu * lv + lv * lw + lw * lu) + 1e-15 * lu * lv * lw, lu * lv * lw};
  }

  FlatArray<Site> sites_;
};

// ---------------------------------------------------------------------------------------------

// One region's spherical polygon (a view into SphereRings): vertex i to vertex i+1 runs along the
// great circle of normal[i], with the region on the side normal[i] points to.
struct RingView
{
  const V3* vert;
  const V3* normal;         // normal[i] = diff(site, neighbor[i]): edge i's bisector plane
  const V3* unit;           // normalized(normal[i])
  const int32_t* neighbor;  // unique-site index
  size_t n;
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
};

// Every region's spherical polygon, flat (no allocation per site): site s's edges at
// [start[s], start[s] + count[s]) of each array, with room up to start[s + 1]; count 0: no region.
struct SphereRings
{
  std::vector<int64_t> start;
  FlatArray<int32_t> count;
  FlatArray<V3> vert, normal, unit;
  FlatArray<int32_t> neighbor;

  // Room for room[s] edges at site s (none written yet: every count 0).
  void shape(const std::vector<int32_t>& room)
  {
    start.assign(room.size() + 1, 0);
    for (size_t s = 0; s < room.size(); ++s)
      start[s + 1] = start[s] + room[s];
    count.assign(room.size(), 0);
    const size_t total = static_cast<size_t>(start.back());
    vert.resize(total);
    normal.resize(total);
    unit.resize(total);
    neighbor.resize(total);
  }
  size_t size() const { return count.size(); }
  size_t at(size_t s) const { return static_cast<size_t>(start[s]); }
  RingView operator[](size_t s) const
  {
    const size_t b = at(s);
    return {vert.data() + b, normal.data() + b, unit.data() + b, neighbor.data() + b, static_cast<size_t>(count[s])};
  }
  // Site s's ring is its count[s] edges from at(s): their unit normals made from the normals.
  void finish(size_t s)
  {
    for (size_t i = at(s), e = at(s) + static_cast<size_t>(count[s]); i < e; ++i)
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

inline Arc makeArc(V3 u, V3 v, V3 mUnit)
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

}  // namespace gpugeo::sphere::detail
