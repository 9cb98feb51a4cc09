// The CPU backend of the neighbour index against the brute-force reference, bit for bit: summaries,
// pairs and DBSCAN on random and degenerate point sets, the layout's invariants, bad input and cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "neighbours/neighbours.h"
#include "neighbours/neighbours_reference.h"
#include "summary_parts.h"

using namespace gpugeo;
using namespace gpugeo::neighbours;

namespace {

constexpr int kThreads = 2;
constexpr double kPi = 3.14159265358979323846;

struct NeighbourCase
{
  std::string name;
  std::vector<double> x, y, z;  // z empty in the plane
  double radius = 1;            // for k == 0: about 5-30 neighbours a point where the points are dense

  Points points() const
  {
    return Points{x.data(), y.data(), z.empty() ? nullptr : z.data(), static_cast<int64_t>(x.size())};
  }
  int64_t size() const { return static_cast<int64_t>(x.size()); }
};

// The radius that gives about `neighbours` neighbours a point for n points spread over `area`.
double planeRadius(int64_t n, double area, double neighbours = 12)
{
  return std::sqrt(neighbours * area / (kPi * double(n)));
}

NeighbourCase uniform2d(uint64_t seed, int n, double side = 1000)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, side);
  NeighbourCase c;
  c.name = "uniform2d_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    c.x.push_back(u(rng));
    c.y.push_back(u(rng));
  }
  c.radius = planeRadius(n, side * side);
  return c;
}

NeighbourCase uniform3d(uint64_t seed, int n)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-500, 500);
  NeighbourCase c;
  c.name = "uniform3d_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    c.x.push_back(u(rng));
    c.y.push_back(u(rng));
    c.z.push_back(u(rng));
  }
  c.radius = std::cbrt(12 * 1e9 * 3 / (4 * kPi * n));  // 12 neighbours in a ball
  return c;
}

// 90% of the points in four squares of 50 x 50 (1% of the 1000 x 1000 area), the rest spread out.
NeighbourCase clustered2d(uint64_t seed, int n)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> all(0, 1000), in(0, 50);
  const double corners[4][2] = {{100, 100}, {700, 150}, {300, 800}, {820, 820}};
  NeighbourCase c;
  c.name = "clustered2d_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    if (i % 10 == 9)
    {
      c.x.push_back(all(rng));
      c.y.push_back(all(rng));
    }
    else
    {
      const double* corner = corners[(i * 7) % 4];
      c.x.push_back(corner[0] + in(rng));
      c.y.push_back(corner[1] + in(rng));
    }
  }
  c.radius = planeRadius(n * 9 / 10, 4 * 50 * 50, 15);
  return c;
}

// Projected coordinates of a typical UTM zone: large offsets, a 1 km spread.
NeighbourCase utm(uint64_t seed, int n)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1000);
  NeighbourCase c;
  c.name = "utm_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    c.x.push_back(500000.0 + u(rng));
    c.y.push_back(4000000.0 + u(rng));
  }
  c.radius = planeRadius(n, 1e6);
  return c;
}

// More points than kRegionCapacity with one Morton code: the run must be cut into regions.
NeighbourCase identical(int n)
{
  NeighbourCase c;
  c.name = "identical_n" + std::to_string(n);
  c.x.assign(static_cast<size_t>(n), 123.456);
  c.y.assign(static_cast<size_t>(n), -7.89);
  c.radius = 1;
  return c;
}

// On the line y = 2x (the product by 2 is exact), or on a vertical line (a bounding box of width 0).
NeighbourCase collinear(uint64_t seed, int n, bool vertical)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1000);
  NeighbourCase c;
  c.name = std::string(vertical ? "collinear_vertical" : "collinear_diagonal") + "_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    const double t = u(rng);
    c.x.push_back(vertical ? 42.0 : t);
    c.y.push_back(vertical ? t : 2 * t);
  }
  const double length = vertical ? 1000 : 1000 * std::sqrt(5.0);
  c.radius = 12 * length / (2 * n);  // 12 neighbours on a segment of length 2r
  return c;
}

