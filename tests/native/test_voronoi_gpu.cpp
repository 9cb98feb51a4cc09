// The CUDA backend against the CPU backend: identical labels and identical distance bits. Skipped
// (not failed) where no GPU can be used.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/backend.h"
#include "core/errors.h"
#include "gpu_test_size.h"
#include "voronoi_cases.h"

#ifdef GPUGEO_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace gpugeo;
using namespace gpugeo::voronoi;
using gpugeo::testing::VoronoiCase;
using gpugeo::testing::gpuCount;
using gpugeo::testing::gpuSide;

namespace {

struct Labels
{
  std::vector<int32_t> site;
  std::vector<float> distance;
  LabelStats stats;
  std::vector<std::string> warnings;
};

// `count` sites drawn uniformly in the w x h pixels at (x0, y0) of the grid (rows down), added to `c`.
void addUniform(VoronoiCase& c, int count, double x0, double y0, double w, double h, std::mt19937_64& rng)
{
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < count; ++i)
  {
    c.x.push_back(x0 + w * u(rng));
    c.y.push_back(-(y0 + h * u(rng)));
  }
}

Labels run(Backend backend, const VoronoiCase& c, int64_t bandRows = 0, std::size_t gpuBudget = 0)
{
  auto labeller = makeLabeller(backend, c.grid, c.sites(), LabellerOptions{2, gpuBudget}, RunControl{});
  Labels out;
  out.site.assign(static_cast<size_t>(c.grid.pixelCount()), -7);
  out.distance.assign(out.site.size(), -7.f);
  if (bandRows <= 0)
    bandRows = c.grid.height;
  for (int64_t row = 0; row < c.grid.height; row += bandRows)
  {
    const int64_t rows = std::min(bandRows, c.grid.height - row);
    labeller->labelRows(row, rows, out.site.data() + row * c.grid.width, out.distance.data() + row * c.grid.width,
                        RunControl{});
  }
  out.stats = labeller->stats();
  out.warnings = labeller->warnings();
  return out;
}

void expectIdentical(const VoronoiCase& c, const Labels& gpu, const Labels& cpu)
{
  int64_t mismatches = 0;
  for (size_t i = 0; i < cpu.site.size(); ++i)
    if (gpu.site[i] != cpu.site[i] || std::memcmp(&gpu.distance[i], &cpu.distance[i], sizeof(float)) != 0)
      if (++mismatches <= 5)
        ADD_FAILURE() << c.name << ": pixel (col " << i % c.grid.width << ", row " << i / c.grid.width << ") GPU site "
                      << gpu.site[i] << " at " << gpu.distance[i] << ", CPU site " << cpu.site[i] << " at "
                      << cpu.distance[i];
  EXPECT_EQ(mismatches, 0) << c.name;
}

#define SKIP_WITHOUT_GPU()                                                      \
  if (!probeGpu().usable)                                                       \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

}  // namespace

TEST(VoronoiGpu, IdenticalToCpuOnRandomAndDegenerateInputs)
{
  SKIP_WITHOUT_GPU();
  for (const VoronoiCase& c : gpugeo::testing::standardCases())
  {
    const Labels cpu = run(Backend::Cpu, c);
    const Labels gpu = run(Backend::Gpu, c);
    expectIdentical(c, gpu, cpu);
    // Each backend counts its own method's tiles; the distinct sites are the same.
    EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
    EXPECT_GT(gpu.stats.tiles + gpu.stats.denseTiles, 0) << c.name;
  }
}

