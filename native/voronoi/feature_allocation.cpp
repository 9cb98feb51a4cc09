// The allocation to lines and polygons: input checks, the prepared form both backends start from
// (pixel frame, bucket side, polygon interiors), and the CPU backend.
#include "feature_allocation.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "detail/feature_index.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;
namespace sg = detail::segments;

namespace {

std::string vertexText(int64_t index, double x, double y)
{
  std::ostringstream text;
  text.precision(15);
  text << "vertex " << index + 1 << " (" << x << ", " << y << ")";
  return text.str();
}

// The bucket side: about one segment a bucket over the grid (a power of two from 4 to 4,096, at
// most kMaxBuckets buckets), doubled while the segments would be listed more than 8 times each on
// average (long segments crossing many buckets).
sg::BucketGrid chooseBuckets(const Grid& grid, const std::vector<Point>& vertex, const std::vector<int32_t>& feature,
                             int64_t segmentCount, int threads)
{
  const double pixels = double(grid.width) * double(grid.height);
  const double side = std::sqrt(pixels / double(std::max<int64_t>(1, segmentCount)));
  sg::BucketGrid g;
  auto fit = [&](int shift) {
    g.shift = shift;
    const int64_t b = int64_t(1) << shift;
    g.bx = static_cast<int>((grid.width + b - 1) / b);
    g.by = static_cast<int>((grid.height + b - 1) / b);
  };
  int shift = sg::kMinShift;
  while (shift < sg::kMaxShift && double(int64_t(1) << (shift + 1)) <= side)
    ++shift;
  fit(shift);
  while (g.shift < sg::kMaxShift && g.count() > sg::kMaxBuckets)
    fit(g.shift + 1);
  const int64_t slots = static_cast<int64_t>(vertex.size());
  while (g.shift < sg::kMaxShift)
  {
    std::atomic<int64_t> entries{0};
    parallelFor(slots, 1 << 16, threads, [&](int64_t first, int64_t last) {
      int64_t n = 0;
      for (int64_t i = first; i < last; ++i)
        if (feature[i] >= 0)
          n += sg::bucketCount(g, sg::makeSegment(vertex[i].x, vertex[i].y, vertex[i + 1].x, vertex[i + 1].y, feature[i]));
      entries += n;
    });
    if (entries <= 8 * segmentCount + (int64_t(1) << 20))
      break;
    fit(g.shift + 1);
  }
  return g;
}

// The spans of one polygon part (rings `first` .. `last` - 1 of the explicit paths), even-odd.
void partSpans(const Grid& grid, const std::vector<Point>& vertex, const std::vector<int64_t>& ringStart,
               int64_t first, int64_t last, int32_t feature, std::vector<Span>& out)
{
  struct Crossing
  {
    int64_t row;
    double x;
  };
  std::vector<Crossing> crossings;
  for (int64_t ring = first; ring < last; ++ring)
    for (int64_t i = ringStart[ring]; i + 1 < ringStart[ring + 1]; ++i)
    {
      const Point a = vertex[i], b = vertex[i + 1];
      if (a.y == b.y)
        continue;
      const double ylo = std::min(a.y, b.y), yhi = std::max(a.y, b.y);
      // Rows whose centre line y = r + 0.5 has ylo <= y < yhi (the half-open rule).
      const int64_t r0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::max(ylo - 0.5, -1.0))));
      const double top = std::min(yhi - 0.5, double(grid.height));
      const int64_t r1 = std::min<int64_t>(grid.height - 1, static_cast<int64_t>(std::ceil(top)));
      for (int64_t r = r0; r <= r1; ++r)
      {
        const double y = double(r) + 0.5;
        if (!(ylo <= y && y < yhi))
          continue;
        const double x = exact::add(a.x, exact::div(exact::mul(exact::sub(y, a.y), exact::sub(b.x, a.x)), exact::sub(b.y, a.y)));
        crossings.push_back({r, x});
      }
    }
  std::sort(crossings.begin(), crossings.end(),
            [](const Crossing& p, const Crossing& q) { return p.row != q.row ? p.row < q.row : p.x < q.x; });
  for (size_t k = 0; k + 1 < crossings.size(); k += 2)
  {
    if (crossings[k].row != crossings[k + 1].row)
    {
      --k;  // an odd count in a row cannot happen with closed rings; resynchronise on the next row
      continue;
    }
    // Pixels whose centre c + 0.5 has x0 < c + 0.5 <= x1: an odd number of crossings left of it.
    const double x0 = crossings[k].x, x1 = crossings[k + 1].x;
    if (!(x1 > 0.0) || !(x0 < double(grid.width)))
      continue;
    int64_t c0 = static_cast<int64_t>(std::max(0.0, std::floor(x0 - 0.5)));
    while (c0 < grid.width && !(double(c0) + 0.5 > x0))
      ++c0;
    int64_t c1 = static_cast<int64_t>(std::min(double(grid.width - 1), std::ceil(x1 - 0.5)));
    while (c1 >= 0 && !(double(c1) + 0.5 <= x1))
      --c1;
    if (c0 <= c1)
      out.push_back({static_cast<int32_t>(crossings[k].row), static_cast<int32_t>(c0), static_cast<int32_t>(c1), feature});
  }
}

}  // namespace

