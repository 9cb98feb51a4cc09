// Voronoi polygons clipped to a rectangle against brute force: every vertex at least as near to its
// own site as to any other and equidistant from as many sites as its place says, sampled points in
// the polygon of their nearest site, areas summing to the rectangle, convex counter-clockwise rings;
// duplicates, collinear sites, lattices (co-circular sites), clusters, UTM-sized coordinates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "voronoi/voronoi_polygons.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;

namespace {

struct Case
{
  std::string name;
  std::vector<double> x, y;
  ClipRectangle rect;
};

// The points' extent grown by `buffer` of its width and height on each side.
ClipRectangle extentOf(const std::vector<double>& x, const std::vector<double>& y, double buffer)
{
  const auto [x0, x1] = std::minmax_element(x.begin(), x.end());
  const auto [y0, y1] = std::minmax_element(y.begin(), y.end());
  const double w = std::max(*x1 - *x0, 1e-9), h = std::max(*y1 - *y0, 1e-9);
  return ClipRectangle{*x0 - buffer * w, *y0 - buffer * h, *x1 + buffer * w, *y1 + buffer * h};
}

Case uniformCase(uint32_t seed, int n, double x0 = 0.0, double y0 = 0.0, double size = 1000.0)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, size);
  Case c{"uniform " + std::to_string(n), {}, {}, {}};
  for (int i = 0; i < n; ++i)
  {
    c.x.push_back(x0 + u(rng));
    c.y.push_back(y0 + u(rng));
  }
  c.rect = extentOf(c.x, c.y, 0.1);
  return c;
}

VoronoiPolygons run(const Case& c)
{
  return voronoiPolygons(PlanePoints{c.x.data(), c.y.data(), int64_t(c.x.size())}, c.rect, VoronoiPolygonsOptions{2, 0.0}, RunControl{});
}

double dist2(double ax, double ay, double bx, double by)
{
  return (ax - bx) * (ax - bx) + (ay - by) * (ay - by);
}

// Every property of the contract, by brute force over the distinct sites.
void checkPolygons(const Case& c, const VoronoiPolygons& v)
{
  const ClipRectangle& r = c.rect;
  const double scale = std::max(r.xMax - r.xMin, r.yMax - r.yMin);
  const int64_t n = int64_t(c.x.size());
  // Distinct sites: the points whose cellOfPoint is set, plus duplicates' first copies.
  std::vector<int64_t> sites;
  for (int64_t i = 0; i < n; ++i)
  {
    bool first = true;
    for (int64_t j = 0; j < i && first; ++j)
      first = !(c.x[j] == c.x[i] && c.y[j] == c.y[i]);
    if (first)
      sites.push_back(i);
    else
      EXPECT_EQ(v.cellOfPoint[i], -1) << c.name << ": duplicate " << i << " has a polygon";
  }
  EXPECT_EQ(v.duplicates, n - int64_t(sites.size())) << c.name;
  double areaSum = 0.0;
  for (int64_t cell = 0; cell + 1 < int64_t(v.ringStart.size()); ++cell)
  {
    const int64_t s = v.pointOfCell[cell];
    ASSERT_EQ(v.cellOfPoint[s], cell) << c.name;
    const int64_t a = v.ringStart[cell], b = v.ringStart[cell + 1];
    ASSERT_GE(b - a, 3) << c.name;
    double twice = 0.0;
    for (int64_t k = a; k < b; ++k)
    {
      const int64_t k1 = k + 1 < b ? k + 1 : a, k2 = k1 + 1 < b ? k1 + 1 : a;
      twice += v.x[k] * v.y[k1] - v.x[k1] * v.y[k];
      // Convex, counter-clockwise: every turn to the left (or straight).
      const double turn = (v.x[k1] - v.x[k]) * (v.y[k2] - v.y[k1]) - (v.y[k1] - v.y[k]) * (v.x[k2] - v.x[k1]);
      EXPECT_GE(turn, -1e-9 * scale * scale) << c.name << " cell " << cell;
      // In the rectangle, and the site's: at least as near to it as to any other site, and as near
      // as that to 3 sites inside the rectangle, 2 on an edge, 1 at a corner.
      const double px = v.x[k], py = v.y[k];
      EXPECT_TRUE(px >= r.xMin - 1e-9 * scale && px <= r.xMax + 1e-9 * scale && py >= r.yMin - 1e-9 * scale &&
                  py <= r.yMax + 1e-9 * scale)
        << c.name;
      // Distances agree within 1e-9 relative, or within the rounding of the vertex's coordinates
      // (at UTM northings a unit in the last place is 1e-9 m: more than 1e-9 of a short distance).
      const double own = std::sqrt(dist2(px, py, c.x[s], c.y[s]));
      const double slack = 1e-9 * own + 2.0 * std::ldexp(std::max(std::abs(px), std::abs(py)), -52);
      int equal = 0;
      for (int64_t t : sites)
      {
        const double d = std::sqrt(dist2(px, py, c.x[t], c.y[t]));
        EXPECT_GE(d, own - slack) << c.name << " cell " << cell << " site " << t;
        equal += std::abs(d - own) <= slack ? 1 : 0;
      }
      const bool onX = std::abs(px - r.xMin) <= 1e-12 * scale || std::abs(px - r.xMax) <= 1e-12 * scale;
      const bool onY = std::abs(py - r.yMin) <= 1e-12 * scale || std::abs(py - r.yMax) <= 1e-12 * scale;
      const int needed = (onX && onY) ? 1 : (onX || onY) ? 2 : 3;
      if (c.name.find("collinear") == std::string::npos || needed == 1)
        EXPECT_GE(equal, std::min<int>(needed, int(sites.size()))) << c.name << " cell " << cell << " vertex " << k;
    }
    EXPECT_GT(twice, 0.0) << c.name;
    areaSum += 0.5 * twice;
  }
  const double area = (r.xMax - r.xMin) * (r.yMax - r.yMin);
  EXPECT_NEAR(areaSum, area, 1e-9 * area) << c.name;
  // Sampled points lie in the polygon of their nearest site.
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> ux(r.xMin, r.xMax), uy(r.yMin, r.yMax);
  for (int k = 0; k < 300; ++k)
  {
    const double px = ux(rng), py = uy(rng);
    int64_t best = sites[0];
    for (int64_t t : sites)
      if (dist2(px, py, c.x[t], c.y[t]) < dist2(px, py, c.x[best], c.y[best]))
        best = t;
    const int64_t cell = v.cellOfPoint[best];
    ASSERT_GE(cell, 0) << c.name;
    double worst = 0.0;  // the most negative turn of the point against the ring's edges
    for (int64_t e = v.ringStart[cell]; e < v.ringStart[cell + 1]; ++e)
    {
      const int64_t f = e + 1 < v.ringStart[cell + 1] ? e + 1 : v.ringStart[cell];
      worst = std::min(worst, (v.x[f] - v.x[e]) * (py - v.y[e]) - (v.y[f] - v.y[e]) * (px - v.x[e]));
    }
    EXPECT_GE(worst, -1e-9 * scale * scale) << c.name << ": sample " << k << " outside its nearest site's polygon";
  }
}

}  // namespace

