// The per-element math of the allocation to lines and polygons (feature_allocation.h), shared by the
// CPU and CUDA backends so that both give the same labels and distances bit for bit: the segment
// record and its distance, the bucket grid the segments are listed in, and the certificate that
// stops a block's search.
#pragma once

#include <cstdint>

#include "core/exact_math.h"
#include "core/hd.h"

namespace gpugeo::voronoi::detail::segments {

constexpr int kBlock = 8;         // a block of 8 x 8 pixels searches its buckets together
constexpr int kMinShift = 2;      // buckets of 4 to 4,096 pixels a side
constexpr int kMaxShift = 12;
constexpr int64_t kMaxBuckets = int64_t(1) << 24;

// A segment in the pixel frame: from (ax, ay) along (dx, dy); inv = 1 / (dx^2 + dy^2), 0 for a
// point (a zero-length segment, or one so short that the inverse overflows).
struct alignas(16) Segment
{
  double ax, ay, dx, dy, inv;
  int32_t feature;  // the site (feature) index; -1: no segment
  int32_t id;       // the segment's number (its copies in several buckets share it)
};

GPUGEO_HD double squaredLength(double dx, double dy)
{
  return exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
}

GPUGEO_HD Segment makeSegment(double ax, double ay, double bx, double by, int32_t feature, int32_t id = 0)
{
  Segment s{ax, ay, exact::sub(bx, ax), exact::sub(by, ay), 0.0, feature, id};
  const double dd = squaredLength(s.dx, s.dy);
  const double inv = dd > 0.0 ? exact::div(1.0, dd) : 0.0;
  if (inv > 0.0 && inv <= 1.7976931348623157e308)
    s.inv = inv;
  else
    s.dx = s.dy = 0.0;
  return s;
}

// The squared distance from (px, py) to the segment, in float64 in this order, no fused operations:
// w = p - a; beyond an end (w.d <= 0, or w.d >= d.d) the squared distance to that end (w - d for
// the far one); else cross(w, d)^2 / d.d, the divide taken as a multiply by inv. All three are
// computed and one is selected: no branch for the CPU to mispredict (the values are the same).
GPUGEO_HD double segmentSquared(double px, double py, const Segment& s)
{
  const double wx = exact::sub(px, s.ax), wy = exact::sub(py, s.ay);
  const double along = exact::add(exact::mul(wx, s.dx), exact::mul(wy, s.dy));
  const double toA = squaredLength(wx, wy);
  const double toB = squaredLength(exact::sub(wx, s.dx), exact::sub(wy, s.dy));
  const double cross = exact::sub(exact::mul(wx, s.dy), exact::mul(wy, s.dx));
  const double toLine = exact::mul(exact::mul(cross, cross), s.inv);
  const double beyondB = exact::select(along >= squaredLength(s.dx, s.dy), toB, toLine);
  return exact::select(along <= 0.0, toA, beyondB);
}

// True when (e, feature) is before (best, bestFeature): nearer, or as near with a lower index.
GPUGEO_HD bool better(double e, int32_t feature, double best, int32_t bestFeature)
{
  return (e < best) | ((e == best) & (feature < bestFeature));
}

// The bucket grid: buckets of side 2^shift pixels, bx x by of them; the grid's edge buckets also
// hold what lies beyond the grid on their side.
struct BucketGrid
{
  int shift = kMinShift;
  int bx = 0, by = 0;

  GPUGEO_HD int64_t count() const { return int64_t(bx) * by; }
};

GPUGEO_HD int clampBucket(double v, int shift, int n)
{
  const double b = v * exact::div(1.0, double(int64_t(1) << shift));  // exact: a power of two
  if (!(b >= 0.0))
    return 0;
  if (b >= double(n - 1))
    return n - 1;
  return int(b);
}

// Calls f(x0, x1, y) for each bucket row y the segment passes through, with the columns [x0, x1]
// it touches there (a superset: the ends widened by a millionth of a bucket).
template <class F>
GPUGEO_HD void forEachBucketRow(const BucketGrid& g, const Segment& s, F&& f)
{
  const double side = double(int64_t(1) << g.shift);
  const double bx = exact::add(s.ax, s.dx), by = exact::add(s.ay, s.dy);
  const double size = (s.ax < 0 ? -s.ax : s.ax) + (s.ay < 0 ? -s.ay : s.ay) + (bx < 0 ? -bx : bx) + (by < 0 ? -by : by);
  const double margin = side * 1e-6 + size * 1e-12;
  const double ylo = s.ay < by ? s.ay : by, yhi = s.ay < by ? by : s.ay;
  const int y0 = clampBucket(ylo - margin, g.shift, g.by), y1 = clampBucket(yhi + margin, g.shift, g.by);
  const double xlo = s.ax < bx ? s.ax : bx, xhi = s.ax < bx ? bx : s.ax;
  for (int y = y0; y <= y1; ++y)
  {
    double lo = xlo, hi = xhi;
    if (y0 != y1 && s.dy != 0.0)
    {
      // The segment's x where it crosses the row's top and bottom (rows at the edges reach out).
      const double top = y == 0 ? ylo : double(y) * side - margin;
      const double bottom = y == g.by - 1 ? yhi : double(y + 1) * side + margin;
      const double t0 = (top - s.ay) / s.dy, t1 = (bottom - s.ay) / s.dy;
      const double ta = t0 < 0.0 ? 0.0 : (t0 > 1.0 ? 1.0 : t0), tb = t1 < 0.0 ? 0.0 : (t1 > 1.0 ? 1.0 : t1);
      const double xa = s.ax + ta * s.dx, xb = s.ax + tb * s.dx;
      lo = xa < xb ? xa : xb;
      hi = xa < xb ? xb : xa;
      lo = lo > xlo ? lo : xlo;
      hi = hi < xhi ? hi : xhi;
    }
    const double widen = margin + 1e-9 * (hi - lo);
    f(clampBucket(lo - widen, g.shift, g.bx), clampBucket(hi + widen, g.shift, g.bx), y);
  }
}

// Buckets a segment is listed in.
GPUGEO_HD int64_t bucketCount(const BucketGrid& g, const Segment& s)
{
  int64_t n = 0;
  forEachBucketRow(g, s, [&](int x0, int x1, int) { n += x1 - x0 + 1; });
  return n;
}

// A rectangle of buckets [x0, x1] x [y0, y1]; empty when x1 < x0.
struct Rect
{
  int x0 = 0, y0 = 0, x1 = -1, y1 = -1;

  GPUGEO_HD bool empty() const { return x1 < x0 || y1 < y0; }
  GPUGEO_HD bool contains(const Rect& o) const
  {
    return o.empty() || (!empty() && o.x0 >= x0 && o.x1 <= x1 && o.y0 >= y0 && o.y1 <= y1);
  }
};

// Calls f(y, x0, x1) for the runs of buckets of `now` that are not in `before` (before within now).
template <class F>
GPUGEO_HD void forNewRuns(const Rect& now, const Rect& before, F&& f)
{
  for (int y = now.y0; y <= now.y1; ++y)
  {
    if (before.empty() || y < before.y0 || y > before.y1)
    {
      f(y, now.x0, now.x1);
      continue;
    }
    if (now.x0 < before.x0)
      f(y, now.x0, before.x0 - 1);
    if (before.x1 < now.x1)
      f(y, before.x1 + 1, now.x1);
  }
}

}  // namespace gpugeo::voronoi::detail::segments
