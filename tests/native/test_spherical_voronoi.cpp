// Spherical Voronoi polygons against brute force: every sample point on the sphere must fall in the
// polygon of its nearest site, every Voronoi vertex must be the centre of an empty cap through its
// three sites, areas must sum to 4 pi, and every ring must be a valid EPSG:4326 polygon ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "sphere/spherical_voronoi.h"
#include "spherical_sites.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = kPi / 180.0;

using cases::Sites;
using cases::randomSites;

using Vec = std::array<double, 3>;

Vec unit(double lonDeg, double latDeg)
{
  return {std::cos(latDeg * kDeg) * std::cos(lonDeg * kDeg), std::cos(latDeg * kDeg) * std::sin(lonDeg * kDeg),
          std::sin(latDeg * kDeg)};
}
double dot(const Vec& a, const Vec& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vec sub(const Vec& a, const Vec& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
double norm(const Vec& a) { return std::sqrt(dot(a, a)); }

std::vector<SphericalRegion> run(const Sites& s, double step = 0.5)
{
  SphericalVoronoiOptions options;
  options.densifyStepDeg = step;
  return sphericalVoronoi(s.lon.data(), s.lat.data(), s.size(), options, RunControl{});
}

// Crossing-number test in lon/lat, over every part of a region.
bool insideRegion(const SphericalRegion& r, double lon, double lat)
{
  bool in = false;
  for (const LonLatPolygon& p : r.parts)
  {
    const auto& x = p.outer.lon;
    const auto& y = p.outer.lat;
    for (size_t i = 0, j = x.size() - 1; i < x.size(); j = i++)
      if ((y[i] > lat) != (y[j] > lat) && lon < (x[j] - x[i]) * (lat - y[i]) / (y[j] - y[i]) + x[i])
        in = !in;
  }
  return in;
}

// Distance in degrees from (lon, lat) to the nearest edge of the region's rings, in the lon/lat plane.
double boundaryDistance(const SphericalRegion& r, double lon, double lat)
{
  double best = std::numeric_limits<double>::infinity();
  for (const LonLatPolygon& p : r.parts)
  {
    const auto& x = p.outer.lon;
    const auto& y = p.outer.lat;
    for (size_t i = 0; i + 1 < x.size(); ++i)
    {
      const double dx = x[i + 1] - x[i], dy = y[i + 1] - y[i];
      const double l2 = dx * dx + dy * dy;
      double t = l2 > 0 ? ((lon - x[i]) * dx + (lat - y[i]) * dy) / l2 : 0.0;
      t = std::clamp(t, 0.0, 1.0);
      best = std::min(best, std::hypot(lon - x[i] - t * dx, lat - y[i] - t * dy));
    }
  }
  return best;
}

// Whether segments pq and rs share a point (touching counts), by orientation signs.
bool segmentsMeet(const double* p, const double* q, const double* r, const double* t)
{
  auto orient = [](const double* a, const double* b, const double* c) {
    const double d = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
    return d > 0 ? 1 : d < 0 ? -1 : 0;
  };
  auto onSegment = [](const double* a, const double* b, const double* c) {
    return std::min(a[0], b[0]) <= c[0] && c[0] <= std::max(a[0], b[0]) && std::min(a[1], b[1]) <= c[1] &&
           c[1] <= std::max(a[1], b[1]);
  };
  const int o1 = orient(p, q, r), o2 = orient(p, q, t), o3 = orient(r, t, p), o4 = orient(r, t, q);
  if (o1 != o2 && o3 != o4 && o1 * o2 <= 0 && o3 * o4 <= 0 && (o1 != 0 || o2 != 0))
    return true;
  return (o1 == 0 && onSegment(p, q, r)) || (o2 == 0 && onSegment(p, q, t)) || (o3 == 0 && onSegment(r, t, p)) ||
         (o4 == 0 && onSegment(r, t, q));
}

// A simple ring: no two non-adjacent edges meet (a sweep over the edges sorted by smallest lon).
bool ringIsSimple(const LonLatRing& ring, size_t& badA, size_t& badB)
{
  const size_t n = ring.lon.size() - 1;  // edges; the ring is closed
  std::vector<std::array<double, 2>> pt(n + 1);
  for (size_t i = 0; i <= n; ++i)
    pt[i] = {ring.lon[i], ring.lat[i]};
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i)
    order[i] = i;
  auto lo = [&](size_t e) { return std::min(pt[e][0], pt[e + 1][0]); };
  auto hi = [&](size_t e) { return std::max(pt[e][0], pt[e + 1][0]); };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lo(a) < lo(b); });
  std::vector<size_t> active;
  for (size_t e : order)
  {
    active.erase(std::remove_if(active.begin(), active.end(), [&](size_t f) { return hi(f) < lo(e); }), active.end());
    for (size_t f : active)
    {
      const bool adjacent = f + 1 == e || e + 1 == f || (f == 0 && e == n - 1) || (e == 0 && f == n - 1);
      if (!adjacent && segmentsMeet(pt[e].data(), pt[e + 1].data(), pt[f].data(), pt[f + 1].data()))
      {
        badA = std::min(e, f);
        badB = std::max(e, f);
        return false;
      }
    }
    active.push_back(e);
  }
  return true;
}

