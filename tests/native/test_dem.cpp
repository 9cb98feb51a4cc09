// The DEM tools' CPU path against the serial references (dem_reference.cpp): filling bit for bit
// against Priority-Flood, directions and accumulation cell by cell; flats drained; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/dem_reference.h"
#include "dem/isochrone_chain.h"
#include "dem/travel_time.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

// Follows directions from every valid cell; true when each walk leaves the grid (or reaches a
// nodata cell) within the cell count, i.e. no pit and no cycle.
bool everyCellDrains(const TestDem& d, const std::vector<uint8_t>& dirs)
{
  const int64_t w = d.width, h = d.height;
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (dirs[std::size_t(c)] == kNoData)
      continue;
    int64_t at = c;
    for (int64_t steps = 0;; ++steps)
    {
      if (steps > w * h)
        return false;
      const uint8_t dir = dirs[std::size_t(at)];
      if (dir == kNoFlow)
        return false;
      const int64_t nx = at % w + kDx[dir], ny = at / w + kDy[dir];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h || dirs[std::size_t(ny * w + nx)] == kNoData)
        break;
      at = ny * w + nx;
    }
  }
  return true;
}

}  // namespace

TEST(DemCpu, FillEqualsPriorityFloodBitForBit)
{
  struct Case
  {
    uint64_t seed;
    int64_t w, h;
    double step;
    int holes;
  };
  for (const Case& c : {Case{1, 40, 30, 0, 0}, Case{2, 300, 280, 0, 20}, Case{3, 600, 530, 1.0, 60},
                        Case{4, 257, 513, 0.5, 10}, Case{5, 1, 50, 0, 0}, Case{6, 50, 1, 0, 0}, Case{7, 1, 1, 0, 0},
                        Case{8, 520, 260, 4.0, 200}})
  {
    const TestDem d = randomDem(c.seed, c.w, c.h, c.step, c.holes);
    const std::vector<float> want = reference::priorityFlood(d.grid());
    for (int threads : {1, 2, 4})
    {
      const std::vector<float> got = fillDepressions(Backend::Cpu, d.grid(), threads, noCancel);
      EXPECT_TRUE(sameBits(got, want)) << "seed " << c.seed << " " << c.w << "x" << c.h << " threads " << threads;
    }
    const std::vector<float> got = fillDepressions(Backend::Auto, d.grid(), 0, noCancel);
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!std::isnan(d.z[i]))
        ASSERT_GE(got[i], d.z[i]);
      else
        ASSERT_TRUE(std::isnan(got[i]));
  }
}

TEST(DemCpu, FillOfAPitAndAClosedBasin)
{
  // A 5 x 5 bowl: rim 10, inside 3 with a 1 at the centre, one gap in the rim at 6.
  TestDem d;
  d.width = d.height = 5;
  d.z.assign(25, 10.f);
  for (int y = 1; y < 4; ++y)
    for (int x = 1; x < 4; ++x)
      d.z[std::size_t(y * 5 + x)] = 3.f;
  d.z[12] = 1.f;
  d.z[2] = 6.f;  // the gap, on the top border
  d.cellWidth.assign(5, 1.0);
  d.cellHeight.assign(5, 1.0);
  const std::vector<float> got = fillDepressions(Backend::Cpu, d.grid(), 1, noCancel);
  for (int y = 1; y < 4; ++y)
    for (int x = 1; x < 4; ++x)
      EXPECT_EQ(got[std::size_t(y * 5 + x)], 6.f) << x << "," << y;
  EXPECT_EQ(got[2], 6.f);
  EXPECT_EQ(got[0], 10.f);
  // A nodata cell next to the centre makes it an edge cell: nothing inside fills above 3 then.
  d.z[13] = std::nanf("");
  const std::vector<float> drained = fillDepressions(Backend::Cpu, d.grid(), 1, noCancel);
  EXPECT_EQ(drained[12], 1.f);
  EXPECT_EQ(drained[6], 3.f);
  EXPECT_TRUE(sameBits(drained, reference::priorityFlood(d.grid())));
}

TEST(DemCpu, DirectionsEqualTheReference)
{
  for (uint64_t seed : {11, 12, 13})
    for (bool perRow : {false, true})
    {
      // Widths whose inner cells come in pairs and not (the CPU takes them two at a time), and grids
      // of one to three rows or columns.
      for (const auto& [w, h] : {std::pair<int64_t, int64_t>{120, 90}, {121, 37}, {3, 3}, {4, 5}, {2, 9}, {9, 2},
                                 {1, 7}, {7, 1}})
      {
        const TestDem d = randomDem(seed, w, h, seed == 13 ? 1.0 : 0.0, w * h > 100 ? 8 : 0, 30,
                                    seed == 12 ? 20 : 30, perRow);
        for (bool flats : {false, true})
        {
          const std::vector<int32_t> mask = flats ? flatMask(Backend::Cpu, d.grid(), 1, noCancel) : std::vector<int32_t>();
          EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), flats, 2, noCancel), reference::directions(d.grid(), mask))
              << "seed " << seed << " perRow " << perRow << " flats " << flats << " " << w << " x " << h;
        }
      }
    }
}