void validate(const Grid& grid, const FeatureSites& features)
{
  // The grid's checks are the point sites' (one dummy site inside it).
  const double cx = grid.originX, cy = grid.originY;
  validate(grid, Sites{&cx, &cy, 1});
  if (features.pathCount <= 0 || !features.pathStart || !features.pathFeature)
    throw InvalidInput("There are no features.");
  if (features.featureCount <= 0 || features.featureCount > kMaxSites)
    throw InvalidInput("There are " + std::to_string(features.featureCount) + " features; the limit is " +
                       std::to_string(kMaxSites) + ".");
  if (!features.x || !features.y)
    throw InvalidInput("The features have no coordinate arrays.");
  if (features.pathStart[0] != 0)
    throw InvalidInput("The first path does not start at vertex 0.");
  int64_t explicitVertices = 0;
  for (int64_t p = 0; p < features.pathCount; ++p)
  {
    const int64_t n = features.pathStart[p + 1] - features.pathStart[p];
    if (n < 0 || n > kMaxFeatureVertices)
      throw InvalidInput("Path " + std::to_string(p + 1) + " ends before it starts or has more than " +
                         std::to_string(kMaxFeatureVertices) + " vertices.");
    if (features.pathFeature[p] < 0 || features.pathFeature[p] >= features.featureCount)
      throw InvalidInput("Path " + std::to_string(p + 1) + " belongs to feature " +
                         std::to_string(features.pathFeature[p]) + ", outside 0 to " +
                         std::to_string(features.featureCount - 1) + ".");
    explicitVertices += n + 1;
    if (explicitVertices > kMaxFeatureVertices)
      throw InvalidInput("The features have more than " + std::to_string(kMaxFeatureVertices) + " vertices.");
  }
  const int64_t vertices = features.pathStart[features.pathCount];
  if (vertices <= 0)
    throw InvalidInput("The features have no vertices.");
  if (explicitVertices > kMaxFeatureVertices)
    throw InvalidInput("The features have " + std::to_string(vertices) + " vertices, more than the limit of " +
                       std::to_string(kMaxFeatureVertices) + ".");
  for (int64_t i = 0; i < vertices; ++i)
  {
    const double x = features.x[i], y = features.y[i];
    if (!std::isfinite(x) || !std::isfinite(y))
      throw InvalidInput(vertexText(i, x, y) + " has a coordinate that is not a finite number.");
    const double u = (x - grid.originX) / grid.pixelSize;
    const double v = (grid.originY - y) / grid.pixelSize;
    if (!(std::fabs(u) <= kMaxSiteOffsetPixels) || !(std::fabs(v) <= kMaxSiteOffsetPixels))
      throw InvalidInput(vertexText(i, x, y) + " lies more than 1e15 pixels from the grid; check the layer's CRS "
                                               "and the pixel size.");
  }
}

