// The neighbour index on the GPU against the CPU: the same regions, and bitwise the same summaries,
// pairs and clusters, on random, clustered and degenerate sets in 2D and 3D. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "gpu_test_size.h"
#include "neighbours/neighbours.h"
#include "summary_parts.h"

using namespace gpugeo;
using namespace gpugeo::neighbours;
using gpugeo::testing::gpuCount;

#define REQUIRE_GPU()                                     \
  if (!probeGpu().usable)                                 \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

namespace {

struct Set
{
  std::string name;
  std::vector<double> x, y, z;
  bool threeD = false;
  double radius = 1.0;  // about 5-30 neighbours
  Points points() const { return {x.data(), y.data(), threeD ? z.data() : nullptr, int64_t(x.size())}; }
};

std::vector<Set> sets()
{
  std::vector<Set> out;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto uniform = [&](const std::string& name, int n, double side, bool threeD, double radius) {
    Set s{name, {}, {}, {}, threeD, radius};
    for (int i = 0; i < n; ++i)
    {
      s.x.push_back(u(rng) * side);
      s.y.push_back(u(rng) * side);
      s.z.push_back(u(rng) * side);
    }
    return s;
  };
  out.push_back(uniform("uniform 2D", int(gpuCount(200000)), 1000.0, false, 5.0));
  out.push_back(uniform("uniform 3D", int(gpuCount(100000)), 100.0, true, 3.0));
  out.push_back(uniform("one point", 1, 1.0, false, 1.0));
  out.push_back(uniform("two points", 2, 1.0, false, 0.5));
  {
    Set s = uniform("skewed 2D", int(gpuCount(100000)), 1000.0, false, 4.0);  // 90% in 1% of the area
    for (std::size_t i = 0; i < s.x.size() * 9 / 10; ++i)
    {
      s.x[i] = 500.0 + s.x[i] * 0.1;
      s.y[i] = 500.0 + s.y[i] * 0.1;
    }
    out.push_back(s);
  }
  {
    Set s = uniform("UTM-sized", 50000, 1000.0, false, 10.0);
    for (std::size_t i = 0; i < s.x.size(); ++i)
    {
      s.x[i] += 500000.0;
      s.y[i] += 4000000.0;
    }
    out.push_back(s);
  }
  {
    Set s{"identical", std::vector<double>(1000, 3.5), std::vector<double>(1000, -2.0), std::vector<double>(1000, 0.0),
          false, 1.0};
    out.push_back(s);
  }
  {
    Set s{"lattice with ties at the radius", {}, {}, {}, false, 1.0};
    for (int i = 0; i < 300; ++i)
      for (int j = 0; j < 300; ++j)
      {
        s.x.push_back(i);
        s.y.push_back(j);
        s.z.push_back(0.0);
      }
    out.push_back(s);
  }
  {
    Set s{"collinear with duplicates", {}, {}, {}, false, 2.0};
    for (int i = 0; i < 20000; ++i)
    {
      s.x.push_back(double(i / 3));
      s.y.push_back(2.0 * double(i / 3));
      s.z.push_back(0.0);
    }
    out.push_back(s);
  }
  {
    Set s{"sphere in metres", {}, {}, {}, true, 50000.0};
    std::normal_distribution<double> g;
    for (int i = 0; i < 100000; ++i)
    {
      double v[3] = {g(rng), g(rng), g(rng)};
      const double l = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
      s.x.push_back(6371008.8 * v[0] / l);
      s.y.push_back(6371008.8 * v[1] / l);
      s.z.push_back(6371008.8 * v[2] / l);
    }
    out.push_back(s);
  }
  return out;
}

bool sameBits(double a, double b)
{
  return std::memcmp(&a, &b, sizeof a) == 0;
}

void expectSameSummary(const Summary& a, const Summary& b, const std::string& what)
{
  ASSERT_EQ(a.count.size(), b.count.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < a.count.size() && bad < 5; ++i)
    if (a.count[i] != b.count[i] || a.nearest[i] != b.nearest[i] || !sameBits(a.nearestDistance[i], b.nearestDistance[i]) ||
        !sameBits(a.meanDistance[i], b.meanDistance[i]))
    {
      ++bad;
      ADD_FAILURE() << what << ": point " << i << " cpu (" << a.count[i] << ", " << a.nearest[i] << ", "
                    << a.nearestDistance[i] << ", " << a.meanDistance[i] << ") gpu (" << b.count[i] << ", "
                    << b.nearest[i] << ", " << b.nearestDistance[i] << ", " << b.meanDistance[i] << ")";
    }
}

}  // namespace

