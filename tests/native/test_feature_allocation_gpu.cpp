// The allocation to lines and polygons: the CUDA backend against the CPU backend (identical labels
// and distance bits) and against brute force on the small cases. Skipped where no GPU can be used.
#include <gtest/gtest.h>

#include <cstring>

#include "core/backend.h"
#include "core/errors.h"
#include "feature_cases.h"
#include "gpu_test_size.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;
using gpugeo::testing::FeatureCase;

namespace {

#define SKIP_WITHOUT_GPU()                                   \
  if (!probeGpu().usable)                                    \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

struct Result
{
  std::vector<int32_t> site;
  std::vector<float> distance;
  LabelStats stats;
  std::vector<std::string> warnings;
};

Result label(Backend backend, const FeatureCase& c, PolygonInterior interior, int64_t bandRows = 0,
             std::size_t budget = 0, bool withDistance = true)
{
  FeatureLabellerOptions options;
  options.threads = 2;
  options.interior = interior;
  options.gpuMemoryBudget = budget;
  auto labeller = makeFeatureLabeller(backend, c.grid, c.sites(), options, RunControl{});
  Result out;
  out.site.assign(static_cast<size_t>(c.grid.pixelCount()), -7);
  out.distance.assign(out.site.size(), -7.f);
  if (bandRows <= 0)
    bandRows = c.grid.height;
  for (int64_t row = 0; row < c.grid.height; row += bandRows)
  {
    const int64_t rows = std::min(bandRows, c.grid.height - row);
    labeller->labelRows(row, rows, out.site.data() + row * c.grid.width,
                        withDistance ? out.distance.data() + row * c.grid.width : nullptr, RunControl{});
  }
  out.stats = labeller->stats();
  out.warnings = labeller->warnings();
  return out;
}

void expectSame(const std::string& name, const Result& gpu, const Result& cpu, int64_t width, bool withDistance = true)
{
  int64_t mismatches = 0;
  for (size_t i = 0; i < cpu.site.size(); ++i)
    if (gpu.site[i] != cpu.site[i] ||
        (withDistance && std::memcmp(&gpu.distance[i], &cpu.distance[i], sizeof(float)) != 0))
      if (++mismatches <= 5)
        ADD_FAILURE() << name << ": pixel (col " << i % width << ", row " << i / width << ") GPU " << gpu.site[i]
                      << " at " << gpu.distance[i] << ", CPU " << cpu.site[i] << " at " << cpu.distance[i];
  EXPECT_EQ(mismatches, 0) << name;
}

FeatureCase squares(int64_t side, int count, unsigned seed)
{
  FeatureCase c;
  c.name = "polygons";
  c.polygons = true;
  c.grid = Grid{300000.0, 5000000.0, 1.5, side, side * 3 / 4};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int f = 0; f < count; ++f)
  {
    const double cx = 300000.0 + 1.5 * side * u(rng), cy = 5000000.0 - 1.5 * side * 0.75 * u(rng);
    const double r = 2.0 + 40.0 * u(rng);
    c.addPath(f, {{cx - r, cy - r}, {cx + r, cy - r * 0.7}, {cx + r * 0.8, cy + r}, {cx - r, cy + r}}, 2 * f);
    if (f % 4 == 0)  // a hole
      c.addPath(f, {{cx - r / 3, cy - r / 3}, {cx - r / 3, cy + r / 3}, {cx + r / 3, cy + r / 3}, {cx + r / 3, cy - r / 3}},
                2 * f);
    if (f % 5 == 0)  // a second part
      c.addPath(f, {{cx + 2 * r, cy}, {cx + 3 * r, cy}, {cx + 2.5 * r, cy + r}}, 2 * f + 1);
  }
  return c;
}

TEST(FeatureAllocationGpu, LinesMatchTheCpuAndBruteForce)
{
  SKIP_WITHOUT_GPU();
  for (unsigned seed : {1u, 2u})
  {
    const FeatureCase c = gpugeo::testing::randomLines("lines", 123, 97, 40, 9, seed);
    const gpugeo::testing::Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
    const Result gpu = label(Backend::Gpu, c, PolygonInterior::Zero);
    Result reference;
    reference.site = ref.site;
    reference.distance = ref.distance;
    expectSame(c.name + " vs brute force", gpu, reference, c.grid.width);
    const Result cpu = label(Backend::Cpu, c, PolygonInterior::Zero);
    expectSame(c.name, gpu, cpu, c.grid.width);
    EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites);
    EXPECT_EQ(gpu.stats.tiles, cpu.stats.tiles);
    EXPECT_EQ(gpu.stats.splitTiles, cpu.stats.splitTiles);
  }
}

TEST(FeatureAllocationGpu, ManyLinesInBandsMatchTheCpu)
{
  SKIP_WITHOUT_GPU();
  const int64_t side = gpugeo::testing::gpuSide(1500);
  const FeatureCase c = gpugeo::testing::randomLines("many lines", side, side * 2 / 3,
                                                     int(gpugeo::testing::gpuCount(3000)), 40, 3);
  const Result cpu = label(Backend::Cpu, c, PolygonInterior::Zero);
  expectSame(c.name, label(Backend::Gpu, c, PolygonInterior::Zero), cpu, c.grid.width);
  expectSame(c.name + " in bands of 50 rows", label(Backend::Gpu, c, PolygonInterior::Zero, 50), cpu, c.grid.width);
  expectSame(c.name + " without distances", label(Backend::Gpu, c, PolygonInterior::Zero, 0, 0, false), cpu,
             c.grid.width, false);
  // A budget of a few rows: the band shrinks to it.
  const Result small = label(Backend::Gpu, c, PolygonInterior::Zero, 0, std::size_t(c.grid.width) * 12 * 16);
  expectSame(c.name + " in small bands", small, cpu, c.grid.width);
}

