#include "dem/breach.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/errors.h"
#include "dem/detail/breach_area.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem {

namespace detail {

BreachArea prepareBreachArea(const float* z, int64_t width, int64_t height, bool window,
                             const CountRegion& count, int64_t* pitsRaised)
{
  BreachArea area;
  area.width = width;
  area.height = height;
  area.window = window;
  area.raised.assign(z, z + width * height);
  area.edge.assign(std::size_t(width * height), 0);
  int64_t raised = 0;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
    {
      const int64_t c = y * width + x;
      float& r = area.raised[std::size_t(c)];
      if (!area.inner(x, y))
      {
        r = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      if (r == 0.f)
        r = 0.f;
      if (isNoData(z[c]))
        continue;
      if (isEdgeCell(z, width, height, x, y))
      {
        area.edge[std::size_t(c)] = 1;
        continue;
      }
      float lowest = std::numeric_limits<float>::infinity();
      for (int d = 0; d < 8; ++d)
        lowest = std::min(lowest, z[(y + kDy[d]) * width + x + kDx[d]]);
      if (z[c] < lowest)
      {
        r = lowest == 0.f ? 0.f : lowest;
        raised += count.contains(x, y);
      }
    }
  if (pitsRaised)
    *pitsRaised += raised;
  return area;
}

namespace {

// The set of equal elevation from `start` within `region`, marking its cells in `seen`.
void floodEqualSet(const BreachArea& area, const CountRegion& region, int64_t start, std::vector<uint8_t>& seen,
                   EqualSet& set)
{
  const int64_t w = area.width, h = area.height;
  const float level = area.raised[std::size_t(start)];
  set = EqualSet();
  set.cells.assign(1, start);
  set.x0 = set.x1 = start % w;
  set.y0 = set.y1 = start / w;
  seen[std::size_t(start)] = 1;
  for (std::size_t i = 0; i < set.cells.size(); ++i)
  {
    const int64_t c = set.cells[i], cx = c % w, cy = c / w;
    set.hasEdge = set.hasEdge || area.edge[std::size_t(c)];
    set.touchesBorder = set.touchesBorder || cx == region.x0 || cy == region.y0 || cx == region.x1 - 1 ||
                        cy == region.y1 - 1;
    set.x0 = std::min(set.x0, cx);
    set.x1 = std::max(set.x1, cx);
    set.y0 = std::min(set.y0, cy);
    set.y1 = std::max(set.y1, cy);
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = cx + kDx[d], ny = cy + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h)
        continue;
      const int64_t n = ny * w + nx;
      const float zn = area.raised[std::size_t(n)];
      if (zn < level)
        set.hasLower = true;
      else if (zn == level && region.contains(nx, ny) && !seen[std::size_t(n)])
      {
        seen[std::size_t(n)] = 1;
        set.cells.push_back(n);
      }
    }
  }
}

}  // namespace

void forEachEqualSet(const BreachArea& area, const CountRegion& region, const RunControl& control,
                     const std::function<void(const EqualSet&)>& visit)
{
  std::vector<uint8_t> seen(area.raised.size(), 0);
  EqualSet set;
  int64_t visited = 0;
  for (int64_t y = region.y0; y < region.y1; ++y)
  {
    if ((++visited & 0xff) == 0 && control.isCanceled())
      throw Canceled();
    for (int64_t x = region.x0; x < region.x1; ++x)
    {
      const int64_t c = y * area.width + x;
      if (seen[std::size_t(c)] || isNoData(area.raised[std::size_t(c)]))
        continue;
      floodEqualSet(area, region, c, seen, set);
      visit(set);
    }
  }
}

EqualSet equalSetAt(const BreachArea& area, int64_t start)
{
  const int64_t m = area.window ? 1 : 0;
  const CountRegion known{m, m, area.width - m, area.height - m};
  std::vector<uint8_t> seen(area.raised.size(), 0);
  EqualSet set;
  floodEqualSet(area, known, start, seen, set);
  std::sort(set.cells.begin(), set.cells.end());
  return set;
}

ChannelSearch::ChannelSearch(const BreachArea& area, const BreachLimits& limits)
  : mArea(area), mLimits(limits), mStamp(area.raised.size(), 0), mLayer(area.raised.size(), 0),
    mCost(area.raised.size(), 0.0), mParent(area.raised.size(), -1)
{
}

