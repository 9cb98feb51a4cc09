// The allocation to lines and polygons on the CPU against brute force: every pixel against every
// segment, interiors by an even-odd count per pixel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/errors.h"
#include "feature_cases.h"
#include "voronoi/detail/feature_index.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;
using gpugeo::testing::FeatureCase;
using gpugeo::testing::Reference;

namespace {

struct Result
{
  std::vector<int32_t> site;
  std::vector<float> distance;
  LabelStats stats;
};

Result label(const FeatureCase& c, PolygonInterior interior, int64_t bandRows = 0, int threads = 2)
{
  FeatureLabellerOptions options;
  options.threads = threads;
  options.interior = interior;
  auto labeller = makeFeatureLabeller(Backend::Cpu, c.grid, c.sites(), options, RunControl{});
  Result out;
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
  return out;
}

void expectReference(const FeatureCase& c, const Result& got, const Reference& ref)
{
  int64_t mismatches = 0;
  for (size_t i = 0; i < ref.site.size(); ++i)
    if (got.site[i] != ref.site[i] || std::memcmp(&got.distance[i], &ref.distance[i], sizeof(float)) != 0)
      if (++mismatches <= 5)
        ADD_FAILURE() << c.name << ": pixel (col " << i % c.grid.width << ", row " << i / c.grid.width << ") got "
                      << got.site[i] << " at " << got.distance[i] << ", brute force " << ref.site[i] << " at "
                      << ref.distance[i];
  EXPECT_EQ(mismatches, 0) << c.name;
}

// A square ring (counter-clockwise or not) in CRS units around (cx, cy) of half-side r.
std::vector<std::pair<double, double>> square(double cx, double cy, double r, bool reverse = false)
{
  std::vector<std::pair<double, double>> ring{{cx - r, cy - r}, {cx + r, cy - r}, {cx + r, cy + r}, {cx - r, cy + r},
                                              {cx - r, cy - r}};
  if (reverse)
    std::reverse(ring.begin(), ring.end());
  return ring;
}

// Polygons: squares with holes, a multipolygon of two parts, random star-shaped rings (some open,
// some self-crossing), overlapping features, one polygon reaching beyond the grid.
FeatureCase polygonCase(unsigned seed)
{
  FeatureCase c;
  c.name = "polygons " + std::to_string(seed);
  c.polygons = true;
  c.grid = Grid{1000.0, 2000.0, 1.0, 137, 101};
  int part = 0;
  c.addPath(0, square(1030.2, 1950.3, 20.0), part);
  c.addPath(0, square(1030.2, 1950.3, 8.5, true), part++);  // a hole
  c.addPath(1, square(1090.0, 1930.0, 6.0), part++);        // two parts of feature 1
  c.addPath(1, square(1110.5, 1920.5, 9.0), part++);
  c.addPath(2, square(1095.0, 1935.0, 15.0), part++);  // overlaps feature 1: 1 wins inside both
  c.addPath(3, square(1160.0, 1990.0, 40.0), part++);  // beyond the grid's top-right corner
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int f = 4; f < 14; ++f)
  {
    const double cx = 1000.0 + 137.0 * u(rng), cy = 2000.0 - 101.0 * u(rng), r = 3.0 + 12.0 * u(rng);
    const int n = 3 + int(8 * u(rng));
    std::vector<std::pair<double, double>> ring;
    for (int i = 0; i < n; ++i)
    {
      const double a = 2.0 * M_PI * (i + 0.8 * u(rng)) / n, rr = r * (0.4 + 0.6 * u(rng));
      ring.emplace_back(cx + rr * std::cos(a), cy + rr * std::sin(a));
    }
    if (f % 3 == 0)
      std::swap(ring[0], ring[n / 2]);  // self-crossing
    if (f % 2 == 0)
      ring.push_back(ring.front());  // closed; the others are left open
    c.addPath(f, ring, part++);
  }
  return c;
}

TEST(FeatureAllocation, RandomLinesMatchBruteForce)
{
  for (unsigned seed : {1u, 2u, 3u})
  {
    const FeatureCase c = gpugeo::testing::randomLines("lines " + std::to_string(seed), 123, 97, 40, 9, seed);
    const Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
    const Result got = label(c, PolygonInterior::Zero);
    expectReference(c, got, ref);
    EXPECT_EQ(got.stats.uniqueSites, 40);
    EXPECT_GT(got.stats.tiles, 0);
  }
}

// The CPU labels with AVX2 vectors where the processor has them, else with the same vector code
// compiled for any x86-64: both must give brute force's bits (on a machine without AVX2 this runs
// the second form twice).
TEST(FeatureAllocation, WithAndWithoutAvx2TheSameBits)
{
  const FeatureCase lines = gpugeo::testing::randomLines("lines 4", 150, 111, 60, 12, 4);
  const FeatureCase polygons = polygonCase(7);
  const Reference lineRef = gpugeo::testing::bruteForce(lines, PolygonInterior::Zero);
  const Reference polygonRef = gpugeo::testing::bruteForce(polygons, PolygonInterior::Zero);
  for (bool avx2 : {false, true})
  {
    const bool before = voronoi::detail::allowAvx2Labelling(avx2);
    expectReference(lines, label(lines, PolygonInterior::Zero, 40), lineRef);
    expectReference(polygons, label(polygons, PolygonInterior::Zero), polygonRef);
    voronoi::detail::allowAvx2Labelling(before);
  }
}