TEST(DemCpu, DiagonalsByTheirTrueDistance)
{
  // Centre 10; east 9 (drop 1 over 1 m); south-east 8.5 (drop 1.5 over sqrt 2 = 1.06): SE wins on
  // square cells. With cells 1 m wide and 3 m high the diagonal is sqrt 10: E wins.
  TestDem d;
  d.width = d.height = 3;
  d.z = {20, 20, 20, 20, 10, 9, 20, 20, 8.5};
  d.cellWidth.assign(3, 1.0);
  d.cellHeight.assign(3, 1.0);
  EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), false, 1, noCancel)[4], 1);  // SE
  d.cellHeight.assign(3, 3.0);
  EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), false, 1, noCancel)[4], 0);  // E
  // Equal drops: the first in the order E, SE, S, ... wins.
  d.z = {20, 20, 20, 20, 10, 9, 20, 9, 20};
  d.cellHeight.assign(3, 1.0);
  EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), false, 1, noCancel)[4], 0);
}

TEST(DemCpu, FilledAndResolvedEveryCellDrains)
{
  for (uint64_t seed : {21, 22, 23, 24})
  {
    TestDem d = randomDem(seed, 150, 140, seed % 2 ? 2.0 : 0.0, seed == 24 ? 30 : 0);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid g = d.gridWith(filled);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, g, true, 2, noCancel);
    EXPECT_TRUE(everyCellDrains(d, dirs)) << "seed " << seed;
    // Without flat resolution the flats of the filled DEM are pits.
    const std::vector<uint8_t> raw = flowDirections(Backend::Cpu, g, false, 2, noCancel);
    int64_t noFlow = 0;
    for (uint8_t v : raw)
      noFlow += v == kNoFlow;
    EXPECT_GT(noFlow, 0) << "seed " << seed;
  }
}

TEST(DemCpu, FlatMaskOfAPlateauDrainsTowardsItsOutletAndAwayFromHighGround)
{
  // A 7 x 5 flat at 5 inside a rim at 9, with its outlet, a 4, on the east border of row 2.
  TestDem d;
  d.width = 7;
  d.height = 5;
  d.z.assign(35, 9.f);
  for (int y = 1; y < 4; ++y)
    for (int x = 1; x < 6; ++x)
      d.z[std::size_t(y * 7 + x)] = 5.f;
  d.z[2 * 7 + 6] = 5.f;  // the outlet cell on the border at the flat's elevation
  d.cellWidth.assign(5, 1.0);
  d.cellHeight.assign(5, 1.0);
  const std::vector<int32_t> mask = flatMask(Backend::Cpu, d.grid(), 1, noCancel);
  // Every flat cell gets a mask; it grows with the steps from the low edge (the border cell at
  // (6, 2)), so the far end of the flat is higher than the cell next to the outlet.
  for (int y = 1; y < 4; ++y)
    for (int x = 1; x < 6; ++x)
      EXPECT_GT(mask[std::size_t(y * 7 + x)], 0) << x << "," << y;
  EXPECT_LT(mask[2 * 7 + 5], mask[2 * 7 + 1]);
  const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, d.grid(), true, 1, noCancel);
  EXPECT_TRUE(everyCellDrains(d, dirs));
  EXPECT_EQ(dirs[2 * 7 + 5], 0);  // east, to the outlet
}

TEST(DemCpu, AccumulationEqualsTheReference)
{
  for (uint64_t seed : {31, 32})
    for (bool perRow : {false, true})
    {
      TestDem d = randomDem(seed, 130, 110, 1.0, 10, 25, 30, perRow);
      const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
      const Grid g = d.gridWith(filled);
      const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, g, true, 2, noCancel);
      const Accumulation want = reference::accumulation(g, dirs);
      // The CPU sums bands of rows (one a thread) apart and then the flows between them.
      for (int threads : {1, 3, 7})
      {
        const Accumulation other = flowAccumulation(Backend::Cpu, g, dirs, threads, noCancel);
        EXPECT_EQ(other.cells, want.cells) << "seed " << seed << " threads " << threads;
        EXPECT_EQ(other.area, want.area) << "seed " << seed << " threads " << threads;
      }
      const Accumulation got = flowAccumulation(Backend::Cpu, g, dirs, 2, noCancel);
      EXPECT_EQ(got.cells, want.cells) << "seed " << seed;
      EXPECT_EQ(got.area, want.area) << "seed " << seed;
      // Every valid cell drains out, so the outlets' counts sum to the valid cells.
      int64_t valid = 0, leaving = 0;
      for (int64_t c = 0; c < d.width * d.height; ++c)
      {
        if (dirs[std::size_t(c)] == kNoData)
          continue;
        ++valid;
        const int64_t nx = c % d.width + kDx[dirs[std::size_t(c)]], ny = c / d.width + kDy[dirs[std::size_t(c)]];
        if (nx < 0 || ny < 0 || nx >= d.width || ny >= d.height || dirs[std::size_t(ny * d.width + nx)] == kNoData)
          leaving += got.cells[std::size_t(c)];
      }
      EXPECT_EQ(leaving, valid);
    }
}

TEST(DemCpu, BadInputAndCancel)
{
  TestDem d = randomDem(41, 10, 10, 0, 0);
  Grid g = d.grid();
  g.width = 0;
  EXPECT_THROW(fillDepressions(Backend::Cpu, g, 1, noCancel), InvalidInput);
  g = d.grid();
  g.z = nullptr;
  EXPECT_THROW(fillDepressions(Backend::Cpu, g, 1, noCancel), InvalidInput);
  d.cellWidth[3] = 0;
  EXPECT_THROW(fillDepressions(Backend::Cpu, d.grid(), 1, noCancel), InvalidInput);
  d.cellWidth[3] = 30;
  EXPECT_THROW(flowAccumulation(Backend::Cpu, d.grid(), std::vector<uint8_t>(5), 1, noCancel), InvalidInput);
  // Directions that go round in a loop: E then W.
  std::vector<uint8_t> loop(100, kNoFlow);
  loop[55] = 0;
  loop[56] = 4;
  EXPECT_THROW(flowAccumulation(Backend::Cpu, d.grid(), loop, 1, noCancel), InvalidInput);
  EXPECT_THROW(flowAccumulation(Backend::Cpu, d.grid(), loop, 2, noCancel), InvalidInput);
  // One across the two threads' bands of rows (rows 0-4 and 5-9), with a cell draining into it.
  std::vector<uint8_t> across(100, kNoFlow);
  across[45] = 2;  // S
  across[55] = 6;  // N
  across[65] = 6;
  EXPECT_THROW(flowAccumulation(Backend::Cpu, d.grid(), across, 2, noCancel), InvalidInput);
  RunControl cancel;
  cancel.canceled = [] { return true; };
  EXPECT_THROW(fillDepressions(Backend::Cpu, d.grid(), 1, cancel), Canceled);
}

