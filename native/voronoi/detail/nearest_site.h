// The per-element math of the plane Voronoi raster, shared by the CPU and CUDA backends so that
// they agree to the bit: the distance contract, the site tree and its traversals, and the
// certified float32 scan of a tile's candidate list.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/exact_math.h"
#include "core/hd.h"

namespace gpugeo::voronoi::detail {

constexpr int kLeafSize = 8;       // sites per tree leaf
constexpr int kFanout = 4;         // children per inner node
constexpr int kMaxLevels = 20;     // 8 * 4^19 sites is far above kMaxSites
constexpr int kStackDepth = (kFanout - 1) * kMaxLevels + 2;

struct alignas(16) Point
{
  double x;
  double y;
};

struct alignas(8) LocalPoint
{
  float x;
  float y;
};

struct Box
{
  double x0, y0, x1, y1;  // min and max corners
};

// The site tree, in the arrays of one backend. Sites are in the pixel frame, sorted along a
// Hilbert curve with exact duplicates removed; leaves are runs of kLeafSize sites, each inner node
// covers kFanout consecutive nodes of the level below; `boxes` holds all levels, leaves first.
struct TreeView
{
  const Point* points = nullptr;
  const int32_t* siteIndex = nullptr;  // input index of each sorted site
  const Box* boxes = nullptr;
  int32_t pointCount = 0;
  int32_t levelCount = 0;
  int32_t levelStart[kMaxLevels + 1] = {};
};

template <typename T>
GPUGEO_HD T maxOf(T a, T b)
{
  return a > b ? a : b;
}

template <typename T>
GPUGEO_HD T minOf(T a, T b)
{
  return a < b ? a : b;
}

template <typename T>
GPUGEO_HD T absOf(T a)
{
  return a < T(0) ? -a : a;
}

// --- The distance contract -------------------------------------------------------------------

GPUGEO_HD double squaredDistance(double px, double py, const Point& site)
{
  const double dx = exact::sub(px, site.x);
  const double dy = exact::sub(py, site.y);
  return exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
}

// The distance written to the raster, in CRS units.
GPUGEO_HD float distanceValue(double squared, double pixelSize)
{
  return exact::toFloat(exact::mul(exact::sqrt(squared), pixelSize));
}

// --- Box bounds (conservative: used for pruning only) ----------------------------------------

GPUGEO_HD double minSquaredDistance(const Box& a, const Box& b)
{
  const double dx = maxOf(0.0, maxOf(exact::sub(a.x0, b.x1), exact::sub(b.x0, a.x1)));
  const double dy = maxOf(0.0, maxOf(exact::sub(a.y0, b.y1), exact::sub(b.y0, a.y1)));
  return exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
}

GPUGEO_HD double maxSquaredDistance(const Box& a, const Box& b)
{
  const double dx = maxOf(exact::sub(a.x1, b.x0), exact::sub(b.x1, a.x0));
  const double dy = maxOf(exact::sub(a.y1, b.y0), exact::sub(b.y1, a.y0));
  return exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
}

// True when a squared distance bound `lower` is certainly above `bound`, whatever the rounding in
// either. Every squared distance here comes from exact coordinates (the sites as stored, pixel
// centres, their midpoints) through one difference per axis, two squares and a sum: within
// 2^-51 of its true value, relatively. The margin, 2^-44 of the bound, is a hundred times that.
GPUGEO_HD bool certainlyAbove(double lower, double bound)
{
  return lower > exact::mul(bound, 1.0 + 0x1p-44);
}

// True when `value` is certainly at most `bound` whatever the rounding (the mirror of certainlyAbove).
GPUGEO_HD bool certainlyWithin(double value, double bound)
{
  return value <= exact::mul(bound, 1.0 - 0x1p-44);
}

// The column (or row) of the bucket of side 2^shift that holds a pixel-frame coordinate, of
// `buckets` a row (a column); a site outside the grid goes to the nearest edge bucket. The GPU's
// index and the host's bands of sites (site_bands.h) both place sites by it.
GPUGEO_HD int bucketOf(double v, int shift, int buckets)
{
  const double f = floor(v / double(1 << shift));
  return int(fmin(fmax(f, 0.0), double(buckets - 1)));
}

GPUGEO_HD Box pointBox(const Point& p)
{
  return Box{p.x, p.y, p.x, p.y};
}

// The largest, over the points of `box`, of the squared distance to `region` (at a corner of the
// box, the distance to a convex region being convex).
GPUGEO_HD double farthestSquaredDistance(const Box& box, const Box& region)
{
  return maxOf(maxOf(minSquaredDistance(Box{box.x0, box.y0, box.x0, box.y0}, region),
                     minSquaredDistance(Box{box.x1, box.y0, box.x1, box.y0}, region)),
               maxOf(minSquaredDistance(Box{box.x0, box.y1, box.x0, box.y1}, region),
                     minSquaredDistance(Box{box.x1, box.y1, box.x1, box.y1}, region)));
}

// The bound a site proves for a region: every point of the region is at most this far (squared).
GPUGEO_HD double siteBound(const Point& site, const Box& region)
{
  return maxSquaredDistance(pointBox(site), region);
}

// Whether a site can be the nearest to some point of the region, given the region's bound.
GPUGEO_HD bool mayBeNearest(const Point& site, const Box& region, double bound)
{
  const Box box = pointBox(site);
  return !certainlyAbove(minSquaredDistance(box, region), bound);
}

// --- Tree traversal ------------------------------------------------------------------------
//
// Depth first, nearer children first. A visitor provides:
//   bool prune(const Box&)        skip this subtree (called when it is popped, with the latest bound)
//   bool takeWhole(const Box&, int32_t firstSlot, int32_t lastSlot)
//                                 take every site of this subtree (slots [first, last)) at once,
//                                 without opening it; false: open it as usual
//   void enter(const Box&)        an inner node or leaf is about to be opened
//   void visit(int32_t slot)      a site
//   double priority(const Box&)   smaller is visited first (only with kOrderChildren)
//   bool done()                   stop the whole traversal
//   kOrderChildren                whether to sort children by priority (searches that tighten a
//                                 bound gain from it; a plain collection does not)

template <class Visitor>
GPUGEO_HD void traverse(const TreeView& tree, Visitor& visitor)
{
  int32_t stackNode[kStackDepth];
  int8_t stackLevel[kStackDepth];
  int depth = 0;
  stackNode[depth] = 0;
  stackLevel[depth] = static_cast<int8_t>(tree.levelCount - 1);
  ++depth;
  while (depth > 0 && !visitor.done())
  {
    --depth;
    const int32_t node = stackNode[depth];
    const int level = stackLevel[depth];
    const Box box = tree.boxes[tree.levelStart[level] + node];
    if (visitor.prune(box))
      continue;
    // A node's sites are the consecutive slots of its leaves.
    static_assert(kFanout == 4, "a node of level l holds 4^l leaves");
    const int64_t sitesPerNode = int64_t(kLeafSize) << (2 * level);
    const int32_t firstSlot = static_cast<int32_t>(node * sitesPerNode);
    const int32_t lastSlot = static_cast<int32_t>(minOf<int64_t>(firstSlot + sitesPerNode, tree.pointCount));
    if (visitor.takeWhole(box, firstSlot, lastSlot))
      continue;
    visitor.enter(box);
    if (level == 0)
    {
      const int32_t first = node * kLeafSize;
      const int32_t last = minOf(first + kLeafSize, tree.pointCount);
      for (int32_t slot = first; slot < last; ++slot)
        visitor.visit(slot);
      continue;
    }
    const int32_t childLevelSize = tree.levelStart[level] - tree.levelStart[level - 1];
    const int32_t firstChild = node * kFanout;
    const int children = static_cast<int>(minOf(firstChild + kFanout, childLevelSize) - firstChild);
    int order[kFanout] = {0, 1, 2, 3};
    if constexpr (Visitor::kOrderChildren)
    {
      // Insertion sort of the children by priority; the farthest is pushed first.
      double key[kFanout];
      for (int i = 0; i < children; ++i)
      {
        const double k = visitor.priority(tree.boxes[tree.levelStart[level - 1] + firstChild + i]);
        int j = i;
        while (j > 0 && key[j - 1] > k)
        {
          key[j] = key[j - 1];
          order[j] = order[j - 1];
          --j;
        }
        key[j] = k;
        order[j] = i;
      }
    }
    for (int i = children - 1; i >= 0; --i)
    {
      stackNode[depth] = firstChild + order[i];
      stackLevel[depth] = static_cast<int8_t>(level - 1);
      ++depth;
    }
  }
}

// A bound on the distance from any point of the region to its nearest site: the smallest, over
// the sites visited, of the largest squared distance from the site to the region. The search is a
// nearest-neighbour search of the region's centre (the site nearest the centre proves a bound
// within half the region's diagonal of the best); every box opened on the way also proves a bound.
// The bound need not be the smallest possible: it only has to be valid, and the same on both
// backends.
struct RegionBoundVisitor
{
  static constexpr bool kOrderChildren = true;
  const TreeView* tree;
  Box region;
  Box centre;
  double bound = 1.79769313486231570e308;
  double nearestToCentre = 1.79769313486231570e308;

