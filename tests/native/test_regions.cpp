// Region tracing (dem/regions.h) against brute force: every polygon covers exactly the cells of one
// 4-connected region (each cell centre tested against all its rings), its area is the region's
// cell count, and its rings are closed, simple, turn at every point, run the right way round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "core/errors.h"
#include "core/polygon_rings.h"
#include "dem/detail/dem_cuda.h"
#include "dem/regions.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

struct Labels
{
  int64_t w, h;
  std::vector<int32_t> v;
  int32_t at(int64_t x, int64_t y) const { return v[std::size_t(y * w + x)]; }
};

// The 4-connected regions of set k (cells of label k), each as a sorted list of cells.
std::vector<std::vector<int64_t>> regionsOf(const Labels& g, int32_t k)
{
  std::vector<int64_t> seen(g.v.size(), 0);
  std::vector<std::vector<int64_t>> out;
  for (int64_t c = 0; c < g.w * g.h; ++c)
  {
    if (g.v[std::size_t(c)] != k || seen[std::size_t(c)])
      continue;
    std::vector<int64_t> stack{c}, region;
    seen[std::size_t(c)] = 1;
    while (!stack.empty())
    {
      const int64_t p = stack.back();
      stack.pop_back();
      region.push_back(p);
      const int64_t x = p % g.w, y = p / g.w;
      const int64_t nx[4] = {x + 1, x - 1, x, x}, ny[4] = {y, y, y + 1, y - 1};
      for (int i = 0; i < 4; ++i)
      {
        if (nx[i] < 0 || ny[i] < 0 || nx[i] >= g.w || ny[i] >= g.h)
          continue;
        const int64_t q = ny[i] * g.w + nx[i];
        if (g.v[std::size_t(q)] == k && !seen[std::size_t(q)])
        {
          seen[std::size_t(q)] = 1;
          stack.push_back(q);
        }
      }
    }
    std::sort(region.begin(), region.end());
    out.push_back(std::move(region));
  }
  std::sort(out.begin(), out.end());
  return out;
}

double ringArea(const BandPolygons& p, int64_t r)
{
  double twice = 0;
  for (int64_t i = p.ringPoint[std::size_t(r)]; i + 1 < p.ringPoint[std::size_t(r) + 1]; ++i)
    twice += p.x[std::size_t(i)] * p.y[std::size_t(i) + 1] - p.x[std::size_t(i) + 1] * p.y[std::size_t(i)];
  return twice / 2;
}