TEST(VoronoiPolygons, UniformPointsAgainstBruteForce)
{
  for (uint32_t seed : {1u, 2u})
  {
    const Case c = uniformCase(seed, seed == 1 ? 2000 : 37);
    const VoronoiPolygons v = run(c);
    EXPECT_EQ(v.dimension, 2);
    EXPECT_EQ(int64_t(v.pointOfCell.size()), int64_t(c.x.size())) << c.name;
    checkPolygons(c, v);
  }
}

TEST(VoronoiPolygons, DuplicatesGoToTheLowestIndex)
{
  Case c = uniformCase(3, 300);
  c.name = "duplicates";
  for (int i = 0; i < 200; ++i)
  {
    c.x.push_back(c.x[i % 7]);
    c.y.push_back(c.y[i % 7]);
  }
  c.x.push_back(-0.0);  // -0.0 and 0.0 are one point
  c.y.push_back(5.0);
  c.x.push_back(0.0);
  c.y.push_back(5.0);
  c.rect = extentOf(c.x, c.y, 0.1);
  const VoronoiPolygons v = run(c);
  EXPECT_EQ(v.duplicates, 201);
  EXPECT_EQ(v.cellOfPoint[501], -1);
  EXPECT_GE(v.cellOfPoint[500], 0);
  for (int i = 300; i < 500; ++i)
    EXPECT_EQ(v.cellOfPoint[i], -1) << i;
  checkPolygons(c, v);
}

TEST(VoronoiPolygons, OneTwoAndCollinearSites)
{
  Case one{"one site", {5.0}, {7.0}, ClipRectangle{0, 0, 10, 10}};
  VoronoiPolygons v = run(one);
  ASSERT_EQ(v.pointOfCell.size(), 1u);
  EXPECT_EQ(v.ringStart[1], 4);
  checkPolygons(one, v);
  Case two{"two sites", {1.0, 3.0}, {1.0, 2.0}, ClipRectangle{0, 0, 4, 4}};
  checkPolygons(two, run(two));
  Case line{"collinear sites", {}, {}, {}};
  for (int i = 0; i < 50; ++i)
  {
    line.x.push_back(10.0 + 3.0 * i);  // exactly collinear
    line.y.push_back(-4.0 + 2.0 * i);
  }
  line.rect = extentOf(line.x, line.y, 0.2);
  v = run(line);
  EXPECT_EQ(v.dimension, 1);
  EXPECT_EQ(v.pointOfCell.size(), 50u);
  checkPolygons(line, v);
}