// Ring validity: closed, in range, at least 4 points, no consecutive duplicates, counter-clockwise,
// simple (no self-intersection or self-touching).
void checkRings(const std::vector<SphericalRegion>& regions, const std::string& name)
{
  for (size_t i = 0; i < regions.size(); ++i)
    for (const LonLatPolygon& p : regions[i].parts)
    {
      const auto& x = p.outer.lon;
      const auto& y = p.outer.lat;
      ASSERT_EQ(x.size(), y.size()) << name << " region " << i;
      ASSERT_GE(x.size(), 4u) << name << " region " << i;
      EXPECT_TRUE(p.holes.empty()) << name << " region " << i;
      EXPECT_EQ(x.front(), x.back()) << name << " region " << i << ": ring not closed";
      EXPECT_EQ(y.front(), y.back()) << name << " region " << i << ": ring not closed";
      double area2 = 0;
      for (size_t k = 0; k + 1 < x.size(); ++k)
      {
        EXPECT_TRUE(x[k] >= -180.0 && x[k] <= 180.0) << name << " region " << i << " lon " << x[k];
        EXPECT_TRUE(y[k] >= -90.0 && y[k] <= 90.0) << name << " region " << i << " lat " << y[k];
        EXPECT_FALSE(x[k] == x[k + 1] && y[k] == y[k + 1]) << name << " region " << i << ": repeated point " << k;
        area2 += (x[k] - x[0]) * (y[k + 1] - y[0]) - (x[k + 1] - x[0]) * (y[k] - y[0]);
      }
      EXPECT_GT(area2, 0.0) << name << " region " << i << ": ring not counter-clockwise";
      size_t a = 0, b = 0;
      EXPECT_TRUE(ringIsSimple(p.outer, a, b)) << name << " region " << i << ": edges " << a << " and " << b
                                               << " of its ring meet";
    }
}

void checkAreas(const std::vector<SphericalRegion>& regions, const std::string& name)
{
  double sum = 0;
  for (size_t i = 0; i < regions.size(); ++i)
  {
    const SphericalRegion& r = regions[i];
    if (r.duplicateOf >= 0)
    {
      EXPECT_LT(r.duplicateOf, static_cast<int64_t>(i)) << name << " region " << i;
      EXPECT_LT(regions[static_cast<size_t>(r.duplicateOf)].duplicateOf, 0) << name << " region " << i;
      EXPECT_TRUE(r.parts.empty()) << name << " duplicate " << i << " has parts";
      EXPECT_EQ(r.areaSteradians, 0.0) << name << " duplicate " << i;
      continue;
    }
    EXPECT_GT(r.areaSteradians, 0.0) << name << " region " << i;
    EXPECT_FALSE(r.parts.empty()) << name << " region " << i << " has no polygon";
    sum += r.areaSteradians;
  }
  ASSERT_NEAR(sum, 4 * kPi, 4 * kPi * 1e-9) << name << ": areas do not sum to 4 pi";
}

// Each site lies in its own polygon (or on its boundary, for sites on a pole or the antimeridian).
void checkSitesInside(const Sites& s, const std::vector<SphericalRegion>& regions, const std::string& name)
{
  for (int64_t i = 0; i < s.size(); ++i)
  {
    const SphericalRegion& r = regions[static_cast<size_t>(i)];
    if (r.duplicateOf >= 0)
      continue;
    const double lon = std::remainder(s.lon[static_cast<size_t>(i)], 360.0);
    const double lat = s.lat[static_cast<size_t>(i)];
    bool ok = insideRegion(r, lon, lat) || boundaryDistance(r, lon, lat) < 1e-9;
    if (!ok && std::fabs(lon) == 180.0)
      ok = insideRegion(r, -lon, lat) || boundaryDistance(r, -lon, lat) < 1e-9;
    EXPECT_TRUE(ok) << name << ": site " << i << " (" << lon << ", " << lat << ") is outside its polygon";
  }
}

