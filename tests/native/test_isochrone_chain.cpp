// The isochrone chain in one call (dem/isochrone_chain.h) on the CPU: the same as its stages run one
// by one, and its own checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "core/errors.h"
#include "dem/isochrone_chain.h"
#include "dem/regions.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

struct Terrain
{
  int64_t w, h;
  std::vector<float> z;
  std::vector<double> cw, ch;
  Grid grid() const { return Grid{z.data(), w, h, cw.data(), ch.data()}; }
};

Terrain terrain(uint64_t seed, int64_t w, int64_t h)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Terrain t{w, h, std::vector<float>(std::size_t(w * h)), std::vector<double>(std::size_t(h), 25.0),
            std::vector<double>(std::size_t(h), 30.0)};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const double v = 0.4 * double(x) + 12 * std::sin(double(x) * 0.09) * std::cos(double(y) * 0.07) + 2 * u(rng);
      t.z[std::size_t(y * w + x)] = (x - 20) * (x - 20) + (y - 25) * (y - 25) < 30 ? NAN : float(std::round(v * 2) / 2);
    }
  return t;
}

}  // namespace

TEST(IsochroneChain, EqualsTheStagesOneByOne)
{
  const Terrain t = terrain(3, 90, 70);
  for (const bool automatic : {true, false})
  {
    ChainOptions o;
    o.automaticOutlet = automatic;
    o.outletColumn = 45;
    o.outletRow = 35;
    o.snapDistance = 200;
    o.interval = 7.5;
    o.keepFilled = o.keepDirections = o.keepAccumulation = o.keepSpeed = true;
    std::vector<ChainStage> stages;
    o.onStage = [&](ChainStage s) { stages.push_back(s); };
    const ChainResult r = isochroneChain(Backend::Cpu, t.grid(), o, 2, RunControl());
    EXPECT_EQ(stages, (std::vector<ChainStage>{ChainStage::Fill, ChainStage::Directions, ChainStage::Accumulation,
                                               ChainStage::TravelTime, ChainStage::Bands}));
    const std::vector<float> filled = fillDepressions(Backend::Cpu, t.grid(), 2, RunControl());
    const Grid fg{filled.data(), t.w, t.h, t.cw.data(), t.ch.data()};
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, fg, true, 2, RunControl());
    const Accumulation acc = flowAccumulation(Backend::Cpu, fg, dirs, 2, RunControl());
    const int64_t outlet = automatic ? largestBasinOutlet(fg, dirs, acc) : snapOutlet(fg, acc, 45, 35, 200);
    const TravelTimes tt = travelTime(fg, dirs, acc, outlet, o.model, 2, RunControl());
    ASSERT_EQ(r.filled.size(), filled.size());
    EXPECT_EQ(0, std::memcmp(r.filled.data(), filled.data(), filled.size() * sizeof(float)));  // NaN nodata too
    EXPECT_EQ(r.directions, dirs);
    EXPECT_EQ(r.accumulation.cells, acc.cells);
    EXPECT_EQ(r.accumulation.area, acc.area);
    EXPECT_EQ(r.outlet, outlet);
    EXPECT_EQ(r.outletCells, acc.cells[std::size_t(outlet)]);
    int64_t raised = 0;
    for (std::size_t i = 0; i < filled.size(); ++i)
      raised += filled[i] > t.z[i];
    EXPECT_EQ(r.raisedCells, raised);
    EXPECT_GT(raised, 10);  // the terrain has pits
    double minSpeed = INFINITY, maxSpeed = 0;
    for (const double v : tt.speed)
      if (!std::isnan(v))
      {
        minSpeed = std::min(minSpeed, v);
        maxSpeed = std::max(maxSpeed, v);
      }
    EXPECT_EQ(r.minSpeed, minSpeed);
    EXPECT_EQ(r.maxSpeed, maxSpeed);
    ASSERT_EQ(r.travel.minutes.size(), tt.minutes.size());
    double longest = 0;
    std::vector<int32_t> bands(tt.minutes.size()), shed(tt.minutes.size());
    for (std::size_t i = 0; i < tt.minutes.size(); ++i)
    {
      ASSERT_EQ(std::isnan(r.travel.minutes[i]), std::isnan(tt.minutes[i]));
      if (std::isnan(tt.minutes[i]))
      {
        bands[i] = shed[i] = -1;
        continue;
      }
      EXPECT_EQ(r.travel.minutes[i], tt.minutes[i]);
      longest = std::max(longest, tt.minutes[i]);
      bands[i] = int32_t(std::floor(tt.minutes[i] / o.interval));
      shed[i] = 0;
    }
    EXPECT_EQ(r.travel.watershedCells, tt.watershedCells);
    EXPECT_EQ(r.bands, int32_t(std::floor(longest / o.interval)) + 1);
    EXPECT_GT(r.bands, 3);
    const BandPolygons want = traceRegions(Backend::Cpu, bands.data(), t.w, t.h, r.bands, 1, RunControl());
    EXPECT_EQ(r.bandPolygons.ringPoint, want.ringPoint);
    EXPECT_EQ(r.bandPolygons.x, want.x);
    EXPECT_EQ(r.bandPolygons.y, want.y);
    const BandPolygons ws = traceRegions(Backend::Cpu, shed.data(), t.w, t.h, 1, 1, RunControl());
    EXPECT_EQ(r.watershed.ringPoint, ws.ringPoint);
    EXPECT_EQ(r.watershed.x, ws.x);
  }
}