// Whole-number coordinates: every squared distance is exact and many equal the squared radius.
NeighbourCase lattice(int side, double radius)
{
  NeighbourCase c;
  std::ostringstream name;
  name << "lattice" << side << "x" << side << "_r" << radius;
  c.name = name.str();
  for (int j = 0; j < side; ++j)
    for (int i = 0; i < side; ++i)
    {
      c.x.push_back(i);
      c.y.push_back(j);
    }
  c.radius = radius;
  return c;
}

// Random points with exact copies of some of them mixed in, in random order.
NeighbourCase withDuplicates(uint64_t seed, int distinct, int copies)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1000);
  std::vector<std::pair<double, double>> p;
  for (int i = 0; i < distinct; ++i)
    p.emplace_back(u(rng), u(rng));
  std::uniform_int_distribution<int> pick(0, distinct - 1);
  for (int i = 0; i < copies; ++i)
    p.push_back(p[static_cast<size_t>(pick(rng))]);
  std::shuffle(p.begin(), p.end(), rng);
  NeighbourCase c;
  c.name = "duplicates_n" + std::to_string(distinct + copies);
  for (const auto& [x, y] : p)
  {
    c.x.push_back(x);
    c.y.push_back(y);
  }
  c.radius = planeRadius(distinct, 1e6);
  return c;
}

// Points on the sphere of the mean Earth radius, as the geographic path gives them (3D, metres).
NeighbourCase sphere(uint64_t seed, int n)
{
  const double R = 6371008.8;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0, 1);
  NeighbourCase c;
  c.name = "sphere_n" + std::to_string(n);
  for (int i = 0; i < n; ++i)
  {
    double a, b, d, norm;
    do
    {
      a = g(rng);
      b = g(rng);
      d = g(rng);
      norm = std::sqrt(a * a + b * b + d * d);
    } while (norm < 1e-6);
    c.x.push_back(R * (a / norm));
    c.y.push_back(R * (b / norm));
    c.z.push_back(R * (d / norm));
  }
  c.radius = 2 * R * std::sqrt(12.0 / n);  // a cap holding n r^2 / (4 R^2) of the points
  return c;
}

const std::vector<NeighbourCase>& allCases()
{
  static const std::vector<NeighbourCase> cases = [] {
    std::vector<NeighbourCase> v;
    v.push_back(uniform2d(1, 1));
    v.push_back(uniform2d(2, 2));
    v.push_back(uniform2d(3, 10));
    v.push_back(uniform2d(4, 1000));
    v.push_back(uniform2d(5, 5000));
    v.push_back(uniform3d(6, 2000));
    v.push_back(clustered2d(7, 3000));
    v.push_back(utm(8, 1500));
    v.push_back(identical(200));
    v.push_back(collinear(9, 600, false));
    v.push_back(collinear(10, 300, true));
    v.push_back(lattice(40, 1.0));
    v.push_back(lattice(40, 1.5));
    v.push_back(withDuplicates(11, 700, 300));
    v.push_back(sphere(12, 2000));
    return v;
  }();
  return cases;
}

std::string queryName(const Query& q)
{
  std::ostringstream s;
  s << std::setprecision(17) << "k=" << q.k << " radius=" << q.radius;
  return s.str();
}

// k == 0 with the case's radius and with radius 0 (duplicates only), then k = 1, 4, 16 with the
// radius and without a bound.
std::vector<Query> queriesFor(const NeighbourCase& c, bool forPairs)
{
  std::vector<Query> q;
  (void)forPairs;
  q.push_back(Query{c.radius, 0});
  q.push_back(Query{0, 0});
  for (int32_t k : {1, 4, 16})
  {
    q.push_back(Query{c.radius, k});
    q.push_back(Query{0, k});
  }
  return q;
}

std::vector<DbscanOptions> dbscanOptionsFor(const NeighbourCase& c)
{
  std::vector<DbscanOptions> v;
  for (bool noise : {false, true})
  {
    v.push_back(DbscanOptions{c.radius, 1, noise});
    v.push_back(DbscanOptions{c.radius, 5, noise});
    v.push_back(DbscanOptions{c.radius, 12, noise});
    v.push_back(DbscanOptions{0.5 * c.radius, 3, noise});
    v.push_back(DbscanOptions{0.0, 2, noise});
  }
  return v;
}