// Every Voronoi vertex is equidistant to its site and the two neighbours of its edges, and no site
// is nearer (the empty circumcap of the Delaunay triangle).
void checkVertices(const Sites& s, const std::vector<SphericalRegion>& regions, const std::string& name,
                   double tol = 1e-12)
{
  std::vector<Vec> p;
  for (int64_t i = 0; i < s.size(); ++i)
    p.push_back(unit(s.lon[static_cast<size_t>(i)], s.lat[static_cast<size_t>(i)]));
  for (size_t i = 0; i < regions.size(); ++i)
  {
    const SphericalRegion& r = regions[i];
    ASSERT_EQ(r.vertices.size(), r.neighbors.size()) << name << " region " << i;
    const size_t k = r.vertices.size();
    for (size_t j = 0; j < k; ++j)
    {
      const Vec& v = r.vertices[j];
      EXPECT_NEAR(norm(v), 1.0, 1e-14) << name << " region " << i;
      const double own = dot(v, p[i]);
      const int64_t a = r.neighbors[j];
      const int64_t b = r.neighbors[(j + k - 1) % k];
      EXPECT_NEAR(dot(v, p[static_cast<size_t>(a)]), own, tol) << name << " region " << i << " vertex " << j;
      EXPECT_NEAR(dot(v, p[static_cast<size_t>(b)]), own, tol) << name << " region " << i << " vertex " << j;
      double nearest = -2;
      for (const Vec& q : p)
        nearest = std::max(nearest, dot(v, q));
      EXPECT_LE(nearest, own + tol) << name << " region " << i << " vertex " << j << ": a site is inside the cap";
    }
  }
}

// Random points on the sphere must lie in the polygon of their nearest site, except within tol
// (radians) of a bisector, where the densified lon/lat edges may differ from the great circles.
void checkBruteForce(const Sites& s, const std::vector<SphericalRegion>& regions, int samples, uint32_t seed,
                     double stepDeg, const std::string& name)
{
  std::vector<Vec> p;
  std::vector<int64_t> uniq;
  for (int64_t i = 0; i < s.size(); ++i)
  {
    p.push_back(unit(s.lon[static_cast<size_t>(i)], s.lat[static_cast<size_t>(i)]));
    if (regions[static_cast<size_t>(i)].duplicateOf < 0)
      uniq.push_back(i);
  }
  const double stepRad = stepDeg * kDeg;
  const double tol = 0.5 * stepRad * stepRad + 1e-9;
  std::vector<std::array<double, 4>> box(regions.size(), {1e9, -1e9, 1e9, -1e9});  // lon, lat bounds
  for (size_t i = 0; i < regions.size(); ++i)
    for (const LonLatPolygon& part : regions[i].parts)
      for (size_t k = 0; k < part.outer.lon.size(); ++k)
      {
        box[i][0] = std::min(box[i][0], part.outer.lon[k]);
        box[i][1] = std::max(box[i][1], part.outer.lon[k]);
        box[i][2] = std::min(box[i][2], part.outer.lat[k]);
        box[i][3] = std::max(box[i][3], part.outer.lat[k]);
      }
  auto inBox = [](const std::array<double, 4>& b, double lon, double lat) {
    return lon >= b[0] && lon <= b[1] && lat >= b[2] && lat <= b[3];
  };
  std::mt19937_64 rng(seed * 7919u + 17u);
  std::normal_distribution<double> gauss;
  int tested = 0, failed = 0;
  for (int n = 0; n < samples; ++n)
  {
    Vec x{gauss(rng), gauss(rng), gauss(rng)};
    const double l = norm(x);
    x = {x[0] / l, x[1] / l, x[2] / l};
    int64_t best = uniq[0];
    for (int64_t i : uniq)
      if (dot(x, p[static_cast<size_t>(i)]) > dot(x, p[static_cast<size_t>(best)]))
        best = i;
    double gap = std::numeric_limits<double>::infinity();
    for (int64_t i : uniq)
    {
      if (i == best)
        continue;
      const Vec m = sub(p[static_cast<size_t>(best)], p[static_cast<size_t>(i)]);
      gap = std::min(gap, std::asin(std::min(1.0, std::fabs(dot(x, m)) / norm(m))));
    }
    if (gap < tol)
      continue;
    ++tested;
    const double lon = std::atan2(x[1], x[0]) / kDeg;
    const double lat = std::atan2(x[2], std::hypot(x[0], x[1])) / kDeg;
    if (!insideRegion(regions[static_cast<size_t>(best)], lon, lat))
    {
      if (++failed <= 5)
        ADD_FAILURE() << name << ": point (" << lon << ", " << lat << ") is not in the polygon of its nearest site "
                      << best;
      continue;
    }
    // The regions tile the sphere: no other region holds the point.
    for (int64_t i : uniq)
      if (i != best && inBox(box[static_cast<size_t>(i)], lon, lat) && insideRegion(regions[static_cast<size_t>(i)], lon, lat))
      {
        if (++failed <= 5)
          ADD_FAILURE() << name << ": point (" << lon << ", " << lat << ") of site " << best << " is also in region " << i;
        break;
      }
  }
  EXPECT_EQ(failed, 0) << name << ": " << failed << " of " << tested << " points outside their nearest site's polygon";
  EXPECT_GT(tested, samples / 4) << name << ": too few points tested";
}

