// What both backends of the allocation to lines and polygons start from (feature_allocation.cpp
// prepares it on the host): the vertices in the pixel frame with their segments, the bucket grid,
// and the polygon interiors as runs of pixels; and the CPU's block search, whose steps the GPU
// kernel repeats warp-wide.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "nearest_site.h"
#include "segment_grid.h"
#include "voronoi/feature_allocation.h"

namespace gpugeo::voronoi::detail {

// Pixels c0 .. c1 of a row inside a polygon part of `feature`.
struct Span
{
  int32_t row, c0, c1, feature;
};

struct PreparedFeatures
{
  // The paths made explicit: rings closed by repeating their first vertex, a path of one vertex
  // doubled; vertex i starts a segment to vertex i + 1 when segmentFeature[i] >= 0.
  std::vector<Point> vertex;
  std::vector<int32_t> segmentFeature;
  int64_t segmentCount = 0;
  int64_t featuresWithSegments = 0;
  segments::BucketGrid buckets;
  double slack = 0.0;  // bound on a computed distance's error, in pixels
  // Polygon interiors (PolygonInterior::Zero): spans sorted by row, row r's at
  // rowSpan[r] .. rowSpan[r + 1] - 1 (empty vectors otherwise).
  std::vector<Span> spans;
  std::vector<int64_t> rowSpan;
};

// Validated input to the prepared form; `threads` as parallelFor.
PreparedFeatures prepareFeatures(const Grid& grid, const FeatureSites& features, PolygonInterior interior,
                                 int threads, const RunControl& control);

// The CPU labeller's AVX2 form (feature_labeller_cpu.cpp): used where the processor has AVX2 unless
// turned off here (the tests run both forms); returns the previous setting.
bool allowAvx2Labelling(bool allow);

// The labels' starting point from the interiors: cover[(r - row0) * width + c] = the lowest
// feature whose interior holds pixel (c, r), INT32_MAX where none; rows [row0, row0 + rows).
void paintCover(const PreparedFeatures& prepared, int64_t width, int64_t row0, int64_t rows, int32_t* cover,
                int threads);

// The pyramid over the buckets: level 0 the buckets, each level above cells of 2 x 2 of the one
// below (ceil'd), up to a single cell; counts[levelStart[k] + Y * levelWidth[k] + X] is how many
// entries cell (X, Y) of level k holds. Far from every segment a block finds its candidates by
// descending it instead of scanning every bucket of a wide rectangle.
constexpr int kMaxPyramid = 26;

struct Pyramid
{
  int levels = 0;
  int64_t levelStart[kMaxPyramid + 1] = {};
  int levelWidth[kMaxPyramid] = {}, levelHeight[kMaxPyramid] = {};
};

// The levels' sizes for a bucket grid (counts filled by the backend).
Pyramid pyramidOf(const segments::BucketGrid& g);

// The bucket index of the segments: bucket b's entries are entries[start[b] .. start[b + 1] - 1].
struct SegmentIndexView
{
  segments::BucketGrid g;
  const int64_t* start = nullptr;
  const segments::Segment* entries = nullptr;
  Pyramid pyramid;
  const int32_t* counts = nullptr;
  double slack = 0.0;
  int width = 0, height = 0;

