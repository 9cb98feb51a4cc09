// The DEM tools on the GPU against the CPU: filled DEMs, directions and accumulation bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "gpu_test_size.h"
#include "dem/dem.h"
#include "dem/isochrone_chain.h"
#include "dem/regions.h"
#include "dem/travel_time.h"

using namespace gpugeo;
using namespace gpugeo::dem;
using gpugeo::testing::gpuSide;

namespace {

struct GpuDem
{
  int64_t width, height;
  std::vector<float> z;
  std::vector<double> cellWidth, cellHeight;
  Grid grid(const std::vector<float>* values = nullptr) const
  {
    return Grid{values ? values->data() : z.data(), width, height, cellWidth.data(), cellHeight.data()};
  }
};

// Terrain with pits (noise), plateaus (rounding), basins larger than a tile, nodata blobs.
GpuDem terrain(uint64_t seed, int64_t w, int64_t h, double step, int holes, bool perRow)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  GpuDem d{w, h, std::vector<float>(std::size_t(w * h)), {}, {}};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      double v = 0.02 * x + 40 * std::sin(x * 0.011) * std::cos(y * 0.013) + 3 * u(rng);
      if (step > 0)
        v = std::round(v / step) * step;
      d.z[std::size_t(y * w + x)] = float(v);
    }
  for (int k = 0; k < holes; ++k)
  {
    const int64_t cx = int64_t(u(rng) * w), cy = int64_t(u(rng) * h), r = 1 + int64_t(u(rng) * 6);
    for (int64_t y = std::max<int64_t>(0, cy - r); y < std::min(h, cy + r); ++y)
      for (int64_t x = std::max<int64_t>(0, cx - r); x < std::min(w, cx + r); ++x)
        d.z[std::size_t(y * w + x)] = std::nanf("");
  }
  for (int64_t y = 0; y < h; ++y)
  {
    d.cellWidth.push_back(perRow ? 30 * std::cos(0.5 + 0.3 * double(y) / double(h)) : 30);
    d.cellHeight.push_back(perRow ? 30 : 25);
  }
  return d;
}

bool gpuUsable()
{
  return probeGpu().usable;
}

RunControl noCancel;

}  // namespace

TEST(DemGpu, SameAsTheCpu)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  struct Case
  {
    uint64_t seed;
    int64_t w, h;
    double step;
    int holes;
    bool perRow;
  };
  for (const Case& c : {Case{1, 1, 1, 0, 0, false}, Case{2, 1, 70, 0, 0, false}, Case{3, 70, 1, 0, 0, false},
                        Case{4, 97, 63, 0, 5, false}, Case{5, gpuSide(600), gpuSide(500), 1.0, 80, true},
                        Case{6, gpuSide(1500), gpuSide(1200), 0.0, 300, false},
                        Case{7, gpuSide(1024), gpuSide(1024), 4.0, 0, true},
                        // one elevation everywhere: a single flat over 11 x 9 tiles, with holes
                        Case{8, 333, 257, 1e6, 20, false}})
  {
    const GpuDem d = terrain(c.seed, c.w, c.h, c.step, c.holes, c.perRow);
    const std::string at = "seed " + std::to_string(c.seed);
    const std::vector<float> cpu = fillDepressions(Backend::Cpu, d.grid(), 0, noCancel);
    const std::vector<float> gpu = fillDepressions(Backend::Gpu, d.grid(), 0, noCancel);
    ASSERT_EQ(cpu.size(), gpu.size());
    EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), cpu.size() * sizeof(float)), 0) << at;
    EXPECT_EQ(flatMask(Backend::Cpu, d.grid(&cpu), 0, noCancel), flatMask(Backend::Gpu, d.grid(&cpu), 0, noCancel))
        << at;
    EXPECT_EQ(flatMask(Backend::Cpu, d.grid(&cpu), 0, noCancel, nullptr, FlatGradient::TowardsOutlet),
              flatMask(Backend::Gpu, d.grid(&cpu), 0, noCancel, nullptr, FlatGradient::TowardsOutlet))
        << at;
    for (bool flats : {false, true})
    {
      const std::vector<uint8_t> dc = flowDirections(Backend::Cpu, d.grid(&cpu), flats, 0, noCancel);
      const std::vector<uint8_t> dg = flowDirections(Backend::Gpu, d.grid(&cpu), flats, 0, noCancel);
      EXPECT_EQ(dc, dg) << at << " flats " << flats;
      const Accumulation ac = flowAccumulation(Backend::Cpu, d.grid(&cpu), dc, 0, noCancel);
      const Accumulation ag = flowAccumulation(Backend::Gpu, d.grid(&cpu), dc, 0, noCancel);
      EXPECT_EQ(ac.cells, ag.cells) << at << " flats " << flats;
      EXPECT_EQ(ac.area, ag.area) << at << " flats " << flats;
    }
    // Directions of the raw DEM (pits have none).
    EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), false, 0, noCancel),
              flowDirections(Backend::Gpu, d.grid(), false, 0, noCancel))
        << at;
  }
}