TEST(FeatureAllocation, PolygonsMatchBruteForceInsideAndBoundary)
{
  for (unsigned seed : {5u, 6u})
  {
    const FeatureCase c = polygonCase(seed);
    for (PolygonInterior interior : {PolygonInterior::Zero, PolygonInterior::Boundary})
    {
      const Reference ref = gpugeo::testing::bruteForce(c, interior);
      expectReference(c, label(c, interior), ref);
    }
  }
  // Inside: distance 0, the hole not, the overlap to the lower index.
  const FeatureCase c = polygonCase(5);
  const Result zero = label(c, PolygonInterior::Zero);
  auto at = [&](const Result& r, double x, double y) {
    const int64_t col = int64_t(std::floor(x - c.grid.originX)), row = int64_t(std::floor(c.grid.originY - y));
    return std::make_pair(r.site[size_t(row * c.grid.width + col)], r.distance[size_t(row * c.grid.width + col)]);
  };
  EXPECT_EQ(at(zero, 1015.0, 1950.0), std::make_pair(0, 0.f));        // in feature 0's shell
  EXPECT_GT(at(zero, 1030.5, 1950.5).second, 7.f);                     // in its hole: 8.5 from the hole's ring
  EXPECT_EQ(at(zero, 1090.0, 1930.0), std::make_pair(1, 0.f));        // in both 1 and 2
  EXPECT_EQ(at(zero, 1105.5, 1945.5), std::make_pair(2, 0.f));        // in 2 only
  const Result boundary = label(c, PolygonInterior::Boundary);
  EXPECT_NEAR(at(boundary, 1015.5, 1950.5).second, 5.3, 1e-5);        // 1015.5 - 1010.2 from the shell's left side
}

TEST(FeatureAllocation, TiesGoToTheLowestFeature)
{
  // Horizontal lines at y = 30 and y = 41: row 28's centres (y = 35.5) are equidistant from both;
  // a copy of feature 1's line as feature 3 never wins; a zero-length segment and a lone vertex.
  FeatureCase c;
  c.name = "ties";
  c.grid = Grid{0.0, 64.0, 1.0, 64, 64};
  c.addPath(1, {{-5.0, 41.0}, {70.0, 41.0}});
  c.addPath(0, {{-5.0, 30.0}, {70.0, 30.0}});
  c.addPath(2, {{10.0, 10.0}, {10.0, 10.0}});
  c.addPath(3, {{70.0, 41.0}, {-5.0, 41.0}});
  c.addPath(4, {{50.0, 10.0}});
  const Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
  const Result got = label(c, PolygonInterior::Zero);
  expectReference(c, got, ref);
  for (int64_t col = 20; col < 40; ++col)
  {
    EXPECT_EQ(got.site[size_t(28 * 64 + col)], 0);  // the tie
    EXPECT_EQ(got.distance[size_t(28 * 64 + col)], 5.5f);
    EXPECT_EQ(got.site[size_t(27 * 64 + col)], 1);
  }
  for (int32_t s : got.site)
    EXPECT_NE(s, 3);
  EXPECT_EQ(got.site[size_t(53 * 64 + 10)], 2);  // at (10.5, 10.5): the zero-length segment
  EXPECT_EQ(got.site[size_t(53 * 64 + 50)], 4);  // the lone vertex
  EXPECT_EQ(got.stats.uniqueSites, 5);
}

TEST(FeatureAllocation, SparseAndFarFeatures)
{
  // One short segment in a corner of a large grid (blocks far from it double their search), and
  // features far outside the grid on every side.
  FeatureCase c;
  c.name = "sparse";
  c.grid = Grid{0.0, 0.0, 1.0, 300, 200};
  c.addPath(0, {{3.2, -4.1}, {5.7, -2.2}});
  c.addPath(1, {{-4000.0, -100.0}, {-3000.0, -150.0}});
  c.addPath(2, {{150.0, 5000.0}, {200.0, 5000.0}, {250.0, 6000.0}});
  c.addPath(3, {{-1e6, -700.0}, {1e6, -700.0}});  // a long line below the grid
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 20.0);
  for (int f = 4; f < 304; ++f)  // a dense cluster in the top-left corner: small buckets
  {
    const double x = u(rng), y = -u(rng);
    c.addPath(f, {{x, y}, {x + 0.5, y - 0.3}});
  }
  const Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
  const Result got = label(c, PolygonInterior::Zero);
  expectReference(c, got, ref);
  EXPECT_GT(got.stats.splitTiles, 0);
}