  GPUGEO_HD RegionBoundVisitor(const TreeView* t, const Box& r)
    : tree(t),
      region(r),
      centre{exact::mul(exact::add(r.x0, r.x1), 0.5), exact::mul(exact::add(r.y0, r.y1), 0.5),
             exact::mul(exact::add(r.x0, r.x1), 0.5), exact::mul(exact::add(r.y0, r.y1), 0.5)}
  {
  }

  GPUGEO_HD bool prune(const Box& box) const
  {
    return certainlyAbove(minSquaredDistance(box, centre), nearestToCentre);
  }
  GPUGEO_HD bool takeWhole(const Box&, int32_t, int32_t) const { return false; }
  GPUGEO_HD void enter(const Box& box) { bound = minOf(bound, maxSquaredDistance(box, region)); }
  GPUGEO_HD void visit(int32_t slot)
  {
    const Point& site = tree->points[slot];
    nearestToCentre = minOf(nearestToCentre, squaredDistance(centre.x0, centre.y0, site));
    bound = minOf(bound, siteBound(site, region));
  }
  GPUGEO_HD double priority(const Box& box) const { return minSquaredDistance(box, centre); }
  GPUGEO_HD bool done() const { return false; }
};

// Calls emit(slot) for every site that may be nearest to some point of the region, given the
// bound found by RegionBoundVisitor; stops after `limit` + 1 sites.
template <class Emit>
struct RegionCandidateVisitor
{
  static constexpr bool kOrderChildren = false;
  const TreeView* tree;
  Box region;
  double bound;
  int limit;
  Emit emit;
  int count = 0;

