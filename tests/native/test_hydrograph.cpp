// The time–area hydrograph (dem/hydrograph.h) against a direct sum over the watershed's cells and the
// excess series' steps (each cell's excess of step j reaching the outlet in step j + its band), on
// the travel times of random DEMs with rows of different cell sizes, the band areas from the tiled
// bands (as the algorithm takes them) and from the in-memory times; the constant series; volume and
// the unit hydrograph; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "dem/hydrograph.h"
#include "dem/isochrone_chain.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

// Σ over cells and steps: the excess of step j on a cell of band k arrives in step j + k.
std::vector<double> directSum(const TestDem& d, const std::vector<double>& minutes, double interval,
                              const std::vector<double>& excess, int64_t steps)
{
  std::vector<double> q(std::size_t(steps), 0.0);
  for (int64_t y = 0; y < d.height; ++y)
    for (int64_t x = 0; x < d.width; ++x)
    {
      const double t = minutes[std::size_t(y * d.width + x)];
      if (std::isnan(t))
        continue;
      const int64_t k = int64_t(std::floor(t / interval));
      const double a = d.cellWidth[std::size_t(y)] * d.cellHeight[std::size_t(y)];
      for (std::size_t j = 0; j < excess.size(); ++j)
        q[std::size_t(k) + j] += a * excess[j] / 3.6e6;
    }
  return q;
}

void expectNear(const std::vector<double>& got, const std::vector<double>& want, const std::string& what)
{
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t n = 0; n < got.size(); ++n)
    EXPECT_NEAR(got[n], want[n], 1e-12 * std::fabs(want[n]) + 1e-300) << what << ", step " << n;
}

}  // namespace

TEST(Hydrograph, TheDirectSumOverCellsAndSteps)
{
  for (const uint64_t seed : {4u, 5u, 6u})
  {
    TestDem d = randomDem(seed, 47 + int64_t(seed), 39 + int64_t(seed) * 3, seed == 5 ? 0.0 : 1.0, int(3 * seed));
    for (int64_t y = 0; y < d.height; ++y)  // cells that shrink towards the pole, as in geographic DEMs
      d.cellWidth[std::size_t(y)] = 30.0 * std::cos(0.9 * double(y) / double(d.height));
    ChainOptions o;
    o.model.kind = seed == 5 ? VelocityModel::Kind::Constant : VelocityModel::Kind::Slope;
    o.model.speed = 0.5;  // the constant model on steps of 30 m: times on the bands' edges (ties)
    o.interval = seed == 5 ? 1.0 : 0.25;
    o.maxBands = 100000;
    const ChainResult chain = isochroneChain(Backend::Cpu, d.grid(), o, 2, noCancel);
    ASSERT_GT(chain.travel.watershedCells, 10);
    std::mt19937_64 random(seed);
    std::uniform_real_distribution<double> mm(0.0, 40.0);
    std::vector<double> excess(std::size_t(3 + seed));
    for (double& i : excess)
      i = random() % 4 == 0 ? 0.0 : mm(random);
    const tiled::RowSizes rows{d.cellWidth, d.cellHeight};
    const tiled::MemoryRaster<double> minutes(d.width, d.height, chain.travel.minutes);
    for (const int64_t side : {int64_t(7), d.width + 1})
    {
      const std::string what = "seed " + std::to_string(seed) + ", tiles of " + std::to_string(side);
      const tiled::TiledBands b =
        tiled::bandsTiled(minutes, rows, chain.interval, chain.bands, nullptr, tiles(side, side), noCancel);
      const Hydrograph h = timeAreaHydrograph(b.bandArea, excess, chain.interval);
      const int64_t steps = int64_t(b.bandArea.size() + excess.size()) - 1;
      expectNear(h.discharge, directSum(d, chain.travel.minutes, chain.interval, excess, steps), what);
      // Volume: the watershed's area times the excess depth.
      double depth = 0;
      for (const double i : excess)
        depth += i / 1000.0 * chain.interval / 60.0;
      EXPECT_NEAR(h.volume, chain.travel.watershedArea * depth, 1e-12 * h.volume) << what;
      EXPECT_EQ(h.excess.size(), std::size_t(steps)) << what;
      // The unit hydrograph: the discharge of 1 mm in the first step.
      const Hydrograph one = timeAreaHydrograph(b.bandArea, {60.0 / chain.interval}, chain.interval);
      for (std::size_t k = 0; k < b.bandArea.size(); ++k)
        EXPECT_NEAR(h.unit[k], one.discharge[k], 1e-12 * one.discharge[k]) << what;
      int64_t peak = -1;
      for (int64_t n = 0; n < steps; ++n)
        if (peak < 0 ? h.discharge[std::size_t(n)] > 0 : h.discharge[std::size_t(n)] > h.discharge[std::size_t(peak)])
          peak = n;
      EXPECT_EQ(h.peakStep, peak) << what;
    }
  }
}

TEST(Hydrograph, AConstantIntensityInWholeAndPartSteps)
{
  EXPECT_EQ(constantExcess(12.0, 60.0, 10.0), std::vector<double>(6, 12.0));
  std::vector<double> part(6, 12.0);
  part.push_back(6.0);
  EXPECT_EQ(constantExcess(12.0, 65.0, 10.0), part);
  EXPECT_EQ(constantExcess(12.0, 5.0, 10.0), std::vector<double>{6.0});
  EXPECT_EQ(constantExcess(12.0, 0.3 * 3, 0.3), std::vector<double>(3, 12.0));  // 0.9 / 0.3 just under 3
  EXPECT_EQ(constantExcess(0.0, 30.0, 10.0), std::vector<double>(3, 0.0));
  // One band of 1 km² under 36 mm/h for one step: 10 m³/s, then nothing.
  const Hydrograph h = timeAreaHydrograph({1e6, 0.0, 2e6}, {36.0}, 5.0);
  EXPECT_EQ(h.discharge, (std::vector<double>{10.0, 0.0, 20.0}));
  EXPECT_EQ(h.peakStep, 2);
  EXPECT_DOUBLE_EQ(h.volume, 30.0 * 300.0);
  const Hydrograph dry = timeAreaHydrograph({1e6}, {0.0, 0.0}, 5.0);
  EXPECT_EQ(dry.peakStep, -1);
  EXPECT_EQ(dry.volume, 0.0);
}

TEST(Hydrograph, BadInput)
{
  const double nan = std::nan("");
  EXPECT_THROW(constantExcess(-1, 60, 10), InvalidInput);
  EXPECT_THROW(constantExcess(nan, 60, 10), InvalidInput);
  EXPECT_THROW(constantExcess(10, 0, 10), InvalidInput);
  EXPECT_THROW(constantExcess(10, 60, 0), InvalidInput);
  EXPECT_THROW(constantExcess(10, 1e9, 1e-3), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph({1.0}, {}, 1), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph({1.0}, {1.0, -2.0}, 1), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph({1.0}, {1.0, nan}, 1), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph({-1.0}, {1.0}, 1), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph({1.0}, {1.0}, -1), InvalidInput);
  EXPECT_THROW(timeAreaHydrograph(std::vector<double>(10), std::vector<double>(std::size_t(kMaxHydrographSteps)), 1),
               InvalidInput);
  try
  {
    timeAreaHydrograph({1.0}, {1.0, 2.0, -3.0}, 1);
    FAIL();
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("step 3"), std::string::npos) << e.what();
  }
}