TEST(FeatureAllocationGpu, PolygonsInsideAndBoundaryMatchTheCpu)
{
  SKIP_WITHOUT_GPU();
  const FeatureCase c = squares(gpugeo::testing::gpuSide(900), int(gpugeo::testing::gpuCount(400)), 5);
  for (PolygonInterior interior : {PolygonInterior::Zero, PolygonInterior::Boundary})
  {
    const Result cpu = label(Backend::Cpu, c, interior);
    const Result gpu = label(Backend::Gpu, c, interior, 40);
    expectSame(interior == PolygonInterior::Zero ? "polygons, inside 0" : "polygons, boundary", gpu, cpu, c.grid.width);
    EXPECT_EQ(gpu.stats.refinedPixels, cpu.stats.refinedPixels);
  }
}

TEST(FeatureAllocationGpu, SparseClusteredAndTiedFeaturesMatchTheCpu)
{
  SKIP_WITHOUT_GPU();
  // A few lines in one corner (blocks double their search), a pile of 2,000 copies of one segment
  // (lists overflow shared memory), lines on pixel edges (ties) and one far outside.
  FeatureCase c;
  c.name = "sparse and piled";
  c.grid = Grid{0.0, 0.0, 1.0, 700, 500};
  c.addPath(0, {{3.2, -4.1}, {5.7, -2.2}, {9.0, -9.0}});
  for (int f = 1; f <= 2000; ++f)
    c.addPath(f, {{600.25, -400.5}, {610.75, -420.0}});
  c.addPath(2001, {{-50.0, -250.0}, {800.0, -250.0}});
  c.addPath(2002, {{-50.0, -261.0}, {800.0, -261.0}});
  c.addPath(2003, {{5000.0, -100.0}, {5000.0, -300.0}});
  const Result cpu = label(Backend::Cpu, c, PolygonInterior::Zero);
  const Result gpu = label(Backend::Gpu, c, PolygonInterior::Zero);
  expectSame(c.name, gpu, cpu, c.grid.width);
  // The pile overflows the tile kernel's shared lists: those blocks took the per-block kernel.
  EXPECT_GT(gpu.stats.denseTiles, 0);
  EXPECT_EQ(cpu.stats.denseTiles, 0);
}

TEST(FeatureAllocationGpu, AClusterFarFromMostPixelsMatchesTheCpu)
{
  SKIP_WITHOUT_GPU();
  // 6,000 short segments in a 60 x 60 corner of a 900 x 700 grid: small buckets, most blocks far
  // from every segment (their search descends the pyramid), long lists near the cluster's edge.
  FeatureCase c;
  c.name = "cluster";
  c.grid = Grid{0.0, 0.0, 1.0, gpugeo::testing::gpuSide(900), gpugeo::testing::gpuSide(700)};
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0.0, 60.0), step(-2.0, 2.0);
  const int count = int(gpugeo::testing::gpuCount(6000));
  for (int f = 0; f < count; ++f)
  {
    const double x = 700.0 + u(rng), y = -500.0 - u(rng);
    c.addPath(f, {{x, y}, {x + step(rng), y + step(rng)}});
  }
  const Result cpu = label(Backend::Cpu, c, PolygonInterior::Zero);
  const Result gpu = label(Backend::Gpu, c, PolygonInterior::Zero);
  expectSame(c.name, gpu, cpu, c.grid.width);
  EXPECT_EQ(gpu.stats.tiles, cpu.stats.tiles);
  EXPECT_EQ(gpu.stats.splitTiles, cpu.stats.splitTiles);
  EXPECT_GT(cpu.stats.splitTiles, 0);
}

TEST(FeatureAllocationGpu, ASearchThatOverflowsItsStackStillFindsEveryCandidate)
{
  SKIP_WITHOUT_GPU();
  // A dense field of short segments (one per 4 x 4 pixels) left of x = 1000 and one lone segment
  // near x = 2000: the empty blocks near x = 1100 first find the lone segment up the pyramid, so
  // their first reach (about 900 pixels) spans the whole field and their stack of cells overflows
  // before nearer segments shrink it (found by review; the GPU must then visit the square).
  FeatureCase c;
  c.name = "stack overflow";
  const int64_t side = 2048;
  c.grid = Grid{0.0, 0.0, 1.0, side, side};
  int f = 0;
  for (int y = 0; y < side; y += 4)
    for (int x = 0; x < 1000; x += 4)
    {
      c.addPath(f, {{x + 1.0, -(y + 1.0)}, {x + 2.5, -(y + 2.0)}});
      ++f;
    }
  c.addPath(f, {{2000.0, -1000.0}, {2001.0, -1001.0}});
  const Result cpu = label(Backend::Cpu, c, PolygonInterior::Zero);
  expectSame(c.name, label(Backend::Gpu, c, PolygonInterior::Zero), cpu, c.grid.width);
}

}  // namespace
