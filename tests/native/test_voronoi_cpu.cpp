// The CPU backend of the plane Voronoi raster against the brute-force reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "voronoi/voronoi_reference.h"
#include "voronoi_cases.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;
using gpugeo::testing::VoronoiCase;

namespace {

struct Labels
{
  std::vector<int32_t> site;
  std::vector<float> distance;
};

Labels runCpu(const VoronoiCase& c, int64_t bandRows = 0, int threads = 2, LabelStats* stats = nullptr)
{
  auto labeller = makeLabeller(Backend::Cpu, c.grid, c.sites(), LabellerOptions{threads, 0}, RunControl{});
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
  if (stats)
    *stats = labeller->stats();
  return out;
}

void expectEqualToReference(const VoronoiCase& c, const Labels& got)
{
  const ReferenceLabels ref = referenceLabels(c.grid, c.sites(), 0, c.grid.height);
  int64_t mismatches = 0;
  for (size_t i = 0; i < ref.site.size(); ++i)
  {
    if (got.site[i] != ref.site[i] || std::memcmp(&got.distance[i], &ref.distance[i], sizeof(float)) != 0)
    {
      if (++mismatches <= 5)
        ADD_FAILURE() << c.name << ": pixel (col " << i % c.grid.width << ", row " << i / c.grid.width << ") got site "
                      << got.site[i] << " at " << got.distance[i] << ", reference site " << ref.site[i] << " at "
                      << ref.distance[i];
    }
  }
  EXPECT_EQ(mismatches, 0) << c.name;
}

}  // namespace

TEST(VoronoiCpu, MatchesBruteForceOnRandomAndDegenerateInputs)
{
  for (const VoronoiCase& c : gpugeo::testing::standardCases())
    expectEqualToReference(c, runCpu(c));
}

TEST(VoronoiCpu, BandsAndThreadCountsDoNotChangeTheResult)
{
  const VoronoiCase c = gpugeo::testing::uniformCase(7, 333, 211, 700);
  const Labels whole = runCpu(c, 0, 1);
  for (int64_t band : {1, 7, 64, 100})
    for (int threads : {1, 3})
    {
      const Labels banded = runCpu(c, band, threads);
      EXPECT_EQ(banded.site, whole.site) << c.name << " band=" << band << " threads=" << threads;
      EXPECT_EQ(0, std::memcmp(banded.distance.data(), whole.distance.data(), whole.distance.size() * sizeof(float)))
        << c.name << " band=" << band << " threads=" << threads;
    }
}

TEST(VoronoiCpu, TiesGoToTheLowestIndexAndAreRefinedInDouble)
{
  // Two sites symmetric about the column of pixel centres x = 10.5: every pixel of that column is
  // an exact tie, which must go to the lower index, whatever the input order.
  const Grid grid{0.0, 20.0, 1.0, 21, 20};
  for (int order = 0; order < 2; ++order)
  {
    std::vector<double> x = {7.5, 13.5}, y = {10.0, 10.0};
    if (order == 1)
    {
      std::swap(x[0], x[1]);
    }
    VoronoiCase c{"mirror pair order=" + std::to_string(order), grid, x, y};
    LabelStats stats;
    const Labels got = runCpu(c, 0, 2, &stats);
    for (int64_t row = 0; row < grid.height; ++row)
      EXPECT_EQ(got.site[row * grid.width + 10], 0) << c.name << " row " << row;
    EXPECT_GE(stats.refinedPixels, grid.height) << c.name;
    expectEqualToReference(c, got);
  }
}

TEST(VoronoiCpu, DenseClustersUseTheTreeSearchAndStayExact)
{
  const VoronoiCase c = gpugeo::testing::clusteredCase(33, 180, 120, 30000);
  LabelStats stats;
  const Labels got = runCpu(c, 0, 2, &stats);
  EXPECT_GT(stats.denseTiles, 0) << c.name;
  EXPECT_GT(stats.splitTiles, 0) << c.name;
  EXPECT_EQ(stats.uniqueSites, 30000) << c.name;
  expectEqualToReference(c, got);
}

TEST(VoronoiCpu, DuplicatesAreDroppedFromTheTreeKeepingTheLowestIndex)
{
  VoronoiCase c = gpugeo::testing::uniformCase(51, 50, 50, 10);
  for (int i = 0; i < 10; ++i)
  {
    c.x.insert(c.x.begin(), c.x[9]);
    c.y.insert(c.y.begin(), c.y[9]);
  }
  LabelStats stats;
  const Labels got = runCpu(c, 0, 2, &stats);
  EXPECT_EQ(stats.uniqueSites, 10) << c.name;
  expectEqualToReference(c, got);
}

TEST(VoronoiCpu, DuplicatesApartInTheCurveOrderAreDroppedToo)
{
  // Sites 0 and 2 are equal, with site 1 (1e-9 pixel away, the same curve key) sorted between them.
  VoronoiCase c{"duplicates apart", Grid{0.0, 50.0, 1.0, 50, 50}, {10.0, 10.0 + 1e-9, 10.0, 40.0}, {10.0, 10.0, 10.0, 40.0}};
  LabelStats stats;
  const Labels got = runCpu(c, 0, 2, &stats);
  EXPECT_EQ(stats.uniqueSites, 3) << c.name;
  expectEqualToReference(c, got);
}

TEST(VoronoiCpu, RowsOutsideTheGridAreRefused)
{
  const VoronoiCase c = gpugeo::testing::uniformCase(73, 20, 10, 5);
  auto labeller = makeLabeller(Backend::Cpu, c.grid, c.sites(), LabellerOptions{2, 0}, RunControl{});
  std::vector<int32_t> site(400);
  EXPECT_THROW(labeller->labelRows(5, 6, site.data(), nullptr, RunControl{}), InvalidInput);
  EXPECT_THROW(labeller->labelRows(-1, 2, site.data(), nullptr, RunControl{}), InvalidInput);
}