namespace {

// Travel times by walking every cell's path to the outlet (NaN when the path misses it).
std::vector<double> walkedTimes(const TestDem& d, const Grid& g, const std::vector<uint8_t>& dirs, int64_t outlet,
                                const std::vector<double>& speed)
{
  const int64_t w = d.width, h = d.height;
  std::vector<double> out(std::size_t(w * h), std::nan(""));
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (dirs[std::size_t(c)] == kNoData)
      continue;
    double t = 0;
    int64_t at = c;
    bool reached = false;
    for (int64_t steps = 0; steps <= w * h; ++steps)
    {
      const uint8_t dir = dirs[std::size_t(at)];
      const double cw = g.cellWidth[at / w], ch = g.cellHeight[at / w];
      const double length = dir >= 8 ? cw : (dir % 2 ? std::sqrt(cw * cw + ch * ch) : (dir == 2 || dir == 6 ? ch : cw));
      if (std::isnan(speed[std::size_t(at)]))
        break;
      t += length / speed[std::size_t(at)] / 60.0;
      if (at == outlet)
      {
        reached = true;
        break;
      }
      if (dir >= 8)
        break;
      const int64_t nx = at % w + kDx[dir], ny = at / w + kDy[dir];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h || dirs[std::size_t(ny * w + nx)] == kNoData)
        break;
      at = ny * w + nx;
    }
    if (reached)
      out[std::size_t(c)] = t;
  }
  return out;
}

}  // namespace

TEST(DemCpu, TravelTimesEqualAWalkDownEveryPath)
{
  for (uint64_t seed : {51, 52})
  {
    TestDem d = randomDem(seed, 120, 100, 0.5, seed == 52 ? 12 : 0, 30, 25, seed == 52);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid g = d.gridWith(filled);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, g, true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, g, dirs, 2, noCancel);
    const int64_t outlet = largestBasinOutlet(g, dirs, acc);
    for (VelocityModel::Kind kind : {VelocityModel::Kind::Constant, VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
    {
      VelocityModel model;
      model.kind = kind;
      model.speed = 0.7;
      model.rainfall = 80;
      const TravelTimes t = travelTime(g, dirs, acc, outlet, model, 2, noCancel);
      const std::vector<double> want = walkedTimes(d, g, dirs, outlet, t.speed);
      int64_t inside = 0;
      for (std::size_t c = 0; c < want.size(); ++c)
      {
        ASSERT_EQ(std::isnan(want[c]), std::isnan(t.minutes[c])) << "cell " << c;
        if (std::isnan(want[c]))
          continue;
        ++inside;
        EXPECT_NEAR(t.minutes[c], want[c], 1e-9 * want[c]) << "cell " << c;
      }
      EXPECT_EQ(inside, t.watershedCells);
      EXPECT_EQ(inside, acc.cells[std::size_t(outlet)]);  // the watershed is what drains through the outlet
      if (kind == VelocityModel::Kind::Constant)
        EXPECT_EQ(t.speed[std::size_t(outlet)], 0.7);
    }
  }
}

TEST(DemCpu, ManningSpeedFollowsSagasFormulas)
{
  VelocityModel m;
  m.kind = VelocityModel::Kind::Manning;
  m.rainfall = 100;
  // Overland: 10 ha, slope 0.1, n 0.15.
  const double S = 25400.0 / 75 - 254, r = (100 - 0.2 * S) * (100 - 0.2 * S) / (100 + 0.8 * S), I = r / 3.6e6;
  const double D = std::sqrt(2 * 1e5 / 3.14159);
  EXPECT_NEAR(manningSpeed(m, 0.1, 1e5, 0.15), std::pow(I * D, 0.4) * std::pow(0.1, 0.3) / std::pow(0.15, 0.6), 1e-15);
  // Low rainfall: runoff floored at 0.1 mm/h, the speed at the minimum.
  m.rainfall = 1;
  EXPECT_EQ(manningSpeed(m, 0.1, 1e5, 0.15), 0.05);
  // Channel: Manning's flow at the depth found is within 0.1 m^3/s of Q = I A.
  m.rainfall = 100;
  const double A = 5e7, s = 0.02, v = manningSpeed(m, s, A, 0.15);
  const double Q = I * A, z = 0.5, wet = Q / v, h = std::sqrt(wet * z);
  const double perimeter = 2 * (h / z + std::sqrt(h * h + (h / z) * (h / z)));
  EXPECT_LE(std::fabs(std::sqrt(s) * std::pow(wet, 5.0 / 3) / std::pow(perimeter, 2.0 / 3) / 0.05 - Q), 0.1);
}

TEST(DemCpu, OutletsSnapAndTheLargestBasin)
{
  // A valley draining south along column 5 of an 11 x 11 grid.
  TestDem d;
  d.width = d.height = 11;
  for (int y = 0; y < 11; ++y)
    for (int x = 0; x < 11; ++x)
      d.z.push_back(float(std::abs(x - 5) * 2 + (10 - y)));
  d.cellWidth.assign(11, 10.0);
  d.cellHeight.assign(11, 10.0);
  const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, d.grid(), true, 1, noCancel);
  const Accumulation acc = flowAccumulation(Backend::Cpu, d.grid(), dirs, 1, noCancel);
  EXPECT_EQ(largestBasinOutlet(d.grid(), dirs, acc), 10 * 11 + 5);
  EXPECT_EQ(snapOutlet(d.grid(), acc, 7, 6, 25.0), 7 * 11 + 5);  // the valley cell of most flow within 25 m
  EXPECT_EQ(snapOutlet(d.grid(), acc, 7, 6, 0.0), 6 * 11 + 7);
  EXPECT_EQ(snapOutlet(d.grid(), acc, 7, 6, 1e308), 10 * 11 + 5);  // the whole grid lies within: the outlet
  EXPECT_THROW(snapOutlet(d.grid(), acc, 11, 0, 10.0), InvalidInput);
  VelocityModel bad;
  bad.kind = VelocityModel::Kind::Constant;
  bad.speed = 0;
  EXPECT_THROW(travelTime(d.grid(), dirs, acc, 5, bad, 1, noCancel), InvalidInput);
  bad.speed = 1;
  EXPECT_THROW(travelTime(d.grid(), dirs, acc, 121, bad, 1, noCancel), InvalidInput);
  d.z[5] = std::nanf("");
  const std::vector<uint8_t> holed = flowDirections(Backend::Cpu, d.grid(), true, 1, noCancel);
  EXPECT_THROW(travelTime(d.grid(), holed, acc, 5, bad, 1, noCancel), InvalidInput);
}