namespace detail {

PreparedFeatures prepareFeatures(const Grid& grid, const FeatureSites& features, PolygonInterior interior,
                                 int threads, const RunControl& control)
{
  PreparedFeatures out;
  const bool polygons = features.pathPart != nullptr;
  // The explicit paths: where each starts in the output.
  std::vector<int64_t> ringStart(static_cast<size_t>(features.pathCount + 1), 0);
  for (int64_t p = 0; p < features.pathCount; ++p)
  {
    const int64_t b = features.pathStart[p], e = features.pathStart[p + 1];
    int64_t n = e - b;
    if (n == 1)
      n = 2;
    else if (polygons && n > 1 && (features.x[b] != features.x[e - 1] || features.y[b] != features.y[e - 1]))
      ++n;
    ringStart[p + 1] = ringStart[p] + n;
  }
  const int64_t slots = ringStart[features.pathCount];
  out.vertex.resize(static_cast<size_t>(slots));
  out.segmentFeature.assign(static_cast<size_t>(slots), -1);
  std::atomic<double> largest{0.0};
  parallelFor(features.pathCount, 1024, threads, [&](int64_t first, int64_t last) {
    double most = 0.0;
    for (int64_t p = first; p < last; ++p)
    {
      const int64_t b = features.pathStart[p], e = features.pathStart[p + 1];
      int64_t o = ringStart[p];
      for (int64_t i = b; i < e; ++i, ++o)
      {
        const Point q{(features.x[i] - grid.originX) / grid.pixelSize, (grid.originY - features.y[i]) / grid.pixelSize};
        out.vertex[o] = q;
        most = std::max({most, std::fabs(q.x), std::fabs(q.y)});
      }
      for (; o < ringStart[p + 1]; ++o)  // the repeated first vertex
        out.vertex[o] = out.vertex[ringStart[p]];
      for (int64_t k = ringStart[p]; k + 1 < ringStart[p + 1]; ++k)
        out.segmentFeature[k] = features.pathFeature[p];
    }
    double seen = largest.load();
    while (most > seen && !largest.compare_exchange_weak(seen, most))
    {
    }
  });
  if (control.isCanceled())
    throw Canceled();
  for (int64_t p = 0; p < features.pathCount; ++p)
    out.segmentCount += ringStart[p + 1] - ringStart[p] - 1;
  {
    std::vector<char> has(static_cast<size_t>(features.featureCount), 0);
    for (int64_t p = 0; p < features.pathCount; ++p)
      if (ringStart[p + 1] - ringStart[p] > 1)
        has[static_cast<size_t>(features.pathFeature[p])] = 1;
    out.featuresWithSegments = std::count(has.begin(), has.end(), 1);
  }
  // Computed distances err by a few units in the last place of the largest coordinate involved
  // (the vertices' and the pixel centres'); 2^-40 of it is far above that.
  const double magnitude = std::max({largest.load(), double(grid.width), double(grid.height)}) + 1.0;
  out.slack = magnitude * 0x1p-40;
  out.buckets = chooseBuckets(grid, out.vertex, out.segmentFeature, out.segmentCount, threads);

  if (polygons && interior == PolygonInterior::Zero)
  {
    // Parts: runs of paths with the same pathPart.
    std::vector<int64_t> partFirst;
    for (int64_t p = 0; p < features.pathCount; ++p)
      if (p == 0 || features.pathPart[p] != features.pathPart[p - 1])
        partFirst.push_back(p);
    partFirst.push_back(features.pathCount);
    const int64_t parts = static_cast<int64_t>(partFirst.size()) - 1;
    std::vector<std::vector<Span>> perPart(static_cast<size_t>(parts));
    parallelFor(parts, 16, threads, [&](int64_t first, int64_t last) {
      for (int64_t q = first; q < last; ++q)
        partSpans(grid, out.vertex, ringStart, partFirst[q], partFirst[q + 1],
                  features.pathFeature[partFirst[q]], perPart[static_cast<size_t>(q)]);
    }, &control);
    out.rowSpan.assign(static_cast<size_t>(grid.height + 1), 0);
    for (const std::vector<Span>& spans : perPart)
      for (const Span& s : spans)
        ++out.rowSpan[static_cast<size_t>(s.row + 1)];
    for (int64_t r = 0; r < grid.height; ++r)
      out.rowSpan[static_cast<size_t>(r + 1)] += out.rowSpan[static_cast<size_t>(r)];
    out.spans.resize(static_cast<size_t>(out.rowSpan.back()));
    std::vector<int64_t> at(out.rowSpan.begin(), out.rowSpan.end() - 1);
    for (const std::vector<Span>& spans : perPart)
      for (const Span& s : spans)
        out.spans[static_cast<size_t>(at[static_cast<size_t>(s.row)]++)] = s;
  }
  return out;
}

void paintCover(const PreparedFeatures& prepared, int64_t width, int64_t row0, int64_t rows, int32_t* cover,
                int threads)
{
  parallelFor(rows, 16, threads, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r)
    {
      int32_t* line = cover + r * width;
      std::fill(line, line + width, INT32_MAX);
      if (prepared.rowSpan.empty())
        continue;
      const int64_t row = row0 + r;
      for (int64_t k = prepared.rowSpan[static_cast<size_t>(row)]; k < prepared.rowSpan[static_cast<size_t>(row + 1)]; ++k)
      {
        const Span& s = prepared.spans[static_cast<size_t>(k)];
        for (int32_t c = s.c0; c <= s.c1; ++c)
          line[c] = std::min(line[c], s.feature);
      }
    }
  });
}

}  // namespace detail

