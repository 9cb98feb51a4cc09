// The isochrone chain in one call (dem/isochrone_chain.h) on the CPU: the same as its stages run one
// by one, and its own checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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
    const ChainResult r = isochroneChain(Backend::Cpu, t.grid(), o, 2, RunControl());
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
  o.interval = 0;
  EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput);
  o.interval = 1e-9;
  o.maxBands = 100;
  EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput);
  o.interval = 5;
  o.automaticOutlet = false;
  o.outletColumn = 30;
  EXPECT_THROW(isochroneChain(Backend::Cpu, t.grid(), o, 1, RunControl()), InvalidInput);
}