std::string optionsName(const DbscanOptions& o)
{
  std::ostringstream s;
  s << std::setprecision(17) << "eps=" << o.eps << " minPoints=" << o.minPoints
    << " borderPointsAreNoise=" << o.borderPointsAreNoise;
  return s.str();
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
template <typename T>
bool same(const T& a, const T& b)
{
  return a == b;
}

// Element by element, NaN equal to NaN; reports the first few differences.
template <typename T>
void expectSame(const std::vector<T>& got, const std::vector<T>& want, const std::string& what)
{
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!same(got[i], want[i]) && ++mismatches <= 5)
      ADD_FAILURE() << what << ": [" << i << "] got " << std::setprecision(17) << +got[i] << ", reference "
                    << +want[i];
  EXPECT_EQ(mismatches, 0) << what;
}

void expectSameSummary(const Summary& got, const Summary& want, const std::string& what)
{
  expectSame(got.count, want.count, what + " count");
  expectSame(got.nearest, want.nearest, what + " nearest");
  expectSame(got.nearestDistance, want.nearestDistance, what + " nearestDistance");
  // The mean is summed in the index's scan order (the same on CPU and GPU), the reference's in
  // distance order: they agree to a few ulps of the sum.
  ASSERT_EQ(got.meanDistance.size(), want.meanDistance.size()) << what;
  int64_t mismatches = 0;
  for (size_t i = 0; i < want.meanDistance.size(); ++i)
  {
    const double g = got.meanDistance[i], w = want.meanDistance[i];
    const bool ok = (std::isnan(g) && std::isnan(w)) || std::fabs(g - w) <= 1e-13 * std::fabs(w);
    if (!ok && ++mismatches <= 5)
      ADD_FAILURE() << what << " meanDistance: [" << i << "] got " << std::setprecision(17) << g << ", reference " << w;
  }
  EXPECT_EQ(mismatches, 0) << what << " meanDistance";
}

void expectSamePairs(const Pairs& got, const Pairs& want, const std::string& what)
{
  expectSame(got.a, want.a, what + " a");
  expectSame(got.b, want.b, what + " b");
  expectSame(got.distance, want.distance, what + " distance");
}

void expectSameClusters(const Clusters& got, const Clusters& want, const std::string& what)
{
  expectSame(got.cluster, want.cluster, what + " cluster");
  expectSame(got.core, want.core, what + " core");
  expectSame(got.size, want.size, what + " size");
}

void expectValidLayout(const Layout& layout, const NeighbourCase& c)
{
  const int64_t n = c.size();
  EXPECT_EQ(layout.dimensions, c.z.empty() ? 2 : 3) << c.name;
  ASSERT_EQ(static_cast<int64_t>(layout.order.size()), n) << c.name;
  std::vector<int32_t> sorted = layout.order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << c.name << ": order is not a permutation of 0.." << n - 1;
  ASSERT_GE(layout.start.size(), 2u) << c.name;
  EXPECT_EQ(layout.start.front(), 0) << c.name;
  EXPECT_EQ(layout.start.back(), n) << c.name;
  for (size_t r = 0; r + 1 < layout.start.size(); ++r)
  {
    const int64_t held = layout.start[r + 1] - layout.start[r];
    EXPECT_GE(held, 1) << c.name << ": region " << r;
    EXPECT_LE(held, kRegionCapacity) << c.name << ": region " << r;
  }
  EXPECT_GE(static_cast<int64_t>(layout.start.size()) - 1, (n + kRegionCapacity - 1) / kRegionCapacity) << c.name;
}

std::unique_ptr<NeighbourIndex> cpuIndex(const Points& points, int threads = kThreads)
{
  return makeNeighbourIndex(Backend::Cpu, points, threads, RunControl{});
}

std::string caseLabel(const ::testing::TestParamInfo<size_t>& info)
{
  std::string name = allCases()[info.param].name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return name;
}

}  // namespace