TEST(VoronoiGpu, IdenticalToCpuOnLargerGridsInBands)
{
  SKIP_WITHOUT_GPU();
  const std::vector<VoronoiCase> cases = {
    gpugeo::testing::uniformCase(101, gpuSide(2048), gpuSide(1536), 1000),
    gpugeo::testing::uniformCase(102, gpuSide(1500), gpuSide(1100), int(gpuCount(200000))),
    gpugeo::testing::clusteredCase(103, gpuSide(1024), gpuSide(768), int(gpuCount(100000))),
    gpugeo::testing::uniformCase(104, gpuSide(1024), gpuSide(1024), 5000, 612345.5, 5123456.25, 0.25, 20.0),
    gpugeo::testing::clusteredCase(105, gpuSide(1200), gpuSide(900), int(gpuCount(300000))),
  };
  for (const VoronoiCase& c : cases)
  {
    const Labels cpu = run(Backend::Cpu, c, 256);
    const Labels gpu = run(Backend::Gpu, c, 256);
    expectIdentical(c, gpu, cpu);
    EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
  }
  // Bands that do not start on a bucket row (the plugin's bands of wide rasters), where roots are
  // labelled by the direct scan (buckets of 4 pixels holding 1 to 2 sites).
  const VoronoiCase& dense = cases[1];
  const Labels cpu = run(Backend::Cpu, dense);
  const Labels gpu = run(Backend::Gpu, dense, 50);
  if (!gpugeo::testing::gpuTestsSmall())
    EXPECT_GT(gpu.stats.denseTiles, 0) << dense.name;
  expectIdentical(dense, gpu, cpu);
}

// 500,000 sites or more, spread out or crowded, start overlapped (voronoi_cuda.cu): the sites go up
// in bands of rows, each indexed on arrival and each root of pixels labelled once the bands within
// its reach are there. The same labels and distance bits as the CPU's: uniform sites with some
// outside the grid, half the sites in a quarter of the area, sites crowded into the top rows (the
// lower bands wait for all), whole coordinates (ties, copies), 90 % of the sites in 1 % of the area,
// more sites than pixels; whole, and in bands of rows that cut across the bands of sites (of whole
// roots, and not).
TEST(VoronoiGpu, TheOverlappedStartOfManySitesMatchesTheCpu)
{
  SKIP_WITHOUT_GPU();
  std::vector<VoronoiCase> cases = {gpugeo::testing::uniformCase(201, 2048, 1536, 1200000, 0.0, 0.0, 1.0, 20.0)};
  std::mt19937_64 rng(203);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // 1,100,000 sites on 2048 x 2048: every `every`-th anywhere, the others in a square of `side`
  // pixels at (x0, y0).
  const auto concentrated = [&](const std::string& name, int every, double x0, double y0, double side) {
    VoronoiCase c;
    c.name = name;
    c.grid = Grid{0.0, 0.0, 1.0, 2048, 2048};
    for (int i = 0; i < 1100000; ++i)
    {
      const bool anywhere = i % every == 0;
      c.x.push_back(anywhere ? 2048 * u(rng) : x0 + side * u(rng));
      c.y.push_back(-(anywhere ? 2048 * u(rng) : y0 + side * u(rng)));
    }
    return c;
  };
  cases.push_back(concentrated("1,100,000 sites on 2048 x 2048, half of them in a quarter of the area", 2, 700, 900, 1024));
  VoronoiCase top;
  top.name = "1,100,000 sites in the top 600 rows of 2048 x 1536, ten elsewhere";
  top.grid = Grid{0.0, 0.0, 1.0, 2048, 1536};
  addUniform(top, 1100000, 0, 0, 2048, 600, rng);
  addUniform(top, 10, 0, 0, 2048, 1536, rng);
  cases.push_back(top);
  VoronoiCase whole;
  whole.name = "1,100,000 sites at whole coordinates of 2048 x 1536 (ties and copies)";
  whole.grid = Grid{0.0, 0.0, 1.0, 2048, 1536};
  std::uniform_int_distribution<int> cx(0, 2048), cy(0, 1536);
  for (int i = 0; i < 1100000; ++i)
  {
    whole.x.push_back(cx(rng));
    whole.y.push_back(-cy(rng));
  }
  cases.push_back(whole);
  // 90 % of the sites in 1 % of the area (crowded roots, about 24 sites a pixel) start overlapped
  // too (since 2026-12-07).
  cases.push_back(concentrated("1,100,000 sites on 2048 x 2048, 90 % of them in 1 % of the area", 10, 760, 1250, 205));
  EXPECT_GT(run(Backend::Gpu, cases.back()).stats.crowdedRoots, 0) << cases.back().name;
  // More sites than pixels everywhere: crowded roots labelled a pixel a thread, band by band.
  cases.push_back(gpugeo::testing::uniformCase(204, 1024, 1024, 1200000, 0.0, 0.0, 1.0, 3.0));
  for (const VoronoiCase& c : cases)
  {
    const Labels cpu = run(Backend::Cpu, c);
    const Labels gpu = run(Backend::Gpu, c);
    EXPECT_GE(gpu.stats.siteBands, 3) << c.name;
    EXPECT_GE(gpu.stats.labelPieces, 2) << c.name;  // rows labelled before the last band is there
    EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
    expectIdentical(c, gpu, cpu);
    expectIdentical(c, run(Backend::Gpu, c, 300), cpu);
    expectIdentical(c, run(Backend::Gpu, c, 320), cpu);  // bands of whole roots: the pieces' roots in each
  }
  EXPECT_GT(run(Backend::Gpu, cases.back()).stats.crowdedRoots, 0) << cases.back().name;
}