bool insideRing(const BandPolygons& p, int64_t r, double px, double py)
{
  bool in = false;
  const int64_t b = p.ringPoint[std::size_t(r)], e = p.ringPoint[std::size_t(r) + 1] - 1;
  for (int64_t i = b; i < e; ++i)
  {
    const double xi = p.x[std::size_t(i)], yi = p.y[std::size_t(i)];
    const double xj = p.x[std::size_t(i) + 1], yj = p.y[std::size_t(i) + 1];
    if ((yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi)
      in = !in;
  }
  return in;
}

// Every check of the file's header, for one grid and its traced polygons.
void expectExactRegions(const Labels& g, int32_t count, const BandPolygons& p)
{
  ASSERT_EQ(p.bandPolygon.size(), std::size_t(count) + 1);
  for (int32_t k = 0; k < count; ++k)
  {
    const std::vector<std::vector<int64_t>> want = regionsOf(g, k);
    std::vector<std::vector<int64_t>> got;
    for (int64_t q = p.bandPolygon[std::size_t(k)]; q < p.bandPolygon[std::size_t(k) + 1]; ++q)
    {
      double area = 0;
      for (int64_t r = p.polygonRing[std::size_t(q)]; r < p.polygonRing[std::size_t(q) + 1]; ++r)
      {
        const int64_t b = p.ringPoint[std::size_t(r)], e = p.ringPoint[std::size_t(r) + 1];
        ASSERT_GE(e - b, 5) << "a ring has at least four corners";
        EXPECT_EQ(p.x[std::size_t(b)], p.x[std::size_t(e) - 1]);
        EXPECT_EQ(p.y[std::size_t(b)], p.y[std::size_t(e) - 1]);
        std::set<std::pair<double, double>> points;
        for (int64_t i = b; i + 1 < e; ++i)
        {
          EXPECT_TRUE(points.emplace(p.x[std::size_t(i)], p.y[std::size_t(i)]).second) << "a ring passes a point twice";
          EXPECT_EQ(p.x[std::size_t(i)], std::floor(p.x[std::size_t(i)]));
          EXPECT_TRUE(p.x[std::size_t(i)] >= 0 && p.x[std::size_t(i)] <= double(g.w));
          EXPECT_TRUE(p.y[std::size_t(i)] <= 0 && p.y[std::size_t(i)] >= -double(g.h));
          // Only corners: the previous and next points are not in line with this one.
          const int64_t prev = i == b ? e - 2 : i - 1;
          const double ax = p.x[std::size_t(i)] - p.x[std::size_t(prev)], ay = p.y[std::size_t(i)] - p.y[std::size_t(prev)];
          const double bx = p.x[std::size_t(i) + 1] - p.x[std::size_t(i)], by = p.y[std::size_t(i) + 1] - p.y[std::size_t(i)];
          EXPECT_NE(ax * by - ay * bx, 0.0) << "a point where the ring goes straight on";
          EXPECT_TRUE(ax == 0 || ay == 0) << "edges run along the cell edges";
        }
        const double a = ringArea(p, r);
        if (r == p.polygonRing[std::size_t(q)])
          EXPECT_GT(a, 0) << "shells run counter-clockwise";
        else
          EXPECT_LT(a, 0) << "holes run clockwise";
        area += a;
      }
      std::vector<int64_t> cells;
      for (int64_t c = 0; c < g.w * g.h; ++c)
      {
        const double px = double(c % g.w) + 0.5, py = -(double(c / g.w) + 0.5);
        bool in = insideRing(p, p.polygonRing[std::size_t(q)], px, py);
        for (int64_t r = p.polygonRing[std::size_t(q)] + 1; in && r < p.polygonRing[std::size_t(q) + 1]; ++r)
          in = !insideRing(p, r, px, py);
        if (in)
          cells.push_back(c);
      }
      EXPECT_EQ(area, double(cells.size())) << "set " << k << " polygon " << q;
      got.push_back(std::move(cells));
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "set " << k << ": the polygons are not the 4-connected regions";
  }
}

Labels randomLabels(uint64_t seed, int64_t w, int64_t h, int32_t values, double background)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Labels g{w, h, std::vector<int32_t>(std::size_t(w * h))};
  for (auto& v : g.v)
    v = u(rng) < background ? -1 : int32_t(rng() % uint64_t(values));
  return g;
}

Labels fromText(const std::vector<std::string>& rows)
{
  Labels g{int64_t(rows[0].size()), int64_t(rows.size()), {}};
  for (const auto& r : rows)
    for (const char ch : r)
      g.v.push_back(ch == '.' ? -1 : int32_t(ch - '0'));
  return g;
}

BandPolygons trace(const Labels& g, int32_t count, int threads = 2)
{
  return traceRegions(Backend::Cpu, g.v.data(), g.w, g.h, count, threads, RunControl());
}

}  // namespace

TEST(Regions, RandomLabelsGiveExactly4ConnectedRegions)
{
  for (uint64_t seed = 1; seed <= 12; ++seed)
  {
    const Labels g = randomLabels(seed, 5 + int64_t(seed * 7 % 23), 4 + int64_t(seed * 5 % 19), 1 + int32_t(seed % 4),
                                  seed % 3 == 0 ? 0.0 : 0.3);
    const int32_t count = 1 + int32_t(seed % 4);
    expectExactRegions(g, count, trace(g, count));
  }
}

TEST(Regions, SmoothBandsWithNestedIslands)
{
  // Concentric bands with noise: islands of a band inside holes of the same band, several deep.
  Labels g{61, 47, {}};
  std::mt19937_64 rng(5);
  for (int64_t y = 0; y < g.h; ++y)
    for (int64_t x = 0; x < g.w; ++x)
    {
      const double r = std::hypot(double(x) - 30.2, double(y) - 23.7) + double(rng() % 3);
      g.v.push_back(r > 28 ? -1 : int32_t(r / 3) % 3);
    }
  expectExactRegions(g, 3, trace(g, 3));
}

