// Breaching depressions (dem/breach.h) on random DEMs and by hand: every cell drains with plain D8
// afterwards; the cut surface is never above the input's fill and never lower than its channels
// allow (maxDepth); a bottom is breached exactly when a brute-force search finds a path of at most
// maxLength cells through cells no deeper than maxDepth to a lower or edge cell; breaching changes
// fewer cells than the fill on DEMs of noise pits; the two-cell depression behind a plateau by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "dem/breach.h"
#include "dem/detail/breach_area.h"
#include "dem/dem.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;
const double kInfinite = std::numeric_limits<double>::infinity();

bool edgeCell(const std::vector<float>& z, int64_t w, int64_t h, int64_t c)
{
  const int64_t x = c % w, y = c / w;
  if (x == 0 || y == 0 || x == w - 1 || y == h - 1)
    return true;
  for (int d = 0; d < 8; ++d)
    if (std::isnan(z[std::size_t((y + kDy[d]) * w + x + kDx[d])]))
      return true;
  return false;
}

bool hasLowerNeighbour(const std::vector<float>& z, int64_t w, int64_t h, int64_t c)
{
  for (int d = 0; d < 8; ++d)
  {
    const int64_t x = c % w + kDx[d], y = c / w + kDy[d];
    if (x >= 0 && y >= 0 && x < w && y < h && z[std::size_t(y * w + x)] < z[std::size_t(c)])
      return true;
  }
  return false;
}

// Whether some path of at most `length` steps from the set `bottom` (at `level`) reaches a cell lower
// than the level or an edge cell, through valid cells outside the set at most `depth` above the level
// (a plain breadth-first search by steps; targets end paths).
bool breachable(const std::vector<float>& z, int64_t w, int64_t h, const std::vector<int64_t>& bottom, float level,
                int64_t length, double depth)
{
  std::vector<int64_t> steps(z.size(), -1);
  std::vector<int64_t> open = bottom;
  for (const int64_t c : bottom)
    steps[std::size_t(c)] = 0;
  for (std::size_t i = 0; i < open.size(); ++i)
  {
    const int64_t c = open[i];
    if (steps[std::size_t(c)] >= length)
      continue;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t x = c % w + kDx[d], y = c / w + kDy[d];
      if (x < 0 || y < 0 || x >= w || y >= h)
        continue;
      const int64_t n = y * w + x;
      if (std::isnan(z[std::size_t(n)]) || steps[std::size_t(n)] >= 0 ||
          !(double(z[std::size_t(n)]) - double(level) <= depth))
        continue;
      if (z[std::size_t(n)] < level || edgeCell(z, w, h, n))
        return true;
      steps[std::size_t(n)] = steps[std::size_t(c)] + 1;
      open.push_back(n);
    }
  }
  return false;
}

// The single-cell pits raised to their lowest neighbour (breach.h's step 1, written again here).
std::vector<float> pitsRaised(const TestDem& dem)
{
  const int64_t w = dem.width, h = dem.height;
  std::vector<float> z = dem.z;
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (std::isnan(dem.z[std::size_t(c)]) || edgeCell(dem.z, w, h, c))
      continue;
    float lowest = std::numeric_limits<float>::infinity();
    for (int d = 0; d < 8; ++d)
      lowest = std::min(lowest, dem.z[std::size_t((c / w + kDy[d]) * w + c % w + kDx[d])]);
    if (dem.z[std::size_t(c)] < lowest)
      z[std::size_t(c)] = lowest;
  }
  return z;
}