std::vector<int64_t> ChannelSearch::channel(const std::vector<int64_t>& cells, float level)
{
  const int64_t w = mArea.width, h = mArea.height;
  const std::vector<float>& z = mArea.raised;
  ++mSearch;
  for (const int64_t c : cells)
    mark(c, 0, 0.0, -1);
  std::vector<int64_t> current = cells, next;
  for (int64_t k = 1; k <= mLimits.maxLength && !current.empty(); ++k)
  {
    next.clear();
    for (const int64_t y : current)
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = y % w + kDx[d], ny = y / w + kDy[d];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h)
          continue;
        const int64_t x = ny * w + nx;
        if (isNoData(z[std::size_t(x)]) || (mStamp[std::size_t(x)] == mSearch && mLayer[std::size_t(x)] < k))
          continue;
        const double above = double(z[std::size_t(x)]) - double(level);
        if (!(above <= mLimits.maxDepth))
          continue;
        const double cost = mCost[std::size_t(y)] + std::max(0.0, above);
        if (mStamp[std::size_t(x)] != mSearch)
        {
          mark(x, k, cost, y);
          next.push_back(x);
        }
        else if (cost < mCost[std::size_t(x)] || (cost == mCost[std::size_t(x)] && y < mParent[std::size_t(x)]))
        {
          mCost[std::size_t(x)] = cost;
          mParent[std::size_t(x)] = y;
        }
      }
    // The layer's cheapest target ends the search; else its cells (none a target) go on.
    int64_t target = -1;
    for (const int64_t x : next)
      if (isTarget(x, level) &&
          (target < 0 || mCost[std::size_t(x)] < mCost[std::size_t(target)] ||
           (mCost[std::size_t(x)] == mCost[std::size_t(target)] && x < target)))
        target = x;
    if (target >= 0)
    {
      std::vector<int64_t> path(std::size_t(k), -1);
      for (int64_t i = k, c = target; i >= 1; --i, c = mParent[std::size_t(c)])
        path[std::size_t(i - 1)] = c;
      return path;
    }
    std::swap(current, next);
  }
  return {};
}

void ChannelSearch::mark(int64_t c, int64_t layer, double cost, int64_t parent)
{
  mStamp[std::size_t(c)] = mSearch;
  mLayer[std::size_t(c)] = layer;
  mCost[std::size_t(c)] = cost;
  mParent[std::size_t(c)] = parent;
}

bool ChannelSearch::isTarget(int64_t x, float level) const
{
  return mArea.edge[std::size_t(x)] || mArea.raised[std::size_t(x)] < level;
}

void cutChannel(const std::vector<int64_t>& path, float level, const std::function<float*(int64_t)>& cut)
{
  for (std::size_t i = 0; i < path.size(); ++i)
    if (float* z = cut(path[i]))
    {
      const float step = lowerBySteps(level, int64_t(i) + 1);
      if (step < *z)
        *z = step;
    }
}

void checkBreachLimits(const BreachLimits& limits)
{
  if (limits.maxLength < 1)
    throw InvalidInput("breach depressions: the maximum length must be at least 1 cell");
  if (!(limits.maxDepth >= 0))
    throw InvalidInput("breach depressions: the maximum depth must be 0 or more");
}

}  // namespace detail

float lowerBySteps(float x, int64_t steps)
{
  if (steps <= 0 || std::isnan(x))
    return x;
  return -raiseBySteps(-x, steps);
}

std::vector<float> cutChannels(const Grid& grid, const BreachLimits& limits, const RunControl& control,
                               BreachCounts* counts)
{
  validateGrid(grid);
  detail::checkBreachLimits(limits);
  const int64_t w = grid.width, h = grid.height;
  BreachCounts local;
  const detail::CountRegion all{0, 0, w, h};
  const detail::BreachArea area = detail::prepareBreachArea(grid.z, w, h, false, all, &local.pitsRaised);

  // Every bottom's channel, searched on the raised DEM, merged by the minimum.
  std::vector<float> cut = area.raised;
  detail::ChannelSearch search(area, limits);
  detail::forEachEqualSet(area, all, control, [&](const detail::EqualSet& set) {
    if (!set.bottom())
      return;
    ++local.bottoms;
    if ((local.bottoms & 0xff) == 0 && control.isCanceled())
      throw Canceled();
    const float level = area.raised[std::size_t(set.cells.front())];
    const std::vector<int64_t> path = search.channel(set.cells, level);
    if (path.empty())
      return;
    ++local.breached;
    detail::cutChannel(path, level, [&](int64_t c) { return &cut[std::size_t(c)]; });
  });
  for (std::size_t c = 0; c < cut.size(); ++c)
    local.channelCells += cut[c] < area.raised[c];
  if (counts)
    *counts = local;
  return cut;
}
BreachedDem breachDepressions(Backend backend, const Grid& grid, const BreachLimits& limits, int threads,
                              const RunControl& control, StageTimes* times)
{
  BreachedDem out;
  StageTimes local;
  StageTimes& timed = times ? *times : local;
  std::vector<float> cut;
  {
    ScopedStage stage(timed, "breach (channels)");
    cut = cutChannels(grid, limits, control, &out.counts);
  }
  const Grid cutGrid{cut.data(), grid.width, grid.height, grid.cellWidth, grid.cellHeight};
  const std::vector<float> filled = fillDepressions(backend, cutGrid, threads, control, times);
  const Grid filledGrid{filled.data(), grid.width, grid.height, grid.cellWidth, grid.cellHeight};
  const std::vector<int32_t> mask = flatMask(backend, filledGrid, threads, control, times);
  {
    ScopedStage stage(timed, "raise flats");
    out.z = raiseFlats(filledGrid, mask).z;
  }
  for (std::size_t c = 0; c < out.z.size(); ++c)
  {
    out.lowered += out.z[c] < grid.z[c];
    out.raised += out.z[c] > grid.z[c];
  }
  return out;
}

}  // namespace gpugeo::dem