TEST(Regions, CornersTouchingAreKeptApart)
{
  // A checkerboard: every cell its own region (4-connectivity), each a unit square.
  const Labels board = fromText({"0101", "1010", "0101"});
  const BandPolygons p = trace(board, 2);
  expectExactRegions(board, 2, p);
  EXPECT_EQ(p.bandPolygon[1], 6);
  EXPECT_EQ(p.bandPolygon[2], 12);
  // A ring of cells closed only at a corner: one polygon whose hole touches its shell at one point.
  const Labels c = fromText({".000", "0..0", "0000"});
  const BandPolygons q = trace(c, 1);
  expectExactRegions(c, 1, q);
  ASSERT_EQ(q.bandPolygon[1], 1);
  EXPECT_EQ(q.polygonRing[1] - q.polygonRing[0], 2) << "the shell and its hole";
  // A hole made of two cells that meet at a corner: two holes, not one ring that crosses itself.
  const Labels d = fromText({"0000", "0.00", "00.0", "0000"});
  const BandPolygons r = trace(d, 1);
  expectExactRegions(d, 1, r);
  EXPECT_EQ(r.polygonRing[1] - r.polygonRing[0], 3);
}

TEST(Regions, WholeGridSingleCellAndBackground)
{
  const Labels all{7, 3, std::vector<int32_t>(21, 0)};
  const BandPolygons p = trace(all, 1);
  expectExactRegions(all, 1, p);
  ASSERT_EQ(p.ringPoint.size(), 2u);
  const std::vector<double> x{0, 7, 7, 0, 0}, y{0, 0, -3, -3, 0};
  // The shell starts at the top-left corner of the first cell and runs counter-clockwise (y up).
  EXPECT_EQ(p.x, (std::vector<double>{0, 0, 7, 7, 0}));
  EXPECT_EQ(p.y, (std::vector<double>{0, -3, -3, 0, 0}));
  const Labels one{1, 1, {0}};
  expectExactRegions(one, 1, trace(one, 1));
  // Labels outside [0, count) are background; a set with no cells has no polygons.
  const Labels g = fromText({"0122", "0122", "3333"});
  const BandPolygons q = trace(g, 2);
  expectExactRegions(g, 2, q);
  EXPECT_EQ(q.bandPolygon, (std::vector<int64_t>{0, 1, 2}));
  const Labels none{3, 3, std::vector<int32_t>(9, -1)};
  EXPECT_EQ(trace(none, 4).bandPolygon, (std::vector<int64_t>{0, 0, 0, 0, 0}));
}

TEST(Regions, ThreadsDoNotChangeTheArrays)
{
  // The CPU walks the rings by bands of rows, four a thread: small random regions, and rings that
  // wind through every band (concentric bands with noise, and a spiral corridor).
  Labels rings{150, 170, {}}, spiral{121, 113, {}};
  std::mt19937_64 rng(9);
  for (int64_t y = 0; y < rings.h; ++y)
    for (int64_t x = 0; x < rings.w; ++x)
    {
      const double r = std::hypot(double(x) - 75.4, double(y) - 85.6) + double(rng() % 4);
      rings.v.push_back(r > 80 ? -1 : int32_t(r / 7) % 4);
    }
  for (int64_t y = 0; y < spiral.h; ++y)
    for (int64_t x = 0; x < spiral.w; ++x)
    {
      const double dx = double(x) - 60.5, dy = double(y) - 56.5;
      const double turn = std::atan2(dy, dx) / (2 * std::acos(-1.0));
      spiral.v.push_back(int32_t(std::floor(std::hypot(dx, dy) / 9 - turn)) % 2 == 0 ? 0 : 1);
    }
  // One label with a third of the cells background: thousands of shells and holes in one band, whose
  // splitting, measuring and hole finding then run on the threads too.
  const std::pair<Labels, int32_t> cases[] = {
    {randomLabels(77, 300, 200, 5, 0.1), 5}, {randomLabels(78, 200, 150, 1, 0.35), 1}, {rings, 4}, {spiral, 2}};
  for (const auto& [g, count] : cases)
  {
    const BandPolygons a = trace(g, count, 1);
    for (int threads : {2, 3, 4, 7, 13})
    {
      const BandPolygons b = trace(g, count, threads);
      EXPECT_EQ(a.bandPolygon, b.bandPolygon) << g.w << " x " << g.h << ", " << threads << " threads";
      EXPECT_EQ(a.polygonRing, b.polygonRing) << g.w << " x " << g.h << ", " << threads << " threads";
      EXPECT_EQ(a.ringPoint, b.ringPoint) << g.w << " x " << g.h << ", " << threads << " threads";
      EXPECT_EQ(a.x, b.x) << g.w << " x " << g.h << ", " << threads << " threads";
      EXPECT_EQ(a.y, b.y) << g.w << " x " << g.h << ", " << threads << " threads";
    }
    if (count < 5)  // the one-label noise and the winding rings (the five labels are checked above)
      expectExactRegions(g, count, a);
  }
}