// The bottoms of `z` as sets of cells (a flood over equal elevations).
std::vector<std::vector<int64_t>> bottomsOf(const std::vector<float>& z, int64_t w, int64_t h)
{
  std::vector<int64_t> label(z.size(), -1);
  std::vector<std::vector<int64_t>> out;
  for (int64_t s = 0; s < w * h; ++s)
  {
    if (std::isnan(z[std::size_t(s)]) || label[std::size_t(s)] >= 0)
      continue;
    std::vector<int64_t> set{s};
    label[std::size_t(s)] = s;
    bool bottom = true;
    for (std::size_t i = 0; i < set.size(); ++i)
    {
      const int64_t c = set[i];
      bottom = bottom && !edgeCell(z, w, h, c) && !hasLowerNeighbour(z, w, h, c);
      for (int d = 0; d < 8; ++d)
      {
        const int64_t x = c % w + kDx[d], y = c / w + kDy[d];
        if (x < 0 || y < 0 || x >= w || y >= h)
          continue;
        const int64_t n = y * w + x;
        if (label[std::size_t(n)] < 0 && z[std::size_t(n)] == z[std::size_t(s)])
        {
          label[std::size_t(n)] = s;
          set.push_back(n);
        }
      }
    }
    if (bottom)
      out.push_back(set);
  }
  return out;
}

struct Case
{
  uint64_t seed;
  int64_t w, h;
  double step;
  int holes;
};

}  // namespace