class NeighboursCpu : public ::testing::TestWithParam<size_t>
{
protected:
  const NeighbourCase& input() const { return allCases()[GetParam()]; }
};

TEST_P(NeighboursCpu, Layout)
{
  const NeighbourCase& c = input();
  const auto index = cpuIndex(c.points());
  EXPECT_EQ(index->backend(), Backend::Cpu);
  expectValidLayout(index->layout(), c);
}

TEST_P(NeighboursCpu, SummaryMatchesReference)
{
  const NeighbourCase& c = input();
  const auto index = cpuIndex(c.points());
  for (const Query& q : queriesFor(c, false))
  {
    const std::string what = c.name + " " + queryName(q);
    const Summary want = reference::summarize(c.points(), q);
    const Summary got = index->summarize(q, RunControl{});
    ASSERT_EQ(got.count.size(), static_cast<size_t>(c.size())) << what;
    expectSameSummary(got, want, what);
    expectSameSummary(test::summaryByParts(*index, q), want, what + " (by parts)");
  }
}

TEST_P(NeighboursCpu, PairsMatchReference)
{
  const NeighbourCase& c = input();
  const auto index = cpuIndex(c.points());
  for (const Query& q : queriesFor(c, true))
  {
    const std::string what = c.name + " " + queryName(q);
    const Pairs want = reference::pairs(c.points(), q);
    const int64_t counted = index->countPairs(q, RunControl{});
    EXPECT_EQ(counted, static_cast<int64_t>(want.a.size())) << what;
    const Pairs got = index->pairs(q, std::numeric_limits<int64_t>::max(), RunControl{});
    EXPECT_EQ(counted, static_cast<int64_t>(got.a.size())) << what;
    expectSamePairs(got, want, what);
    // Into the caller's arrays without distances; nothing written past the pairs; too small a
    // capacity refused before writing.
    const int64_t total = static_cast<int64_t>(want.a.size());
    std::vector<int32_t> a(want.a.size() + 1, -1), b(a);
    EXPECT_EQ(index->pairsInto(q, PairsOutput{a.data(), b.data(), nullptr}, total + 1, RunControl{}), total) << what;
    EXPECT_EQ(a.back(), -1) << what;
    EXPECT_EQ(b.back(), -1) << what;
    a.pop_back();
    b.pop_back();
    EXPECT_EQ(a, want.a) << what;
    EXPECT_EQ(b, want.b) << what;
    if (total > 0)
    {
      std::vector<int32_t> untouched(a.size(), -1);
      a = untouched;
      EXPECT_THROW(index->pairsInto(q, PairsOutput{a.data(), b.data(), nullptr}, total - 1, RunControl{}), InvalidInput)
        << what;
      EXPECT_EQ(a, untouched) << what;
    }
  }
  // What a count keeps is only for its own query: pairs of another query after it are its own.
  const std::vector<Query> queries = queriesFor(c, true);
  for (std::size_t k = 0; k + 1 < queries.size(); ++k)
  {
    index->countPairs(queries[k], RunControl{});
    const Pairs want = reference::pairs(c.points(), queries[k + 1]);
    Pairs got;
    got.a.resize(want.a.size());
    got.b.resize(want.a.size());
    got.distance.resize(want.a.size());
    EXPECT_EQ(index->pairsInto(queries[k + 1], PairsOutput{got.a.data(), got.b.data(), got.distance.data()},
                               static_cast<int64_t>(want.a.size()), RunControl{}),
              static_cast<int64_t>(want.a.size()));
    expectSamePairs(got, want, c.name + " " + queryName(queries[k + 1]) + " after " + queryName(queries[k]));
  }
}