namespace detail {

Pyramid pyramidOf(const sg::BucketGrid& g)
{
  Pyramid p;
  int w = g.bx, h = g.by;
  for (;;)
  {
    p.levelWidth[p.levels] = w;
    p.levelHeight[p.levels] = h;
    p.levelStart[p.levels + 1] = p.levelStart[p.levels] + int64_t(w) * h;
    ++p.levels;
    if ((w == 1 && h == 1) || p.levels == kMaxPyramid)
      break;
    w = (w + 1) / 2;
    h = (h + 1) / 2;
  }
  return p;
}

}  // namespace detail

namespace {

// The host's bucket index: every segment listed in each bucket it passes through, a bucket's in
// the order of the segments; and the pyramid of the buckets' counts.
struct HostSegmentIndex
{
  std::vector<int64_t> start;
  std::vector<sg::Segment> entries;
  Pyramid pyramid;
  std::vector<int32_t> counts;
};

void fillPyramid(HostSegmentIndex& index, const sg::BucketGrid& g)
{
  index.pyramid = pyramidOf(g);
  const Pyramid& p = index.pyramid;
  index.counts.assign(static_cast<size_t>(p.levelStart[p.levels]), 0);
  for (int64_t b = 0; b < g.count(); ++b)
    index.counts[static_cast<size_t>(b)] = static_cast<int32_t>(index.start[b + 1] - index.start[b]);
  for (int k = 1; k < p.levels; ++k)
    for (int Y = 0; Y < p.levelHeight[k - 1]; ++Y)
      for (int X = 0; X < p.levelWidth[k - 1]; ++X)
        index.counts[static_cast<size_t>(p.levelStart[k] + int64_t(Y / 2) * p.levelWidth[k] + X / 2)] +=
          index.counts[static_cast<size_t>(p.levelStart[k - 1] + int64_t(Y) * p.levelWidth[k - 1] + X)];
}

HostSegmentIndex buildHostIndex(const PreparedFeatures& p)
{
  HostSegmentIndex index;
  const sg::BucketGrid& g = p.buckets;
  index.start.assign(static_cast<size_t>(g.count() + 1), 0);
  const int64_t slots = static_cast<int64_t>(p.vertex.size());
  auto segmentAt = [&](int64_t i) {
    return sg::makeSegment(p.vertex[i].x, p.vertex[i].y, p.vertex[i + 1].x, p.vertex[i + 1].y, p.segmentFeature[i],
                           static_cast<int32_t>(i));
  };
  for (int64_t i = 0; i < slots; ++i)
    if (p.segmentFeature[i] >= 0)
      sg::forEachBucketRow(g, segmentAt(i), [&](int x0, int x1, int y) {
        for (int x = x0; x <= x1; ++x)
          ++index.start[static_cast<size_t>(int64_t(y) * g.bx + x + 1)];
      });
  for (int64_t b = 0; b < g.count(); ++b)
    index.start[static_cast<size_t>(b + 1)] += index.start[static_cast<size_t>(b)];
  // The pyramid counts entries in int32, as the GPU's index does.
  if (index.start.back() >= (int64_t(1) << 31))
    throw InvalidInput("The segments would be listed " + std::to_string(index.start.back()) +
                       " times in their buckets, more than the index holds (2^31); use a larger pixel size.");
  index.entries.resize(static_cast<size_t>(index.start.back()));
  std::vector<int64_t> at(index.start.begin(), index.start.end() - 1);
  for (int64_t i = 0; i < slots; ++i)
    if (p.segmentFeature[i] >= 0)
    {
      const sg::Segment s = segmentAt(i);
      sg::forEachBucketRow(g, s, [&](int x0, int x1, int y) {
        for (int x = x0; x <= x1; ++x)
          index.entries[static_cast<size_t>(at[static_cast<size_t>(int64_t(y) * g.bx + x)]++)] = s;
      });
    }
  fillPyramid(index, g);
  return index;
}

// What the blocks did, for LabelStats.
struct BlockCounts
{
  int64_t blocks = 0, widened = 0, candidates = 0;
};

// A cell of the pyramid.
struct CellRef
{
  int k, X, Y;
};

// Scratch of one thread: the block's segments (each once: `stamp` remembers, per segment id, the
// last block that took it) with their squared distances from the block's centre, and the lists
// (indexes into them) of its quarters and cells.
struct BlockScratch
{
  const void* owner = nullptr;
  std::vector<uint32_t> stamp;
  uint32_t serial = 0;
  std::vector<sg::Segment> segment;
  std::vector<double> e;
  std::vector<uint32_t> block, quarter, cell;
  std::vector<CellRef> stack;