TEST(Regions, HugeRingsThatTouchThemselvesSplitAsSmallOnes)
{
  // A random field at 60 % cover: the largest region's outer ring has far more than the 65,536 nodes
  // from which a compact ring's repeated corners are found with bits (polygon_rings.cpp), and passes
  // corners twice. The same rings with their keys spread 1,000 times apart (too sparse for bits) go
  // through the hash tables: every array must be the same.
  const Labels g = randomLabels(31, 700, 650, 1, 0.4);
  const RunControl control;
  RawRings raw = dem::detail::regionRingsCpu(g.v.data(), g.w, g.h, 1, 2, control);
  // polygonsFromRings' coordinates: each ring reversed after its first corner, x the corner's column
  // and y minus its row.
  raw.x.resize(raw.key.size());
  raw.y.resize(raw.key.size());
  int64_t largest = 0, largestRing = 0;
  for (std::size_t r = 0; r + 1 < raw.ringNode.size(); ++r)
  {
    const int64_t b = raw.ringNode[r], e = raw.ringNode[r + 1];
    std::reverse(raw.key.begin() + b + 1, raw.key.begin() + e);
    for (int64_t i = b; i < e; ++i)
    {
      raw.x[std::size_t(i)] = double(raw.key[std::size_t(i)] % (g.w + 1));
      raw.y[std::size_t(i)] = -double(raw.key[std::size_t(i)] / (g.w + 1));
    }
    if (e - b > largest)
    {
      largest = e - b;
      largestRing = int64_t(r);
    }
  }
  ASSERT_GE(largest, 65536);
  std::vector<int64_t> keys(raw.key.begin() + raw.ringNode[std::size_t(largestRing)],
                            raw.key.begin() + raw.ringNode[std::size_t(largestRing) + 1]);
  std::sort(keys.begin(), keys.end());
  ASSERT_NE(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "the largest ring touches itself";
  RawRings spread = raw;
  spread.vertexCount *= 1000;
  for (auto& k : spread.key)
    k *= 1000;
  int64_t droppedBits = 0, droppedTables = 0;
  const BandPolygons a = assembleRings(raw, droppedBits, control, 3);
  const BandPolygons b = assembleRings(spread, droppedTables, control, 3);
  EXPECT_EQ(droppedBits, droppedTables);
  EXPECT_EQ(a.bandPolygon, b.bandPolygon);
  EXPECT_EQ(a.polygonRing, b.polygonRing);
  EXPECT_EQ(a.ringPoint, b.ringPoint);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  // The polygons cover the label's cells: shells less holes.
  double area = 0;
  for (std::size_t r = 0; r + 1 < a.ringPoint.size(); ++r)
    for (int64_t i = a.ringPoint[r]; i + 1 < a.ringPoint[r + 1]; ++i)
      area += a.x[std::size_t(i)] * a.y[std::size_t(i + 1)] - a.x[std::size_t(i + 1)] * a.y[std::size_t(i)];
  EXPECT_EQ(area / 2, double(std::count(g.v.begin(), g.v.end(), 0)));
  EXPECT_GT(a.polygonRing.back(), a.bandPolygon.back()) << "holes split off";
}

TEST(Regions, BadInputIsRefused)
{
  const std::vector<int32_t> v{0};
  EXPECT_THROW(traceRegions(Backend::Cpu, v.data(), 0, 1, 1, 1, RunControl()), InvalidInput);
  EXPECT_THROW(traceRegions(Backend::Cpu, nullptr, 1, 1, 1, 1, RunControl()), InvalidInput);
  EXPECT_THROW(traceRegions(Backend::Cpu, v.data(), 1, 1, 0, 1, RunControl()), InvalidInput);
}
