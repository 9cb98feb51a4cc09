#include "dem/breach.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/breach_area.h"
#include "dem/detail/breach_cuda.h"
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

// Whether a neighbour of (x, y) in the area holds the same raised elevation.
bool hasEqualNeighbour(const BreachArea& area, int64_t x, int64_t y)
{
  const float level = area.raised[std::size_t(y * area.width + x)];
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = x + kDx[d], ny = y + kDy[d];
    if (nx >= 0 && ny >= 0 && nx < area.width && ny < area.height && area.raised[std::size_t(ny * area.width + nx)] == level)
      return true;
  }
  return false;
}

}  // namespace

void forEachEqualSet(const BreachArea& area, const CountRegion& region, const RunControl& control,
                     const std::function<void(const EqualSet&)>& visit, const std::vector<int64_t>* starts)
{
  std::vector<uint8_t> seen(area.raised.size(), 0);
  EqualSet set;
  const auto from = [&](int64_t c) {
    if (seen[std::size_t(c)] || isNoData(area.raised[std::size_t(c)]) ||
        !hasEqualNeighbour(area, c % area.width, c / area.width))
      return;
    floodEqualSet(area, region, c, seen, set);
    visit(set);
  };
  if (starts)
  {
    for (const int64_t c : *starts)
      from(c);
    return;
  }
  int64_t visited = 0;
  for (int64_t y = region.y0; y < region.y1; ++y)
  {
    if ((++visited & 0xff) == 0 && control.isCanceled())
      throw Canceled();
    for (int64_t x = region.x0; x < region.x1; ++x)
      from(y * area.width + x);
  }
}

void forEachBottom(const BreachArea& area, const CountRegion& region, const RunControl& control,
                   const std::function<void(const EqualSet&)>& visit)
{
  const int64_t w = area.width, h = area.height;
  // seen: the flood that reached a cell (0: none). A flood stops at its set's first edge cell or lower
  // neighbour: the set is no bottom; a later flood that meets its cells stops too (the same set).
  std::vector<int64_t> seen(area.raised.size(), 0);
  int64_t flood = 0;
  EqualSet set;
  int64_t rows = 0;
  const auto disqualified = [&](int64_t c, int64_t cx, int64_t cy, float level) {
    if (area.edge[std::size_t(c)])
      return true;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = cx + kDx[d], ny = cy + kDy[d];
      if (nx >= 0 && ny >= 0 && nx < w && ny < h && area.raised[std::size_t(ny * w + nx)] < level)
        return true;
    }
    return false;
  };
  for (int64_t y = region.y0; y < region.y1; ++y)
  {
    if ((++rows & 0xff) == 0 && control.isCanceled())
      throw Canceled();
    for (int64_t x = region.x0; x < region.x1; ++x)
    {
      const int64_t c = y * w + x;
      const float level = area.raised[std::size_t(c)];
      if (seen[std::size_t(c)] || isNoData(level) || !hasEqualNeighbour(area, x, y) || disqualified(c, x, y, level))
        continue;
      ++flood;
      set = EqualSet();
      set.cells.assign(1, c);
      set.x0 = set.x1 = x;
      set.y0 = set.y1 = y;
      seen[std::size_t(c)] = flood;
      bool bottom = true;
      for (std::size_t i = 0; i < set.cells.size() && bottom; ++i)
      {
        const int64_t e = set.cells[i], ex = e % w, ey = e / w;
        if (i > 0 && disqualified(e, ex, ey, level))
        {
          bottom = false;
          break;
        }
        set.touchesBorder = set.touchesBorder || ex == region.x0 || ey == region.y0 || ex == region.x1 - 1 ||
                            ey == region.y1 - 1;
        set.x0 = std::min(set.x0, ex);
        set.x1 = std::max(set.x1, ex);
        set.y0 = std::min(set.y0, ey);
        set.y1 = std::max(set.y1, ey);
        for (int d = 0; d < 8; ++d)
        {
          const int64_t nx = ex + kDx[d], ny = ey + kDy[d];
          if (!region.contains(nx, ny))
            continue;
          const int64_t n = ny * w + nx;
          if (area.raised[std::size_t(n)] != level)
            continue;
          if (seen[std::size_t(n)] == 0)
          {
            seen[std::size_t(n)] = flood;
            set.cells.push_back(n);
          }
          else if (seen[std::size_t(n)] != flood)
          {
            bottom = false;  // a flood before stopped in this set
            break;
          }
        }
      }
      if (bottom)
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
  : mArea(area), mLimits(limits), mStamp(area.raised.size(), 0), mFewestSteps(area.raised.size(), 0),
    mReached(area.raised.size(), 0)
{
}

std::vector<int64_t> ChannelSearch::channel(const std::vector<int64_t>& cells, float level)
{
  const int64_t w = mArea.width, h = mArea.height;
  const std::vector<float>& z = mArea.raised;
  ++mSearch;
  if (!reachesTarget(cells, level))
    return {};
  mStates.clear();
  mOpen.clear();
  // The open states, the least (cost, steps, cell, from) on top of the heap.
  const auto later = [](const State& x, const State& y) {
    if (x.cost != y.cost)
      return x.cost > y.cost;
    if (x.steps != y.steps)
      return x.steps > y.steps;
    if (x.cell != y.cell)
      return x.cell > y.cell;
    return x.from > y.from;
  };
  const auto push = [&](const State& state) {
    mOpen.push_back(state);
    std::push_heap(mOpen.begin(), mOpen.end(), later);
  };
  for (const int64_t c : cells)
  {
    mStamp[std::size_t(c)] = mSearch;
    mFewestSteps[std::size_t(c)] = 0;
    push({0.0, 0, c, -1, -1});
  }
  while (!mOpen.empty())
  {
    std::pop_heap(mOpen.begin(), mOpen.end(), later);
    const State state = mOpen.back();
    mOpen.pop_back();
    int64_t self = -1;  // its place in mStates, the chain back to the bottom
    if (state.steps > 0)
    {
      if (mStamp[std::size_t(state.cell)] == mSearch && mFewestSteps[std::size_t(state.cell)] <= state.steps)
        continue;  // left already at no more cost in no more steps
      mStamp[std::size_t(state.cell)] = mSearch;
      mFewestSteps[std::size_t(state.cell)] = state.steps;
      self = int64_t(mStates.size());
      mStates.push_back({state.cell, state.parent});
      if (isTarget(state.cell, level))
      {
        std::vector<int64_t> path(std::size_t(state.steps), -1);
        for (int64_t p = self, k = state.steps; k >= 1; p = mStates[std::size_t(p)].parent, --k)
          path[std::size_t(k - 1)] = mStates[std::size_t(p)].cell;
        return path;
      }
    }
    if (state.steps >= mLimits.maxLength)
      continue;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = state.cell % w + kDx[d], ny = state.cell / w + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h)
        continue;
      const int64_t x = ny * w + nx;
      if (isNoData(z[std::size_t(x)]) ||
          (mStamp[std::size_t(x)] == mSearch && mFewestSteps[std::size_t(x)] <= state.steps + 1))
        continue;
      const double above = double(z[std::size_t(x)]) - double(level);
      if (!(above <= mLimits.maxDepth))
        continue;
      push({state.cost + std::max(0.0, above), state.steps + 1, x, state.cell, self});
    }
  }
  return {};
}