  // A new block: a serial no segment carries yet.
  void next(const void* labeller, size_t ids)
  {
    if (owner != labeller || stamp.size() != ids)
    {
      owner = labeller;
      stamp.assign(ids, 0);
      serial = 0;
    }
    if (++serial == 0)
    {
      std::fill(stamp.begin(), stamp.end(), 0);
      serial = 1;
    }
    segment.clear();
    e.clear();
  }
};

// Keeps the segments of `from` that may be nearest to a pixel of [c0, c1] x [r0, r1] (their
// distances taken from its centre) in `to`.
void keepNearest(const BlockScratch& scratch, const std::vector<uint32_t>& from, int c0, int r0, int c1, int r1,
                 double slack, std::vector<uint32_t>& to, std::vector<double>& e)
{
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  e.resize(from.size());
  double eMin = HUGE_VAL;
  for (size_t k = 0; k < from.size(); ++k)
  {
    e[k] = sg::segmentSquared(disc.cx, disc.cy, scratch.segment[from[k]]);
    eMin = std::min(eMin, e[k]);
  }
  const double limit = keepLimit(pixelBound(eMin, disc), disc, slack);
  to.resize(from.size());
  size_t n = 0;
  for (size_t k = 0; k < from.size(); ++k)
  {
    to[n] = from[k];
    n += e[k] <= limit ? 1 : 0;
  }
  to.resize(n);
}

// The CPU's form of the block search (the GPU's warp takes the same steps, so the counts agree too):
// 1. the block's buckets and one ring, a few more while the rectangle stays small (kSmallRect), or
//    where all are empty a near non-empty bucket (nearestBucket); u, the least distance from the
//    block's centre plus its radius over their segments, bounds every pixel's nearest; every other
//    bucket within u of the block is found by descending the pyramid;
// 2. the segments that may be nearest to some pixel of the block (keepLimit) are kept, each once
//    (a segment is listed in every bucket it crosses), then again for each 4 x 4 quarter and each
//    2 x 2 cell of it;
// 3. each cell's pixels take the best of its list (from the interior's 0 where they are inside).
void labelBlock(const SegmentIndexView& v, const void* labeller, size_t ids, int c0, int r0, int rowEnd,
                int64_t bandRow0, const int32_t* cover, int32_t* site, float* distance, double pixelSize,
                BlockScratch& scratch, BlockCounts& counts)
{
  constexpr int K = sg::kBlock;
  const int c1 = std::min(c0 + K, v.width) - 1, r1 = std::min(r0 + K, rowEnd) - 1;
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  ++counts.blocks;
  scratch.next(labeller, ids);
  double eMin = HUGE_VAL;
  auto scanBucket = [&](int64_t b) {
    for (int64_t k = v.start[b]; k < v.start[b + 1]; ++k)
    {
      const sg::Segment& s = v.entries[k];
      uint32_t& seen = scratch.stamp[static_cast<size_t>(s.id)];
      if (seen == scratch.serial)
        continue;
      seen = scratch.serial;
      const double ec = sg::segmentSquared(disc.cx, disc.cy, s);
      eMin = std::min(eMin, ec);
      scratch.segment.push_back(s);
      scratch.e.push_back(ec);
    }
  };
  // 1. The block's buckets and one ring (a few more while that stays small); where they hold
  //    nothing, a near non-empty bucket found in the pyramid (nearestBucket).
  auto scanNewRuns = [&](const sg::Rect& now, const sg::Rect& before) {
    sg::forNewRuns(now, before, [&](int y, int x0, int x1) {
      for (int x = x0; x <= x1; ++x)
        scanBucket(int64_t(y) * v.g.bx + x);
    });
  };
  auto entriesIn = [&](const sg::Rect& r) {
    int64_t n = 0;
    for (int y = r.y0; y <= r.y1; ++y)
      n += v.rowEntries(y, r.x0, r.x1);
    return n;
  };
  sg::Rect rect = blockRect(v.g, c0, r0, c1, r1, 1);
  scanNewRuns(rect, sg::Rect{});
  int64_t greedy = -1;
  if (scratch.segment.empty())
    ++counts.widened;
  // A few buckets more while the rectangle stays small (most blocks); beyond, the pyramid.
  auto area = [](const sg::Rect& r) { return int64_t(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1); };
  for (int m = 2; scratch.segment.empty() && m <= 4; m *= 2)
  {
    const sg::Rect wider = blockRect(v.g, c0, r0, c1, r1, m);
    if (entriesIn(wider) == 0)
      continue;
    scanNewRuns(wider, rect);
    rect = wider;
  }
  if (scratch.segment.empty())
  {
    greedy = nearestBucket(v, c0, r0, c1, r1);
    scanBucket(greedy);
  }
  else
    for (int step = 0; step < 3; ++step)
    {
      const sg::Rect need = reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect);
      if (rect.contains(need) || area(need) > kSmallRect)
        break;
      scanNewRuns(need, rect);
      rect = need;
    }
  // 2. Every other bucket within reach of the block, down the pyramid from the level whose cells
  //    span the reach (the reach shrinks as nearer segments turn up).
  double reach = reachOf(eMin, disc, v.slack);
  const int k0 = levelSpanning(v, double(std::max(c1 - c0, r1 - r0)) + 2.0 * reach + 1.0);
  scratch.stack.clear();
  // (Nothing to do where the reach stays within the buckets already scanned: most blocks.)
  if (greedy >= 0 || !rect.contains(reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect)))
  {
    const int shift = v.g.shift + k0;
    const int X0 = sg::clampBucket(double(c0) + 0.5 - reach, shift, v.pyramid.levelWidth[k0]);
    const int X1 = sg::clampBucket(double(c1) + 0.5 + reach, shift, v.pyramid.levelWidth[k0]);
    const int Y0 = sg::clampBucket(double(r0) + 0.5 - reach, shift, v.pyramid.levelHeight[k0]);
    const int Y1 = sg::clampBucket(double(r1) + 0.5 + reach, shift, v.pyramid.levelHeight[k0]);
    for (int Y = Y0; Y <= Y1; ++Y)
      for (int X = X0; X <= X1; ++X)
        scratch.stack.push_back({k0, X, Y});
  }
  while (!scratch.stack.empty())
  {
    const CellRef cell = scratch.stack.back();
    scratch.stack.pop_back();
    if (v.count(cell.k, cell.X, cell.Y) == 0 ||
        beyondReach(cellSquaredDistance(v, cell.k, cell.X, cell.Y, c0, r0, c1, r1), reach))
      continue;
    if (cell.k == 0)
    {
      const int64_t b = int64_t(cell.Y) * v.g.bx + cell.X;
      if (b == greedy || (cell.X >= rect.x0 && cell.X <= rect.x1 && cell.Y >= rect.y0 && cell.Y <= rect.y1))
        continue;
      scanBucket(b);
      reach = reachOf(eMin, disc, v.slack);
      continue;
    }
    for (int j = 0; j < 4; ++j)
    {
      const int x = 2 * cell.X + (j & 1), y = 2 * cell.Y + (j >> 1);
      if (x < v.pyramid.levelWidth[cell.k - 1] && y < v.pyramid.levelHeight[cell.k - 1])
        scratch.stack.push_back({cell.k - 1, x, y});
    }
  }
  const double limit = keepLimit(pixelBound(eMin, disc), disc, v.slack);
  scratch.block.clear();
  for (size_t k = 0; k < scratch.segment.size(); ++k)
    if (scratch.e[k] <= limit)
      scratch.block.push_back(static_cast<uint32_t>(k));

  for (int q = 0; q < 4; ++q)
  {
    const int qc0 = c0 + (q & 1) * 4, qr0 = r0 + (q >> 1) * 4;
    const int qc1 = std::min(qc0 + 3, c1), qr1 = std::min(qr0 + 3, r1);
    if (qc0 > qc1 || qr0 > qr1)
      continue;
    keepNearest(scratch, scratch.block, qc0, qr0, qc1, qr1, v.slack, scratch.quarter, scratch.e);
    for (int k = 0; k < 4; ++k)
    {
      const int kc0 = qc0 + (k & 1) * 2, kr0 = qr0 + (k >> 1) * 2;
      const int kc1 = std::min(kc0 + 1, qc1), kr1 = std::min(kr0 + 1, qr1);
      if (kc0 > kc1 || kr0 > kr1)
        continue;
      keepNearest(scratch, scratch.quarter, kc0, kr0, kc1, kr1, v.slack, scratch.cell, scratch.e);
      counts.candidates += int64_t(scratch.cell.size());
      // The cell's four pixels (some may lie outside a partial block), each segment against all four.
      double best[4];
      int32_t label[4];
      for (int j = 0; j < 4; ++j)
      {
        const int c = kc0 + (j & 1), r = kr0 + (j >> 1);
        const int32_t covered = (cover && c <= kc1 && r <= kr1) ? cover[(int64_t(r) - bandRow0) * v.width + c] : INT32_MAX;
        best[j] = covered != INT32_MAX ? 0.0 : HUGE_VAL;
        label[j] = covered;
      }
      const double px = double(kc0) + 0.5, py = double(kr0) + 0.5;
      for (const uint32_t k2 : scratch.cell)
      {
        const sg::Segment& s = scratch.segment[k2];
        for (int j = 0; j < 4; ++j)
        {
          const double d = sg::segmentSquared(px + double(j & 1), py + double(j >> 1), s);
          const bool take = sg::better(d, s.feature, best[j], label[j]);
          best[j] = exact::select(take, d, best[j]);
          label[j] = take ? s.feature : label[j];
        }
      }
      for (int j = 0; j < 4; ++j)
      {
        const int c = kc0 + (j & 1), r = kr0 + (j >> 1);
        if (c > kc1 || r > kr1)
          continue;
        const int64_t at = (int64_t(r) - bandRow0) * v.width + c;
        site[at] = label[j];
        if (distance)
          distance[at] = distanceValue(best[j], pixelSize);
      }
    }
  }
}