// A clean coverage: every ring point (but the corners of the lon/lat rectangle) lies on an edge that
// another region shares, so it appears bitwise in another region's rings too (on the antimeridian
// under the other sign of 180).
void checkCoverage(const std::vector<SphericalRegion>& regions, const std::string& name)
{
  std::map<std::pair<double, double>, std::set<size_t>> owners;
  for (size_t i = 0; i < regions.size(); ++i)
    for (const LonLatPolygon& p : regions[i].parts)
      for (size_t k = 0; k < p.outer.lon.size(); ++k)
        owners[{p.outer.lon[k] == 180.0 ? -180.0 : p.outer.lon[k], p.outer.lat[k]}].insert(i);
  int lonely = 0;
  for (const auto& [point, who] : owners)
    if (who.size() < 2 && !(std::fabs(point.first) == 180.0 && std::fabs(point.second) == 90.0) && ++lonely <= 3)
      ADD_FAILURE() << name << ": point (" << point.first << ", " << point.second << ") of region " << *who.begin()
                    << " is in no other region";
}

// Every ring point but those along a pole's line (lat +-90) lies on the region's boundary: no site is
// nearer to it than its own, and one other site is as near, within tol (in cosines of the distance).
// That includes the points where a ring is cut at the antimeridian.
void checkRingPointsOnBisectors(const Sites& s, const std::vector<SphericalRegion>& regions, const std::string& name,
                                double tol = 1e-12)
{
  std::vector<Vec> p;
  std::vector<size_t> uniq;
  for (int64_t i = 0; i < s.size(); ++i)
  {
    p.push_back(unit(s.lon[static_cast<size_t>(i)], s.lat[static_cast<size_t>(i)]));
    if (regions[static_cast<size_t>(i)].duplicateOf < 0)
      uniq.push_back(static_cast<size_t>(i));
  }
  if (uniq.size() < 2)
    return;
  int failed = 0;
  for (size_t i = 0; i < regions.size(); ++i)
    for (const LonLatPolygon& part : regions[i].parts)
      for (size_t k = 0; k + 1 < part.outer.lon.size(); ++k)
      {
        if (std::fabs(part.outer.lat[k]) == 90.0)
          continue;
        const Vec x = unit(part.outer.lon[k], part.outer.lat[k]);
        const double own = dot(x, p[i]);
        double other = -2;
        for (size_t j : uniq)
          if (j != i)
            other = std::max(other, dot(x, p[j]));
        if (std::fabs(own - other) > tol && ++failed <= 5)
          ADD_FAILURE() << name << ": point " << k << " (" << part.outer.lon[k] << ", " << part.outer.lat[k]
                        << ") of region " << i << " is off its boundary by " << own - other;
      }
  EXPECT_EQ(failed, 0) << name << ": ring points off the boundary";
}

void checkAll(const Sites& s, const std::vector<SphericalRegion>& r, const std::string& name, int samples = 3000,
              double step = 0.5, uint32_t seed = 1)
{
  ASSERT_EQ(static_cast<int64_t>(r.size()), s.size()) << name;
  checkRings(r, name);
  checkCoverage(r, name);
  checkAreas(r, name);
  checkSitesInside(s, r, name);
  checkVertices(s, r, name);
  checkRingPointsOnBisectors(s, r, name);
  checkBruteForce(s, r, samples, seed, step, name);
}

}  // namespace

TEST(SphericalVoronoi, RandomSites)
{
  for (int64_t n : {4, 10, 100, 2000})
    for (uint32_t seed : {1u, 2u, 3u})
    {
      const std::string name = "random n=" + std::to_string(n) + " seed=" + std::to_string(seed);
      const Sites s = randomSites(n, seed);
      const auto r = run(s);
      checkAll(s, r, name, n >= 2000 ? 4000 : 3000, 0.5, seed);
      if (::testing::Test::HasFatalFailure())
        return;
    }
}