TEST(FeatureAllocation, BandsThreadsAndLargeCoordinatesGiveTheSameResult)
{
  const FeatureCase c = gpugeo::testing::randomLines("utm lines", 211, 150, 150, 12, 9, 652000.0, 5810000.0, 0.25);
  const Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
  const Result whole = label(c, PolygonInterior::Zero, 0, 1);
  expectReference(c, whole, ref);
  const Result banded = label(c, PolygonInterior::Zero, 7, 2);
  EXPECT_EQ(banded.site, whole.site);
  EXPECT_EQ(std::memcmp(banded.distance.data(), whole.distance.data(), whole.distance.size() * sizeof(float)), 0);
  const FeatureCase p = polygonCase(7);
  const Reference pref = gpugeo::testing::bruteForce(p, PolygonInterior::Zero);
  expectReference(p, label(p, PolygonInterior::Zero, 13, 2), pref);
}

TEST(FeatureAllocation, DistancesAreTheTrueDistancesToTheSegments)
{
  // The contract's formula against long double arithmetic (1e-12 of the distance, or of a pixel).
  const FeatureCase c = gpugeo::testing::randomLines("accuracy", 90, 70, 25, 6, 11);
  const Reference ref = gpugeo::testing::bruteForce(c, PolygonInterior::Zero);
  double worst = 0.0;
  for (int64_t r = 0; r < c.grid.height; ++r)
    for (int64_t col = 0; col < c.grid.width; ++col)
    {
      const long double px = col + 0.5L, py = r + 0.5L;
      long double best = INFINITY;
      for (size_t p = 0; p < c.pathFeature.size(); ++p)
      {
        auto v = c.pixelPath(int64_t(p));
        if (v.size() == 1)
          v.push_back(v[0]);
        for (size_t i = 0; i + 1 < v.size(); ++i)
        {
          const long double ax = v[i].first, ay = v[i].second, dx = v[i + 1].first - ax, dy = v[i + 1].second - ay;
          const long double dd = dx * dx + dy * dy;
          long double t = dd > 0 ? ((px - ax) * dx + (py - ay) * dy) / dd : 0;
          t = std::max(0.0L, std::min(1.0L, t));
          const long double qx = ax + t * dx - px, qy = ay + t * dy - py;
          best = std::min(best, std::sqrt(qx * qx + qy * qy));
        }
      }
      const double ours = std::sqrt(ref.squared[size_t(r * c.grid.width + col)]);
      worst = std::max(worst, double(std::fabs((long double)ours - best) / (1.0L + best)));
    }
  EXPECT_LT(worst, 1e-12);
}

TEST(FeatureAllocation, BadInputIsRefused)
{
  const Grid grid{0.0, 10.0, 1.0, 10, 10};
  FeatureCase empty;
  empty.grid = grid;
  EXPECT_THROW(makeFeatureLabeller(Backend::Cpu, grid, empty.sites(), {}, RunControl{}), InvalidInput);
  FeatureCase none;  // a path without vertices only
  none.grid = grid;
  none.addPath(0, {});
  EXPECT_THROW(makeFeatureLabeller(Backend::Cpu, grid, none.sites(), {}, RunControl{}), InvalidInput);
  FeatureCase nan;
  nan.grid = grid;
  nan.addPath(0, {{1.0, 1.0}, {NAN, 2.0}});
  EXPECT_THROW(makeFeatureLabeller(Backend::Cpu, grid, nan.sites(), {}, RunControl{}), InvalidInput);
  FeatureCase far;
  far.grid = grid;
  far.addPath(0, {{1.0, 1.0}, {1e17, 2.0}});
  EXPECT_THROW(makeFeatureLabeller(Backend::Cpu, grid, far.sites(), {}, RunControl{}), InvalidInput);
  FeatureCase wrong;
  wrong.grid = grid;
  wrong.addPath(0, {{1.0, 1.0}});
  wrong.pathFeature[0] = 5;
  EXPECT_THROW(makeFeatureLabeller(Backend::Cpu, grid, wrong.sites(), {}, RunControl{}), InvalidInput);
  FeatureCase ok;
  ok.grid = grid;
  ok.addPath(0, {{1.0, 1.0}});
  EXPECT_THROW(makeFeatureLabeller(Backend::Auto, grid, ok.sites(), {}, RunControl{}), InvalidInput);
  auto labeller = makeFeatureLabeller(Backend::Cpu, grid, ok.sites(), {}, RunControl{});
  std::vector<int32_t> site(100);
  EXPECT_THROW(labeller->labelRows(5, 6, site.data(), nullptr, RunControl{}), InvalidInput);
}

TEST(FeatureAllocation, CancelStopsTheRun)
{
  const FeatureCase c = gpugeo::testing::randomLines("cancel", 400, 400, 100, 5, 4);
  auto labeller = makeFeatureLabeller(Backend::Cpu, c.grid, c.sites(), {}, RunControl{});
  std::vector<int32_t> site(static_cast<size_t>(c.grid.pixelCount()));
  RunControl canceled;
  canceled.canceled = [] { return true; };
  EXPECT_THROW(labeller->labelRows(0, c.grid.height, site.data(), nullptr, canceled), Canceled);
}

}  // namespace
