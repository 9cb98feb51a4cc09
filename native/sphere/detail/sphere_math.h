// The per-element math of the spherical nearest-site labelling, shared by the CPU and CUDA paths so
// that both give the same bits: cell centres and grid points from trigonometric tables made once on
// the host, squared chord distances, the site tree's searches.
#pragma once

#include <cstdint>
#ifndef __CUDA_ARCH__
#include <cmath>
#endif

#include "core/exact_math.h"
#include "core/hd.h"
#include "sphere/qtm.h"

namespace gpugeo::sphere::detail {

struct Vec3
{
  double x, y, z;
};

// Squared chord between two unit vectors, in this order without fused multiply-adds. The chord is
// monotone in the great-circle distance, and, unlike 1 - dot, keeps its relative precision for
// points centimetres apart.
GPUGEO_HD double chord2(const Vec3& a, const Vec3& b)
{
  const double dx = exact::sub(a.x, b.x);
  const double dy = exact::sub(a.y, b.y);
  const double dz = exact::sub(a.z, b.z);
  return exact::add(exact::add(exact::mul(dx, dx), exact::mul(dy, dy)), exact::mul(dz, dz));
}

GPUGEO_HD Vec3 normalised(double x, double y, double z)
{
  const double len = exact::sqrt(exact::add(exact::add(exact::mul(x, x), exact::mul(y, y)), exact::mul(z, z)));
  return {exact::div(x, len), exact::div(y, len), exact::div(z, len)};
}

// sinQuarter[m] = sin(pi/2 * m / n) for m = 0..n (made on the host, qtmTrigTable).
struct QtmTrig
{
  const double* sinQuarter = nullptr;
  int32_t n = 1;
};

GPUGEO_HD Vec3 qtmVertexVector(const QtmTrig& t, int32_t lonUnits, int32_t latUnits)
{
  const int32_t a = latUnits < 0 ? -latUnits : latUnits;
  const double sinLatAbs = t.sinQuarter[a];
  const double sinLat = latUnits < 0 ? -sinLatAbs : sinLatAbs;
  const double cosLat = t.sinQuarter[t.n - a];
  // longitude = -180 + 90 * quadrant + theta, theta = 90 * m / n
  const int32_t quadrant = (lonUnits / t.n) & 3;
  const int32_t m = lonUnits % t.n;
  const double s = t.sinQuarter[m];
  const double c = t.sinQuarter[t.n - m];
  double sinLon, cosLon;
  switch (quadrant)
  {
    case 0: sinLon = -s; cosLon = -c; break;
    case 1: sinLon = -c; cosLon = s; break;
    case 2: sinLon = s; cosLon = c; break;
    default: sinLon = c; cosLon = -s; break;
  }
  return {exact::mul(cosLat, cosLon), exact::mul(cosLat, sinLon), sinLat};
}

GPUGEO_HD Vec3 qtmCellCentre(const QtmTrig& t, uint64_t id, int level)
{
  const QtmCorners c = qtmCellCorners(qtmLatticeFromId(id, level), level);
  const Vec3 a = qtmVertexVector(t, c.lonUnits[0], c.latUnits[0]);
  const Vec3 b = qtmVertexVector(t, c.lonUnits[1], c.latUnits[1]);
  const Vec3 d = qtmVertexVector(t, c.lonUnits[2], c.latUnits[2]);
  return normalised(exact::add(exact::add(a.x, b.x), d.x), exact::add(exact::add(a.y, b.y), d.y),
                    exact::add(exact::add(a.z, b.z), d.z));
}

// Queries come in blocks of 64 points that lie close together; a block shares one list of candidate
// sites. QTM cells: 64 consecutive ids (one cell three levels up). Grid pixels: an 8 x 8 tile.
constexpr int kBlockPoints = 64;

struct QtmQueries
{
  QtmTrig trig;
  int level = 0;
  uint64_t first = 0;  // first cell id
  int64_t count = 0;

  GPUGEO_HD int64_t blocks() const { return (count + kBlockPoints - 1) / kBlockPoints; }
  GPUGEO_HD bool point(int64_t block, int j, Vec3& p, int64_t& out) const
  {
    out = block * kBlockPoints + j;
    if (out >= count)
      return false;
    p = qtmCellCentre(trig, first + uint64_t(out), level);
    return true;
  }
};

// Pixel centres of a lon/lat grid: unit vectors from per-column and per-row sines and cosines.
struct GridQueries
{
  const double* colSin = nullptr;
  const double* colCos = nullptr;
  const double* rowSin = nullptr;  // indexed by the row within this band
  const double* rowCos = nullptr;
  int64_t width = 0;
  int64_t rows = 0;