TEST(DemGpu, TravelTimesAgreeWithTheCpu)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (uint64_t seed : {21, 22})
  {
    const GpuDem d = terrain(seed, gpuSide(seed == 21 ? 700 : 300), gpuSide(seed == 21 ? 600 : 250), 0.5,
                             seed == 22 ? 20 : 0, seed == 22);
    const std::vector<float> filled = fillDepressions(Backend::Cpu, d.grid(), 0, noCancel);
    const Grid g = d.grid(&filled);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, g, true, 0, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, g, dirs, 0, noCancel);
    const int64_t outlet = largestBasinOutlet(g, dirs, acc);
    std::vector<float> manning(filled.size(), 0.08f);
    for (std::size_t i = 0; i < manning.size(); i += 7)
      manning[i] = std::nanf("");
    for (VelocityModel::Kind kind : {VelocityModel::Kind::Constant, VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
    {
      VelocityModel model;
      model.kind = kind;
      model.rainfall = 60;
      model.manning = kind == VelocityModel::Kind::Manning ? manning.data() : nullptr;
      const TravelTimes cpu = travelTime(Backend::Cpu, g, dirs, acc, outlet, model, 0, noCancel);
      const TravelTimes gpu = travelTime(Backend::Gpu, g, dirs, acc, outlet, model, 0, noCancel);
      EXPECT_EQ(cpu.watershedCells, gpu.watershedCells) << "seed " << seed << " model " << int(kind);
      EXPECT_EQ(cpu.watershedArea, gpu.watershedArea);
      for (std::size_t c = 0; c < cpu.minutes.size(); ++c)
      {
        ASSERT_EQ(std::isnan(cpu.minutes[c]), std::isnan(gpu.minutes[c])) << "cell " << c;
        if (!std::isnan(cpu.minutes[c]))
        {
          ASSERT_NEAR(gpu.minutes[c], cpu.minutes[c], 1e-9 * cpu.minutes[c]) << "cell " << c << " model " << int(kind);
          ASSERT_NEAR(gpu.speed[c], cpu.speed[c], 1e-12 * cpu.speed[c]) << "cell " << c;
        }
      }
    }
  }
}

TEST(DemGpu, LoopedDirectionsAreRefused)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const GpuDem d = terrain(9, 10, 10, 0, 0, false);
  std::vector<uint8_t> loop(100, kNoFlow);
  loop[55] = 0;
  loop[56] = 4;
  EXPECT_THROW(flowAccumulation(Backend::Gpu, d.grid(), loop, 0, noCancel), InvalidInput);
}

TEST(DemGpu, NoGpuIsDeviceUnavailable)
{
  if (gpuUsable())
    GTEST_SKIP() << "a GPU is usable here";
  const GpuDem d = terrain(9, 10, 10, 0, 0, false);
  EXPECT_THROW(fillDepressions(Backend::Gpu, d.grid(), 0, noCancel), DeviceUnavailable);
}