// Against the true Euclidean distances, computed in long double from the CRS coordinates: a label
// may differ only at a near tie, within the bound stated in voronoi_raster.h.
TEST(VoronoiCpu, AgreesWithExactDistancesExceptWithinTheNearTieBound)
{
  std::vector<VoronoiCase> cases = {
    gpugeo::testing::uniformCase(61, 160, 120, 400, 512345.25, 4123456.75, 0.5),
    gpugeo::testing::uniformCase(62, 128, 128, 1000, 0.0, 0.0, 1.0, 50.0),
    gpugeo::testing::latticeCase(63, 90, 70, 300),
  };
  for (const VoronoiCase& c : cases)
  {
    const Labels got = runCpu(c);
    const long double ps = c.grid.pixelSize;
    int64_t differing = 0;
    for (int64_t row = 0; row < c.grid.height; ++row)
      for (int64_t col = 0; col < c.grid.width; ++col)
      {
        const long double px = c.grid.originX + (col + 0.5L) * ps;
        const long double py = c.grid.originY - (row + 0.5L) * ps;
        auto dist = [&](size_t s) {
          const long double dx = px - c.x[s], dy = py - c.y[s];
          return std::sqrt(dx * dx + dy * dy) / ps;
        };
        size_t best = 0;
        for (size_t s = 1; s < c.x.size(); ++s)
          if (dist(s) < dist(best))
            best = s;
        const size_t ours = static_cast<size_t>(got.site[row * c.grid.width + col]);
        if (ours == best)
          continue;
        ++differing;
        const long double gap = dist(ours) - dist(best);
        auto frame = [&](size_t s) {
          return std::fabs((c.x[s] - c.grid.originX) / ps) + std::fabs((c.grid.originY - c.y[s]) / ps) + 1;
        };
        // The long double reference itself errs by about 2^-63 of the CRS coordinates' size.
        const long double referenceError = 8 * std::ldexp(1.0L, -63) *
                                           (std::fabs(c.grid.originX) + std::fabs(c.grid.originY) + 1) / ps;
        const long double bound = kNearTieRelative * (2 * std::max(frame(ours), frame(best)) + dist(best)) + referenceError;
        EXPECT_LE(gap, bound) << c.name << " pixel (" << col << ", " << row << "): site " << ours << " vs exact "
                              << best;
      }
    // Only near ties may differ: a handful at most.
    EXPECT_LE(differing, c.grid.pixelCount() / 100) << c.name;
  }
}

TEST(VoronoiCpu, CancelStopsWithCanceled)
{
  const VoronoiCase c = gpugeo::testing::uniformCase(71, 512, 512, 5000);
  auto labeller = makeLabeller(Backend::Cpu, c.grid, c.sites(), LabellerOptions{2, 0}, RunControl{});
  std::vector<int32_t> site(static_cast<size_t>(c.grid.pixelCount()));
  std::atomic<int> polls{0};
  RunControl control;
  control.canceled = [&] { return ++polls > 3; };
  EXPECT_THROW(labeller->labelRows(0, c.grid.height, site.data(), nullptr, control), Canceled);
}

TEST(VoronoiCpu, DistanceIsOptional)
{
  const VoronoiCase c = gpugeo::testing::uniformCase(72, 77, 55, 30);
  auto labeller = makeLabeller(Backend::Cpu, c.grid, c.sites(), LabellerOptions{2, 0}, RunControl{});
  std::vector<int32_t> site(static_cast<size_t>(c.grid.pixelCount()), -1);
  labeller->labelRows(0, c.grid.height, site.data(), nullptr, RunControl{});
  EXPECT_EQ(site, referenceLabels(c.grid, c.sites(), 0, c.grid.height).site);
}

TEST(VoronoiValidate, RefusesBadInputWithAClearMessage)
{
  const std::vector<double> x = {1.0, 2.0}, y = {1.0, 2.0};
  const Sites two{x.data(), y.data(), 2};
  auto expectInvalid = [](const Grid& grid, const Sites& sites, const std::string& words) {
    try
    {
      validate(grid, sites);
      ADD_FAILURE() << "no error; expected one mentioning '" << words << "'";
    }
    catch (const InvalidInput& e)
    {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expectInvalid(Grid{0, 0, 0.0, 10, 10}, two, "pixel size");
  expectInvalid(Grid{0, 0, -1.0, 10, 10}, two, "pixel size");
  expectInvalid(Grid{0, 0, std::nan(""), 10, 10}, two, "pixel size");
  expectInvalid(Grid{0, 0, 1.0, 0, 10}, two, "no area");
  expectInvalid(Grid{0, 0, 1.0, 65536, 32769}, two, "2^31");
  expectInvalid(Grid{0, 0, 1.0, 10, 10}, Sites{x.data(), y.data(), 0}, "no sites");
  const std::vector<double> bad = {1.0, std::numeric_limits<double>::infinity()};
  expectInvalid(Grid{0, 0, 1.0, 10, 10}, Sites{bad.data(), y.data(), 2}, "site 2");
  const std::vector<double> far = {1.0, 1e300};
  expectInvalid(Grid{0, 0, 1.0, 10, 10}, Sites{far.data(), y.data(), 2}, "1e15 pixels");
  EXPECT_NO_THROW(validate(Grid{0, 0, 1.0, 65536, 32768}, two));
}