// The per-site steps run on several threads: the regions, areas, neighbours and polygons are bit
// for bit those of one thread, with duplicates and sites on the poles and the antimeridian mixed in.
TEST(SphericalVoronoi, ThreadsGiveTheSameRegions)
{
  Sites s = randomSites(3000, 17);
  for (int i = 0; i < 30; ++i)
    s.add(s.lon[size_t(i * 7)], s.lat[size_t(i * 7)]);
  s.add(0.0, 90.0);
  s.add(180.0, 12.5);
  s.add(-180.0, -40.0);
  std::vector<std::vector<SphericalRegion>> runs;
  for (int threads : {1, 2, 3})
  {
    SphericalVoronoiOptions options;
    options.densifyStepDeg = 0.5;
    options.threads = threads;
    runs.push_back(sphericalVoronoi(s.lon.data(), s.lat.data(), s.size(), options, RunControl{}));
  }
  for (size_t k = 1; k < runs.size(); ++k)
    for (size_t i = 0; i < runs[0].size(); ++i)
    {
      const SphericalRegion &a = runs[0][i], &b = runs[k][i];
      ASSERT_EQ(a.duplicateOf, b.duplicateOf) << i;
      ASSERT_EQ(a.areaSteradians, b.areaSteradians) << i;
      ASSERT_EQ(a.vertices, b.vertices) << i;
      ASSERT_EQ(a.neighbors, b.neighbors) << i;
      ASSERT_EQ(a.parts.size(), b.parts.size()) << i;
      for (size_t p = 0; p < a.parts.size(); ++p)
      {
        ASSERT_EQ(a.parts[p].outer.lon, b.parts[p].outer.lon) << i;
        ASSERT_EQ(a.parts[p].outer.lat, b.parts[p].outer.lat) << i;
      }
    }
}

TEST(SphericalVoronoi, CoarseAndFineDensification)
{
  for (double step : {10.0, 0.1})
  {
    const std::string name = "random n=30 step=" + std::to_string(step);
    const Sites s = randomSites(30, 11);
    const auto r = run(s, step);
    checkAll(s, r, name, 3000, step, 11);
  }
}

TEST(SphericalVoronoi, SitesAtBothPoles)
{
  Sites s = randomSites(20, 5);
  s.add(0, 90);
  s.add(37, -90);
  s.add(120, 90);  // the north pole again, under another longitude: a duplicate
  const auto r = run(s);
  checkAll(s, r, "poles");
  EXPECT_EQ(r[22].duplicateOf, 20);
  // The polar regions each contain their pole: one polygon over the full longitude range.
  for (size_t i : {20u, 21u})
  {
    ASSERT_EQ(r[i].parts.size(), 1u) << "poles region " << i;
    const auto& lon = r[i].parts[0].outer.lon;
    EXPECT_EQ(*std::min_element(lon.begin(), lon.end()), -180.0);
    EXPECT_EQ(*std::max_element(lon.begin(), lon.end()), 180.0);
  }
}

TEST(SphericalVoronoi, SitesOnTheAntimeridian)
{
  Sites s = randomSites(15, 6);
  s.add(180, 10);
  s.add(-180, -25);
  s.add(180, 60);
  s.add(-180, 10);  // the same point as site 15
  s.add(540, -25);  // longitudes are taken modulo 360: the same point as site 16
  const auto r = run(s);
  checkAll(s, r, "antimeridian");
  EXPECT_EQ(r[18].duplicateOf, 15);
  EXPECT_EQ(r[19].duplicateOf, 16);
  for (size_t i : {15u, 16u, 17u})
  {
    // Cut in two, or (site 17 here, the nearest to the north pole) one polar polygon over [-180, 180].
    EXPECT_EQ(r[i].parts.size(), i == 17 ? 1u : 2u) << "antimeridian region " << i;
    bool west = false, east = false;
    for (const auto& part : r[i].parts)
      for (double x : part.outer.lon)
      {
        west = west || x == -180.0;
        east = east || x == 180.0;
      }
    EXPECT_TRUE(west && east) << "antimeridian region " << i << ": cut points are not exactly +-180";
  }
}

TEST(SphericalVoronoi, EquatorOnlyGivesLunes)
{
  Sites s;
  for (double lon : {0.0, 30.0, 100.0, -160.0, -60.0, 170.0})
    s.add(lon, 0.0);
  const auto r = run(s);
  checkAll(s, r, "equator");
  // Sorted longitudes 0 30 100 170 200 300: a lune's area is the sum of its two longitude gaps.
  const double expected[] = {90.0, 100.0, 140.0, 130.0, 160.0, 100.0};
  for (size_t i = 0; i < 6; ++i)
  {
    EXPECT_NEAR(r[i].areaSteradians, expected[i] * kDeg, 1e-13) << "equator lune " << i;
    EXPECT_EQ(r[i].vertices.size(), 2u) << "equator lune " << i;
  }
}