// Region tracing: the GPU's rings, ordered and started as the CPU's, give the same arrays bit for
// bit (the CPU's are checked against brute force in test_regions.cpp).
TEST(DemGpu, RegionsAreTheCpus)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  std::mt19937_64 rng(31);
  struct Case
  {
    int64_t w, h;
    int32_t count;
    int kind;  // 0 random labels, 1 noisy concentric bands, 2 checkerboard, 3 all background
  };
  for (const Case k : {Case{17, 13, 3, 0}, Case{1, 1, 1, 1}, Case{64, 40, 2, 2}, Case{9, 7, 2, 3},
                       Case{gpuSide(1503), gpuSide(1291), 40, 1}, Case{gpuSide(700), gpuSide(900), 5, 0}})
  {
    std::vector<int32_t> labels(std::size_t(k.w * k.h));
    for (int64_t y = 0; y < k.h; ++y)
      for (int64_t x = 0; x < k.w; ++x)
      {
        int32_t v = -1;
        if (k.kind == 0)
          v = int32_t(rng() % uint64_t(k.count + 1)) - 1;
        else if (k.kind == 1)
        {
          const double r = std::hypot(double(x) - 0.45 * double(k.w), double(y) - 0.55 * double(k.h)) + double(rng() % 4);
          v = r > 0.45 * double(std::max(k.w, k.h)) ? -1 : int32_t(r / 9) % k.count;
        }
        else if (k.kind == 2)
          v = int32_t((x + y) % 2);
        labels[std::size_t(y * k.w + x)] = v;
      }
    const BandPolygons cpu = traceRegions(Backend::Cpu, labels.data(), k.w, k.h, k.count, 0, noCancel);
    const BandPolygons gpu = traceRegions(Backend::Gpu, labels.data(), k.w, k.h, k.count, 0, noCancel);
    EXPECT_EQ(gpu.bandPolygon, cpu.bandPolygon) << k.w << "x" << k.h;
    EXPECT_EQ(gpu.polygonRing, cpu.polygonRing) << k.w << "x" << k.h;
    EXPECT_EQ(gpu.ringPoint, cpu.ringPoint) << k.w << "x" << k.h;
    EXPECT_EQ(gpu.x, cpu.x) << k.w << "x" << k.h;
    EXPECT_EQ(gpu.y, cpu.y) << k.w << "x" << k.h;
    if (k.kind == 1 && k.w > 1000)
      EXPECT_GT(cpu.polygonRing.size(), 1000u) << "a case with many rings and holes";
  }
}