TEST(BreachDepressions, LowerByStepsMirrorsRaiseBySteps)
{
  EXPECT_EQ(lowerBySteps(1.0f, 1), std::nextafter(1.0f, 0.0f));
  EXPECT_EQ(lowerBySteps(1.0f, 3), std::nextafter(std::nextafter(std::nextafter(1.0f, 0.0f), 0.0f), 0.0f));
  EXPECT_EQ(lowerBySteps(0.0f, 1), -std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(lowerBySteps(-0.0f, 2), -2 * std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(lowerBySteps(-1.0f, 1), std::nextafter(-1.0f, -2.0f));
  EXPECT_EQ(lowerBySteps(-std::numeric_limits<float>::max(), 5), -std::numeric_limits<float>::max());
  EXPECT_EQ(lowerBySteps(2.5f, 0), 2.5f);
}

// On random DEMs (rounded to steps, so with flats and multi-cell depressions; nodata holes): the
// invariants of breach.h's definition, and every bottom breached exactly when a path exists.
TEST(BreachDepressions, EveryCellDrainsAndTheChannelsKeepTheirLimits)
{
  const std::vector<Case> cases{{1, 40, 33, 0.0, 0}, {2, 41, 37, 0.5, 2}, {3, 48, 40, 1.0, 3},
                                {4, 30, 52, 0.25, 1}, {5, 12, 12, 1.0, 0},  {6, 9, 11, 0.5, 1}};
  const std::vector<BreachLimits> limits{{1, kInfinite}, {3, kInfinite}, {10, kInfinite}, {50, kInfinite},
                                         {10, 0.5},      {10, 2.0},      {3, 0.0}};
  int64_t allBottoms = 0, allBreached = 0, multiCell = 0;
  for (const Case& k : cases)
  {
    const TestDem dem = randomDem(k.seed, k.w, k.h, k.step, k.holes);
    const int64_t w = dem.width, h = dem.height;
    const std::vector<float> filled = fillDepressions(Backend::Cpu, dem.grid(), 1, noCancel);
    const std::vector<float> raised = pitsRaised(dem);
    const std::vector<std::vector<int64_t>> bottoms = bottomsOf(raised, w, h);
    for (const BreachLimits& limit : limits)
    {
      const std::string what = "seed " + std::to_string(k.seed) + ", length " + std::to_string(limit.maxLength) +
                               ", depth " + std::to_string(limit.maxDepth);
      BreachCounts counts;
      const std::vector<float> cut = cutChannels(dem.grid(), limit, noCancel, &counts);
      EXPECT_EQ(counts.bottoms, int64_t(bottoms.size())) << what;
      // The cut surface: at most the pit-raised DEM, at least it less the depth (and the float steps);
      // nodata kept.
      int64_t lowered = 0;
      for (std::size_t c = 0; c < cut.size(); ++c)
      {
        ASSERT_EQ(std::isnan(cut[c]), std::isnan(dem.z[c])) << what;
        if (std::isnan(cut[c]))
          continue;
        ASSERT_LE(cut[c], raised[c]) << what << ", cell " << c;
        ASSERT_GE(raised[c], dem.z[c]) << what;
        lowered += cut[c] < raised[c];
        const double slack = double(limit.maxLength) * 2.4e-7 * (std::fabs(double(raised[c])) + 1.0);
        ASSERT_LE(double(raised[c]) - double(cut[c]), limit.maxDepth + slack) << what << ", cell " << c;
      }
      EXPECT_EQ(lowered, counts.channelCells) << what;
      // Each bottom is breached (has a lower neighbour after the cut) exactly when a path exists.
      int64_t breached = 0;
      for (const std::vector<int64_t>& bottom : bottoms)
      {
        const float level = raised[std::size_t(bottom.front())];
        const bool drains = std::any_of(bottom.begin(), bottom.end(),
                                        [&](int64_t c) { return hasLowerNeighbour(cut, w, h, c); });
        EXPECT_EQ(drains, breachable(raised, w, h, bottom, level, limit.maxLength, limit.maxDepth))
          << what << ", bottom at " << bottom.front();
        breached += drains;
      }
      EXPECT_EQ(breached, counts.breached) << what;
      allBottoms += counts.bottoms;
      allBreached += counts.breached;
      for (const std::vector<int64_t>& bottom : bottoms)
        multiCell += bottom.size() > 2;
      // Never above the input's fill once filled; every cell drains with plain D8 at the end.
      const std::vector<float> cutFilled = fillDepressions(Backend::Cpu, dem.gridOf(cut), 1, noCancel);
      for (std::size_t c = 0; c < cut.size(); ++c)
        if (!std::isnan(cut[c]))
          ASSERT_LE(cutFilled[c], filled[c]) << what << ", cell " << c;
      const BreachedDem out = breachDepressions(Backend::Cpu, dem.grid(), limit, 1, noCancel);
      const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.gridOf(out.z), false, 1, noCancel);
      for (int64_t c = 0; c < w * h; ++c)
        if (!std::isnan(out.z[std::size_t(c)]) && !edgeCell(out.z, w, h, c))
          ASSERT_LT(dirs[std::size_t(c)], 8) << what << ", cell " << c << " does not drain";
      EXPECT_EQ(out.counts.breached, counts.breached) << what;
    }
  }
  // The cases hold bottoms of several cells, breached and not.
  EXPECT_GT(multiCell, 20);
  EXPECT_GT(allBreached, 100);
  EXPECT_GT(allBottoms - allBreached, 100);
}

// Each channel is the least-cost path within the limits: its cost equals the least over every path of
// at most maxLength cells, found by a plain dynamic programme over the number of steps (Bellman-Ford);
// of the least-cost paths it has the fewest cells; it is a path (each step a neighbour, the first next
// to the bottom), crosses no cell deeper than maxDepth, and ends at its first target. Integer
// elevations, so that costs are exact.
TEST(BreachDepressions, EachChannelIsTheLeastCostPath)
{
  int64_t checked = 0, longer = 0;
  for (uint64_t seed = 31; seed <= 36; ++seed)
  {
    const TestDem dem = randomDem(seed, 36, 30, 1.0, int(seed % 2));
    const int64_t w = dem.width, h = dem.height;
    const detail::CountRegion all{0, 0, w, h};
    const detail::BreachArea area = detail::prepareBreachArea(dem.z.data(), w, h, false, all, nullptr);
    const std::vector<float>& z = area.raised;
    for (const BreachLimits& limit : {BreachLimits{4, kInfinite}, BreachLimits{12, 3.0}, BreachLimits{30, kInfinite}})
    {
      detail::ChannelSearch search(area, limit);
      detail::forEachEqualSet(area, all, noCancel, [&](const detail::EqualSet& set) {
        if (!set.bottom())
          return;
        const float level = z[std::size_t(set.cells.front())];
        const std::vector<int64_t> path = search.channel(set.cells, level);
        // best[k][x]: the least cost of a path of k cells ending at x (no earlier target, crossable cells).
        const double inf = std::numeric_limits<double>::infinity();
        std::vector<double> best(std::size_t(w * h), inf), next;
        for (const int64_t c : set.cells)
          best[std::size_t(c)] = 0.0;
        std::vector<uint8_t> inBottom(std::size_t(w * h), 0);
        for (const int64_t c : set.cells)
          inBottom[std::size_t(c)] = 1;
        const auto target = [&](int64_t c) { return area.edge[std::size_t(c)] || z[std::size_t(c)] < level; };
        double least = inf;
        int64_t leastSteps = -1;
        for (int64_t k = 1; k <= limit.maxLength; ++k)
        {
          next.assign(best.size(), inf);
          for (int64_t c = 0; c < w * h; ++c)
          {
            if (best[std::size_t(c)] == inf || (k > 1 && (target(c) || inBottom[std::size_t(c)])))
              continue;
            for (int d = 0; d < 8; ++d)
            {
              const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
              if (nx < 0 || ny < 0 || nx >= w || ny >= h)
                continue;
              const int64_t n = ny * w + nx;
              if (std::isnan(z[std::size_t(n)]) || inBottom[std::size_t(n)] ||
                  !(double(z[std::size_t(n)]) - double(level) <= limit.maxDepth))
                continue;
              next[std::size_t(n)] =
                std::min(next[std::size_t(n)], best[std::size_t(c)] + std::max(0.0, double(z[std::size_t(n)]) - double(level)));
            }
          }
          best.swap(next);
          for (int64_t c = 0; c < w * h; ++c)
            if (target(c) && best[std::size_t(c)] < least)
            {
              least = best[std::size_t(c)];
              leastSteps = k;
            }
        }
        ASSERT_EQ(path.empty(), least == inf) << "seed " << seed << ", bottom at " << set.cells.front();
        if (path.empty())
          return;
        double cost = 0.0;
        for (std::size_t i = 0; i < path.size(); ++i)
        {
          const int64_t c = path[i];
          const int64_t before = i == 0 ? -1 : path[i - 1];
          const bool adjacent = i == 0 ? std::any_of(set.cells.begin(), set.cells.end(), [&](int64_t b) {
            return std::max(std::abs(b % w - c % w), std::abs(b / w - c / w)) == 1;
          })
                                       : std::max(std::abs(before % w - c % w), std::abs(before / w - c / w)) == 1;
          ASSERT_TRUE(adjacent) << "seed " << seed;
          ASSERT_LE(double(z[std::size_t(c)]) - double(level), limit.maxDepth);
          ASSERT_EQ(target(c), i + 1 == path.size()) << "seed " << seed;
          cost += std::max(0.0, double(z[std::size_t(c)]) - double(level));
        }
        EXPECT_EQ(cost, least) << "seed " << seed << ", bottom at " << set.cells.front();
        EXPECT_EQ(int64_t(path.size()), leastSteps) << "seed " << seed << ", bottom at " << set.cells.front();
        ++checked;
        longer += path.size() > 2;
      });
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(longer, 10);
}

// By hand: a two-cell bottom at 0 whose straight way out crosses a ridge cell at 40 to a cell at -1,
// while a way through a cell at 1 m goes round it: the channel takes the way round (cost 1 against 40).
TEST(BreachDepressions, AChannelGoesRoundARidgeWhereThatCutsLess)
{
  const int64_t w = 7, h = 5;
  TestDem dem;
  dem.width = w;
  dem.height = h;
  dem.z.assign(std::size_t(w * h), 100.f);
  const auto at = [&](int64_t x, int64_t y) -> float& { return dem.z[std::size_t(y * w + x)]; };
  at(1, 2) = 0.f;   // the bottom
  at(2, 2) = 0.f;
  at(3, 2) = 40.f;  // the ridge
  at(4, 2) = -1.f;  // the target straight ahead
  at(5, 2) = -2.f;
  at(6, 2) = -3.f;  // on to the edge
  at(3, 3) = 1.f;   // the way round
  dem.cellWidth.assign(std::size_t(h), 10.0);
  dem.cellHeight.assign(std::size_t(h), 10.0);
  BreachCounts counts;
  const std::vector<float> cut = cutChannels(dem.grid(), BreachLimits{10, kInfinite}, noCancel, &counts);
  EXPECT_EQ(counts.breached, 1);
  EXPECT_EQ(cut[std::size_t(2 * w + 3)], 40.f);  // the ridge kept
  // The way round: (3, 3) then the target (4, 2) diagonally: two steps, cost 1.
  EXPECT_EQ(cut[std::size_t(3 * w + 3)], lowerBySteps(0.f, 1));
  EXPECT_EQ(counts.channelCells, 1);
  // One cell at most: the cheapest of the edge cells beside the bottom (100 m, the lowest index).
  BreachCounts one;
  const std::vector<float> west = cutChannels(dem.grid(), BreachLimits{1, kInfinite}, noCancel, &one);
  EXPECT_EQ(one.breached, 1);
  EXPECT_EQ(west[std::size_t(1 * w + 0)], lowerBySteps(0.f, 1));
  // No deeper than 0.5 m: no channel.
  BreachCounts none;
  cutChannels(dem.grid(), BreachLimits{10, 0.5}, noCancel, &none);
  EXPECT_EQ(none.breached, 0);
}

// On DEMs of noise (pits and small depressions on a slope): the channels change fewer cells than the
// fill (before the flats are raised), with the default limits.
TEST(BreachDepressions, ChangesFewerCellsThanTheFillOnNoisePits)
{
  for (uint64_t seed = 11; seed <= 16; ++seed)
  {
    const TestDem dem = randomDem(seed, 48, 40, seed % 2 ? 0.5 : 0.0, 0);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, dem.grid(), 1, noCancel);
    const std::vector<float> cut = cutChannels(dem.grid(), BreachLimits{}, noCancel);
    const std::vector<float> cutFilled = fillDepressions(Backend::Cpu, dem.gridOf(cut), 1, noCancel);
    int64_t byFill = 0, byBreach = 0;
    for (std::size_t c = 0; c < cut.size(); ++c)
    {
      byFill += filled[c] != dem.z[c];
      byBreach += cutFilled[c] != dem.z[c];
    }
    EXPECT_GT(byFill, 0) << seed;
    EXPECT_LT(byBreach, byFill) << seed;
  }
}

// By hand: a two-cell bottom at 0 walled in at 100 but for a route of a rim cell and five plateau cells
// at 10 to cells at -1 (on to the edge). A channel needs 7 steps and 10 m: with maxLength 7 it lowers six
// cells (the target is already lower); with 6, or a depth of 9 m, the bottom is filled instead.
TEST(BreachDepressions, TheTwoCellDepressionBehindAPlateau)
{
  const int64_t w = 12, h = 5;
  TestDem dem;
  dem.width = w;
  dem.height = h;
  dem.z.assign(std::size_t(w * h), 100.f);
  const int64_t row = 2;
  dem.z[std::size_t(row * w + 1)] = 0.f;  // the bottom: cells 1 and 2 of the middle row
  dem.z[std::size_t(row * w + 2)] = 0.f;
  for (int64_t x = 3; x <= 8; ++x)  // the rim cell and the plateau
    dem.z[std::size_t(row * w + x)] = 10.f;
  for (int64_t x = 9; x < w; ++x)
    dem.z[std::size_t(row * w + x)] = -1.f;  // below the bottom, on to the edge
  dem.cellWidth.assign(std::size_t(h), 10.0);
  dem.cellHeight.assign(std::size_t(h), 10.0);
  BreachCounts counts;
  const std::vector<float> cut = cutChannels(dem.grid(), BreachLimits{7, 10.0}, noCancel, &counts);
  EXPECT_EQ(counts.bottoms, 1);
  EXPECT_EQ(counts.breached, 1);
  EXPECT_EQ(counts.channelCells, 6);
  for (int64_t x = 3; x <= 8; ++x)
    EXPECT_EQ(cut[std::size_t(row * w + x)], lowerBySteps(0.f, x - 2)) << x;
  const BreachedDem out = breachDepressions(Backend::Cpu, dem.grid(), BreachLimits{7, 10.0}, 1, noCancel);
  EXPECT_EQ(out.lowered, 6);
  for (const BreachLimits& tooShort : {BreachLimits{6, 10.0}, BreachLimits{7, 9.0}})
  {
    BreachCounts none;
    const std::vector<float> kept = cutChannels(dem.grid(), tooShort, noCancel, &none);
    EXPECT_EQ(none.breached, 0);
    EXPECT_EQ(kept, dem.z);
    const BreachedDem filled = breachDepressions(Backend::Cpu, dem.grid(), tooShort, 1, noCancel);
    EXPECT_EQ(filled.lowered, 0);
    EXPECT_GE(filled.raised, 2);  // the bottom filled to the plateau (and its flats raised)
  }
}

// A single-cell pit is raised to its lowest neighbour and nothing is cut.
TEST(BreachDepressions, ASingleCellPitIsRaised)
{
  TestDem dem = randomDem(3, 9, 9, 0.0, 0);
  for (int64_t y = 0; y < 9; ++y)
    for (int64_t x = 0; x < 9; ++x)
      dem.z[std::size_t(y * 9 + x)] = float(10 + x);  // a slope down to the west edge
  dem.z[std::size_t(4 * 9 + 4)] = 5.f;
  BreachCounts counts;
  const std::vector<float> cut = cutChannels(dem.grid(), BreachLimits{}, noCancel, &counts);
  EXPECT_EQ(counts.pitsRaised, 1);
  EXPECT_EQ(counts.bottoms, 0);
  EXPECT_EQ(cut[std::size_t(4 * 9 + 4)], 13.f);
}

TEST(BreachDepressions, BadLimitsAreRefused)
{
  const TestDem dem = randomDem(1, 8, 8, 0.0, 0);
  EXPECT_THROW(cutChannels(dem.grid(), BreachLimits{0, 1.0}, noCancel), InvalidInput);
  EXPECT_THROW(cutChannels(dem.grid(), BreachLimits{5, -1.0}, noCancel), InvalidInput);
  EXPECT_THROW(cutChannels(dem.grid(), BreachLimits{5, std::nan("")}, noCancel), InvalidInput);
}

// The tiled run (tiled_dem.h's cutChannelsTiled and breachDepressionsTiled) is the in-memory one bit
// for bit, its counts too, at tile sizes down to one cell, with large bottoms that cross tiles.
TEST(BreachDepressions, TileByTileIsTheInMemoryRun)
{
  struct Tiling
  {
    int64_t w, h;
  };
  int64_t largeBreached = 0;
  for (uint64_t seed = 21; seed <= 23; ++seed)
  {
    const TestDem dem = basinsDem(seed, 60, 48);
    const tiled::RowSizes rows{dem.cellWidth, dem.cellHeight};
    tiled::MemoryRaster<float> source(dem.width, dem.height, dem.z);
    for (const BreachLimits& limit : {BreachLimits{1, kInfinite}, BreachLimits{3, 2.0}, BreachLimits{8, kInfinite},
                                      BreachLimits{40, 2.0}, BreachLimits{40, kInfinite},
                                      BreachLimits{5000, kInfinite}})
    {
      BreachCounts expected;
      const std::vector<float> cut = cutChannels(dem.grid(), limit, noCancel, &expected);
      const BreachedDem whole = breachDepressions(Backend::Cpu, dem.grid(), limit, 1, noCancel);
      BreachCounts onThreads;
      ASSERT_TRUE(sameBits(tiled::cutChannelsOnThreads(dem.grid(), limit, 2, noCancel, &onThreads), cut));
      EXPECT_EQ(onThreads.breached, expected.breached);
      std::vector<Tiling> tilings{{7, 5}, {16, 16}, {33, 17}, {60, 48}};
      if (limit.maxLength <= 3)
        tilings.insert(tilings.begin(), {{1, 1}, {2, 3}});
      if (limit.maxLength > 100)
        tilings = {{16, 16}, {60, 48}};  // windows of the whole raster and its ring, whatever the margin
      for (const Tiling& t : tilings)
      {
        const std::string what = "seed " + std::to_string(seed) + ", length " + std::to_string(limit.maxLength) +
                                 ", tiles " + std::to_string(t.w) + " x " + std::to_string(t.h);
        tiled::MemoryRaster<float> tiledCut(dem.width, dem.height);
        tiled::TiledReport report;
        const BreachCounts counts = tiled::cutChannelsTiled(source, rows, tiledCut, limit, tiles(t.w, t.h), noCancel, &report);
        ASSERT_TRUE(sameBits(tiledCut.cells(), cut)) << what;
        EXPECT_EQ(counts.pitsRaised, expected.pitsRaised) << what;
        EXPECT_EQ(counts.bottoms, expected.bottoms) << what;
        EXPECT_EQ(counts.breached, expected.breached) << what;
        EXPECT_EQ(counts.channelCells, expected.channelCells) << what;
        if (t.w == 16 || t.w == 7)
        {
          tiled::ScratchFolder scratch(testing::TempDir());
          tiled::MemoryRaster<float> out(dem.width, dem.height);
          tiled::TiledOptions options = tiles(t.w, t.h);
          options.hostKeepBytes = t.w == 7 ? int64_t(1) << 30 : 0;  // the raise's tiles kept between rounds, or not
          tiled::breachDepressionsTiled(source, rows, out, limit, scratch.path(), options, noCancel);
          ASSERT_TRUE(sameBits(out.cells(), whole.z)) << what;
        }
      }
      // The first basin's bottom (a large one up to maxLength 51, its channel found once in the large
      // bottoms' step) is breached where a channel may reach the top edge: its first step, in the ring
      // around the basin, is cut.
      if (limit.maxLength >= 8 && limit.maxDepth == kInfinite)
      {
        const std::vector<float> raised = pitsRaised(dem);
        bool ringCut = false;
        for (int64_t x = 3; x <= 56; ++x)
          for (const int64_t y : {int64_t(4), int64_t(11)})
            ringCut = ringCut || cut[std::size_t(y * dem.width + x)] < raised[std::size_t(y * dem.width + x)];
        for (int64_t y = 4; y <= 11; ++y)
          for (const int64_t x : {int64_t(3), int64_t(56)})
            ringCut = ringCut || cut[std::size_t(y * dem.width + x)] < raised[std::size_t(y * dem.width + x)];
        EXPECT_TRUE(ringCut) << "seed " << seed << ", length " << limit.maxLength;
        largeBreached += ringCut;
      }
    }
  }
  EXPECT_EQ(largeBreached, 9);  // lengths 8, 40 (a large bottom) and 5,000, three DEMs
}

TEST(BreachDepressions, TiledRunRefusesBadLimits)
{
  const TestDem dem = randomDem(1, 8, 8, 0.0, 0);
  const tiled::RowSizes rows{dem.cellWidth, dem.cellHeight};
  tiled::MemoryRaster<float> source(dem.width, dem.height, dem.z), out(dem.width, dem.height);
  EXPECT_THROW(tiled::cutChannelsTiled(source, rows, out, BreachLimits{0, 1.0}, tiles(4, 4), noCancel), InvalidInput);
  EXPECT_THROW(tiled::cutChannelsTiled(source, rows, out, BreachLimits{5, -1.0}, tiles(4, 4), noCancel), InvalidInput);
}