TEST(DemCpu, RaisingBySteps)
{
  std::mt19937_64 rng(61);
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<float> values{0.f, -0.f, 1.f, -1.f, std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(), -2 * std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 200; ++i)
    values.push_back(u(rng) * std::pow(10.f, float(i % 7 - 3)));
  for (const float v : values)
    for (int64_t k : {0, 1, 2, 3, 17, 50})
    {
      float want = v;
      for (int64_t i = 0; i < k; ++i)
        want = std::nextafter(want == 0.f ? 0.f : want, std::numeric_limits<float>::infinity());
      if (k == 0)
        want = v;
      const float got = raiseBySteps(v, k);
      EXPECT_TRUE(got == want && (k == 0 || !std::signbit(got) || want < 0)) << v << " + " << k << " steps: " << got
                                                                              << " want " << want;
    }
  EXPECT_EQ(raiseBySteps(std::numeric_limits<float>::max(), 5), std::numeric_limits<float>::max());
}

namespace {

// Priority-Flood+epsilon (Barnes et al. 2014, algorithm 3) with one float32 step as epsilon, seeded
// from the edge cells, over `z`, leaving cells that cannot drain in `drains` as they are: the serial
// reference of raiseFlats()'s second stage.
std::vector<float> priorityFloodEpsilon(const Grid& g, std::vector<float> z, const std::vector<uint8_t>& drains)
{
  const int64_t w = g.width, h = g.height;
  std::vector<uint8_t> done(std::size_t(w * h), 0);
  using Entry = std::pair<float, int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> open;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const int64_t c = y * w + x;
      if (std::isnan(z[std::size_t(c)]))
      {
        done[std::size_t(c)] = 1;
        continue;
      }
      bool edge = x == 0 || y == 0 || x == w - 1 || y == h - 1;
      for (int d = 0; d < 8 && !edge; ++d)
        edge = std::isnan(g.z[(y + kDy[d]) * w + x + kDx[d]]);
      if (edge || !drains[std::size_t(c)])
      {
        done[std::size_t(c)] = 1;
        if (edge)
          open.emplace(z[std::size_t(c)], c);
      }
    }
  while (!open.empty())
  {
    const auto [level, c] = open.top();
    open.pop();
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h || done[std::size_t(ny * w + nx)])
        continue;
      const std::size_t n = std::size_t(ny * w + nx);
      done[n] = 1;
      z[n] = std::max(z[n], std::nextafter(level, std::numeric_limits<float>::infinity()));
      open.emplace(z[n], int64_t(n));
    }
  }
  return z;
}

// Valid cells that are not edge cells and have no strictly lower neighbour.
int64_t innerCellsWithoutALowerNeighbour(const Grid& g, const std::vector<float>& z)
{
  int64_t count = 0;
  for (int64_t y = 1; y + 1 < g.height; ++y)
    for (int64_t x = 1; x + 1 < g.width; ++x)
    {
      const float v = z[std::size_t(y * g.width + x)];
      bool inner = !std::isnan(v), lower = false;
      for (int d = 0; d < 8 && inner; ++d)
      {
        const float n = z[std::size_t((y + kDy[d]) * g.width + x + kDx[d])];
        inner = !std::isnan(n);
        lower = lower || n < v;
      }
      count += inner && !lower;
    }
  return count;
}

}  // namespace

TEST(DemCpu, RaisedFlatsDrainWithoutResolution)
{
  for (uint64_t seed : {71, 72, 73})
  {
    TestDem d = randomDem(seed, 140, 120, seed == 73 ? 4.0 : 1.0, seed == 72 ? 20 : 0);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid g = d.gridWith(filled);
    for (FlatGradient gradient : {FlatGradient::Combined, FlatGradient::TowardsOutlet})
    {
      const std::vector<int32_t> mask = flatMask(Backend::Cpu, g, 2, noCancel, nullptr, gradient);
      const RaisedFlats raised = raiseFlats(g, mask);
      EXPECT_GT(raised.raised, 0) << "seed " << seed;
      EXPECT_EQ(raised.raisedInTurn, 0) << "seed " << seed;
      for (std::size_t c = 0; c < filled.size(); ++c)
        if (!std::isnan(filled[c]))
          ASSERT_GE(raised.z[c], filled[c]);
      const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, d.gridWith(raised.z), false, 2, noCancel);
      EXPECT_TRUE(everyCellDrains(d, dirs)) << "seed " << seed << " gradient " << int(gradient);
    }
  }
}

