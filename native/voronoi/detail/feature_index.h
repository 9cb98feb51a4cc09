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

// The labels' starting point from the interiors: cover[(r - row0) * width + c] = the lowest
// feature whose interior holds pixel (c, r), INT32_MAX where none; rows [row0, row0 + rows).
void paintCover(const PreparedFeatures& prepared, int64_t width, int64_t row0, int64_t rows, int32_t* cover,
                int threads);

// The bucket index of the segments: bucket b's entries are entries[start[b] .. start[b + 1] - 1].
struct SegmentIndexView
{
  segments::BucketGrid g;
  const int64_t* start = nullptr;
  const segments::Segment* entries = nullptr;
  double slack = 0.0;
  int width = 0, height = 0;

  GPUGEO_HD int64_t rowEntries(int y, int x0, int x1) const
  {
    return start[int64_t(y) * g.bx + x1 + 1] - start[int64_t(y) * g.bx + x0];
  }
};

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

GPUGEO_HD bool wholeGrid(const segments::BucketGrid& g, const segments::Rect& r)
{
  return r.x0 == 0 && r.y0 == 0 && r.x1 == g.bx - 1 && r.y1 == g.by - 1;
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