TEST(NeighboursGpu, SameRegionsSummariesPairsAndClustersAsTheCpu)
{
  REQUIRE_GPU();
  for (const Set& s : sets())
  {
    auto cpu = makeNeighbourIndex(Backend::Cpu, s.points(), 0, RunControl{});
    auto gpu = makeNeighbourIndex(Backend::Gpu, s.points(), 0, RunControl{});
    const Layout lc = cpu->layout(), lg = gpu->layout();
    EXPECT_EQ(lc.order, lg.order) << s.name;
    EXPECT_EQ(lc.start, lg.start) << s.name;
    for (const Query q : {Query{s.radius, 0}, Query{0.0, 0}, Query{s.radius, 4}, Query{0.0, 1}, Query{0.0, 16}})
    {
      const std::string what = s.name + " radius " + std::to_string(q.radius) + " k " + std::to_string(q.k);
      const Summary whole = cpu->summarize(q, RunControl{});
      expectSameSummary(whole, gpu->summarize(q, RunControl{}), what);
      expectSameSummary(whole, test::summaryByParts(*gpu, q), what + " (by parts)");
      const int64_t count = cpu->countPairs(q, RunControl{});
      EXPECT_EQ(gpu->countPairs(q, RunControl{}), count) << what;
      const Pairs pc = cpu->pairs(q, count, RunControl{}), pg = gpu->pairs(q, count, RunControl{});
      EXPECT_EQ(pc.a, pg.a) << what;
      EXPECT_EQ(pc.b, pg.b) << what;
      ASSERT_EQ(pc.distance.size(), pg.distance.size()) << what;
      for (std::size_t k = 0; k < pc.distance.size(); ++k)
        if (!sameBits(pc.distance[k], pg.distance[k]))
        {
          ADD_FAILURE() << what << ": pair " << k << " distance " << pc.distance[k] << " vs " << pg.distance[k];
          break;
        }
      // Without distances, after a count of another query (which must not be used), into arrays with
      // a marker past the end; too small a capacity is refused before anything is written.
      gpu->countPairs(Query{0.5 * s.radius, q.k}, RunControl{});
      std::vector<int32_t> a(pc.a.size() + 1, -1), b(pc.b.size() + 1, -1);
      EXPECT_EQ(gpu->pairsInto(q, PairsOutput{a.data(), b.data(), nullptr}, count + 1, RunControl{}), count) << what;
      EXPECT_EQ(a.back(), -1) << what;
      EXPECT_EQ(b.back(), -1) << what;
      a.pop_back();
      b.pop_back();
      EXPECT_EQ(a, pc.a) << what << " (without distances)";
      EXPECT_EQ(b, pc.b) << what << " (without distances)";
      if (count > 0)
      {
        EXPECT_THROW(gpu->pairs(q, count - 1, RunControl{}), InvalidInput) << what;
        const std::vector<int32_t> untouched(a.size(), -1);
        a = untouched;
        EXPECT_THROW(gpu->pairsInto(q, PairsOutput{a.data(), b.data(), nullptr}, count - 1, RunControl{}), InvalidInput)
          << what;
        EXPECT_EQ(a, untouched) << what;
        EXPECT_THROW(gpu->pairsInto(q, PairsOutput{nullptr, b.data(), nullptr}, count, RunControl{}), InvalidInput)
          << what;
      }
    }
    for (const DbscanOptions o : {DbscanOptions{s.radius, 5, false}, DbscanOptions{s.radius, 5, true},
                                  DbscanOptions{s.radius, 1, false}, DbscanOptions{0.5 * s.radius, 3, false}})
    {
      const std::string what = s.name + " dbscan eps " + std::to_string(o.eps) + " min " + std::to_string(o.minPoints);
      const Clusters cc = cpu->dbscan(o, RunControl{}), cg = gpu->dbscan(o, RunControl{});
      EXPECT_EQ(cc.cluster, cg.cluster) << what;
      EXPECT_EQ(cc.core, cg.core) << what;
      EXPECT_EQ(cc.size, cg.size) << what;
    }
  }
}

TEST(NeighboursGpu, BadInputAndCancel)
{
  REQUIRE_GPU();
  const std::vector<double> x = {0.0, 1.0, std::nan("")}, y = {0.0, 1.0, 2.0};
  EXPECT_THROW(makeNeighbourIndex(Backend::Gpu, Points{x.data(), y.data(), nullptr, 3}, 0, RunControl{}), InvalidInput);
  auto index = makeNeighbourIndex(Backend::Gpu, Points{x.data(), y.data(), nullptr, 2}, 0, RunControl{});
  EXPECT_THROW(index->summarize(Query{-1.0, 0}, RunControl{}), InvalidInput);
  EXPECT_THROW(index->summarize(Query{1.0, kMaxK + 1}, RunControl{}), InvalidInput);
  RunControl stop;
  stop.canceled = [] { return true; };
  EXPECT_THROW(index->summarize(Query{1.0, 0}, stop), Canceled);
}