// Dense clusters overflow the tiles' lists: the tiles split (down to single pixels where need be).
// (2,700 sites in a blob of about a pixel: their root holds fewer sites than pixels, so it is cut
// into tiles, not labelled a pixel a thread.)
TEST(VoronoiGpu, DenseClustersSplitTheirTiles)
{
  SKIP_WITHOUT_GPU();
  const VoronoiCase c = gpugeo::testing::clusteredCase(33, 180, 120, 3000);
  const Labels cpu = run(Backend::Cpu, c);
  const Labels gpu = run(Backend::Gpu, c);
  EXPECT_GT(gpu.stats.splitTiles, 0) << c.name;
  EXPECT_EQ(gpu.stats.crowdedRoots, 0) << c.name;
  EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
  expectIdentical(c, gpu, cpu);
}

// Roots holding more sites than pixels are labelled a pixel a thread (crowdedKernel): the same labels
// and distance bits as the CPU's. A blob of 27,000 sites; sites on whole and half coordinates, four
// a pixel, a fifth of them copies (ties everywhere); a crowded strip beside empty columns of the same
// root (pixels there grow their rectangles far); a crowded root among few sites, where the buckets
// are 4 pixels; crowded corners with sites outside the grid; whole, and in bands of rows.
TEST(VoronoiGpu, CrowdedRootsAreLabelledAPixelAThread)
{
  SKIP_WITHOUT_GPU();
  std::vector<VoronoiCase> cases = {gpugeo::testing::clusteredCase(34, 180, 120, 30000),
                                    gpugeo::testing::latticeCase(35, 128, 96, 40000)};
  std::mt19937_64 rng(36);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  VoronoiCase strip;
  strip.name = "3 sites a pixel in the left 40 columns of 160 x 128";
  strip.grid = Grid{0.0, 0.0, 1.0, 160, 128};
  addUniform(strip, 3 * 40 * 128, 0, 0, 40, 128, rng);
  cases.push_back(strip);
  VoronoiCase sparse;
  sparse.name = "6,000 sites in one root of 2048 x 2048, 10,000 elsewhere (buckets of 4 pixels)";
  sparse.grid = Grid{0.0, 0.0, 1.0, 2048, 2048};
  for (int i = 0; i < 16000; ++i)
  {
    const bool crowdedRoot = i < 6000;
    sparse.x.push_back(crowdedRoot ? 640 + 64 * u(rng) : 2048 * u(rng));
    sparse.y.push_back(-(crowdedRoot ? 1280 + 64 * u(rng) : 2048 * u(rng)));
  }
  cases.push_back(sparse);
  VoronoiCase corners;
  corners.name = "crowded corners of 200 x 150, some sites outside the grid";
  corners.grid = Grid{0.0, 0.0, 1.0, 200, 150};
  for (int i = 0; i < 40000; ++i)
  {
    const double x = -3 + 30 * u(rng), y = -3 + 30 * u(rng);
    corners.x.push_back(i % 2 ? x : 200 - x);
    corners.y.push_back(-(i % 3 ? y : 150 - y));
  }
  cases.push_back(corners);
  for (const VoronoiCase& c : cases)
  {
    const Labels cpu = run(Backend::Cpu, c);
    const Labels gpu = run(Backend::Gpu, c);
    EXPECT_GT(gpu.stats.crowdedRoots, 0) << c.name;
    EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
    expectIdentical(c, gpu, cpu);
    expectIdentical(c, run(Backend::Gpu, c, 50), cpu);
  }
}