TEST_P(NeighboursCpu, DbscanMatchesReference)
{
  const NeighbourCase& c = input();
  const auto index = cpuIndex(c.points());
  for (const DbscanOptions& o : dbscanOptionsFor(c))
  {
    const std::string what = c.name + " " + optionsName(o);
    expectSameClusters(index->dbscan(o, RunControl{}), reference::dbscan(c.points(), o), what);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, NeighboursCpu, ::testing::Range<size_t>(0, allCases().size()), caseLabel);

TEST(NeighboursCpuFixed, ThreadCountsDoNotChangeTheResult)
{
  for (const NeighbourCase& c : {clustered2d(21, 2000), identical(300)})
    for (int threads : {1, 3})
    {
      const std::string what = c.name + " threads=" + std::to_string(threads);
      const auto index = cpuIndex(c.points(), threads);
      expectValidLayout(index->layout(), c);
      for (const Query& q : {Query{c.radius, 0}, Query{0, 7}})
      {
        expectSameSummary(index->summarize(q, RunControl{}), reference::summarize(c.points(), q),
                          what + " " + queryName(q));
        expectSamePairs(index->pairs(q, std::numeric_limits<int64_t>::max(), RunControl{}),
                        reference::pairs(c.points(), q), what + " " + queryName(q));
      }
      const DbscanOptions o{c.radius, 6, false};
      expectSameClusters(index->dbscan(o, RunControl{}), reference::dbscan(c.points(), o), what + " " + optionsName(o));
    }
}

TEST(NeighboursCpuFixed, LargestKTakesEveryPoint)
{
  const NeighbourCase c = uniform2d(31, 10);
  const auto index = cpuIndex(c.points());
  for (const Query& q : {Query{0, kMaxK}, Query{c.radius, kMaxK}})
  {
    const Summary got = index->summarize(q, RunControl{});
    expectSameSummary(got, reference::summarize(c.points(), q), queryName(q));
    expectSamePairs(index->pairs(q, 1000, RunControl{}), reference::pairs(c.points(), q), queryName(q));
  }
  const Summary all = index->summarize(Query{0, kMaxK}, RunControl{});
  for (int32_t count : all.count)
    EXPECT_EQ(count, 9);
}

// Hand-worked: the corners of the unit square, radius 1 (the sides are exactly at the radius).
TEST(NeighboursCpuFixed, UnitSquare)
{
  const std::vector<double> x{0, 1, 0, 1}, y{0, 0, 1, 1};
  const Points p{x.data(), y.data(), nullptr, 4};
  const auto index = cpuIndex(p);
  const Summary s = index->summarize(Query{1.0, 0}, RunControl{});
  EXPECT_EQ(s.count, (std::vector<int32_t>{2, 2, 2, 2}));
  EXPECT_EQ(s.nearest, (std::vector<int64_t>{1, 0, 0, 1}));  // ties at distance 1 go to the lower index
  EXPECT_EQ(s.nearestDistance, (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(s.meanDistance, (std::vector<double>{1, 1, 1, 1}));
  expectSameSummary(s, reference::summarize(p, Query{1.0, 0}), "unit square");
  EXPECT_EQ(index->countPairs(Query{1.0, 0}, RunControl{}), 4);
  const Pairs pr = index->pairs(Query{1.0, 0}, 4, RunControl{});
  EXPECT_EQ(pr.a, (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(pr.b, (std::vector<int32_t>{1, 2, 3, 3}));
  // Nearest by index among ties: 0 -> 1, 1 -> 0, 2 -> 0, 3 -> 1, so the pairs 0-1, 0-2 and 1-3.
  const Pairs nearest = index->pairs(Query{0, 1}, 3, RunControl{});
  EXPECT_EQ(nearest.a, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(nearest.b, (std::vector<int32_t>{1, 2, 3}));
  const Summary all = index->summarize(Query{0, 3}, RunControl{});
  EXPECT_EQ(all.count, (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(all.meanDistance[0], (1.0 + 1.0 + std::sqrt(2.0)) / 3);
}

// Hand-worked DBSCAN on a line, eps 1, minPoints 4: two groups of cores (A around 3.4..4.2, B around
// 5.8..6.6) not within eps of each other, a bridge point X at 5.0 within eps of one core of each, and
// an end border point on each side. X joins A, whose core 4.2 has the lower index (3) than B's 5.8 (4).
// The clusters are numbered by their first core point, as QGIS numbers them: B's 6.2 (index 1) comes
// before A's 4.2 (index 3), though A holds the lowest point (3.0, a border point).
TEST(NeighboursCpuFixed, DbscanBorderPointJoinsLowestIndexCoreNeighbour)
{
  //                         0    1    2    3    4    5    6    7    8
  const std::vector<double> x{3.0, 6.2, 5.0, 4.2, 5.8, 3.4, 3.8, 6.6, 7.0};
  const std::vector<double> y(x.size(), 0.0);
  const Points p{x.data(), y.data(), nullptr, static_cast<int64_t>(x.size())};
  const auto index = cpuIndex(p);

  const Clusters withBorder = index->dbscan(DbscanOptions{1.0, 4, false}, RunControl{});
  EXPECT_EQ(withBorder.core, (std::vector<uint8_t>{0, 1, 0, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(withBorder.cluster, (std::vector<int64_t>{2, 1, 2, 2, 1, 2, 2, 1, 1}));
  EXPECT_EQ(withBorder.size, (std::vector<int64_t>{4, 5}));
  expectSameClusters(withBorder, reference::dbscan(p, DbscanOptions{1.0, 4, false}), "line, border points");

  // Only the cores are clustered: the same ids.
  const Clusters coresOnly = index->dbscan(DbscanOptions{1.0, 4, true}, RunControl{});
  EXPECT_EQ(coresOnly.core, withBorder.core);
  EXPECT_EQ(coresOnly.cluster, (std::vector<int64_t>{0, 1, 0, 2, 1, 2, 2, 1, 0}));
  EXPECT_EQ(coresOnly.size, (std::vector<int64_t>{3, 3}));
  expectSameClusters(coresOnly, reference::dbscan(p, DbscanOptions{1.0, 4, true}), "line, cores only");
}

TEST(NeighboursCpuFixed, BadPointsAreInvalidInput)
{
  std::vector<double> x{0, 1, 2}, y{0, 1, 2}, z{0, 1, 2};
  EXPECT_THROW(cpuIndex(Points{x.data(), y.data(), nullptr, 0}), InvalidInput);
  EXPECT_THROW(cpuIndex(Points{x.data(), y.data(), z.data(), 0}), InvalidInput);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, inf, -inf})
  {
    std::vector<double> bx = x, by = y, bz = z;
    bx[1] = bad;
    EXPECT_THROW(cpuIndex(Points{bx.data(), y.data(), nullptr, 3}), InvalidInput) << bad << " in x";
    by[2] = bad;
    EXPECT_THROW(cpuIndex(Points{x.data(), by.data(), nullptr, 3}), InvalidInput) << bad << " in y";
    bz[0] = bad;
    EXPECT_THROW(cpuIndex(Points{x.data(), y.data(), bz.data(), 3}), InvalidInput) << bad << " in z";
  }
  EXPECT_NO_THROW(cpuIndex(Points{x.data(), y.data(), z.data(), 3}));
}

// Coordinates near +-1e308: their extent overflows, and a NaN went to a Morton cell (NN_DIST came
// out infinite with the wrong NN_FID). Spreads past kMaxExtent are refused, naming the axis; a
// spread just within is taken, its squared distances still finite.
TEST(NeighboursCpuFixed, CoordinatesSpreadBeyondTheRangeAreRefused)
{
  for (const double far : {1e308, 1.7e308, 2e150})
  {
    std::vector<double> x{0.0, 1.0, -far, 3.0}, y{0.0, 1.0, 2.0, 3.0};
    try
    {
      cpuIndex(Points{x.data(), y.data(), nullptr, 4});
      ADD_FAILURE() << far << " accepted";
    }
    catch (const InvalidInput& e)
    {
      EXPECT_NE(std::string(e.what()).find("the points' x coordinates run from"), std::string::npos) << e.what();
    }
    std::swap(x, y);
    EXPECT_THROW(cpuIndex(Points{x.data(), y.data(), nullptr, 4}), InvalidInput) << far << " in y";
    std::vector<double> z{0.0, 0.0, far, 0.0};
    EXPECT_THROW(cpuIndex(Points{y.data(), y.data(), z.data(), 4}), InvalidInput) << far << " in z";
  }
  std::vector<double> x{0.0, 1.0, 1e149, 3.0}, y{0.0, 1.0, 2.0, 3.0};
  const auto index = cpuIndex(Points{x.data(), y.data(), nullptr, 4});
  const Summary s = index->summarize(Query{0.0, 1}, RunControl{});
  EXPECT_EQ(s.nearest[2], 0);  // at 1e149 the other three are equally far in float64: the lowest index
  EXPECT_EQ(s.nearestDistance[2], 1e149);
  EXPECT_EQ(s.nearest[1], 0);
}

TEST(NeighboursCpuFixed, BadQueriesAreInvalidInput)
{
  const NeighbourCase c = uniform2d(41, 100);
  const auto index = cpuIndex(c.points());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Query> bad{{-1.0, 0}, {nan, 0}, {inf, 0}, {-1.0, 4}, {nan, 4}, {10.0, -1}, {0.0, -1},
                               {10.0, kMaxK + 1}, {0.0, kMaxK + 1}};
  for (const Query& q : bad)
  {
    EXPECT_THROW(index->summarize(q, RunControl{}), InvalidInput) << queryName(q);
    EXPECT_THROW(index->countPairs(q, RunControl{}), InvalidInput) << queryName(q);
    EXPECT_THROW(index->pairs(q, 1 << 20, RunControl{}), InvalidInput) << queryName(q);
  }
  // Every pair of the whole set: only pairs() refuses it; a summary with radius 0 counts duplicates.
  EXPECT_NO_THROW(index->pairs(Query{0.0, 0}, 1 << 20, RunControl{}));  // the duplicate pairs
  EXPECT_NO_THROW(index->summarize(Query{0.0, 0}, RunControl{}));
}

TEST(NeighboursCpuFixed, TooManyPairsIsInvalidInput)
{
  const NeighbourCase c = uniform2d(51, 500);
  const auto index = cpuIndex(c.points());
  for (const Query& q : {Query{c.radius, 0}, Query{0, 4}})
  {
    const int64_t count = index->countPairs(q, RunControl{});
    ASSERT_GT(count, 0) << queryName(q);
    EXPECT_THROW(index->pairs(q, count - 1, RunControl{}), InvalidInput) << queryName(q);
    EXPECT_THROW(index->pairs(q, 0, RunControl{}), InvalidInput) << queryName(q);
    const Pairs exact = index->pairs(q, count, RunControl{});
    EXPECT_EQ(static_cast<int64_t>(exact.a.size()), count) << queryName(q);
  }
}

TEST(NeighboursCpuFixed, CancelStopsSummarize)
{
  const NeighbourCase c = uniform2d(61, 200000);
  const auto index = cpuIndex(c.points());
  RunControl cancel;
  cancel.canceled = [] { return true; };
  EXPECT_THROW(index->summarize(Query{c.radius, 0}, cancel), Canceled);
  EXPECT_THROW(index->summarize(Query{0, 16}, cancel), Canceled);
}

// A count canceled half-way keeps nothing: the pairs after it are counted again, and whole.
TEST(NeighboursCpuFixed, CanceledCountIsNotKept)
{
  const NeighbourCase c = uniform2d(62, 50000);
  const auto index = cpuIndex(c.points());
  for (const Query& q : {Query{c.radius, 0}, Query{0, 4}})
  {
    std::atomic<int> calls{0};
    RunControl cancelLater;
    cancelLater.canceled = [&calls] { return ++calls > 3; };
    EXPECT_THROW(index->countPairs(q, cancelLater), Canceled) << queryName(q);
    const int64_t total = index->countPairs(q, RunControl{});
    std::vector<int32_t> a(static_cast<std::size_t>(total)), b(a);
    EXPECT_EQ(index->pairsInto(q, PairsOutput{a.data(), b.data(), nullptr}, total, RunControl{}), total);
    const Pairs want = cpuIndex(c.points())->pairs(q, total, RunControl{});
    EXPECT_EQ(a, want.a) << queryName(q);
    EXPECT_EQ(b, want.b) << queryName(q);
  }
}