// Flats whose rim lies a few float32 steps above them: the mask raises cells past the rim, which
// must then be raised in turn (issue: a cell 0.0004 m above a flat became a pit). Every inner cell
// keeps a lower neighbour, plain D8 drains every cell, and the DEM is the lowest that does so: what
// Priority-Flood+epsilon gives on the mask-raised DEM, bit for bit.
TEST(DemCpu, OvertakenRimCellsAreRaisedInTurn)
{
  int64_t overtaken = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed)
  {
    const double base = seed % 3 == 0 ? 0.0 : (seed % 3 == 1 ? 312.5 : -4.0);
    TestDem d = nearlyFlatDem(seed, 90 + int64_t(seed) * 7, 70 + int64_t(seed) * 5, base, 1.0, int(seed % 4) + 1,
                              seed % 2 ? 6 : 0);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid g = d.gridWith(filled);
    for (FlatGradient gradient : {FlatGradient::Combined, FlatGradient::TowardsOutlet})
    {
      const std::vector<int32_t> mask = flatMask(Backend::Cpu, g, 3, noCancel, nullptr, gradient);
      const RaisedFlats raised = raiseFlats(g, mask);
      std::vector<float> byMask(filled);
      std::vector<uint8_t> drains(filled.size(), 0);
      for (int64_t y = 0; y < g.height; ++y)
        for (int64_t x = 0; x < g.width; ++x)
        {
          const std::size_t c = std::size_t(y * g.width + x);
          if (mask[c] > 0)
          {
            byMask[c] = raiseBySteps(filled[c], mask[c]);
            drains[c] = 1;
          }
          for (int dir = 0; dir < 8; ++dir)
          {
            const int64_t nx = x + kDx[dir], ny = y + kDy[dir];
            if (nx >= 0 && ny >= 0 && nx < g.width && ny < g.height && filled[std::size_t(ny * g.width + nx)] < filled[c])
              drains[c] = 1;
          }
        }
      const std::string where = "seed " + std::to_string(seed) + " gradient " + std::to_string(int(gradient));
      EXPECT_EQ(innerCellsWithoutALowerNeighbour(g, raised.z), 0) << where;
      EXPECT_TRUE(sameBits(raised.z, priorityFloodEpsilon(g, byMask, drains))) << where;
      const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, d.gridWith(raised.z), false, 2, noCancel);
      EXPECT_TRUE(everyCellDrains(d, dirs)) << where;
      overtaken += raised.raisedInTurn;
    }
  }
  EXPECT_GT(overtaken, 0) << "the terrains no longer make a raised flat overtake its rim";
}

// The case by hand: a flat 40 cells long draining east, and a cell one float32 step above the
// flat's far end whose only lower neighbours are flat cells. The mask raises those by up to 80
// steps; the rim cell must end above its raised neighbour.
TEST(DemCpu, ARimCellOneStepAboveAFlatStillDrains)
{
  TestDem d;
  d.width = 44;
  d.height = 5;
  const float flat = 250.0f, up = std::nextafter(flat, 1e9f);
  d.z.assign(std::size_t(d.width * d.height), 300.0f);
  for (int64_t x = 2; x < 43; ++x)
    d.z[std::size_t(2 * d.width + x)] = flat;
  d.z[std::size_t(2 * d.width + 43)] = 100.0f;  // the outlet, on the east border
  d.z[std::size_t(2 * d.width + 1)] = up;        // the rim cell at the flat's west end
  d.cellWidth.assign(5, 30.0);
  d.cellHeight.assign(5, 30.0);
  const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 1, noCancel);
  const Grid g = d.gridWith(filled);
  for (FlatGradient gradient : {FlatGradient::Combined, FlatGradient::TowardsOutlet})
  {
    const RaisedFlats raised = raiseFlats(g, flatMask(Backend::Cpu, g, 1, noCancel, nullptr, gradient));
    const float rim = raised.z[std::size_t(2 * d.width + 1)], next = raised.z[std::size_t(2 * d.width + 2)];
    EXPECT_GT(rim, next) << "gradient " << int(gradient);
    EXPECT_GE(raised.raisedInTurn, 1) << "gradient " << int(gradient);
    EXPECT_EQ(innerCellsWithoutALowerNeighbour(g, raised.z), 0) << "gradient " << int(gradient);
  }
}