  GPUGEO_HD int64_t tilesX() const { return (width + 7) / 8; }
  GPUGEO_HD int64_t blocks() const { return tilesX() * ((rows + 7) / 8); }
  GPUGEO_HD bool point(int64_t block, int j, Vec3& p, int64_t& out) const
  {
    const int64_t tx = tilesX();
    const int64_t col = (block % tx) * 8 + (j & 7);
    const int64_t row = (block / tx) * 8 + (j >> 3);
    if (col >= width || row >= rows)
      return false;
    out = row * width + col;
    p = {exact::mul(rowCos[row], colCos[col]), exact::mul(rowCos[row], colSin[col]), rowSin[row]};
    return true;
  }
};

// ---- The site tree: sites sorted along a 3D Morton curve, leaves of 8, four children a node ----

constexpr int kLeafSites = 8;
constexpr int kFanout = 4;
constexpr int kMaxTreeLevels = 16;

struct Box
{
  double lo[3];
  double hi[3];
};

// ---- Building the tree (the same bits on the host and the device) ----

GPUGEO_HD uint64_t mortonSpread21(uint64_t v)
{
  v &= 0x1fffff;
  v = (v | v << 32) & 0x1f00000000ffffull;
  v = (v | v << 16) & 0x1f0000ff0000ffull;
  v = (v | v << 8) & 0x100f00f00f00f00full;
  v = (v | v << 4) & 0x10c30c30c30c30c3ull;
  v = (v | v << 2) & 0x1249249249249249ull;
  return v;
}

// A coordinate in -1..1 as one of 2^21 steps.
GPUGEO_HD uint64_t mortonStep(double c)
{
  constexpr double steps = double(1 << 21);
#ifdef __CUDA_ARCH__
  const double scaled = ::floor(exact::mul(exact::add(c, 1.0), 0.5 * steps));
#else
  const double scaled = std::floor(exact::mul(exact::add(c, 1.0), 0.5 * steps));
#endif
  return scaled <= 0.0 ? 0 : scaled >= steps - 1.0 ? uint64_t(steps - 1.0) : uint64_t(scaled);
}

// The site's position on the 3D Morton curve (63 bits).
GPUGEO_HD uint64_t mortonKey(const Vec3& v)
{
  return mortonSpread21(mortonStep(v.x)) | mortonSpread21(mortonStep(v.y)) << 1 | mortonSpread21(mortonStep(v.z)) << 2;
}

// A coordinate's bits with -0 read as +0, so that equal coordinates have equal bits (the tree's
// order puts exact duplicates next to each other: Morton key, then these bits of x, y and z).
GPUGEO_HD uint64_t coordinateBits(double c)
{
  const double v = exact::add(c, 0.0);
#ifdef __CUDA_ARCH__
  return uint64_t(__double_as_longlong(v));
#else
  uint64_t bits;
  __builtin_memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}

GPUGEO_HD Box emptyBox()
{
  return {{1e300, 1e300, 1e300}, {-1e300, -1e300, -1e300}};
}

GPUGEO_HD void growBox(Box& b, const Vec3& v)
{
  const double c[3] = {v.x, v.y, v.z};
  for (int k = 0; k < 3; ++k)
  {
    b.lo[k] = c[k] < b.lo[k] ? c[k] : b.lo[k];
    b.hi[k] = b.hi[k] < c[k] ? c[k] : b.hi[k];
  }
}

GPUGEO_HD void growBox(Box& b, const Box& child)
{
  for (int k = 0; k < 3; ++k)
  {
    b.lo[k] = child.lo[k] < b.lo[k] ? child.lo[k] : b.lo[k];
    b.hi[k] = b.hi[k] < child.hi[k] ? child.hi[k] : b.hi[k];
  }
}

// A lower bound of the squared distance from p to the box, scaled down so that its rounding can
// never make it exceed the true squared distance of a site in the box.
GPUGEO_HD double boxLowerBound(const Box& b, const Vec3& p)
{
  const double q[3] = {p.x, p.y, p.z};
  double sum = 0.0;
  for (int k = 0; k < 3; ++k)
  {
    double d = 0.0;
    if (q[k] < b.lo[k])
      d = exact::sub(b.lo[k], q[k]);
    else if (q[k] > b.hi[k])
      d = exact::sub(q[k], b.hi[k]);
    sum = exact::add(sum, exact::mul(d, d));
  }
  return exact::mul(sum, 0.9999999999);
}

struct SiteTreeView
{
  const Vec3* sites = nullptr;       // unique sites in tree order
  const int32_t* original = nullptr;  // their input indices
  int32_t count = 0;
  int levels = 0;                     // levels[0] = leaves, levels - 1 = root
  int32_t levelOffset[kMaxTreeLevels] = {};
  int32_t levelSize[kMaxTreeLevels] = {};
  const Box* boxes = nullptr;
};

struct Nearest
{
  double d2;
  int32_t site;  // input index
};

GPUGEO_HD bool better(double d2, int32_t site, const Nearest& best)
{
  return d2 < best.d2 || (d2 == best.d2 && site < best.site);
}

// The exact nearest site of p (smallest chord2, then lowest input index), by depth-first search.
GPUGEO_HD Nearest treeNearest(const SiteTreeView& t, const Vec3& p)
{
  Nearest best{1e300, 0x7fffffff};
  int32_t stack[kMaxTreeLevels * kFanout];
  int8_t stackLevel[kMaxTreeLevels * kFanout];
  int top = 0;
  stack[top] = 0;
  stackLevel[top] = int8_t(t.levels - 1);
  ++top;
  while (top > 0)
  {
    --top;
    const int32_t node = stack[top];
    const int level = stackLevel[top];
    if (boxLowerBound(t.boxes[t.levelOffset[level] + node], p) > best.d2)
      continue;
    if (level == 0)
    {
      const int32_t end = (node + 1) * kLeafSites < t.count ? (node + 1) * kLeafSites : t.count;
      for (int32_t i = node * kLeafSites; i < end; ++i)
      {
        const double d2 = chord2(p, t.sites[i]);
        if (better(d2, t.original[i], best))
          best = {d2, t.original[i]};
      }
      continue;
    }
    // children, nearer ones pushed last so they are searched first
    const int32_t first = node * kFanout;
    const int32_t last = first + kFanout < t.levelSize[level - 1] ? first + kFanout : t.levelSize[level - 1];
    double lb[kFanout];
    int32_t order[kFanout];
    int k = 0;
    for (int32_t c = first; c < last; ++c, ++k)
    {
      lb[k] = boxLowerBound(t.boxes[t.levelOffset[level - 1] + c], p);
      order[k] = c;
      for (int m = k; m > 0 && lb[m] > lb[m - 1]; --m)
      {
        const double tl = lb[m]; lb[m] = lb[m - 1]; lb[m - 1] = tl;
        const int32_t to = order[m]; order[m] = order[m - 1]; order[m - 1] = to;
      }
    }
    for (int m = 0; m < k; ++m)
      if (lb[m] <= best.d2)
      {
        stack[top] = order[m];
        stackLevel[top] = int8_t(level - 1);
        ++top;
      }
  }
  return best;
}

// Appends to `out` (tree positions) every site with chord2(c, site) <= radius2, up to `capacity`;
// returns how many there are, which may exceed capacity (then the list is incomplete).
GPUGEO_HD int32_t treeGather(const SiteTreeView& t, const Vec3& c, double radius2, int32_t* out, int32_t capacity)
{
  int32_t found = 0;
  int32_t stack[kMaxTreeLevels * kFanout];
  int8_t stackLevel[kMaxTreeLevels * kFanout];
  int top = 0;
  stack[top] = 0;
  stackLevel[top] = int8_t(t.levels - 1);
  ++top;
  while (top > 0 && found <= capacity)
  {
    --top;
    const int32_t node = stack[top];
    const int level = stackLevel[top];
    if (boxLowerBound(t.boxes[t.levelOffset[level] + node], c) > radius2)
      continue;
    if (level == 0)
    {
      const int32_t end = (node + 1) * kLeafSites < t.count ? (node + 1) * kLeafSites : t.count;
      for (int32_t i = node * kLeafSites; i < end; ++i)
        if (chord2(c, t.sites[i]) <= radius2)
        {
          if (found < capacity)
            out[found] = i;
          ++found;
        }
      continue;
    }
    const int32_t first = node * kFanout;
    const int32_t last = first + kFanout < t.levelSize[level - 1] ? first + kFanout : t.levelSize[level - 1];
    for (int32_t ch = first; ch < last; ++ch)
    {
      stack[top] = ch;
      stackLevel[top] = int8_t(level - 1);
      ++top;
    }
  }
  return found;
}

// The gather radius for a block with centre c, farthest point at chord rho from c and nearest site
// at chord d0 from c: a site nearest to some point p of the block has |c - s| <= |c - p| + |p - s|
// <= rho + |p - s0| <= 2 rho + d0 (chords obey the triangle inequality). Widened by a relative and
// an absolute margin that dwarf the rounding of every chord involved.
GPUGEO_HD double gatherRadius2(double rho2, double d02)
{
  const double r = exact::add(exact::mul(exact::add(exact::mul(2.0, exact::sqrt(rho2)), exact::sqrt(d02)), 1.000000001), 1e-12);
  return exact::mul(r, r);
}

// Capacity of a block's candidate list; a block with more candidates searches the tree per point.
constexpr int32_t kBlockCandidates = 128;

// Great-circle distance in km for a squared chord on the unit sphere, in float64.
GPUGEO_HD double chordToKmDouble(double d2, double radiusKm)
{
  double half = exact::mul(exact::sqrt(d2), 0.5);
  if (half > 1.0)
    half = 1.0;
  return 2.0 * radiusKm * ::asin(half);
}

// The same rounded to float32 (the labellers' distance arrays).
GPUGEO_HD float chordToKm(double d2, double radiusKm)
{
  return exact::toFloat(chordToKmDouble(d2, radiusKm));
}

}  // namespace gpugeo::sphere::detail