  GPUGEO_HD bool prune(const Box& box) const
  {
    return certainlyAbove(minSquaredDistance(box, region), bound);
  }
  // A subtree whose every point certainly qualifies is taken whole, in slot order: the same sites,
  // in the same order, as visiting its leaves one by one.
  GPUGEO_HD bool takeWhole(const Box& box, int32_t firstSlot, int32_t lastSlot)
  {
    if (!certainlyWithin(farthestSquaredDistance(box, region), bound))
      return false;
    for (int32_t slot = firstSlot; slot < lastSlot && count <= limit; ++slot)
    {
      if (count < limit)
        emit(count, slot);
      ++count;
    }
    return true;
  }
  GPUGEO_HD void enter(const Box&) {}
  GPUGEO_HD void visit(int32_t slot)
  {
    if (count <= limit && mayBeNearest(tree->points[slot], region, bound))
    {
      if (count < limit)
        emit(count, slot);
      ++count;
    }
  }
  GPUGEO_HD bool done() const { return count > limit; }
};

// The exact nearest site to one point under the contract (smallest e, then lowest input index).
struct NearestSiteVisitor
{
  static constexpr bool kOrderChildren = true;
  const TreeView* tree;
  double px, py;
  double best;
  int32_t bestSite;

  GPUGEO_HD Box query() const { return Box{px, py, px, py}; }
  GPUGEO_HD bool prune(const Box& box) const
  {
    const Box q = query();
    return certainlyAbove(minSquaredDistance(box, q), best);
  }
  GPUGEO_HD bool takeWhole(const Box&, int32_t, int32_t) const { return false; }
  GPUGEO_HD void enter(const Box&) {}
  GPUGEO_HD void visit(int32_t slot)
  {
    const double e = squaredDistance(px, py, tree->points[slot]);
    const int32_t site = tree->siteIndex[slot];
    if (e < best || (e == best && site < bestSite))
    {
      best = e;
      bestSite = site;
    }
  }
  GPUGEO_HD double priority(const Box& box) const { return minSquaredDistance(box, query()); }
  GPUGEO_HD bool done() const { return false; }
};

// --- Tiles -------------------------------------------------------------------------------------

// The box spanned by the pixel centres of columns [c0, c1) and rows [r0, r1).
GPUGEO_HD Box pixelCentreBox(int64_t c0, int64_t c1, int64_t r0, int64_t r1)
{
  return Box{double(c0) + 0.5, double(r0) + 0.5, double(c1) - 0.5, double(r1) - 0.5};
}

// A site in a tile's local float frame (relative to the tile's top-left pixel corner).
GPUGEO_HD LocalPoint toLocal(const Point& site, int64_t tileColumn0, int64_t tileRow0)
{
  return LocalPoint{exact::toFloat(exact::sub(site.x, double(tileColumn0))),
                    exact::toFloat(exact::sub(site.y, double(tileRow0)))};
}

// Error bound of a float32 squared distance f computed in the tile's local frame against the
// float64 contract e: |f - e| <= (f + span^2) * 2^-21 (rounding of the local site coordinates, of
// the differences, the squares and the sum; the local pixel centre is exact), taken with a margin
// of 4.
GPUGEO_HD float floatErrorBound(float f, float span2)
{
  return exact::mul(exact::add(f, span2), 0x1p-19f);
}

struct PixelAnswer
{
  int32_t site;     // input index
  double squared;   // e under the contract
  bool refined;     // a near tie sent it to float64
};

// A tile's candidate sites, as three parallel arrays: coordinates in the tile's local float frame,
// in the pixel frame, and input indices.
struct CandidateArrays
{
  const LocalPoint* localPoints;
  const Point* points;
  const int32_t* sites;
  int count;