bool ChannelSearch::reachesTarget(const std::vector<int64_t>& cells, float level)
{
  const int64_t w = mArea.width, h = mArea.height;
  const std::vector<float>& z = mArea.raised;
  for (const int64_t c : cells)
    mReached[std::size_t(c)] = mSearch;
  mLayer.assign(cells.begin(), cells.end());
  for (int64_t k = 1; k <= mLimits.maxLength && !mLayer.empty(); ++k)
  {
    mNextLayer.clear();
    for (const int64_t y : mLayer)
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = y % w + kDx[d], ny = y / w + kDy[d];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h)
          continue;
        const int64_t x = ny * w + nx;
        if (mReached[std::size_t(x)] == mSearch || isNoData(z[std::size_t(x)]) ||
            !(double(z[std::size_t(x)]) - double(level) <= mLimits.maxDepth))
          continue;
        if (isTarget(x, level))
          return true;
        mReached[std::size_t(x)] = mSearch;
        mNextLayer.push_back(x);
      }
    std::swap(mLayer, mNextLayer);
  }
  return false;
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

namespace {

// The valid cells the breached DEM lowered and raised, counted on `threads`.
void countChanges(const Grid& grid, int threads, BreachedDem& out)
{
  std::atomic<int64_t> lowered{0}, raised{0};
  parallelFor(int64_t(out.z.size()), int64_t(1) << 20, threads, [&](int64_t b, int64_t e) {
    int64_t down = 0, up = 0;
    for (int64_t c = b; c < e; ++c)
    {
      down += out.z[std::size_t(c)] < grid.z[c];
      up += out.z[std::size_t(c)] > grid.z[c];
    }
    lowered += down;
    raised += up;
  });
  out.lowered = lowered;
  out.raised = raised;
}

}  // namespace

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
  detail::forEachBottom(area, all, control, [&](const detail::EqualSet& set) {
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
  StageTimes local;
  StageTimes& timed = times ? *times : local;
  if (backend == Backend::Gpu)
  {
    validateGrid(grid);
    detail::checkBreachLimits(limits);
    detail::BreachOnDevice device = detail::breachCuda(grid, limits, threads, control, timed);
    BreachedDem out;
    out.z = std::move(device.z);
    out.counts = device.counts;
    countChanges(grid, threads, out);
    return out;
  }
  BreachCounts counts;
  std::vector<float> cut;
  {
    ScopedStage stage(timed, "breach (channels)");
    cut = cutChannels(grid, limits, control, &counts);
  }
  return finishBreach(backend, grid, cut, counts, threads, control, &timed);
}

BreachedDem finishBreach(Backend backend, const Grid& grid, const std::vector<float>& cut, const BreachCounts& counts,
                         int threads, const RunControl& control, StageTimes* times)
{
  StageTimes local;
  StageTimes& timed = times ? *times : local;
  BreachedDem out;
  out.counts = counts;
  const Grid cutGrid{cut.data(), grid.width, grid.height, grid.cellWidth, grid.cellHeight};
  out.z = fillAndRaiseFlats(backend, cutGrid, FlatGradient::Combined, threads, control, &timed).z;
  countChanges(grid, threads, out);
  return out;
}

}  // namespace gpugeo::dem