TEST(VoronoiPolygons, LatticeCellsAreUnitSquares)
{
  Case c{"lattice", {}, {}, {}};
  for (int i = 0; i < 30; ++i)
    for (int j = 0; j < 30; ++j)
    {
      c.x.push_back(i);
      c.y.push_back(j);
    }
  c.rect = ClipRectangle{-0.5, -0.5, 29.5, 29.5};
  const VoronoiPolygons v = run(c);
  for (int64_t cell = 0; cell + 1 < int64_t(v.ringStart.size()); ++cell)
  {
    const int64_t a = v.ringStart[cell], b = v.ringStart[cell + 1];
    EXPECT_EQ(b - a, 4) << "cell " << cell;
    double twice = 0.0;
    for (int64_t k = a; k < b; ++k)
    {
      const int64_t k1 = k + 1 < b ? k + 1 : a;
      twice += v.x[k] * v.y[k1] - v.x[k1] * v.y[k];
    }
    EXPECT_NEAR(0.5 * twice, 1.0, 1e-12) << "cell " << cell;
  }
  checkPolygons(c, v);
}

TEST(VoronoiPolygons, ClustersAndUtmCoordinates)
{
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0.0, 1.0);
  Case clusters{"clusters", {}, {}, {}};
  for (int k = 0; k < 5; ++k)
  {
    const double cx = 100.0 * k, cy = 37.0 * k, spread = std::pow(10.0, -k);
    for (int i = 0; i < 300; ++i)
    {
      clusters.x.push_back(cx + spread * g(rng));
      clusters.y.push_back(cy + spread * g(rng));
    }
  }
  clusters.rect = extentOf(clusters.x, clusters.y, 0.1);
  checkPolygons(clusters, run(clusters));
  Case utm = uniformCase(6, 800, 612345.25, 5123456.75, 250.0);
  utm.name = "UTM";
  checkPolygons(utm, run(utm));
}

// The tolerance merges greedily in input order: each point within it of a kept earlier point goes
// to the lowest such; the kept points' polygons are those of the kept points alone.
TEST(VoronoiPolygons, ToleranceMergesIntoEarlierPoints)
{
  const Case c = uniformCase(8, 600, 0.0, 0.0, 100.0);
  const double tolerance = 3.0;
  const VoronoiPolygons v = voronoiPolygons(PlanePoints{c.x.data(), c.y.data(), int64_t(c.x.size())}, c.rect,
                                            VoronoiPolygonsOptions{2, tolerance}, RunControl{});
  Case kept{"kept", {}, {}, c.rect};
  std::vector<int64_t> keptIndex;
  for (int64_t i = 0; i < int64_t(c.x.size()); ++i)
  {
    bool merged = false;
    for (int64_t k : keptIndex)
      merged = merged || dist2(c.x[i], c.y[i], c.x[k], c.y[k]) <= tolerance * tolerance;
    EXPECT_EQ(v.cellOfPoint[i] < 0, merged) << i;
    if (!merged)
    {
      keptIndex.push_back(i);
      kept.x.push_back(c.x[i]);
      kept.y.push_back(c.y[i]);
    }
  }
  EXPECT_EQ(v.duplicates, int64_t(c.x.size() - keptIndex.size()));
  const VoronoiPolygons alone = run(kept);
  ASSERT_EQ(alone.x.size(), v.x.size());
  for (std::size_t k = 0; k < v.x.size(); ++k)
    ASSERT_EQ(alone.x[k], v.x[k]) << k;
}

TEST(VoronoiPolygons, BadInputIsRefused)
{
  const double x[] = {1.0, std::nan("")}, y[] = {2.0, 3.0};
  EXPECT_THROW(voronoiPolygons(PlanePoints{x, y, 0}, ClipRectangle{0, 0, 1, 1}, VoronoiPolygonsOptions{1, 0.0}, RunControl{}), InvalidInput);
  EXPECT_THROW(voronoiPolygons(PlanePoints{x, y, 2}, ClipRectangle{0, 0, 1, 1}, VoronoiPolygonsOptions{1, 0.0}, RunControl{}), InvalidInput);
  EXPECT_THROW(voronoiPolygons(PlanePoints{x, y, 1}, ClipRectangle{0, 0, 0, 1}, VoronoiPolygonsOptions{1, 0.0}, RunControl{}), InvalidInput);
  EXPECT_THROW(voronoiPolygons(PlanePoints{x, y, 1}, ClipRectangle{0, 0, 1, 1}, VoronoiPolygonsOptions{1, -1.0}, RunControl{}), InvalidInput);
  const double huge[] = {1e200};
  EXPECT_THROW(voronoiPolygons(PlanePoints{huge, y, 1}, ClipRectangle{0, 0, 1, 1}, VoronoiPolygonsOptions{1, 0.0}, RunControl{}), InvalidInput);
  RunControl cancel;
  cancel.canceled = [] { return true; };
  const Case c = uniformCase(7, 100);
  EXPECT_THROW(voronoiPolygons(PlanePoints{c.x.data(), c.y.data(), 100}, c.rect, VoronoiPolygonsOptions{1, 0.0}, cancel), Canceled);
}