class CpuFeatureLabeller final : public Labeller
{
public:
  CpuFeatureLabeller(const Grid& grid, const FeatureSites& features, const FeatureLabellerOptions& options,
                     const RunControl& control)
    : mGrid(grid), mThreads(options.threads > 0 ? options.threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "prepare");
    mPrepared = prepareFeatures(grid, features, options.interior, mThreads, control);
    mIndex = buildHostIndex(mPrepared);
    mView.g = mPrepared.buckets;
    mView.start = mIndex.start.data();
    mView.entries = mIndex.entries.data();
    mView.pyramid = mIndex.pyramid;
    mView.counts = mIndex.counts.data();
    mView.slack = mPrepared.slack;
    mView.width = static_cast<int>(grid.width);
    mView.height = static_cast<int>(grid.height);
    mStats.uniqueSites = mPrepared.featuresWithSegments;
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
    ScopedStage stage(mTimes, "compute");
    const bool covered = !mPrepared.rowSpan.empty();
    if (covered)
    {
      mCover.resize(static_cast<size_t>(rows * mGrid.width));
      paintCover(mPrepared, mGrid.width, row0, rows, mCover.data(), mThreads);
      int64_t inside = 0;
      for (int32_t c : mCover)
        inside += c != INT32_MAX;
      mStats.refinedPixels += inside;
    }
    constexpr int K = sg::kBlock;
    const int64_t blocksX = (mGrid.width + K - 1) / K, blocksY = (rows + K - 1) / K;
    std::atomic<int64_t> blocks{0}, widened{0}, candidates{0};
    parallelFor(
      blocksX * blocksY, 16, mThreads,
      [&](int64_t first, int64_t last) {
        thread_local BlockScratch scratch;
        BlockCounts counts;
        for (int64_t b = first; b < last; ++b)
          labelBlock(mView, this, mPrepared.vertex.size(), static_cast<int>((b % blocksX) * K),
                     static_cast<int>(row0 + (b / blocksX) * K), static_cast<int>(row0 + rows), row0,
                     covered ? mCover.data() : nullptr, site, distance, mGrid.pixelSize, scratch, counts);
        blocks += counts.blocks;
        widened += counts.widened;
        candidates += counts.candidates;
      },
      &control);
    mStats.tiles += blocks;
    mStats.splitTiles += widened;
    mStats.candidates += candidates;
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string deviceName() const override { return cpuDescription(mThreads); }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override { return mStats; }
  std::vector<std::string> warnings() const override { return {}; }

private:
  Grid mGrid;
  int mThreads;
  PreparedFeatures mPrepared;
  HostSegmentIndex mIndex;
  SegmentIndexView mView;
  std::vector<int32_t> mCover;
  StageTimes mTimes;
  LabelStats mStats;
};

}  // namespace

std::unique_ptr<Labeller> makeFeatureLabeller(Backend backend, const Grid& grid, const FeatureSites& features,
                                              const FeatureLabellerOptions& options, const RunControl& control)
{
  validate(grid, features);
  if (control.isCanceled())
    throw Canceled();
  switch (backend)
  {
    case Backend::Cpu:
      return std::make_unique<CpuFeatureLabeller>(grid, features, options, control);
    case Backend::Gpu:
      return makeGpuFeatureLabeller(grid, features, options, control);
    case Backend::Auto:
      break;
  }
  throw InvalidInput("makeFeatureLabeller needs a resolved backend (Cpu or Gpu), not Auto; see resolveBackend().");
}

}  // namespace gpugeo::voronoi