  GPUGEO_HD LocalPoint local(int k) const { return localPoints[k]; }
  GPUGEO_HD const Point& point(int k) const { return points[k]; }
  GPUGEO_HD int32_t site(int k) const { return sites[k]; }
};

// The same, as tree slots with their local coordinates (the lists of the tile quadtree).
struct CandidateSlots
{
  const TreeView* tree;
  const LocalPoint* localPoints;
  const int32_t* slots;
  int count;

  GPUGEO_HD LocalPoint local(int k) const { return localPoints[k]; }
  GPUGEO_HD const Point& point(int k) const { return tree->points[slots[k]]; }
  GPUGEO_HD int32_t site(int k) const { return tree->siteIndex[slots[k]]; }
};

// The nearest of a tile's candidates to pixel (column, row): a float32 scan keeps the best and
// second-best values; when their gap exceeds both error bounds the float winner is the exact one,
// otherwise every candidate is re-evaluated in float64 under the contract.
template <class List>
GPUGEO_HD PixelAnswer nearestCandidate(const List& list, int64_t column, int64_t row, int64_t tileColumn0,
                                       int64_t tileRow0, float span2)
{
  const float a = float(column - tileColumn0) + 0.5f;
  const float b = float(row - tileRow0) + 0.5f;
  float best = 3.402823466e38f;
  float second = 3.402823466e38f;
  int bestIndex = 0;
  for (int k = 0; k < list.count; ++k)
  {
    const LocalPoint s = list.local(k);
    const float dx = exact::sub(a, s.x);
    const float dy = exact::sub(b, s.y);
    const float f = exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
    if (f < best)
    {
      second = best;
      best = f;
      bestIndex = k;
    }
    else if (f < second)
    {
      second = f;
    }
  }
  const double px = double(column) + 0.5;
  const double py = double(row) + 0.5;
  const bool certain = exact::sub(second, floatErrorBound(second, span2)) > exact::add(best, floatErrorBound(best, span2));
  if (certain)
    return PixelAnswer{list.site(bestIndex), squaredDistance(px, py, list.point(bestIndex)), false};
  double exactBest = 0.0;
  int32_t exactSite = -1;
  for (int k = 0; k < list.count; ++k)
  {
    const double e = squaredDistance(px, py, list.point(k));
    const int32_t site = list.site(k);
    if (exactSite < 0 || e < exactBest || (e == exactBest && site < exactSite))
    {
      exactBest = e;
      exactSite = site;
    }
  }
  return PixelAnswer{exactSite, exactBest, true};
}

// The exact nearest site by a search of the whole tree (tiles whose candidate list is too long).
GPUGEO_HD PixelAnswer nearestByTree(const TreeView& tree, int64_t column, int64_t row)
{
  NearestSiteVisitor visitor{&tree, double(column) + 0.5, double(row) + 0.5, 1.79769313486231570e308, 0x7fffffff};
  traverse(tree, visitor);
  return PixelAnswer{visitor.bestSite, visitor.best, false};
}

// --- Tree construction (per element) -----------------------------------------------------------

// Position along the Hilbert curve of a point quantized to 32 bits per axis over `bounds`. Runs of
// consecutive sites along the Hilbert curve are compact (the curve never jumps), so the boxes of
// the packed tree overlap far less than along a Morton curve: measured on 10^6 uniform sites, a
// nearest-site search opens about a third as many boxes.
GPUGEO_HD uint64_t curveKey(const Point& p, const Box& bounds, double scaleX, double scaleY)
{
  const double fx = minOf(exact::mul(exact::sub(p.x, bounds.x0), scaleX), 4294967295.0);
  const double fy = minOf(exact::mul(exact::sub(p.y, bounds.y0), scaleY), 4294967295.0);
  uint32_t x = static_cast<uint32_t>(maxOf(fx, 0.0));
  uint32_t y = static_cast<uint32_t>(maxOf(fy, 0.0));
  uint64_t key = 0;
  for (uint32_t s = 0x80000000u; s > 0; s >>= 1)
  {
    const uint32_t rx = (x & s) ? 1u : 0u;
    const uint32_t ry = (y & s) ? 1u : 0u;
    key += uint64_t(s) * uint64_t(s) * ((3u * rx) ^ ry);
    if (ry == 0)
    {
      if (rx == 1)
      {
        x = ~x;
        y = ~y;
      }
      const uint32_t t = x;
      x = y;
      y = t;
    }
  }
  return key;
}

GPUGEO_HD double curveScale(double low, double high)
{
  const double range = exact::sub(high, low);
  return range > 0.0 ? 4294967295.0 / range : 0.0;
}

GPUGEO_HD bool samePoint(const Point& a, const Point& b)
{
  return a.x == b.x && a.y == b.y;
}

// Whether site i of the curve order repeats an earlier site: exact duplicates share a curve key,
// so only the run of equal keys before i is searched (it stops at the first repeat).
template <class PointAt>
GPUGEO_HD bool repeatsEarlier(const uint64_t* keys, const PointAt& pointAt, int32_t i)
{
  const Point p = pointAt(i);
  for (int32_t j = i - 1; j >= 0 && keys[j] == keys[i]; --j)
    if (samePoint(pointAt(j), p))
      return true;
  return false;
}

GPUGEO_HD Box boxOfPoints(const Point* points, int32_t first, int32_t last)
{
  Box box{points[first].x, points[first].y, points[first].x, points[first].y};
  for (int32_t i = first + 1; i < last; ++i)
  {
    box.x0 = minOf(box.x0, points[i].x);
    box.y0 = minOf(box.y0, points[i].y);
    box.x1 = maxOf(box.x1, points[i].x);
    box.y1 = maxOf(box.y1, points[i].y);
  }
  return box;
}

GPUGEO_HD Box boxOfBoxes(const Box* boxes, int32_t first, int32_t last)
{
  Box box = boxes[first];
  for (int32_t i = first + 1; i < last; ++i)
  {
    box.x0 = minOf(box.x0, boxes[i].x0);
    box.y0 = minOf(box.y0, boxes[i].y0);
    box.x1 = maxOf(box.x1, boxes[i].x1);
    box.y1 = maxOf(box.y1, boxes[i].y1);
  }
  return box;
}

// Level sizes of a tree over `count` sites; returns the number of levels.
inline int levelLayout(int32_t count, int32_t* levelStart)
{
  int levels = 0;
  int32_t size = (count + kLeafSize - 1) / kLeafSize;
  levelStart[0] = 0;
  while (true)
  {
    levelStart[levels + 1] = levelStart[levels] + size;
    ++levels;
    if (size == 1)
      break;
    size = (size + kFanout - 1) / kFanout;
  }
  return levels;
}

// --- The tile quadtree ------------------------------------------------------------------------
//
// The grid is cut into root tiles of 64 x 64 pixels. A tile gathers its candidates (the sites that
// can be nearest to one of its pixel centres) by a search of the site tree, or, when its parent
// has a list, by filtering the parent's list, which holds every site that can be nearest anywhere
// in the parent. A tile whose list is long is split into four, down to 2 x 2 pixels, so that dense
// places get small tiles and sparse ones large tiles, and every pixel scans a short list.

constexpr int kRootShift = 6;
constexpr int kRootSpan = 1 << kRootShift;
constexpr int kMinSpan = 2;
constexpr int kTileLevels = 6;        // spans 64, 32, 16, 8, 4, 2
constexpr int kMaxGathered = 512;     // a tree search that finds more gives up (the tile is split)
constexpr int kRootLeafMaxList = 16;  // the longest list a root tile keeps without splitting

// Whether a tile of side `span` whose list has `count` sites (-1: more than kMaxGathered) is split.
// Splitting costs each child a pass over the parent's list; it pays while the list is longer than
// about 16 sites for tiles of 8 pixels or more, and than 32 for 4 x 4 tiles.
GPUGEO_HD bool shouldSplit(int span, int count)
{
  if (span <= kMinSpan)
    return false;
  if (count < 0)
    return true;
  return count > (span >= 8 ? kRootLeafMaxList : 2 * kRootLeafMaxList);
}

// The bound of a tile from a list that holds all its possible nearest sites: the smallest bound
// over the list. (The GPU computes the same minimum with a warp per tile.)
template <class PointAt>
GPUGEO_HD double boundFromList(const PointAt& pointAt, int count, const Box& region)
{
  double bound = 1.79769313486231570e308;
  for (int k = 0; k < count; ++k)
    bound = minOf(bound, siteBound(pointAt(k), region));
  return bound;
}

// Calls emit(index in the list, position in the output) for each listed site that may be nearest
// to some point of the region, in list order; returns how many.
template <class PointAt, class Emit>
GPUGEO_HD int filterList(const PointAt& pointAt, int count, const Box& region, double bound, Emit&& emit)
{
  int kept = 0;
  for (int k = 0; k < count; ++k)
    if (mayBeNearest(pointAt(k), region, bound))
      emit(k, kept++);
  return kept;
}

}  // namespace gpugeo::voronoi::detail
