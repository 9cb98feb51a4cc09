#include "dem/breach.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/errors.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem {

namespace {

using detail::isEdgeCell;
using detail::isNoData;

// One bottom's search (step 3) over the whole grid, its marks kept in arrays stamped with the search's
// number so that they need no clearing between searches.
class ChannelSearch
{
public:
  ChannelSearch(const std::vector<float>& z, const std::vector<uint8_t>& edge, int64_t w, int64_t h,
                const BreachLimits& limits)
    : mZ(z), mEdge(edge), mW(w), mH(h), mLimits(limits), mStamp(z.size(), 0), mLayer(z.size(), 0),
      mCost(z.size(), 0.0), mParent(z.size(), -1)
  {
  }

  // The channel of the bottom `cells` at elevation `level` (its cells from the first step to the
  // target), empty when there is none within the limits.
  std::vector<int64_t> channel(const std::vector<int64_t>& cells, float level)
  {
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
          const int64_t nx = y % mW + kDx[d], ny = y / mW + kDy[d];
          if (nx < 0 || ny < 0 || nx >= mW || ny >= mH)
            continue;
          const int64_t x = ny * mW + nx;
          if (isNoData(mZ[std::size_t(x)]) || (mStamp[std::size_t(x)] == mSearch && mLayer[std::size_t(x)] < k))
            continue;
          const double above = double(mZ[std::size_t(x)]) - double(level);
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

private:
  void mark(int64_t c, int64_t layer, double cost, int64_t parent)
  {
    mStamp[std::size_t(c)] = mSearch;
    mLayer[std::size_t(c)] = layer;
    mCost[std::size_t(c)] = cost;
    mParent[std::size_t(c)] = parent;
  }
  bool isTarget(int64_t x, float level) const { return mEdge[std::size_t(x)] || mZ[std::size_t(x)] < level; }

  const std::vector<float>& mZ;
  const std::vector<uint8_t>& mEdge;
  int64_t mW, mH;
  const BreachLimits& mLimits;
  int64_t mSearch = 0;
  std::vector<int64_t> mStamp, mLayer;
  std::vector<double> mCost;
  std::vector<int64_t> mParent;
};

// Step 1: single-cell pits raised to their lowest neighbour; -0 written as +0.
std::vector<float> raisePits(const Grid& grid, const std::vector<uint8_t>& edge, int64_t& raised)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<float> z(grid.z, grid.z + w * h);
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (z[std::size_t(c)] == 0.f)
      z[std::size_t(c)] = 0.f;
    if (isNoData(grid.z[c]) || edge[std::size_t(c)])
      continue;
    float lowest = std::numeric_limits<float>::infinity();
    for (int d = 0; d < 8; ++d)
      lowest = std::min(lowest, grid.z[(c / w + kDy[d]) * w + c % w + kDx[d]]);
    if (grid.z[c] < lowest)
    {
      z[std::size_t(c)] = lowest == 0.f ? 0.f : lowest;
      ++raised;
    }
  }
  return z;
}

// Step 2: the bottoms (8-connected sets of equal elevation with no edge cell and no cell with a lower
// neighbour), each as its cells, in the order of their lowest cells.
std::vector<std::vector<int64_t>> bottoms(const std::vector<float>& z, const std::vector<uint8_t>& edge, int64_t w,
                                          int64_t h, const RunControl& control)
{
  std::vector<uint8_t> seen(z.size(), 0);
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> set;
  for (int64_t start = 0; start < w * h; ++start)
  {
    if (seen[std::size_t(start)] || isNoData(z[std::size_t(start)]))
      continue;
    if ((start & 0xfffff) == 0 && control.isCanceled())
      throw Canceled();
    const float level = z[std::size_t(start)];
    set.assign(1, start);
    seen[std::size_t(start)] = 1;
    bool bottom = true;
    for (std::size_t i = 0; i < set.size(); ++i)
    {
      const int64_t c = set[i];
      bottom = bottom && !edge[std::size_t(c)];
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h)
          continue;
        const int64_t n = ny * w + nx;
        const float zn = z[std::size_t(n)];
        if (zn < level)
          bottom = false;
        else if (zn == level && !seen[std::size_t(n)])
        {
          seen[std::size_t(n)] = 1;
          set.push_back(n);
        }
      }
    }
    if (bottom)
    {
      std::sort(set.begin(), set.end());
      out.push_back(set);
    }
  }
  return out;
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
  if (limits.maxLength < 1)
    throw InvalidInput("breach depressions: the maximum length must be at least 1 cell");
  if (!(limits.maxDepth >= 0))
    throw InvalidInput("breach depressions: the maximum depth must be 0 or more");
  const int64_t w = grid.width, h = grid.height;
  std::vector<uint8_t> edge(std::size_t(w * h), 0);
  for (int64_t c = 0; c < w * h; ++c)
    edge[std::size_t(c)] = !isNoData(grid.z[c]) && isEdgeCell(grid.z, w, h, c % w, c / w);
  BreachCounts local;
  const std::vector<float> raised = raisePits(grid, edge, local.pitsRaised);

  // Every bottom's channel, searched on the raised DEM, merged by the minimum.
  const std::vector<std::vector<int64_t>> sets = bottoms(raised, edge, w, h, control);
  local.bottoms = int64_t(sets.size());
  std::vector<float> cut = raised;
  ChannelSearch search(raised, edge, w, h, limits);
  for (std::size_t s = 0; s < sets.size(); ++s)
  {
    if ((s & 0xff) == 0 && control.isCanceled())
      throw Canceled();
    const float level = raised[std::size_t(sets[s].front())];
    const std::vector<int64_t> path = search.channel(sets[s], level);
    if (path.empty())
      continue;
    ++local.breached;
    for (std::size_t i = 0; i < path.size(); ++i)
    {
      float& z = cut[std::size_t(path[i])];
      const float step = lowerBySteps(level, int64_t(i) + 1);
      if (step < z)
        z = step;
    }
  }
  for (std::size_t c = 0; c < cut.size(); ++c)
    local.channelCells += cut[c] < raised[c];
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