// The whole chain with its arrays kept on the device against the CPU's chain: the same outlet,
// filled DEM, directions, accumulation and watershed; times within 1e-9; the bands' polygons those of
// the GPU's own times, traced on the CPU.
TEST(DemGpu, ChainIsTheCpus)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  for (const bool automatic : {true, false})
  {
    const GpuDem d = terrain(automatic ? 21 : 22, gpuSide(700), gpuSide(523), 0.5, 4, !automatic);
    ChainOptions o;
    o.automaticOutlet = automatic;
    o.outletColumn = d.width / 2;
    o.outletRow = d.height / 2;
    o.snapDistance = 900;
    o.interval = 0;  // the automatic interval with the automatic outlet; else an eighth of the longest time
    o.keepFilled = o.keepDirections = o.keepAccumulation = o.keepSpeed = true;
    if (!automatic)
    {
      const ChainResult first = isochroneChain(Backend::Cpu, d.grid(), o, 0, noCancel);
      o.interval = first.interval * double(first.bands) / 8.0;
    }
    const ChainResult cpu = isochroneChain(Backend::Cpu, d.grid(), o, 0, noCancel);
    std::vector<ChainStage> stages;
    o.onStage = [&](ChainStage s) { stages.push_back(s); };
    const ChainResult gpu = isochroneChain(Backend::Gpu, d.grid(), o, 0, noCancel);
    EXPECT_EQ(stages, (std::vector<ChainStage>{ChainStage::Fill, ChainStage::Directions, ChainStage::Accumulation,
                                               ChainStage::TravelTime, ChainStage::Bands}));
    EXPECT_EQ(gpu.outlet, cpu.outlet);
    EXPECT_EQ(gpu.outletCells, cpu.outletCells);
    EXPECT_EQ(gpu.raisedCells, cpu.raisedCells);
    EXPECT_GT(cpu.raisedCells, 100);
    EXPECT_NEAR(gpu.minSpeed, cpu.minSpeed, 1e-12 * cpu.minSpeed);
    EXPECT_NEAR(gpu.maxSpeed, cpu.maxSpeed, 1e-12 * cpu.maxSpeed);
    EXPECT_LT(cpu.minSpeed, cpu.maxSpeed);
    // Keeping nothing changes nothing but what comes back.
    ChainOptions bare = o;
    bare.keepFilled = bare.keepDirections = bare.keepAccumulation = bare.keepSpeed = false;
    const ChainResult lean = isochroneChain(Backend::Gpu, d.grid(), bare, 0, noCancel);
    EXPECT_TRUE(lean.filled.empty() && lean.directions.empty() && lean.accumulation.cells.empty() &&
                lean.accumulation.area.empty() && lean.travel.speed.empty());
    EXPECT_EQ(0, std::memcmp(lean.travel.minutes.data(), gpu.travel.minutes.data(),
                             gpu.travel.minutes.size() * sizeof(double)));
    EXPECT_EQ(lean.bandPolygons.x, gpu.bandPolygons.x);
    EXPECT_EQ(lean.minSpeed, gpu.minSpeed);
    EXPECT_EQ(0, std::memcmp(gpu.filled.data(), cpu.filled.data(), cpu.filled.size() * sizeof(float)));
    EXPECT_EQ(gpu.directions, cpu.directions);
    EXPECT_EQ(gpu.accumulation.cells, cpu.accumulation.cells);
    EXPECT_EQ(gpu.accumulation.area, cpu.accumulation.area);
    EXPECT_EQ(gpu.travel.watershedCells, cpu.travel.watershedCells);
    ASSERT_EQ(gpu.travel.minutes.size(), cpu.travel.minutes.size());
    std::vector<int32_t> bands(cpu.travel.minutes.size());
    double longest = 0;
    for (std::size_t c = 0; c < bands.size(); ++c)
    {
      ASSERT_EQ(std::isnan(gpu.travel.minutes[c]), std::isnan(cpu.travel.minutes[c])) << c;
      if (std::isnan(gpu.travel.minutes[c]))
      {
        bands[c] = -1;
        continue;
      }
      ASSERT_NEAR(gpu.travel.minutes[c], cpu.travel.minutes[c], 1e-9 * cpu.travel.minutes[c]) << c;
      ASSERT_NEAR(gpu.travel.speed[c], cpu.travel.speed[c], 1e-12 * cpu.travel.speed[c]) << c;
      bands[c] = int32_t(std::floor(gpu.travel.minutes[c] / gpu.interval));
      longest = std::max(longest, gpu.travel.minutes[c]);
    }
    EXPECT_EQ(gpu.interval, cpu.interval);
    EXPECT_EQ(gpu.interval, automatic ? automaticInterval(longest) : o.interval);
    EXPECT_EQ(gpu.bands, int32_t(std::floor(longest / gpu.interval)) + 1);
    EXPECT_GT(gpu.bands, automatic ? 0 : 3);
    const BandPolygons want = traceRegions(Backend::Cpu, bands.data(), d.width, d.height, gpu.bands, 0, noCancel);
    EXPECT_EQ(gpu.bandPolygons.bandPolygon, want.bandPolygon);
    EXPECT_EQ(gpu.bandPolygons.ringPoint, want.ringPoint);
    EXPECT_EQ(gpu.bandPolygons.x, want.x);
    EXPECT_EQ(gpu.bandPolygons.y, want.y);
    EXPECT_EQ(gpu.watershed.ringPoint, cpu.watershed.ringPoint);
    EXPECT_EQ(gpu.watershed.x, cpu.watershed.x);
    EXPECT_EQ(gpu.watershed.y, cpu.watershed.y);
  }
}

