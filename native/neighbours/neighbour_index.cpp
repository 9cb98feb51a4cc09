#include "neighbours/neighbour_index.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/parallel_sort.h"

namespace gpugeo::neighbours {

namespace detail {

void validatePoints(const Points& points)
{
  if (points.count < 1)
    throw InvalidInput("there are no points");
  if (points.count > kMaxPoints)
    throw InvalidInput("too many points: " + std::to_string(points.count) + " (at most " + std::to_string(kMaxPoints) +
                       ")");
  if (!points.x || !points.y)
    throw InvalidInput("the coordinate arrays must not be null");
  int64_t bad = 0;
  for (int64_t i = 0; i < points.count; ++i)
    bad += !(std::isfinite(points.x[i]) && std::isfinite(points.y[i]) && (!points.z || std::isfinite(points.z[i])));
  if (bad > 0)
    throw InvalidInput(std::to_string(bad) + " of " + std::to_string(points.count) +
                       " points have a NaN or infinite coordinate; fix or remove them");
  // Distances are compared by their squares: an extent past kMaxExtent would overflow them (and the
  // extent itself, for coordinates near +-1e308).
  const double* axes[3] = {points.x, points.y, points.z};
  for (int a = 0; a < (points.z ? 3 : 2); ++a)
  {
    const auto [lo, hi] = std::minmax_element(axes[a], axes[a] + points.count);
    if (!(*hi - *lo <= kMaxExtent))
    {
      char text[240];
      std::snprintf(text, sizeof text,
                    "the points' %c coordinates run from %.6g to %.6g, farther apart than the %.0e this tool "
                    "takes (their squared distances would overflow): check the layer's CRS and coordinates",
                    "xyz"[a], *lo, *hi, kMaxExtent);
      throw InvalidInput(text);
    }
  }
}

void validateQuery(const Query& query)
{
  if (!(query.radius >= 0.0) || !std::isfinite(query.radius))
    throw InvalidInput("the radius must be zero or more (got " + std::to_string(query.radius) + ")");
  if (query.k < 0 || query.k > kMaxK)
    throw InvalidInput("k must be between 0 and " + std::to_string(kMaxK) + " (got " + std::to_string(query.k) + ")");
}

void validateDbscan(const DbscanOptions& options)
{
  if (!(options.eps >= 0.0) || !std::isfinite(options.eps))
    throw InvalidInput("the DBSCAN distance must be zero or more (got " + std::to_string(options.eps) + ")");
  if (options.minPoints < 1)
    throw InvalidInput("the minimum cluster size must be at least 1 (got " + std::to_string(options.minPoints) + ")");
}

template <int D>
LocalFrame<D> localFrame(const Points& points, int threads, const RunControl& control)
{
  const int64_t n = points.count;
  const double* axis[3] = {points.x, points.y, points.z};
  double lo[D], hi[D], origin[D];
  for (int a = 0; a < D; ++a)
  {
    lo[a] = std::numeric_limits<double>::infinity();
    hi[a] = -lo[a];
    for (int64_t i = 0; i < n; ++i)
    {
      lo[a] = std::min(lo[a], axis[a][i]);
      hi[a] = std::max(hi[a], axis[a][i]);
    }
  }
  LocalFrame<D> frame;
  frameFromBounds<D>(lo, hi, origin, frame.quantiser);
  frame.points.resize(std::size_t(n));
  parallelFor(n, 1 << 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      for (int a = 0; a < D; ++a)
        frame.points[std::size_t(i)].c[a] = axis[a][i] - origin[a];
  }, &control);
  return frame;
}

template <int D>
std::vector<int64_t> regionStarts(const std::vector<uint64_t>& codes)
{
  constexpr int kLevels = MortonTraits<D>::kLevels;
  const int64_t n = int64_t(codes.size());
  std::vector<int64_t> starts;
  starts.reserve(std::size_t(n / 16 + 2));
  int64_t s = 0;
  while (s < n)
  {
    starts.push_back(s);
    const int level = leafLevel<D, kRegionCapacity>(codes.data(), n, s);
    int64_t e = s + 1;
    if (level > kLevels)  // a run of more than kRegionCapacity equal codes: pieces of that many
      while (e < n && e - s < kRegionCapacity && codes[std::size_t(e)] == codes[std::size_t(s)])
        ++e;
    else
      while (e < n && delta<D>(codes.data(), n, e) >= level)
        ++e;
    s = e;
  }
  starts.push_back(n);
  return starts;
}

template <int D>
void buildTreeLevels(HostIndex<D>& index)
{
  int64_t size = int64_t(index.boxes.size());
  int64_t offset = 0;
  index.levels = 0;
  for (;;)
  {
    index.levelOffset[index.levels] = offset;
    index.levelSize[index.levels] = size;
    ++index.levels;
    if (size <= 1)
      break;
    const int64_t parents = (size + kFanout - 1) / kFanout;
    for (int64_t p = 0; p < parents; ++p)
      index.boxes.push_back(parentBox(index.boxes.data() + offset, size, p));
    offset += size;
    size = parents;
  }
}

template <int D>
HostIndex<D> buildHostIndex(const LocalFrame<D>& frame, int threads, const RunControl& control)
{
  const int64_t n = int64_t(frame.points.size());
  std::vector<std::pair<uint64_t, int32_t>> keyed(static_cast<std::size_t>(n));
  parallelFor(n, 1 << 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      keyed[std::size_t(i)] = {mortonCode(frame.quantiser, frame.points[std::size_t(i)]), int32_t(i)};
  }, &control);
  parallelSort(keyed, threads, control);