// Piles of exact copies (more than a tile's list in one bucket) are dropped before labelling: the
// lowest index of each pile keeps its pixels; -0.0 and 0.0 are one point.
TEST(VoronoiGpu, PilesOfCopiesGiveTheLowestIndex)
{
  SKIP_WITHOUT_GPU();
  VoronoiCase c = gpugeo::testing::uniformCase(115, 512, 384, 2000);
  c.name = "piles of copies";
  const double pile[3][2] = {{100.25, 200.5}, {0.0, 150.0}, {511.999, 383.999}};
  for (int i = 0; i < int(gpuCount(90000)); ++i)
  {
    const int k = i % 3;
    c.x.push_back(k == 1 && i % 2 ? -0.0 : pile[k][0]);
    c.y.push_back(pile[k][1]);
  }
  const Labels cpu = run(Backend::Cpu, c);
  const Labels gpu = run(Backend::Gpu, c);
  EXPECT_EQ(cpu.stats.uniqueSites, 2003) << c.name;
  EXPECT_EQ(gpu.stats.uniqueSites, cpu.stats.uniqueSites) << c.name;
  expectIdentical(c, gpu, cpu);
}

TEST(VoronoiGpu, ASmallMemoryBudgetSplitsTheWorkIntoBandsWithTheSameResult)
{
  SKIP_WITHOUT_GPU();
  const VoronoiCase c = gpugeo::testing::uniformCase(111, 1000, 900, 3000);
  const Labels cpu = run(Backend::Cpu, c);
  const Labels gpu = run(Backend::Gpu, c, 0, 1 << 20);
  expectIdentical(c, gpu, cpu);
}

#ifdef GPUGEO_WITH_CUDA
// A real out-of-memory: all but 64 MB of the GPU taken, a budget that asks for far more. The
// band buffers fail to allocate, the bands shrink with a warning, and the result is unchanged.
TEST(VoronoiGpu, OutOfMemoryShrinksTheBandsWithAWarning)
{
  SKIP_WITHOUT_GPU();
  if (gpugeo::testing::gpuTestsSmall())
    GTEST_SKIP() << "needs an input that fills the GPU's bands: not in the small mode";
  const VoronoiCase c = gpugeo::testing::uniformCase(114, 4096, 3072, 2000);
  const Labels cpu = run(Backend::Cpu, c);
  size_t freeBytes = 0, totalBytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&freeBytes, &totalBytes), cudaSuccess);
  void* hog = nullptr;
  const size_t keep = size_t(64) << 20;
  ASSERT_GT(freeBytes, keep);
  ASSERT_EQ(cudaMalloc(&hog, freeBytes - keep), cudaSuccess);
  Labels gpu;
  try
  {
    gpu = run(Backend::Gpu, c, 0, size_t(64) << 30);
  }
  catch (...)
  {
    cudaFree(hog);
    throw;
  }
  cudaFree(hog);
  ASSERT_FALSE(gpu.warnings.empty()) << "no out-of-memory warning";
  EXPECT_NE(gpu.warnings.front().find("ran out of memory"), std::string::npos) << gpu.warnings.front();
  expectIdentical(c, gpu, cpu);
}
#endif

TEST(VoronoiGpu, CancelStopsWithCanceled)
{
  SKIP_WITHOUT_GPU();
  const VoronoiCase c = gpugeo::testing::uniformCase(112, 1024, 1024, 1000);
  auto labeller = makeLabeller(Backend::Gpu, c.grid, c.sites(), LabellerOptions{2, 1 << 20}, RunControl{});
  std::vector<int32_t> site(static_cast<size_t>(c.grid.pixelCount()));
  int polls = 0;
  RunControl control;
  control.canceled = [&] { return ++polls > 2; };
  EXPECT_THROW(labeller->labelRows(0, c.grid.height, site.data(), nullptr, control), Canceled);
}

TEST(VoronoiGpu, WithoutAGpuTheGpuBackendIsRefusedWithTheReason)
{
  if (probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  const VoronoiCase c = gpugeo::testing::uniformCase(113, 10, 10, 3);
  try
  {
    makeLabeller(Backend::Gpu, c.grid, c.sites(), LabellerOptions{}, RunControl{});
    ADD_FAILURE() << "expected DeviceUnavailable";
  }
  catch (const DeviceUnavailable& e)
  {
    EXPECT_EQ(std::string(e.what()), probeGpu().reason);
  }
}
