// The per-site math of the Voronoi cells clipped for the GPU path (spherical_cells.h), shared by the
// CUDA kernel and its host build (hostCells) so that both give the same bits: every product and sum
// rounded one by one (exact_math.h, no fused multiply-adds).
#pragma once

#include <cstdint>
#ifndef __CUDA_ARCH__
#include <cmath>
#endif

#include "core/exact_math.h"
#include "core/hd.h"
#include "sphere/detail/sphere_math.h"

namespace gpugeo::sphere::detail::cells {

// The most sites a thread gathers (the nearest ones within its radius) and the most edges a cell
// may have while it is being cut (uniform random sites: 6 on average, rarely above 14).
constexpr int kCellCandidates = 128;
constexpr int kCellEdges = 32;
// The gathering radius starts where some 24 sites of a uniform spread would fall within it, and
// doubles while the cell cannot be closed, at most this many times.
constexpr int kRadiusDoublings = 24;
// Why a cell failed, a bit each.
constexpr int kFailTooMany = 1;    // more than kCellCandidates sites within twice its reach
constexpr int kFailEdges = 2;      // more than kCellEdges edges
constexpr int kFailOpen = 4;       // the starting square's edges never all cut away (a cell too large)
constexpr int kFailRounding = 8;   // a cut that is no clean cut (rounding on a near-degenerate cell)

struct D3
{
  double x, y, z;
};

// Products and sums rounded one by one (exact_math.h: no fused multiply-adds), so that the kernel gives
// the bits a host build of it gives, which is how it is debugged.
GPUGEO_HD D3 operator-(D3 a, D3 b) { return {exact::sub(a.x, b.x), exact::sub(a.y, b.y), exact::sub(a.z, b.z)}; }
GPUGEO_HD double dot3(D3 a, D3 b)
{
  return exact::add(exact::add(exact::mul(a.x, b.x), exact::mul(a.y, b.y)), exact::mul(a.z, b.z));
}
GPUGEO_HD double crossTerm(double a, double b, double c, double d)
{
  return exact::sub(exact::mul(a, b), exact::mul(c, d));
}
GPUGEO_HD D3 cross3(D3 a, D3 b)
{
  return {crossTerm(a.y, b.z, a.z, b.y), crossTerm(a.z, b.x, a.x, b.z), crossTerm(a.x, b.y, a.y, b.x)};
}
GPUGEO_HD D3 unit3(D3 a)
{
  const double r = exact::div(1.0, exact::sqrt(dot3(a, a)));
  return {exact::mul(a.x, r), exact::mul(a.y, r), exact::mul(a.z, r)};
}

// First index in key[0, n) not below k.
GPUGEO_HD int32_t lowerBound(const uint64_t* key, int32_t n, uint64_t k)
{
  int32_t lo = 0, hi = n;
  while (lo < hi)
  {
    const int32_t mid = lo + (hi - lo) / 2;
    if (key[mid] < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// A convex spherical polygon about the site: edge k on the great circle of plane normal n[k] (the
// cell on the side it points to), from its site id[k] (negative: the starting square); vertex k
// joins edge k and edge k + 1, counter-clockwise seen from outside.
struct Cell
{
  int m;
  D3 n[kCellEdges + 2];
  int32_t id[kCellEdges + 2];
  D3 v[kCellEdges + 2];
};

// The spherical square of half-width 45 degrees about s.
GPUGEO_HD void startSquare(Cell& c, D3 s)
{
  const double ax = fabs(s.x), ay = fabs(s.y), az = fabs(s.z);
  const D3 axis = ax <= ay && ax <= az ? D3{1, 0, 0} : ay <= az ? D3{0, 1, 0} : D3{0, 0, 1};
  const D3 e1 = unit3(cross3(s, axis));
  const D3 e2 = cross3(s, e1);
  const D3 d[4] = {e1, e2, {-e1.x, -e1.y, -e1.z}, {-e2.x, -e2.y, -e2.z}};
  c.m = 4;
  for (int k = 0; k < 4; ++k)
  {
    c.n[k] = {s.x - d[k].x, s.y - d[k].y, s.z - d[k].z};  // sin 45 s - cos 45 d, scaled
    c.id[k] = -1 - k;
  }
  for (int k = 0; k < 4; ++k)
    c.v[k] = unit3(cross3(c.n[k], c.n[(k + 1) % 4]));
}

// Cuts the cell by the plane of normal q (keeping q.x >= 0) from site qid; 0 or a kFail bit.
GPUGEO_HD int cut(Cell& c, D3 q, int32_t qid)
{
  uint64_t out = 0;
  for (int k = 0; k < c.m; ++k)
    if (dot3(q, c.v[k]) < 0)
      out |= uint64_t(1) << k;
  if (out == 0)
    return 0;
  const uint64_t all = c.m == 64 ? ~uint64_t(0) : (uint64_t(1) << c.m) - 1;
  if (out == all)
    return kFailRounding;
  // The outside vertices a..b (cyclic) must be one run: exactly one step from in to out.
  int a = -1, b = -1, entries = 0;
  for (int k = 0; k < c.m; ++k)
  {
    const int prev = (k + c.m - 1) % c.m, next = (k + 1) % c.m;
    const bool o = (out >> k) & 1;
    if (o && !((out >> prev) & 1))
    {
      a = k;
      ++entries;
    }
    if (o && !((out >> next) & 1))
      b = k;
  }
  if (entries != 1)
    return kFailRounding;
  // Kept edges b + 1 .. a (cyclic), then q; vertices between kept edges stay.
  const int kept = (a - (b + 1) + 2 * c.m) % c.m + 1;
  if (kept + 1 > kCellEdges)
    return kFailEdges;
  D3 n[kCellEdges + 2], v[kCellEdges + 2];
  int32_t id[kCellEdges + 2];
  for (int t = 0; t < kept; ++t)
  {
    const int e = (b + 1 + t) % c.m;
    n[t] = c.n[e];
    id[t] = c.id[e];
    v[t] = c.v[e];
  }
  v[kept - 1] = unit3(cross3(n[kept - 1], q));
  n[kept] = q;
  id[kept] = qid;
  v[kept] = unit3(cross3(q, n[0]));
  c.m = kept + 1;
  for (int t = 0; t < c.m; ++t)
  {
    c.n[t] = n[t];
    c.id[t] = id[t];
    c.v[t] = v[t];
  }
  return 0;
}

// The largest squared chord from s to a vertex of the cell.
GPUGEO_HD double reach2(const Cell& c, D3 s)
{
  double r = 0;
  for (int k = 0; k < c.m; ++k)
  {
    const D3 d = c.v[k] - s;
    r = fmax(r, dot3(d, d));
  }
  return r;
}

// A level-L Morton cell's coordinate along one axis for a coordinate in [-1, 1].
GPUGEO_HD uint32_t cellCoord(double c, int shift)
{
  return uint32_t(mortonStep(fmin(1.0, fmax(-1.0, c))) >> shift);
}

// Site i's cell: returns its edge count and writes its neighbours, counter-clockwise seen from
// outside, to neighbor[0 ..]; or minus the kFail bits of why it could not be closed. site: the n unit
// vectors sorted by their Morton keys `key`; radius0: the first gathering radius (chord).
GPUGEO_HD int clipCell(int32_t i, const D3* site, const uint64_t* key, int32_t n, double radius0, int32_t* neighbor)
{
  const D3 s = site[i];
  int32_t candId[kCellCandidates];
  double candD2[kCellCandidates];
  Cell c;
  double radius = radius0;
  int failure = 0;
  for (int attempt = 0; attempt <= kRadiusDoublings; ++attempt, radius *= 2.0)
  {
    failure = 0;
    // Gather the nearest sites within the radius, sorted by distance: the Morton cells of the level
    // whose cells are at least 2 radius wide, around the site.
    const double r2 = radius * radius;
    int level = 0;
    while (level < 21 && ::ldexp(1.0, -(level + 1)) >= radius)
      ++level;
    const int shift = 21 - level;
    int count = 0;
    bool full = false;
    const uint32_t x0 = cellCoord(s.x - radius, shift), x1 = cellCoord(s.x + radius, shift);
    const uint32_t y0 = cellCoord(s.y - radius, shift), y1 = cellCoord(s.y + radius, shift);
    const uint32_t z0 = cellCoord(s.z - radius, shift), z1 = cellCoord(s.z + radius, shift);
    for (uint32_t cx = x0; cx <= x1; ++cx)
      for (uint32_t cy = y0; cy <= y1; ++cy)
        for (uint32_t cz = z0; cz <= z1; ++cz)
        {
          const uint64_t prefix = mortonSpread21(cx) | mortonSpread21(cy) << 1 | mortonSpread21(cz) << 2;
          const int32_t from = lowerBound(key, n, prefix << (3 * shift));
          const int32_t to = lowerBound(key, n, (prefix + 1) << (3 * shift));
          for (int32_t j = from; j < to; ++j)
          {
            if (j == i)
              continue;
            const D3 d = site[j] - s;
            const double d2 = dot3(d, d);
            if (d2 > r2 || (full && d2 >= candD2[kCellCandidates - 1]))
              continue;
            int at = count < kCellCandidates ? count++ : kCellCandidates - 1;
            while (at > 0 && (candD2[at - 1] > d2 || (candD2[at - 1] == d2 && candId[at - 1] > j)))
            {
              candD2[at] = candD2[at - 1];
              candId[at] = candId[at - 1];
              --at;
            }
            candD2[at] = d2;
            candId[at] = j;
            full = full || count == kCellCandidates;
          }
        }
    // Every site nearer than this is among the candidates.
    const double known2 = full ? candD2[kCellCandidates - 1] : r2;
    startSquare(c, s);
    double far2 = reach2(c, s);
    bool closed = false;
    for (int k = 0; k < count && !failure; ++k)
    {
      if (4.0 * far2 * (1.0 + 1e-6) < candD2[k])
      {
        closed = true;
        break;
      }
      const D3 p = site[candId[k]];
      failure = cut(c, s - p, candId[k]);
      far2 = reach2(c, s);
    }
    if (failure)
      break;
    closed = closed || 4.0 * far2 * (1.0 + 1e-6) < known2;
    if (closed)
      break;
    if (full)
    {
      failure = kFailTooMany;
      break;
    }
    failure = kFailOpen;
  }
  if (!failure)
    for (int k = 0; k < c.m; ++k)
      if (c.id[k] < 0)
        failure = kFailOpen;
  if (failure)
    return -failure;
  for (int k = 0; k < c.m; ++k)
    neighbor[k] = c.id[k];
  return c.m;
}

}  // namespace gpugeo::sphere::detail::cells