namespace {

// Barnes et al.'s flat mask as dem.h states it, one step at a time: the flats are the
// equal-elevation components of the flat cells, non-flat cells of their elevation included; a
// flat drains when it has a low edge (a non-flat cell beside one of its flat cells); the steps go
// from the low edges and from the high edges through the flat's flat cells.
std::vector<int32_t> flatMaskByTheDefinition(const Grid& g, bool towardsOnly)
{
  const int64_t w = g.width, h = g.height, n = w * h;
  auto valid = [&](int64_t x, int64_t y) { return x >= 0 && y >= 0 && x < w && y < h && !std::isnan(g.z[y * w + x]); };
  std::vector<uint8_t> flat(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
  {
    const int64_t x = c % w, y = c / w;
    if (!valid(x, y))
      continue;
    bool edge = x == 0 || y == 0 || x == w - 1 || y == h - 1, lower = false;
    for (int d = 0; d < 8; ++d)
      if (!valid(x + kDx[d], y + kDy[d]))
        edge = true;
      else
        lower = lower || g.z[(y + kDy[d]) * w + x + kDx[d]] < g.z[c];
    flat[std::size_t(c)] = !edge && !lower;
  }
  // Breadth-first over the valid neighbours m of c with link(c, m), from the cells queued.
  auto spread = [&](std::vector<int64_t>& queue, auto link) {
    for (std::size_t head = 0; head < queue.size(); ++head)
    {
      const int64_t c = queue[head];
      for (int d = 0; d < 8; ++d)
        if (valid(c % w + kDx[d], c / w + kDy[d]) && link(c, c + kDy[d] * w + kDx[d]))
          queue.push_back(c + kDy[d] * w + kDx[d]);
    }
  };
  std::vector<int64_t> label(std::size_t(n), -1);
  std::vector<bool> drained;
  for (int64_t s = 0; s < n; ++s)
    if (flat[std::size_t(s)] && label[std::size_t(s)] < 0)
    {
      const int64_t id = int64_t(drained.size());
      std::vector<int64_t> queue{s};
      label[std::size_t(s)] = id;
      spread(queue, [&](int64_t c, int64_t m) {
        if (label[std::size_t(m)] >= 0 || g.z[m] != g.z[c])
          return false;
        label[std::size_t(m)] = id;
        return true;
      });
      bool low = false;
      for (const int64_t c : queue)
        low = low || !flat[std::size_t(c)];
      drained.push_back(low);
    }
  auto stepsFrom = [&](auto isSource, int32_t first) {
    std::vector<int32_t> steps(std::size_t(n), -1);
    std::vector<int64_t> queue;
    for (int64_t c = 0; c < n; ++c)
      if (label[std::size_t(c)] >= 0 && drained[std::size_t(label[std::size_t(c)])] && isSource(c))
      {
        steps[std::size_t(c)] = first;
        queue.push_back(c);
      }
    spread(queue, [&](int64_t c, int64_t m) {
      if (!flat[std::size_t(m)] || steps[std::size_t(m)] >= 0 || label[std::size_t(m)] != label[std::size_t(c)])
        return false;
      steps[std::size_t(m)] = steps[std::size_t(c)] + 1;
      return true;
    });
    return steps;
  };
  auto beside = [&](int64_t c, auto test) {
    for (int d = 0; d < 8; ++d)
      if (valid(c % w + kDx[d], c / w + kDy[d]) && test(c + kDy[d] * w + kDx[d]))
        return true;
    return false;
  };
  const std::vector<int32_t> towards = stepsFrom(
      [&](int64_t c) { return !flat[std::size_t(c)] && beside(c, [&](int64_t m) { return flat[std::size_t(m)] && g.z[m] == g.z[c]; }); }, 0);
  const std::vector<int32_t> away =
      stepsFrom([&](int64_t c) { return flat[std::size_t(c)] && beside(c, [&](int64_t m) { return g.z[m] > g.z[c]; }); }, 1);
  std::vector<int32_t> height(drained.size(), 0), mask(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
    if (flat[std::size_t(c)])
      height[std::size_t(label[std::size_t(c)])] = std::max(height[std::size_t(label[std::size_t(c)])], away[std::size_t(c)]);
  for (int64_t c = 0; c < n; ++c)
    if (flat[std::size_t(c)] && drained[std::size_t(label[std::size_t(c)])])
    {
      const int32_t t = std::max(towards[std::size_t(c)], 0), a = std::max(away[std::size_t(c)], 0);
      mask[std::size_t(c)] = towardsOnly ? t : 2 * t + (a > 0 ? height[std::size_t(label[std::size_t(c)])] - a : 0);
    }
  return mask;
}

// A comb at 5 in ground at 9: teeth 1 to 7 columns wide, flat, joined only through a spine of
// non-flat cells of their elevation (a 4 beside each on the top border), so one flat whose highest
// count of steps from higher ground comes from its widest teeth. Transposed, the spine runs down
// the rows.
TestDem combDem(int64_t size, bool transposed)
{
  TestDem d;
  d.width = d.height = size;
  d.z.assign(std::size_t(size * size), 9.f);
  auto at = [&](int64_t x, int64_t y) -> float& { return d.z[std::size_t(transposed ? x * size + y : y * size + x)]; };
  for (int64_t x = 1, width = 1; x < size - 1; x += width + 1, width = width % 7 + 1)
    for (int64_t y = 2; y < size - 1 - x % 5; ++y)
      for (int64_t dx = 0; dx < width && x + dx < size - 1; ++dx)
        at(x + dx, y) = 5.f;
  for (int64_t x = 1; x < size - 1; ++x)
    at(x, 1) = 5.f;
  for (int64_t x = 0; x < size; x += 2)
    at(x, 0) = 4.f;
  d.cellWidth.assign(std::size_t(size), 30.0);
  d.cellHeight.assign(std::size_t(size), 30.0);
  return d;
}

}  // namespace

TEST(DemCpu, FlatMaskEqualsTheDefinitionOnAnyThreads)
{
  std::vector<TestDem> dems;
  for (const TestDem& d : {randomDem(81, 130, 150, 1.0, 25), randomDem(82, 9, 700, 4.0, 6), randomDem(83, 300, 220, 0.5, 40)})
  {
    dems.push_back(d);
    TestDem filled = d;
    filled.z = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    dems.push_back(filled);
  }
  dems.push_back(combDem(150, false));
  dems.push_back(combDem(150, true));
  // Two flats at 5: the west one drains at the border and into a nodata hole; the east one is closed
  // (no mask).
  TestDem two;
  two.width = 12;
  two.height = 7;
  two.z.assign(84, 9.f);
  for (int64_t y = 1; y < 6; ++y)
    for (int64_t x = 1; x < 11; ++x)
      if (x != 5)
        two.z[std::size_t(y * 12 + x)] = 5.f;
  two.z[std::size_t(3 * 12)] = 5.f;
  two.z[std::size_t(2 * 12 + 3)] = std::nanf("");
  two.cellWidth.assign(7, 30.0);
  two.cellHeight.assign(7, 30.0);
  dems.push_back(two);
  for (std::size_t i = 0; i < dems.size(); ++i)
    for (FlatGradient gradient : {FlatGradient::Combined, FlatGradient::TowardsOutlet})
    {
      const std::vector<int32_t> want = flatMaskByTheDefinition(dems[i].grid(), gradient == FlatGradient::TowardsOutlet);
      for (int threads : {1, 2, 3})
        EXPECT_EQ(flatMask(Backend::Cpu, dems[i].grid(), threads, noCancel, nullptr, gradient), want)
            << "dem " << i << " gradient " << int(gradient) << " threads " << threads;
    }
  // The cases hold what they are for: the comb's narrow teeth take the height of its wide ones; the
  // closed flat gets no mask, the open one does.
  const std::vector<int32_t> comb = flatMask(Backend::Cpu, dems[6].grid(), 2, noCancel);
  EXPECT_EQ(comb[std::size_t(10 * 150 + 1)], 2 * 9 + 4 - 1);  // the 1-wide tooth, 9 steps from the spine
  const std::vector<int32_t> mask = flatMask(Backend::Cpu, two.grid(), 2, noCancel);
  EXPECT_GT(mask[std::size_t(1 * 12 + 1)], 0);
  EXPECT_EQ(mask[std::size_t(3 * 12 + 8)], 0);
}

TEST(DemCpu, TravelTimesToInnerOutletsWhateverTheThreads)
{
  // Outlets inside the grid, whose watersheds other cells surround: the cell of most flow near the
  // centre, one beside a nodata blob, a ridge cell (a watershed of one); the Manning model with a
  // raster (NaN: the default n) and channel flow. The times are the walk down every path, a cell's
  // speed is its own whatever the outlet, and 1, 2 or 3 threads give the same bits.
  for (uint64_t seed : {81, 82})
  {
    TestDem d = randomDem(seed, 150, 120, 0.5, 15, 30, 25, true);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid g = d.gridWith(filled);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, g, true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, g, dirs, 2, noCancel);
    const int64_t w = d.width, h = d.height;
    int64_t besideHole = -1, ridge = -1;
    for (int64_t y = 1; y + 1 < h; ++y)
      for (int64_t x = 1; x + 1 < w; ++x)
      {
        const int64_t c = y * w + x;
        if (dirs[std::size_t(c)] == kNoData)
          continue;
        bool nearHole = false;
        for (int k = 0; k < 8; ++k)
          nearHole = nearHole || dirs[std::size_t((y + kDy[k]) * w + x + kDx[k])] == kNoData;
        if (nearHole && besideHole < 0 && acc.cells[std::size_t(c)] > 20)
          besideHole = c;
        if (!nearHole && ridge < 0 && acc.cells[std::size_t(c)] == 1)
          ridge = c;
      }
    const int64_t centre = snapOutlet(g, acc, w / 2, h / 2, 150.0);
    ASSERT_GE(besideHole, 0);
    ASSERT_GE(ridge, 0);
    ASSERT_GT(acc.cells[std::size_t(centre)], 20);
    std::vector<float> manning(filled.size(), 0.08f);
    for (std::size_t i = 0; i < manning.size(); i += 7)
      manning[i] = std::nanf("");
    for (VelocityModel::Kind kind : {VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
    {
      VelocityModel model;
      model.kind = kind;
      model.rainfall = 80;
      model.mixedArea = 2e4;  // channel flow from 27 cells of 750 m² on
      model.channelAreaManning = 1e5;
      model.manning = kind == VelocityModel::Kind::Manning ? manning.data() : nullptr;
      const TravelTimes whole = travelTime(g, dirs, acc, largestBasinOutlet(g, dirs, acc), model, 2, noCancel);
      for (int64_t outlet : {centre, besideHole, ridge})
      {
        const TravelTimes t = travelTime(g, dirs, acc, outlet, model, 2, noCancel);
        const std::vector<double> want = walkedTimes(d, g, dirs, outlet, t.speed);
        int64_t inside = 0;
        double area = 0;
        for (std::size_t c = 0; c < want.size(); ++c)
        {
          ASSERT_EQ(std::isnan(want[c]), std::isnan(t.minutes[c])) << "cell " << c << " outlet " << outlet;
          ASSERT_EQ(std::isnan(t.speed[c]), std::isnan(t.minutes[c])) << "cell " << c;
          if (std::isnan(want[c]))
            continue;
          ++inside;
          area += g.cellWidth[int64_t(c) / w] * g.cellHeight[int64_t(c) / w];
          EXPECT_NEAR(t.minutes[c], want[c], 1e-9 * want[c]) << "cell " << c;
          if (!std::isnan(whole.speed[c]))
            EXPECT_EQ(t.speed[c], whole.speed[c]) << "cell " << c;
        }
        EXPECT_EQ(inside, t.watershedCells);
        EXPECT_EQ(inside, acc.cells[std::size_t(outlet)]);
        EXPECT_NEAR(area, t.watershedArea, 1e-12 * area);  // summed by rows there
        if (outlet == ridge)
          EXPECT_EQ(inside, 1);
        for (int threads : {1, 3})
        {
          const TravelTimes other = travelTime(g, dirs, acc, outlet, model, threads, noCancel);
          EXPECT_EQ(std::memcmp(other.minutes.data(), t.minutes.data(), t.minutes.size() * sizeof(double)), 0)
              << threads << " threads";
          EXPECT_EQ(std::memcmp(other.speed.data(), t.speed.data(), t.speed.size() * sizeof(double)), 0);
          EXPECT_EQ(other.watershedArea, t.watershedArea);
        }
      }
    }
  }
  // Directions that loop through the outlet (56 -> 55 -> 56, which accumulation refuses but a
  // caller's directions may hold): the loop and what drains into it are the watershed, each path
  // ending at the outlet.
  TestDem d;
  d.width = d.height = 10;
  d.z.assign(100, 1.f);
  d.cellWidth.assign(10, 10.0);
  d.cellHeight.assign(10, 20.0);
  std::vector<uint8_t> loop(100, kNoFlow);
  loop[55] = 0;  // E
  loop[56] = 4;  // W
  loop[54] = 0;
  loop[53] = 0;
  loop[47] = 1;  // SE, into 58, which drains nowhere: outside
  loop[46] = 2;  // S, into 56
  Accumulation acc;
  acc.cells.assign(100, 1);
  acc.area.assign(100, 0);
  VelocityModel model;
  model.kind = VelocityModel::Kind::Constant;
  const TravelTimes t = travelTime(d.grid(), loop, acc, 56, model, 2, noCancel);
  const std::vector<double> want = walkedTimes(d, d.grid(), loop, 56, t.speed);
  for (std::size_t c = 0; c < 100; ++c)
  {
    ASSERT_EQ(std::isnan(want[c]), std::isnan(t.minutes[c])) << "cell " << c;
    if (!std::isnan(want[c]))
      EXPECT_NEAR(t.minutes[c], want[c], 1e-12 * want[c]) << "cell " << c;
  }
  EXPECT_EQ(t.watershedCells, 5);  // 53, 54, 55, 56 and 46
  EXPECT_NEAR(t.minutes[53], (10 + 10 + 10 + 10) / 60.0, 1e-12);
  EXPECT_NEAR(t.minutes[46], (20 + 10) / 60.0, 1e-12);
}

// Upstream areas are exact 64-bit sums of 1e-6 m² units (9.2 million km² at most): a catchment that
// could pass that is refused with the reason, on both backends and in the chain; one that cannot is not.
TEST(DemCpu, UpstreamAreasPastTheirRangeAreRefused)
{
  // Cells of 1,000 km x 1,000 km, the largest taken: 1e18 units each, so ten in one catchment pass
  // the range.
  const std::vector<double> huge(1, 1.0e6);
  std::vector<float> slope(12), level(12, 1.f);
  for (int i = 0; i < 12; ++i)
    slope[std::size_t(i)] = float(12 - i);
  const Grid falling{slope.data(), 12, 1, huge.data(), huge.data()}, flat{level.data(), 12, 1, huge.data(), huge.data()};
  RunControl control;
  std::vector<Backend> backends = {Backend::Cpu};
  if (probeGpu().usable)
    backends.push_back(Backend::Gpu);
  for (const Backend b : backends)
  {
    const std::vector<uint8_t> down = flowDirections(b, falling, false, 0, control);
    try
    {
      flowAccumulation(b, falling, down, 0, control);
      ADD_FAILURE() << "no error";
    }
    catch (const InvalidInput& e)
    {
      EXPECT_NE(std::string(e.what()).find("the largest catchment has 12 cells of up to 1e+12 m² each: its "
                                           "area could pass the 9.2 million km²"),
                std::string::npos)
          << e.what();
    }
    ChainOptions o;
    o.interval = 60;
    EXPECT_THROW(isochroneChain(b, falling, o, 0, control), InvalidInput);
    // Every cell drains out on its own: one cell's area fits.
    const Accumulation one = flowAccumulation(b, flat, flowDirections(b, flat, false, 0, control), 0, control);
    EXPECT_EQ(one.area, std::vector<int64_t>(12, int64_t(1'000'000'000'000'000'000)));
  }
}

// Cell sizes outside 1 mm .. 1,000 km are refused, with the row and the sizes: cells over ~3,000 km
// made the fixed-point areas wrap to negative values, cells of 1e-300 m overflowed the slopes.
TEST(DemCpu, CellSizesOutsideTheirRangeAreRefused)
{
  const std::vector<float> z = {3.f, 2.f, 1.f, 2.f};
  RunControl control;
  for (const double size : {1e-300, 1e-4, 9.99e-4, 1.0000001e6, 3e6, 1e300})
  {
    const std::vector<double> sizes{30.0, size}, heights(2, 30.0);
    const Grid g{z.data(), 2, 2, sizes.data(), heights.data()};
    try
    {
      fillDepressions(Backend::Cpu, g, 1, control);
      ADD_FAILURE() << size << " accepted";
    }
    catch (const InvalidInput& e)
    {
      EXPECT_NE(std::string(e.what()).find("the cells of row 1 are"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("between 1 mm and 1,000 km"), std::string::npos) << e.what();
    }
  }
  for (const double size : {1e-3, 1e6})
  {
    const std::vector<double> sizes(2, size);
    const Grid g{z.data(), 2, 2, sizes.data(), sizes.data()};
    EXPECT_NO_THROW(flowAccumulation(Backend::Cpu, g, flowDirections(Backend::Cpu, g, true, 1, control), 1, control));
  }
}