  HostIndex<D> index;
  std::vector<uint64_t> codes(static_cast<std::size_t>(n));
  index.original.resize(std::size_t(n));
  index.points.resize(std::size_t(n));
  parallelFor(n, 1 << 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      codes[std::size_t(i)] = keyed[std::size_t(i)].first;
      index.original[std::size_t(i)] = keyed[std::size_t(i)].second;
      index.points[std::size_t(i)] = frame.points[std::size_t(keyed[std::size_t(i)].second)];
    }
  }, &control);
  keyed = {};
  index.start = regionStarts<D>(codes);
  const int64_t regions = int64_t(index.start.size()) - 1;
  index.boxes.resize(std::size_t(regions));
  parallelFor(regions, 1024, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      index.boxes[std::size_t(r)] =
        boxOf(index.points.data(), index.start[std::size_t(r)], index.start[std::size_t(r + 1)]);
  }, &control);
  buildTreeLevels(index);
  return index;
}

template <int D>
RegionView<D> HostIndex<D>::view() const
{
  RegionView<D> v;
  v.points = points.data();
  v.original = original.data();
  v.start = start.data();
  v.regions = int64_t(start.size()) - 1;
  v.tree.boxes = boxes.data();
  v.tree.levels = levels;
  for (int l = 0; l < levels; ++l)
  {
    v.tree.levelOffset[l] = levelOffset[l];
    v.tree.levelSize[l] = levelSize[l];
  }
  return v;
}

void requirePairsAtMost(int64_t pairs, int64_t maxPairs)
{
  if (pairs > maxPairs)
    throw InvalidInput("the query gives " + std::to_string(pairs) + " pairs, more than the limit of " +
                       std::to_string(maxPairs) + "; use a smaller radius or k");
}

void requirePairsFit(int64_t pairs, int64_t capacity, const PairsOutput& out)
{
  requirePairsAtMost(pairs, capacity);
  if (pairs > 0 && (out.a == nullptr || out.b == nullptr))
    throw InvalidInput("pairsInto() needs the arrays a and b");
}

Clusters assignClusters(std::vector<uint8_t> core, const std::vector<int32_t>& root,
                        const std::vector<int32_t>& borderCore, bool borderPointsAreNoise)
{
  const int64_t n = int64_t(core.size());
  Clusters c;
  c.cluster.assign(std::size_t(n), 0);
  std::vector<int64_t> idOfRoot(std::size_t(n), 0);
  // Ids in order of each cluster's first core point in input order (its root), as QGIS numbers
  // them: a cluster starts at the first unvisited core point met in feature order.
  for (int64_t i = 0; i < n; ++i)
  {
    if (!core[std::size_t(i)])
      continue;
    const int32_t r = root[std::size_t(i)];
    if (idOfRoot[std::size_t(r)] == 0)
    {
      c.size.push_back(0);
      idOfRoot[std::size_t(r)] = int64_t(c.size.size());
    }
  }
  for (int64_t i = 0; i < n; ++i)
  {
    int32_t r = -1;
    if (core[std::size_t(i)])
      r = root[std::size_t(i)];
    else if (!borderPointsAreNoise && borderCore[std::size_t(i)] != INT32_MAX)
      r = root[std::size_t(borderCore[std::size_t(i)])];
    if (r < 0)
      continue;
    c.cluster[std::size_t(i)] = idOfRoot[std::size_t(r)];
    ++c.size[std::size_t(idOfRoot[std::size_t(r)] - 1)];
  }
  c.core = std::move(core);
  return c;
}

template LocalFrame<2> localFrame<2>(const Points&, int, const RunControl&);
template LocalFrame<3> localFrame<3>(const Points&, int, const RunControl&);
template std::vector<int64_t> regionStarts<2>(const std::vector<uint64_t>&);
template std::vector<int64_t> regionStarts<3>(const std::vector<uint64_t>&);
template void buildTreeLevels<2>(HostIndex<2>&);
template void buildTreeLevels<3>(HostIndex<3>&);
template HostIndex<2> buildHostIndex<2>(const LocalFrame<2>&, int, const RunControl&);
template HostIndex<3> buildHostIndex<3>(const LocalFrame<3>&, int, const RunControl&);
template struct HostIndex<2>;
template struct HostIndex<3>;

}  // namespace detail

Summary NeighbourIndex::summarize(const Query& query, const RunControl& control)
{
  const std::size_t n = static_cast<std::size_t>(pointCount());
  Summary s;
  s.count.resize(n);
  s.nearest.resize(n);
  s.nearestDistance.resize(n);
  s.meanDistance.resize(n);
  summarizeInto(query, SummaryOutput{s.count.data(), s.nearest.data(), s.nearestDistance.data(), s.meanDistance.data()},
                control);
  return s;
}

Pairs NeighbourIndex::pairs(const Query& query, int64_t maxPairs, const RunControl& control)
{
  const int64_t total = countPairs(query, control);
  detail::requirePairsAtMost(total, maxPairs);
  Pairs p;
  p.a.resize(static_cast<std::size_t>(total));
  p.b.resize(static_cast<std::size_t>(total));
  p.distance.resize(static_cast<std::size_t>(total));
  pairsInto(query, PairsOutput{p.a.data(), p.b.data(), p.distance.data()}, total, control);
  return p;
}

std::unique_ptr<NeighbourIndex> makeNeighbourIndex(Backend backend, const Points& points, int threads,
                                                   const RunControl& control)
{
  detail::validatePoints(points);
  if (backend == Backend::Gpu)
    return detail::makeCudaIndex(points, control);
  return detail::makeCpuIndex(points, threads, control);
}

}  // namespace gpugeo::neighbours
