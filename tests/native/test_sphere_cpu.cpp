// Spherical nearest-site labelling on the CPU: the indexed path equals the brute force bit for bit,
// and both equal the long-double reference except at stated near ties.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "sphere/detail/site_prep.h"
#include "sphere/qtm.h"
#include "sphere/sphere_nearest.h"
#include "sphere/sphere_reference.h"
#include "sphere_cases.h"

using namespace gpugeo;
using namespace gpugeo::sphere;
using gpugeo::sphere::cases::SiteCase;

namespace {

struct Labels
{
  std::vector<int32_t> site;
  std::vector<float> km;
};

Labels qtmLabels(const SiteCase& c, int level, NearestMethod method, Backend backend = Backend::Cpu)
{
  SphereOptions options;
  options.method = method;
  auto labeller = makeSphereLabeller(backend, c.sites(), options, RunControl{});
  Labels out;
  const int64_t count = int64_t(qtmCellCount(level));
  out.site.resize(std::size_t(count));
  out.km.resize(std::size_t(count));
  labeller->labelQtm(level, 0, count, out.site.data(), out.km.data(), RunControl{});
  return out;
}

// Our label against the long-double reference: equal, or a near tie within the stated bound.
void expectNearest(const SiteCase& c, const std::vector<reference::Point>& sites, const reference::Point& p,
                   int32_t label, const std::string& where)
{
  const int32_t ref = reference::nearest(sites, p);
  if (label == ref)
    return;
  const long double gap = reference::angle(p, sites[std::size_t(label)]) - reference::angle(p, sites[std::size_t(ref)]);
  ASSERT_LE(gap, (long double)kNearTieRadians) << c.name << " " << where << ": label " << label << ", nearest " << ref;
}

}  // namespace

TEST(SphereCpu, QtmIndexedEqualsBruteForceAndReference)
{
  for (const SiteCase& c : cases::standardCases())
    for (int level : {0, 3, 6})
    {
      const Labels brute = qtmLabels(c, level, NearestMethod::BruteGlobal);
      const Labels indexed = qtmLabels(c, level, NearestMethod::Indexed);
      ASSERT_EQ(brute.site, indexed.site) << c.name << " level " << level;
      ASSERT_EQ(brute.km, indexed.km) << c.name << " level " << level;
      const auto sites = reference::siteVectors(c.sites());
      const int64_t count = int64_t(qtmCellCount(level));
      const int64_t step = std::max<int64_t>(1, count / 4000);
      for (int64_t id = 0; id < count; id += step)
        expectNearest(c, sites, reference::qtmCentre(uint64_t(id), level), indexed.site[std::size_t(id)],
                      "level " + std::to_string(level) + " cell " + std::to_string(id));
    }
}

TEST(SphereCpu, RandomCellsAtHighLevels)
{
  const SiteCase c = cases::randomSites("random", 5000, 11);
  SphereOptions options;
  options.method = NearestMethod::Indexed;
  auto labeller = makeSphereLabeller(Backend::Cpu, c.sites(), options, RunControl{});
  const auto sites = reference::siteVectors(c.sites());
  std::mt19937_64 rng(5);
  for (int level : {9, 11, 13})
  {
    std::uniform_int_distribution<uint64_t> pick(0, qtmCellCount(level) - 200);
    for (int k = 0; k < 8; ++k)
    {
      const uint64_t first = pick(rng);
      std::vector<int32_t> site(200);
      labeller->labelQtm(level, first, 200, site.data(), nullptr, RunControl{});
      for (int i = 0; i < 200; ++i)
        expectNearest(c, sites, reference::qtmCentre(first + uint64_t(i), level), site[std::size_t(i)],
                      "level " + std::to_string(level) + " cell " + std::to_string(first + uint64_t(i)));
    }
  }
}

TEST(SphereCpu, GridLabelsEqualBruteForceAndReference)
{
  LonLatGrid grid;
  grid.west = -180.0;
  grid.north = 90.0;
  grid.pixelWidth = 2.5;
  grid.pixelHeight = 2.5;
  grid.width = 144;
  grid.height = 72;
  for (const SiteCase& c : cases::standardCases())
  {
    std::vector<int32_t> a(std::size_t(grid.width * grid.height)), b(a.size());
    std::vector<float> ka(a.size()), kb(a.size());
    SphereOptions brute, indexed;
    brute.method = NearestMethod::BruteGlobal;
    indexed.method = NearestMethod::Indexed;
    makeSphereLabeller(Backend::Cpu, c.sites(), brute, RunControl{})
      ->labelGridRows(grid, 0, grid.height, a.data(), ka.data(), RunControl{});
    auto labeller = makeSphereLabeller(Backend::Cpu, c.sites(), indexed, RunControl{});
    // in two bands, as the processing layer calls it
    labeller->labelGridRows(grid, 0, 30, b.data(), kb.data(), RunControl{});
    labeller->labelGridRows(grid, 30, grid.height - 30, b.data() + 30 * grid.width, kb.data() + 30 * grid.width,
                            RunControl{});
    ASSERT_EQ(a, b) << c.name;
    ASSERT_EQ(ka, kb) << c.name;
    const auto sites = reference::siteVectors(c.sites());
    for (int64_t r = 0; r < grid.height; r += 3)
      for (int64_t col = 0; col < grid.width; col += 5)
        expectNearest(c, sites, reference::gridPoint(grid, r, col), b[std::size_t(r * grid.width + col)],
                      "pixel " + std::to_string(col) + "," + std::to_string(r));
  }
}

