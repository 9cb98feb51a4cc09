// The allocation to lines and polygons: input checks, the prepared form both backends start from
// (pixel frame, bucket side, polygon interiors); the backends are feature_labeller_cpu.cpp and
// feature_allocation_cuda.cu.
#include "feature_allocation.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "core/host_memory.h"
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
  resizeHuge(out.vertex, static_cast<size_t>(slots));
  assignHuge(out.segmentFeature, static_cast<size_t>(slots), int32_t(-1));
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

std::unique_ptr<Labeller> makeFeatureLabeller(Backend backend, const Grid& grid, const FeatureSites& features,
                                              const FeatureLabellerOptions& options, const RunControl& control)
{
  validate(grid, features);
  if (control.isCanceled())
    throw Canceled();
  switch (backend)
  {
    case Backend::Cpu:
      return makeCpuFeatureLabeller(grid, features, options, control);
    case Backend::Gpu:
      return makeGpuFeatureLabeller(grid, features, options, control);
    case Backend::Auto:
      break;
  }
  throw InvalidInput("makeFeatureLabeller needs a resolved backend (Cpu or Gpu), not Auto; see resolveBackend().");
}

}  // namespace gpugeo::voronoi