TEST(DemGpu, TooLargeForTheGpuNamesTheLimit)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  // 46,000 x 46,000 cells (2.1e9, under the 2^31 cap) need about 180 GB for the chain and 17 GB for
  // the fill alone, more than an 80 GB GPU holds for the chain. The check comes before the elevations
  // are read, so one float stands for them here.
  const int64_t side = 46000;
  const float one = 1.f;
  const std::vector<double> size(std::size_t(side), 30.0);
  const Grid huge{&one, side, side, size.data(), size.data()};
  if (probeGpu().totalMemory >= std::size_t(side * side) * 85)
    GTEST_SKIP() << "this GPU holds the chain of the largest DEM; the memory check needs another test";
  ChainOptions o;
  try
  {
    isochroneChain(Backend::Gpu, huge, o, 0, noCancel);
    ADD_FAILURE() << "no error";
  }
  catch (const DeviceOutOfMemory& e)
  {
    const std::string text = e.what();
    EXPECT_NE(text.find("the isochrone chain on a DEM of 46000 x 46000 cells needs about"), std::string::npos) << text;
    EXPECT_NE(text.find("GiB of GPU memory; the GPU has"), std::string::npos) << text;
  }
  EXPECT_THROW(travelTime(Backend::Gpu, huge, std::vector<uint8_t>(1), Accumulation(), 0, VelocityModel(), 0, noCancel),
               InvalidInput);  // the sizes are checked first
}

// A flat that winds across many tiles: a corridor at 10 m between walls at 50 m, turning at the top
// and the bottom every 8 columns, open to the grid's left edge at one end only. Its cells form one
// component however the tiles cut it, and their distances to the outlet grow along the whole path.
TEST(DemGpu, AWindingFlatIsTheCpus)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const int64_t w = 203, h = 150;
  GpuDem d{w, h, std::vector<float>(std::size_t(w * h), 50.f), std::vector<double>(std::size_t(h), 30.0),
           std::vector<double>(std::size_t(h), 30.0)};
  for (int64_t y = 1; y < h - 1; ++y)
    for (int64_t x = 1; x < w - 1; ++x)
    {
      const int64_t wall = x % 8 == 0 ? x / 8 : -1;  // the k-th wall is open at the bottom when k is odd
      const bool open = wall >= 0 && (wall % 2 == 1 ? y >= h - 4 : y <= 2);
      if (wall < 0 || open)
        d.z[std::size_t(y * w + x)] = 10.f;
    }
  d.z[std::size_t(2 * w)] = 10.f;  // the outlet: the corridor's first bend meets the left edge
  const std::vector<int32_t> cpu = flatMask(Backend::Cpu, d.grid(), 0, noCancel);
  EXPECT_EQ(cpu, flatMask(Backend::Gpu, d.grid(), 0, noCancel));
  EXPECT_GT(*std::max_element(cpu.begin(), cpu.end()), 2 * 1000);  // the path is longer than 1000 cells
  EXPECT_EQ(flowDirections(Backend::Cpu, d.grid(), true, 0, noCancel),
            flowDirections(Backend::Gpu, d.grid(), true, 0, noCancel));
}

// Past 2^30 cells the device's 32-bit cell indices run out: a clear error, before any elevation is
// read (one float stands for them), where the GPU's memory would have held the fill.
TEST(DemGpu, MoreCellsThanTheGpuIndexesAreRefused)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const int64_t side = 33000;  // 1.089e9 cells, 8.7 GB for the fill
  if (probeGpu().totalMemory < std::size_t(side * side) * 10)
    GTEST_SKIP() << "this GPU cannot hold the fill of 33000 x 33000 cells";
  const float one = 1.f;
  const std::vector<double> size(std::size_t(side), 30.0);
  const Grid huge{&one, side, side, size.data(), size.data()};
  try
  {
    fillDepressions(Backend::Gpu, huge, 0, noCancel);
    ADD_FAILURE() << "no error";
  }
  catch (const InvalidInput& e)
  {
    const std::string text = e.what();
    EXPECT_NE(text.find("depression filling on a DEM of 33000 x 33000 cells: 1089000000 cells are more than the GPU "
                        "path's 1073741822 (32-bit cell indices); run it on the CPU"),
              std::string::npos)
        << text;
  }
}