TEST(SphereCpu, DistancesAreGreatCircleKilometres)
{
  // One site at the north pole: every cell's distance is the colatitude of its centre times R.
  const double lon[] = {0.0}, lat[] = {90.0};
  SiteCase c{"north pole", {0.0}, {90.0}};
  const Labels l = qtmLabels(c, 4, NearestMethod::Indexed);
  const auto pole = reference::fromLonLat(0, 90);
  for (uint64_t id = 0; id < qtmCellCount(4); ++id)
  {
    const double expected = double(reference::angle(reference::qtmCentre(id, 4), pole)) * kEarthRadiusKm;
    ASSERT_NEAR(l.km[std::size_t(id)], expected, expected * 1e-6 + 1e-3) << "cell " << id;
  }
  (void)lon;
  (void)lat;
}

TEST(SphereCpu, AllIdenticalSitesGiveTheLowestIndex)
{
  SiteCase c{"identical", std::vector<double>(20, -70.0), std::vector<double>(20, 12.0)};
  for (NearestMethod m : {NearestMethod::BruteGlobal, NearestMethod::Indexed})
  {
    const Labels l = qtmLabels(c, 5, m);
    for (int32_t s : l.site)
      ASSERT_EQ(s, 0);
  }
}

// Every exact duplicate leaves the tree, however many distinct sites share its Morton cell (40
// distinct sites centimetres apart, each three times, interleaved; -0 and +0 are one coordinate).
TEST(SphereCpu, EveryExactDuplicateLeavesTheTree)
{
  SiteCase c{"duplicates in one Morton cell", {}, {}};
  for (int copy = 0; copy < 3; ++copy)
    for (int i = 0; i < 40; ++i)
    {
      c.lon.push_back(10.0 + 1e-9 * i);
      c.lat.push_back(-5.0 - 1e-9 * (i % 7));
    }
  c.lon.insert(c.lon.end(), {0.0, -0.0});
  c.lat.insert(c.lat.end(), {-0.0, 0.0});
  const detail::PreparedSites prep = detail::prepareSites(c.sites(), 2, RunControl{});
  EXPECT_EQ(prep.treeCount, 41);
  for (int32_t original : prep.treeOriginal)
    EXPECT_TRUE(original < 40 || original == 120) << original;
  const Labels l = qtmLabels(c, 6, NearestMethod::Indexed);
  const Labels brute = qtmLabels(c, 6, NearestMethod::BruteGlobal);
  EXPECT_EQ(l.site, brute.site);
}

TEST(SphereCpu, StatsCountBlocksAndCandidates)
{
  const SiteCase c = cases::randomSites("random", 1000, 4, false);
  SphereOptions options;
  options.method = NearestMethod::Indexed;
  auto labeller = makeSphereLabeller(Backend::Cpu, c.sites(), options, RunControl{});
  std::vector<int32_t> site(qtmCellCount(6));
  labeller->labelQtm(6, 0, int64_t(site.size()), site.data(), nullptr, RunControl{});
  EXPECT_EQ(labeller->stats().uniqueSites, 1000);
  EXPECT_EQ(labeller->stats().blocks, int64_t(site.size()) / 64);
  EXPECT_GT(labeller->stats().candidates, labeller->stats().blocks);
  EXPECT_EQ(labeller->stats().overflowBlocks, 0);
}

TEST(SphereCpu, BadInputIsRefused)
{
  const double lon[] = {0.0, NAN, 10.0, 20.0};
  const double lat[] = {0.0, 0.0, 91.0, -90.0};
  try
  {
    makeSphereLabeller(Backend::Cpu, {lon, lat, 4}, {}, RunControl{});
    FAIL() << "NaN and lat 91 accepted";
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("2 of 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(makeSphereLabeller(Backend::Cpu, {lon, lat, 0}, {}, RunControl{}), InvalidInput);
  // Longitudes: up to two turns either way are taken modulo 360; past that they are no longitudes.
  const double far[] = {1e15, -720.5, 720.0, -540.0, 359.0};
  const double zero[] = {0.0, 0.0, 0.0, 0.0, 0.0};
  EXPECT_EQ(countInvalidSites({far, zero, 5}), 2);
  EXPECT_EQ(countInvalidSites({far + 2, zero, 3}), 0);
  auto labeller = makeSphereLabeller(Backend::Cpu, {lon, lat, 1}, {}, RunControl{});
  std::vector<int32_t> out(8);
  EXPECT_THROW(labeller->labelQtm(14, 0, 1, out.data(), nullptr, RunControl{}), InvalidInput);
  EXPECT_THROW(labeller->labelQtm(-1, 0, 1, out.data(), nullptr, RunControl{}), InvalidInput);
  EXPECT_THROW(labeller->labelQtm(0, 4, 5, out.data(), nullptr, RunControl{}), InvalidInput);
  RunControl cancel;
  cancel.canceled = [] { return true; };
  std::vector<int32_t> big(qtmCellCount(7));
  EXPECT_THROW(labeller->labelQtm(7, 0, int64_t(big.size()), big.data(), nullptr, cancel), Canceled);
}