TEST(SphericalVoronoi, OtherCoplanarSets)
{
  {
    // A tilted great circle, normal (1, 1, 1) / sqrt 3.
    Sites s;
    const Vec a{1 / std::sqrt(2.0), -1 / std::sqrt(2.0), 0};
    const Vec b{1 / std::sqrt(6.0), 1 / std::sqrt(6.0), -2 / std::sqrt(6.0)};
    for (double t : {0.0, 50.0, 80.0, 170.0, 250.0, 300.0})
    {
      const double c = std::cos(t * kDeg), d = std::sin(t * kDeg);
      const Vec v{c * a[0] + d * b[0], c * a[1] + d * b[1], c * a[2] + d * b[2]};
      s.add(std::atan2(v[1], v[0]) / kDeg, std::asin(v[2]) / kDeg);
    }
    checkAll(s, run(s), "tilted great circle");
  }
  {
    // A small circle: latitude 50; its plane does not pass through the centre.
    Sites s;
    for (double lon : {-170.0, -20.0, 40.0, 95.0})
      s.add(lon, 50.0);
    const auto r = run(s);
    checkAll(s, r, "small circle");
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(r[i].vertices.size(), 2u) << "small circle lune " << i;
  }
  {
    // Nearly coplanar: the equator and one site just off it (not a lune set).
    Sites s;
    for (double lon : {0.0, 70.0, 150.0, -100.0})
      s.add(lon, 0.0);
    s.add(35.0, 1e-3);
    checkAll(s, run(s), "nearly coplanar");
  }
}

TEST(SphericalVoronoi, OneSiteIsTheWholeSphere)
{
  Sites s;
  s.add(12.5, -33.0);
  const auto r = run(s);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NEAR(r[0].areaSteradians, 4 * kPi, 1e-15);
  ASSERT_EQ(r[0].parts.size(), 1u);
  const auto& ring = r[0].parts[0].outer;
  EXPECT_EQ(ring.lon, (std::vector<double>{-180, 180, 180, -180, -180}));
  EXPECT_EQ(ring.lat, (std::vector<double>{-90, -90, 90, 90, -90}));
  checkRings(r, "one site");
}

TEST(SphericalVoronoi, TwoSites)
{
  const std::vector<std::array<double, 4>> pairs = {
      {10, 20, -50, 5},     // generic
      {0, 0, 180, 0},       // antipodal
      {-30, 20, 30, 20},    // bisector through both poles
      {0, 90, 0, -90},      // the poles: the equator splits them
      {170, 10, -170, 10},  // bisector along the antimeridian's other side
  };
  for (const auto& q : pairs)
  {
    Sites s;
    s.add(q[0], q[1]);
    s.add(q[2], q[3]);
    const std::string name = "two sites (" + std::to_string(q[0]) + "," + std::to_string(q[1]) + ") (" +
                             std::to_string(q[2]) + "," + std::to_string(q[3]) + ")";
    const auto r = run(s);
    checkAll(s, r, name);
    EXPECT_NEAR(r[0].areaSteradians, 2 * kPi, 1e-13) << name;
    EXPECT_NEAR(r[1].areaSteradians, 2 * kPi, 1e-13) << name;
  }
}

TEST(SphericalVoronoi, ThreeSites)
{
  for (uint32_t seed : {21u, 22u, 23u})
  {
    const Sites s = randomSites(3, seed);
    checkAll(s, run(s), "three sites seed=" + std::to_string(seed));
  }
  Sites s;
  s.add(0, 60);
  s.add(120, 60);
  s.add(-120, 60);
  checkAll(s, run(s), "three sites around the north pole");
}

TEST(SphericalVoronoi, DuplicatedSites)
{
  Sites s = randomSites(50, 8);
  for (int i = 0; i < 10; ++i)
    s.add(s.lon[static_cast<size_t>(3 * i)], s.lat[static_cast<size_t>(3 * i)]);
  s.add(s.lon[0], s.lat[0]);
  const auto r = run(s);
  checkAll(s, r, "duplicates");
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(r[static_cast<size_t>(50 + i)].duplicateOf, 3 * i) << "duplicate " << 50 + i;
  EXPECT_EQ(r[60].duplicateOf, 0);
}

// 300,000 copies of one site among 1,000 others (runs of duplicates across the 65,536-site blocks of
// the unique-site pass): each copy points at the first, in linear time.
TEST(SphericalVoronoi, LongRunsOfDuplicates)
{
  Sites s = randomSites(1000, 12);
  for (int i = 0; i < 300000; ++i)
    s.add(i % 2 ? s.lon[5] : s.lon[700], i % 2 ? s.lat[5] : s.lat[700]);
  const auto r = run(s, 2.0);
  for (int i = 0; i < 300000; ++i)
    ASSERT_EQ(r[size_t(1000 + i)].duplicateOf, i % 2 ? 5 : 700) << i;
  double area = 0;
  for (int i = 0; i < 1000; ++i)
  {
    EXPECT_EQ(r[size_t(i)].duplicateOf, -1);
    area += r[size_t(i)].areaSteradians;
  }
  EXPECT_NEAR(area, 4 * kPi, 1e-12);
}