  GPUGEO_HD int64_t rowEntries(int y, int x0, int x1) const
  {
    return start[int64_t(y) * g.bx + x1 + 1] - start[int64_t(y) * g.bx + x0];
  }
  GPUGEO_HD int32_t count(int k, int X, int Y) const
  {
    return counts[pyramid.levelStart[k] + int64_t(Y) * pyramid.levelWidth[k] + X];
  }
};

// The squared distance from the pixel centres [c0, c1] x [r0, r1] to cell (X, Y) of level k (cells
// on the grid's edge reach out to infinity: their buckets hold what lies beyond). Exact: every
// term is a whole or half number.
GPUGEO_HD double cellSquaredDistance(const SegmentIndexView& v, int k, int X, int Y, int c0, int r0, int c1, int r1)
{
  const double side = double(int64_t(1) << (v.g.shift + k));
  const bool left = X == 0, right = (int64_t(X + 1) << k) >= v.g.bx;
  const bool top = Y == 0, bottom = (int64_t(Y + 1) << k) >= v.g.by;
  const double x0 = double(c0) + 0.5, x1 = double(c1) + 0.5, y0 = double(r0) + 0.5, y1 = double(r1) + 0.5;
  const double dx = maxOf(0.0, maxOf(left ? 0.0 : double(X) * side - x1, right ? 0.0 : x0 - double(X + 1) * side));
  const double dy = maxOf(0.0, maxOf(top ? 0.0 : double(Y) * side - y1, bottom ? 0.0 : y0 - double(Y + 1) * side));
  return exact::add(exact::mul(dx, dx), exact::mul(dy, dy));
}

// Whether a cell at squared distance dd from the block is beyond reach r (r >= 0, with its margin).
GPUGEO_HD bool beyondReach(double dd, double r)
{
  return dd > exact::mul(exact::mul(r, r), 1.0 + 0x1p-40);
}

// The most buckets a block's rectangle grows to before the pyramid takes over (the GPU's blocks
// searched on their own).
constexpr int64_t kSmallRect = 81;

// A tile's rectangle of buckets grows by the runs its reach adds while it stays within kTileRect
// buckets, up to kTileGrowSteps times; beyond, the pyramid (both backends' tiles). (With
// kSmallRect, tuned for 8-pixel blocks, a 32-pixel tile whose reach passes its ring, nearly every
// tile of the 8192^2 bench, went down the pyramid from the level spanning its reach, ~190 cells a
// tile: slower than scanning the rows outright, by 12 % of the CPU's labelling.)
constexpr int64_t kTileRect = 1024;
constexpr int kTileGrowSteps = 10;

// The bucket rectangle of a block of pixels [c0, c1] x [r0, r1] widened by m buckets, clamped.
GPUGEO_HD segments::Rect blockRect(const segments::BucketGrid& g, int c0, int r0, int c1, int r1, int m)
{
  segments::Rect rect;
  rect.x0 = maxOf(0, (c0 >> g.shift) - m);
  rect.y0 = maxOf(0, (r0 >> g.shift) - m);
  rect.x1 = minOf(g.bx - 1, (c1 >> g.shift) + m);
  rect.y1 = minOf(g.by - 1, (r1 >> g.shift) + m);
  return rect;
}

// A box of pixels [c0, c1] x [r0, r1] (inclusive) as a disc around its centre: every pixel centre
// of the box is within `h` of (cx, cy).
struct PixelDisc
{
  double cx, cy, h;
};

GPUGEO_HD PixelDisc discOf(int c0, int r0, int c1, int r1)
{
  const double hx = double(c1 - c0) * 0.5, hy = double(r1 - r0) * 0.5;
  // cx, cy and hx, hy are exact (halves of integers); h is rounded up.
  return PixelDisc{double(c0 + c1 + 1) * 0.5, double(r0 + r1 + 1) * 0.5,
                   exact::mul(exact::sqrt(exact::add(exact::mul(hx, hx), exact::mul(hy, hy))), 1.0 + 0x1p-40)};
}

// The margin that covers the rounding of the distances compared against a bound `u` (pixels).
GPUGEO_HD double boundMargin(double u, double slack)
{
  return exact::add(exact::mul(2.0, slack), exact::mul(1e-9, exact::add(1.0, u)));
}

// The bound on every pixel's nearest distance that the least squared distance eMin from a disc's
// centre gives: sqrt(eMin) + h.
GPUGEO_HD double pixelBound(double eMin, const PixelDisc& disc)
{
  return exact::add(exact::sqrt(eMin), disc.h);
}

// The squared distance from a disc's centre beyond which a segment cannot be the nearest to any of
// its pixels, when every pixel has one within u: (u + h + margin)^2, rounded up.
GPUGEO_HD double keepLimit(double u, const PixelDisc& disc, double slack)
{
  const double reach = exact::mul(exact::add(exact::add(u, disc.h), boundMargin(u, slack)), 1.0 + 0x1p-50);
  return exact::mul(exact::mul(reach, reach), 1.0 + 0x1p-50);
}

// The reach of a block whose least squared distance from its centre is eMin: every point nearer
// to one of its pixels than that pixel's nearest segment lies within it of the block's pixels.
GPUGEO_HD double reachOf(double eMin, const PixelDisc& disc, double slack)
{
  const double u = pixelBound(eMin, disc);
  return exact::add(u, boundMargin(u, slack));
}

// A non-empty bucket near the block's pixels, for a first bound where its own buckets hold nothing:
// up the pyramid from the bucket of the block's first pixel to the first non-empty cell, then down
// by each level's nearest non-empty child.
GPUGEO_HD int64_t nearestBucket(const SegmentIndexView& v, int c0, int r0, int c1, int r1)
{
  int k = 0, X = c0 >> v.g.shift, Y = r0 >> v.g.shift;
  while (k + 1 < v.pyramid.levels && v.count(k, X, Y) == 0)
  {
    ++k;
    X >>= 1;
    Y >>= 1;
  }
  while (k > 0)
  {
    double best = HUGE_VAL;
    int bestX = -1, bestY = -1;
    for (int j = 0; j < 4; ++j)
    {
      const int x = 2 * X + (j & 1), y = 2 * Y + (j >> 1);
      if (x >= v.pyramid.levelWidth[k - 1] || y >= v.pyramid.levelHeight[k - 1] || v.count(k - 1, x, y) == 0)
        continue;
      const double dd = cellSquaredDistance(v, k - 1, x, y, c0, r0, c1, r1);
      if (dd < best)
      {
        best = dd;
        bestX = x;
        bestY = y;
      }
    }
    --k;
    X = bestX;
    Y = bestY;
  }
  return int64_t(Y) * v.g.bx + X;
}

// The level whose cells are at least `span` pixels a side (so that a span meets at most two of
// them on each axis), at most the top.
GPUGEO_HD int levelSpanning(const SegmentIndexView& v, double span)
{
  int k = 0;
  while (k + 1 < v.pyramid.levels && double(int64_t(1) << (v.g.shift + k)) < span)
    ++k;
  return k;
}

// The bucket rectangle holding every point within u (plus the margin) of the pixel centres of
// [c0, c1] x [r0, r1], together with `rect`.
GPUGEO_HD segments::Rect reachRect(const segments::BucketGrid& g, int c0, int r0, int c1, int r1, double u,
                                   double slack, const segments::Rect& rect)
{
  const double reach = exact::add(u, boundMargin(u, slack));
  segments::Rect out = rect;
  out.x0 = minOf(out.x0, segments::clampBucket(double(c0) + 0.5 - reach, g.shift, g.bx));
  out.x1 = maxOf(out.x1, segments::clampBucket(double(c1) + 0.5 + reach, g.shift, g.bx));
  out.y0 = minOf(out.y0, segments::clampBucket(double(r0) + 0.5 - reach, g.shift, g.by));
  out.y1 = maxOf(out.y1, segments::clampBucket(double(r1) + 0.5 + reach, g.shift, g.by));
  return out;
}

}  // namespace gpugeo::voronoi::detail