TEST(IsochroneChain, BadOptionsAreRefused)
{
  const Terrain t = terrain(4, 30, 20);
  ChainOptions o;
  for (const double interval : {-1.0, double(NAN), double(INFINITY)})
  {
    o.interval = interval;
    EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput) << interval;
  }
  o.interval = 1e-9;
  o.maxBands = 100;
  EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput);
  try
  {
    isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl());
    ADD_FAILURE() << "no error for 1e9 bands";
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("more than the limit of 100: choose a larger interval"), std::string::npos)
        << e.what();
  }
  o.interval = 5;
  o.automaticOutlet = false;
  o.outletColumn = 30;
  EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput);
  // A model out of range is refused before any stage starts.
  o.outletColumn = 10;
  bool started = false;
  o.onStage = [&](ChainStage) { started = true; };
  for (int which = 0; which < 3; ++which)
  {
    ChainOptions bad = o;
    if (which == 0)
    {
      bad.model.kind = VelocityModel::Kind::Constant;
      bad.model.speed = 0;
    }
    else if (which == 1)
    {
      bad.model.kind = VelocityModel::Kind::Manning;
      bad.model.curveNumber = 101;
    }
    else
    {
      bad.model.kind = VelocityModel::Kind::Slope;
      bad.model.kChannel = -1;
    }
    EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), bad, 1, RunControl()), InvalidInput) << which;
    EXPECT_THROW(isochroneChain(Backend::Gpu, t.grid(), bad, 1, RunControl()), InvalidInput) << which;
  }
  EXPECT_FALSE(started);
  // The snap window's test (the 90 x 70 terrain's nodata disc of radius 5.5 cells about column 20,
  // row 25; cells of 25 x 30 m): 100 m from the centre is all disc, 200 m reaches data.
  const Terrain big = terrain(3, 90, 70);
  EXPECT_TRUE(validCellWithin(big.grid(), 5, 5, 0));
  EXPECT_FALSE(validCellWithin(big.grid(), 20, 25, 0));
  EXPECT_FALSE(validCellWithin(big.grid(), 20, 25, 100));
  EXPECT_TRUE(validCellWithin(big.grid(), 20, 25, 200));
  EXPECT_THROW(validCellWithin(big.grid(), 90, 5, 10), InvalidInput);
  EXPECT_THROW(validCellWithin(big.grid(), 5, 5, -1), InvalidInput);
}

// INTERVAL 0: the first round interval (1, 2, 5 ... minutes, hours, days, weeks) that cuts the times
// into at most kAutomaticBands bands; the chain reports the interval it used.
TEST(IsochroneChain, TheAutomaticIntervalIsRoundAndGivesAtMostTwelveBands)
{
  const std::vector<double> round{1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440, 2880, 4320, 10080};
  for (const double longest : {0.0, 0.5, 11.99, 12.0, 59.0, 600.0, 954.25, 5000.0, 1e5, 3e6})
  {
    const double v = automaticInterval(longest);
    EXPECT_LE(std::floor(longest / v) + 1, kAutomaticBands) << longest;
    const auto at = std::find(round.begin(), round.end(), v);
    if (at != round.end())
    {
      if (at != round.begin())
        EXPECT_GT(std::floor(longest / *(at - 1)) + 1, kAutomaticBands) << longest << ": " << *(at - 1) << " would do";
    }
    else
      EXPECT_EQ(std::fmod(v, 10080.0), 0.0) << longest << ": " << v;
  }
  EXPECT_EQ(automaticInterval(954.25), 120.0);
  const Terrain t = terrain(3, 90, 70);
  ChainOptions o;
  o.interval = 0;
  const ChainResult r = isochroneChain(Backend::Cpu, t.grid(), o, 2, RunControl());
  double longest = 0;
  for (const double m : r.travel.minutes)
    longest = std::isnan(m) ? longest : std::max(longest, m);
  EXPECT_EQ(r.interval, automaticInterval(longest));
  EXPECT_EQ(r.bands, int32_t(std::floor(longest / r.interval)) + 1);
  EXPECT_LE(r.bands, kAutomaticBands);
}