TEST(SphericalVoronoi, Octahedron)
{
  Sites s;
  for (const auto& q : std::vector<std::array<double, 2>>{{0, 0}, {90, 0}, {180, 0}, {-90, 0}, {0, 90}, {0, -90}})
    s.add(q[0], q[1]);
  const auto r = run(s);
  checkAll(s, r, "octahedron");
  for (size_t i = 0; i < 6; ++i)
  {
    EXPECT_NEAR(r[i].areaSteradians, 4 * kPi / 6, 1e-13) << "octahedron region " << i;
    EXPECT_EQ(r[i].vertices.size(), 4u) << "octahedron region " << i;
  }
}

TEST(SphericalVoronoi, CubeCocircularSites)
{
  Sites s;
  const double lat = std::atan(1 / std::sqrt(2.0)) / kDeg;
  for (double lon : {45.0, 135.0, -135.0, -45.0})
    for (double sign : {1.0, -1.0})
      s.add(lon, sign * lat);
  const auto r = run(s);
  checkAll(s, r, "cube");
  for (size_t i = 0; i < 8; ++i)
  {
    EXPECT_NEAR(r[i].areaSteradians, 4 * kPi / 8, 1e-13) << "cube region " << i;
    EXPECT_EQ(r[i].vertices.size(), 3u) << "cube region " << i << ": co-circular vertices not merged";
  }
}

TEST(SphericalVoronoi, PoleAsVoronoiVertex)
{
  // Three sites on one latitude around the north pole and one in the south: the north pole is a
  // Voronoi vertex of the three.
  Sites s;
  s.add(10, 40);
  s.add(130, 40);
  s.add(-110, 40);
  s.add(50, -70);
  checkAll(s, run(s), "pole as vertex");
}

TEST(SphericalVoronoi, SitesInOneSmallCap)
{
  // All sites within a few degrees: the far facets of the hull face the origin.
  Sites s;
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (int i = 0; i < 60; ++i)
    s.add(-170 + u(rng), 75 + u(rng));
  checkAll(s, run(s), "small cap");
}

TEST(SphericalVoronoi, TinyCluster)
{
  // Sites 1e-6 degree apart (about 10 cm), alone and among far sites; Qhull alone cannot resolve
  // the curvature between them.
  for (bool withFar : {false, true})
  {
    const std::string name = std::string("tiny cluster") + (withFar ? " with far sites" : " alone");
    Sites s = withFar ? randomSites(40, 9) : Sites{};
    const size_t first = s.lon.size();
    const double lon0 = 12.345678, lat0 = 45.678901;
    std::mt19937_64 rng(10);
    std::uniform_int_distribution<int> cell(-3, 3);
    std::uniform_real_distribution<double> jitter(-0.3e-6, 0.3e-6);
    for (int i = 0; i < 12; ++i)
    {
      const double x = lon0 + 1e-6 * cell(rng) + jitter(rng);
      const double y = lat0 + 1e-6 * cell(rng) + jitter(rng);
      s.add(x, y);
    }
    const auto r = run(s);
    checkAll(s, r, name);
    if (::testing::Test::HasFatalFailure())
      return;
    // Around the cluster, nearest sites by local planar distance (exact enough at this scale: the
    // brute force on unit vectors would be rounding there).
    std::mt19937_64 rng2(12);
    std::uniform_real_distribution<double> around(-5e-6, 5e-6);
    const double c = std::cos(lat0 * kDeg);
    int tested = 0, failed = 0;
    for (int n = 0; n < 4000; ++n)
    {
      const double lon = lon0 + around(rng2), lat = lat0 + around(rng2);
      double d1 = 1e300, d2 = 1e300;
      size_t best = first;
      for (size_t i = first; i < s.lon.size(); ++i)
      {
        const double d = std::hypot((s.lon[i] - lon) * c, s.lat[i] - lat);
        if (d < d1)
        {
          d2 = d1;
          d1 = d;
          best = i;
        }
        else
          d2 = std::min(d2, d);
      }
      if (d2 - d1 < 1e-9)
        continue;
      ++tested;
      if (!insideRegion(r[best], lon, lat) && ++failed <= 5)
        ADD_FAILURE() << name << ": (" << lon << ", " << lat << ") not in the polygon of site " << best;
    }
    EXPECT_EQ(failed, 0) << name << ": " << failed << " of " << tested << " local points misplaced";
  }
}

// A cluster of 1,500 sites some 30 cm across among 300 far ones: the hull leaves the cluster out
// (closer than its 2^-23 rad bound), so it is built again magnified about the cluster, and then
// leaves out far sites instead, which the repair inserts.
TEST(SphericalVoronoi, DenseClusterAmongFarSites)
{
  Sites s = randomSites(300, 21);
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> jitter(-1.5e-6, 1.5e-6);
  for (int i = 0; i < 1500; ++i)
    s.add(-60.25 + jitter(rng), 33.5 + jitter(rng));
  const auto r = run(s);
  checkAll(s, r, "dense cluster among far sites");
  double total = 0;
  for (const auto& region : r)
    total += region.areaSteradians;
  EXPECT_NEAR(total, 4 * kPi, 1e-12);
}

TEST(SphericalVoronoi, AllSitesIdentical)
{
  Sites s;
  for (int i = 0; i < 5; ++i)
    s.add(-75.5, 12.25);
  const auto r = run(s);
  checkRings(r, "identical");
  EXPECT_NEAR(r[0].areaSteradians, 4 * kPi, 1e-15);
  EXPECT_EQ(r[0].parts.size(), 1u);
  for (size_t i = 1; i < 5; ++i)
  {
    EXPECT_EQ(r[i].duplicateOf, 0) << "identical " << i;
    EXPECT_TRUE(r[i].parts.empty()) << "identical " << i;
  }
}

TEST(SphericalVoronoi, BadInput)
{
  const double lon[] = {0.0, 10.0};
  const double lat[] = {0.0, 20.0};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double lonNan[] = {0.0, nan};
  const double latNan[] = {nan, 20.0};
  const double lat91[] = {0.0, 91.0};
  const double lonInf[] = {std::numeric_limits<double>::infinity(), 0.0};
  const SphericalVoronoiOptions ok;
  const RunControl control;
  EXPECT_THROW(sphericalVoronoi(lon, lat, 0, ok, control), InvalidInput);
  EXPECT_THROW(sphericalVoronoi(lonNan, lat, 2, ok, control), InvalidInput);
  EXPECT_THROW(sphericalVoronoi(lon, latNan, 2, ok, control), InvalidInput);
  EXPECT_THROW(sphericalVoronoi(lon, lat91, 2, ok, control), InvalidInput);
  EXPECT_THROW(sphericalVoronoi(lonInf, lat, 2, ok, control), InvalidInput);
  for (double step : {0.0, -1.0, 10.5, nan})
  {
    SphericalVoronoiOptions bad;
    bad.densifyStepDeg = step;
    EXPECT_THROW(sphericalVoronoi(lon, lat, 2, bad, control), InvalidInput) << "step " << step;
  }
}

TEST(SphericalVoronoi, Cancel)
{
  const Sites s = randomSites(5000, 13);
  RunControl control;
  control.canceled = [] { return true; };
  EXPECT_THROW(sphericalVoronoi(s.lon.data(), s.lat.data(), s.size(), SphericalVoronoiOptions{}, control), Canceled);
}

// The GPU path's mesh from the cells, with the cells made on the host by the kernel's own code: taken
// for uniform sites and then the same regions, areas, vertices, neighbours and polygons, bit for bit,
// as from CGAL's hull; refused on a grid (ties) with the reason, and the same result from the hull.
TEST(SphericalVoronoi, CellsMeshIsTheHullsMesh)
{
  Sites uniform = randomSites(20000, 11);
  uniform.add(uniform.lon[7], uniform.lat[7]);
  Sites grid;
  for (int lat = -87; lat <= 87; lat += 3)
    for (int lon = -180; lon < 180; lon += 3)
      grid.add(lon, lat);
  for (const Sites* s : {&uniform, &grid})
  {
    SphericalVoronoiOptions options;
    options.threads = 2;
    const auto hull = sphericalVoronoi(s->lon.data(), s->lat.data(), s->size(), options, RunControl{});
    options.backend = Backend::Gpu;
    options.cellsOnHost = true;
    SphericalVoronoiReport report;
    const auto cells = sphericalVoronoi(s->lon.data(), s->lat.data(), s->size(), options, RunControl{}, &report);
    if (s == &uniform)
      EXPECT_TRUE(report.gpuMesh) << report.gpuMeshRefused;
    else
    {
      EXPECT_FALSE(report.gpuMesh);
      EXPECT_FALSE(report.gpuMeshRefused.empty());
    }
    ASSERT_EQ(cells.size(), hull.size());
    for (size_t i = 0; i < cells.size(); ++i)
    {
      ASSERT_EQ(cells[i].duplicateOf, hull[i].duplicateOf) << i;
      ASSERT_EQ(cells[i].areaSteradians, hull[i].areaSteradians) << i;
      ASSERT_EQ(cells[i].vertices, hull[i].vertices) << i;
      ASSERT_EQ(cells[i].neighbors, hull[i].neighbors) << i;
      ASSERT_EQ(cells[i].parts.size(), hull[i].parts.size()) << i;
      for (size_t p = 0; p < cells[i].parts.size(); ++p)
      {
        ASSERT_EQ(cells[i].parts[p].outer.lon, hull[i].parts[p].outer.lon) << i;
        ASSERT_EQ(cells[i].parts[p].outer.lat, hull[i].parts[p].outer.lat) << i;
      }
    }
  }
}
