// gpugeo:pointneighbours through the QGIS API: memory point and multipoint layers in (EPSG:32633 and
// EPSG:4326), memory layers and GeoPackages out. Every count, nearest point, distance and pair is
// checked against a brute force computed here (every point against every other, plain double loops).
//
// The projected test points lie on a 1/64 m grid: every coordinate, every difference of two and the
// centre of their extent are exact doubles, so the brute force squares the very numbers the
// algorithm squares (it measures from the centre of the extent) and the comparisons can be exact,
// ties at the radius included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <tuple>

#include <QFile>

#include <qgsfeature.h>
#include <qgsfeatureiterator.h>
#include <qgsgeometry.h>
#include <qgslinestring.h>
#include <qgspoint.h>
#include <qgsprocessingutils.h>
#include <qgsvectorfilewriter.h>
#include <qgsvectorlayer.h>

#include "core/backend.h"
#include "processing_test_support.h"

namespace {

using gpugeo::test::featuresOf;
using gpugeo::test::RunResult;

// The sphere of the help text (IUGG mean radius), written here rather than taken from the core.
constexpr double kSphereRadiusM = 6371008.8;

// One site: a point, or a part of a multipoint. (px, py) in the layer's CRS; (x, y, z) where the
// distances are measured: the same in the plane, metres on the sphere for a geographic layer.
struct Site
{
  double px, py;
  double x, y, z;
  QgsFeatureId fid;
  int part;
  QVariant val;
  QString name;
};

// What the output should say about one site.
struct Expected
{
  int count = 0;
  int64_t nearest = -1;  // a site index
  double nearestDistance = std::numeric_limits<double>::quiet_NaN();
  double meanDistance = std::numeric_limits<double>::quiet_NaN();
};

using PairKey = std::tuple<qlonglong, int, qlonglong, int>;  // FID_A, PART_A, FID_B, PART_B

struct BruteForce
{
  std::vector<Expected> sites;
  std::map<PairKey, double> pairs;  // the distance of every pair
  int64_t tiesAtTheRadius = 0;      // pairs exactly at the radius
  int64_t tiesAtK = 0;              // sites whose K-th and (K+1)-th candidates are equally far
};

double squaredDistance(const Site& a, const Site& b)
{
  const double dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;
  return dx * dx + dy * dy + dz * dz;
}

// The query of the help text: k == 0, every other site within the radius (inclusive); k > 0, the k
// nearest within it, or at any distance when the radius is 0, equal distances in input order. The
// nearest other site at any distance, likewise. Pairs: every unordered pair where either site is a
// neighbour of the other.
BruteForce bruteForce(const std::vector<Site>& sites, double radius, int k)
{
  BruteForce out;
  const double r2 = radius * radius;
  const bool bounded = k == 0 || radius > 0;
  const size_t n = sites.size();
  out.sites.resize(n);
  std::vector<std::pair<double, size_t>> candidates;
  for (size_t i = 0; i < n; ++i)
  {
    candidates.clear();
    Expected& e = out.sites[i];
    double nearestD2 = 0;
    for (size_t j = 0; j < n; ++j)
    {
      if (j == i)
        continue;
      const double d2 = squaredDistance(sites[i], sites[j]);
      if (e.nearest < 0 || d2 < nearestD2)
      {
        e.nearest = int64_t(j);
        nearestD2 = d2;
      }
      if (!bounded || d2 <= r2)
        candidates.emplace_back(d2, j);
      if (j > i && d2 == r2)
        ++out.tiesAtTheRadius;
    }
    std::sort(candidates.begin(), candidates.end());
    if (k > 0 && candidates.size() > size_t(k))
    {
      if (candidates[size_t(k) - 1].first == candidates[size_t(k)].first)
        ++out.tiesAtK;
      candidates.resize(size_t(k));
    }
    double sum = 0;
    for (const auto& [d2, j] : candidates)
    {
      sum += std::sqrt(d2);
      const size_t a = std::min(i, j), b = std::max(i, j);
      out.pairs[{sites[a].fid, sites[a].part, sites[b].fid, sites[b].part}] = std::sqrt(d2);
    }
    e.count = int(candidates.size());
    if (!candidates.empty())
      e.meanDistance = sum / double(candidates.size());
    if (e.nearest >= 0)
      e.nearestDistance = std::sqrt(nearestD2);
  }
  return out;
}

// The unit vector of a longitude and latitude in degrees, times the sphere's radius.
void onTheSphere(Site& s)
{
  const double lon = s.px * M_PI / 180.0, lat = s.py * M_PI / 180.0;
  s.x = kSphereRadiusM * std::cos(lat) * std::cos(lon);
  s.y = kSphereRadiusM * std::cos(lat) * std::sin(lon);
  s.z = kSphereRadiusM * std::sin(lat);
}

// The sites of a layer as the algorithm reads them: features in the layer's order, multipoints one
// site a part, features without geometry or with an empty one left out.
std::vector<Site> sitesOf(QgsVectorLayer& layer)
{
  const bool geographic = layer.crs().isGeographic();
  std::vector<Site> sites;
  QgsFeature f;
  QgsFeatureIterator it = layer.getFeatures();
  while (it.nextFeature(f))
  {
    if (!f.hasGeometry())
      continue;
    int part = 0;
    for (auto p = f.geometry().vertices_begin(); p != f.geometry().vertices_end(); ++p)
    {
      if (std::isnan((*p).x()) && std::isnan((*p).y()))
        continue;
      Site s{(*p).x(),    (*p).y(), (*p).x(),
             (*p).y(),    0.0,      f.id(),
             part++,      f.attribute(QStringLiteral("val")), f.attribute(QStringLiteral("name")).toString()};
      if (geographic)
        onTheSphere(s);
      sites.push_back(s);
    }
  }
  return sites;
}

class PointNeighboursAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // A memory layer with an integer field "val" and a text field "name".
  static std::unique_ptr<QgsVectorLayer> layer(const QString& crs = QStringLiteral("EPSG:32633"),
                                               const QString& type = QStringLiteral("Point"))
  {
    return std::make_unique<QgsVectorLayer>(type + QStringLiteral("?crs=") + crs +
                                              QStringLiteral("&field=val:integer&field=name:string"),
                                            QStringLiteral("points"), QStringLiteral("memory"));
  }

  static void add(QgsVectorLayer& target, const QgsGeometry& geometry, int val)
  {
    QgsFeature feature(target.fields());
    feature.setGeometry(geometry);
    feature.setAttributes(QgsAttributes() << val << QStringLiteral("point %1").arg(val));
    ASSERT_TRUE(target.dataProvider()->addFeature(feature));
  }

  static void addPoint(QgsVectorLayer& target, double x, double y, int val)
  {
    add(target, QgsGeometry(new QgsPoint(x, y)), val);
  }

  // 300 random points in a 200 m square of UTM zone 33N on a 1/64 m grid; an 8 x 8 lattice of
  // 2 m spacing inside it (with the radius 10: neighbours at exactly 10 m, (6, 8) and (10, 0) apart);
  // exact duplicates of 20 random and 3 lattice points; in random order, with a feature without
  // geometry and one with an empty point among them.
  static std::unique_ptr<QgsVectorLayer> mixedLayer(uint32_t seed = 17)
  {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> ticks(0, 200 * 64);
    std::vector<std::pair<double, double>> points;
    for (int i = 0; i < 300; ++i)
    {
      const double x = 500000.0 + ticks(rng) / 64.0;  // x first: argument order is unspecified
      points.emplace_back(x, 5000000.0 + ticks(rng) / 64.0);
    }
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j)
        points.emplace_back(500080.0 + 2.0 * i, 5000090.0 + 2.0 * j);
    for (int i = 0; i < 20; ++i)
    {
      const auto copy = points[size_t(i * 13)];
      points.push_back(copy);
    }
    for (int i : {300, 327, 363})
    {
      const auto copy = points[size_t(i)];
      points.push_back(copy);
    }
    std::shuffle(points.begin(), points.end(), rng);
    auto input = layer();
    for (size_t i = 0; i < points.size(); ++i)
    {
      if (i == 57)
        add(*input, QgsGeometry(), 9057);
      if (i == 131)
        add(*input, QgsGeometry(new QgsPoint()), 9131);
      addPoint(*input, points[i].first, points[i].second, int(i));
    }
    return input;
  }

  // K = 0 (all within the radius) unless the test gives K: the tests were written for that default.
  RunResult run(QgsVectorLayer* input, QVariantMap parameters, QgsProcessingContext& context,
                bool cancelMidway = false)
  {
    if (!parameters.contains(QStringLiteral("K")))
      parameters.insert(QStringLiteral("K"), 0);
    return runAlgorithm(QStringLiteral("gpugeo:pointneighbours"), input, parameters, context, cancelMidway);
  }

  RunResult run(QgsVectorLayer* input, const QVariantMap& parameters, bool cancelMidway = false)
  {
    QgsProcessingContext context;
    return run(input, parameters, context, cancelMidway);
  }


  // The output points: one a site in the sites' order, at the site, with its feature's attributes and
  // NB_COUNT, NN_FID, NN_DIST, MEAN_DIST as the brute force has them (distances within `tolerance`;
  // 0: bit for bit; the mean within 1e-12 relative as well, the sum being taken in another order).
  static void expectPoints(QgsVectorLayer* output, const std::vector<Site>& sites, const BruteForce& want,
                           double tolerance)
  {
    ASSERT_TRUE(output);
    EXPECT_EQ(output->wkbType(), QgsWkbTypes::Point);
    const QStringList names = output->fields().names();
    EXPECT_EQ(names, (QStringList{"val", "name", "NB_COUNT", "NN_FID", "NN_DIST", "MEAN_DIST"}));
    const std::vector<QgsFeature> got = featuresOf(output);
    ASSERT_EQ(got.size(), sites.size());
    for (size_t i = 0; i < sites.size(); ++i)
    {
      const QgsFeature& f = got[i];
      const Site& s = sites[i];
      const Expected& e = want.sites[i];
      const std::string where = "site " + std::to_string(i) + " (fid " + std::to_string(s.fid) + " part " +
                                std::to_string(s.part) + ")";
      const QgsPointXY p = f.geometry().asPoint();
      EXPECT_EQ(p.x(), s.px) << where;
      EXPECT_EQ(p.y(), s.py) << where;
      EXPECT_EQ(f.attribute(QStringLiteral("val")), s.val) << where;
      EXPECT_EQ(f.attribute(QStringLiteral("name")).toString(), s.name) << where;
      EXPECT_EQ(f.attribute(QStringLiteral("NB_COUNT")).toInt(), e.count) << where;
      if (e.nearest < 0)
      {
        EXPECT_TRUE(f.attribute(QStringLiteral("NN_FID")).isNull()) << where;
        EXPECT_TRUE(f.attribute(QStringLiteral("NN_DIST")).isNull()) << where;
      }
      else
      {
        EXPECT_EQ(f.attribute(QStringLiteral("NN_FID")).toLongLong(), sites[size_t(e.nearest)].fid) << where;
        EXPECT_NEAR(f.attribute(QStringLiteral("NN_DIST")).toDouble(), e.nearestDistance, tolerance) << where;
      }
      if (e.count == 0)
        EXPECT_TRUE(f.attribute(QStringLiteral("MEAN_DIST")).isNull()) << where;
      else
        EXPECT_NEAR(f.attribute(QStringLiteral("MEAN_DIST")).toDouble(), e.meanDistance,
                    std::max(tolerance, 1e-12 * e.meanDistance))
          << where;
    }
  }

  // The pairs: each of the brute force's once, FID_A <= FID_B (PART_A < PART_B within a feature),
  // its distance; with `lines`, a line from point A to point B, else no geometry.
  static void expectPairs(QgsVectorLayer* output, const std::vector<Site>& sites, const BruteForce& want,
                          double tolerance, bool lines)
  {
    ASSERT_TRUE(output);
    EXPECT_EQ(output->wkbType(), lines ? QgsWkbTypes::LineString : QgsWkbTypes::NoGeometry);
    for (const QString& field : {"FID_A", "PART_A", "FID_B", "PART_B", "DISTANCE"})
      EXPECT_GE(output->fields().lookupField(field), 0) << field.toStdString();
    std::map<std::pair<qlonglong, int>, const Site*> siteOf;
    for (const Site& s : sites)
      siteOf[{s.fid, s.part}] = &s;
    std::set<PairKey> seen;
    for (const QgsFeature& f : featuresOf(output))
    {
      const PairKey key{f.attribute(QStringLiteral("FID_A")).toLongLong(), f.attribute(QStringLiteral("PART_A")).toInt(),
                        f.attribute(QStringLiteral("FID_B")).toLongLong(), f.attribute(QStringLiteral("PART_B")).toInt()};
      const auto [fidA, partA, fidB, partB] = key;
      const std::string where = "pair " + std::to_string(fidA) + "/" + std::to_string(partA) + " - " +
                                std::to_string(fidB) + "/" + std::to_string(partB);
      EXPECT_TRUE(fidA < fidB || (fidA == fidB && partA < partB)) << where;
      EXPECT_TRUE(seen.insert(key).second) << where << " twice";
      const auto wanted = want.pairs.find(key);
      if (wanted == want.pairs.end())
      {
        ADD_FAILURE() << where << " is not a pair of the brute force";
        continue;
      }
      EXPECT_NEAR(f.attribute(QStringLiteral("DISTANCE")).toDouble(), wanted->second, tolerance) << where;
      if (lines)
      {
        const QgsPolylineXY line = f.geometry().asPolyline();
        ASSERT_EQ(line.size(), 2) << where;
        const Site* a = siteOf.at({fidA, partA});
        const Site* b = siteOf.at({fidB, partB});
        EXPECT_EQ(line[0], QgsPointXY(a->px, a->py)) << where;
        EXPECT_EQ(line[1], QgsPointXY(b->px, b->py)) << where;
      }
      else
      {
        EXPECT_FALSE(f.hasGeometry()) << where;
      }
    }
    EXPECT_EQ(seen.size(), want.pairs.size());
  }
};

}  // namespace

// Radius 10 m: random points, a lattice with many neighbours at exactly the radius, duplicates, a
// null and an empty geometry.
TEST_F(PointNeighboursAlgorithmTest, CountsNearestAndMeanDistancesMatchTheBruteForce)
{
  auto input = mixedLayer();
  const std::vector<Site> sites = sitesOf(*input);
  ASSERT_EQ(sites.size(), 387u);
  const BruteForce want = bruteForce(sites, 10.0, 0);
  ASSERT_GT(want.tiesAtTheRadius, 80) << "the data should hold distances of exactly the radius";
  // and points without neighbours (their nearest beyond the radius), and duplicates (nearest at 0)
  EXPECT_GT(std::count_if(want.sites.begin(), want.sites.end(), [](const Expected& e) { return e.count == 0; }), 10);
  EXPECT_GT(std::count_if(want.sites.begin(), want.sites.end(), [](const Expected& e) { return e.nearestDistance == 0; }), 40);

  QgsProcessingContext context;
  const RunResult result = run(input.get(),
                               {{QStringLiteral("RADIUS"), 10.0},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                               context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  QgsVectorLayer* points = outputLayer(result, QStringLiteral("OUTPUT"), context);
  ASSERT_TRUE(points);
  EXPECT_EQ(points->crs().authid(), QStringLiteral("EPSG:32633"));
  expectPoints(points, sites, want, 0.0);
  expectPairs(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context), sites, want, 0.0, false);

  EXPECT_TRUE(result.log.contains(QStringLiteral("WARNING Skipped 1 features without geometry and 1 with an empty geometry.")))
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.log.contains(QStringLiteral("387 sites from 387 features."))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.log.contains(QStringLiteral("%1 pairs.").arg(want.pairs.size()))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Stage times: read")));
}

// The same pairs as lines, written to a GeoPackage: each line runs from point A to point B.
TEST_F(PointNeighboursAlgorithmTest, PairsAsLinesJoinTheTwoPoints)
{
  auto input = mixedLayer(23);
  const std::vector<Site> sites = sitesOf(*input);
  const BruteForce want = bruteForce(sites, 10.0, 0);
  const RunResult result = run(input.get(), {{QStringLiteral("RADIUS"), 10.0},
                                             {QStringLiteral("DEVICE"), 1},
                                             {QStringLiteral("PAIRS_AS_LINES"), true},
                                             {QStringLiteral("OUTPUT"), path("points.gpkg")},
                                             {QStringLiteral("OUTPUT_PAIRS"), path("pairs.gpkg")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTPUT_PAIRS")).toString(), path("pairs.gpkg"));
  QgsVectorLayer pairs(path("pairs.gpkg"), QStringLiteral("pairs"), QStringLiteral("ogr"));
  ASSERT_TRUE(pairs.isValid());
  EXPECT_EQ(pairs.crs().authid(), QStringLiteral("EPSG:32633"));
  EXPECT_EQ(pairs.featureCount(), long(want.pairs.size()));
  expectPairs(&pairs, sites, want, 0.0, true);
  QgsVectorLayer points(path("points.gpkg"), QStringLiteral("points"), QStringLiteral("ogr"));
  ASSERT_TRUE(points.isValid());
  EXPECT_EQ(points.featureCount(), long(sites.size()));
}

// K nearest within the radius, and (radius 0) at any distance: the lattice and the duplicates make
// many K-th and (K+1)-th neighbours equally far, which go to the lower input order.
TEST_F(PointNeighboursAlgorithmTest, KNearestWithinTheRadiusAndAtAnyDistance)
{
  auto input = mixedLayer();
  const std::vector<Site> sites = sitesOf(*input);
  struct Case
  {
    double radius;
    int k;
  };
  for (const Case& c : {Case{10.0, 3}, Case{0.0, 5}, Case{6.0, 1}})
  {
    SCOPED_TRACE("radius " + std::to_string(c.radius) + ", K " + std::to_string(c.k));
    const BruteForce want = bruteForce(sites, c.radius, c.k);
    EXPECT_GT(want.tiesAtK, 10) << "the data should hold ties at the K-th neighbour";
    if (c.radius > 0)  // and points with fewer than K neighbours within the radius
      EXPECT_GT(std::count_if(want.sites.begin(), want.sites.end(), [&](const Expected& e) { return e.count < c.k; }), 10);
    QgsProcessingContext context;
    const RunResult result = run(input.get(),
                                 {{QStringLiteral("RADIUS"), c.radius},
                                  {QStringLiteral("K"), c.k},
                                  {QStringLiteral("DEVICE"), 1},
                                  {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                  {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                                 context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    expectPoints(outputLayer(result, QStringLiteral("OUTPUT"), context), sites, want, 0.0);
    expectPairs(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context), sites, want, 0.0, false);
    if (c.radius == 0.0)
      for (const Expected& e : want.sites)
        ASSERT_EQ(e.count, c.k);
  }
}

// Multipoints: one site a part, PART_A / PART_B telling the parts apart (duplicate parts of one
// feature make a pair within the feature), single-part multipoints, a null and an empty multipoint.
TEST_F(PointNeighboursAlgorithmTest, MultipointsAreExplodedWithTheirParts)
{
  auto input = layer(QStringLiteral("EPSG:32633"), QStringLiteral("MultiPoint"));
  add(*input, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500000 5000000),(500003 5000004),(500003 5000004))")), 1);
  add(*input, QgsGeometry(), 2);
  add(*input, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500006 5000008))")), 3);
  add(*input, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500000 5000005),(500100 5000100))")), 4);
  add(*input, gpugeo::test::emptyMultiPoint(), 5);
  add(*input, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500003 5000000),(500000 5000000),(500104 5000097))")), 6);
  const std::vector<Site> sites = sitesOf(*input);
  ASSERT_EQ(sites.size(), 9u);
  const BruteForce want = bruteForce(sites, 5.0, 0);
  ASSERT_GT(want.tiesAtTheRadius, 3);
  const QgsFeatureId first = sites.front().fid, sixth = sites.back().fid;
  // by hand: the duplicate parts of the first feature, its first part and the sixth's second
  EXPECT_EQ(want.pairs.at({first, 1, first, 2}), 0.0);
  EXPECT_EQ(want.pairs.at({first, 0, sixth, 1}), 0.0);
  EXPECT_EQ(want.pairs.at({first, 0, first, 1}), 5.0);

  QgsProcessingContext context;
  const RunResult result = run(input.get(),
                               {{QStringLiteral("RADIUS"), 5.0},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("PAIRS_AS_LINES"), true},
                                {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                               context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  expectPoints(outputLayer(result, QStringLiteral("OUTPUT"), context), sites, want, 0.0);
  expectPairs(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context), sites, want, 0.0, true);
  EXPECT_TRUE(result.log.contains(QStringLiteral("WARNING Skipped 1 features without geometry and 1 with an empty geometry.")))
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.log.contains(QStringLiteral("9 sites from 4 features."))) << result.log.join('\n').toStdString();
}

// EPSG:4326: the radius and every distance in metres, straight lines between the points on a sphere
// of radius 6,371,008.8 m; across the antimeridian and around the pole too.
TEST_F(PointNeighboursAlgorithmTest, GeographicLayerMeasuresChordMetresOnTheSphere)
{
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> lon(9.0, 13.0), lat(44.0, 47.0);
  auto input = layer(QStringLiteral("EPSG:4326"));
  int val = 0;
  for (int i = 0; i < 200; ++i)
  {
    const double x = lon(rng);
    addPoint(*input, x, lat(rng), val++);
  }
  for (const auto& [x, y] : std::vector<std::pair<double, double>>{{179.9, -16.5}, {-179.95, -16.45}, {179.8, -16.6},
                                                                   {0.0, 89.9}, {90.0, 89.9}, {180.0, 89.95},
                                                                   {-90.0, 89.85}, {-179.95, -16.45}})
    addPoint(*input, x, y, val++);
  const double radius = 30000.0;
  const std::vector<Site> sites = sitesOf(*input);
  const BruteForce want = bruteForce(sites, radius, 0);
  // No distance within a millimetre of the radius, no nearest within a micrometre of the next: the
  // comparison below does not hang on rounding.
  for (size_t i = 0; i < sites.size(); ++i)
  {
    std::vector<double> d;
    for (size_t j = 0; j < sites.size(); ++j)
      if (j != i)
        d.push_back(std::sqrt(squaredDistance(sites[i], sites[j])));
    std::sort(d.begin(), d.end());
    for (double v : d)
      ASSERT_GT(std::abs(v - radius), 1e-3) << "site " << i;
    ASSERT_TRUE(d[1] == d[0] || d[1] - d[0] > 1e-6) << "site " << i;
  }
  // across the antimeridian (15 to 17 km apart, one point twice) and around the pole (16 to 20 km)
  EXPECT_EQ(want.sites[200].count, 3);
  EXPECT_EQ(want.sites[200].nearest, 202);
  EXPECT_EQ(want.sites[203].count, 3);

  QgsProcessingContext context;
  const RunResult result = run(input.get(),
                               {{QStringLiteral("RADIUS"), radius},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                               context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  QgsVectorLayer* points = outputLayer(result, QStringLiteral("OUTPUT"), context);
  ASSERT_TRUE(points);
  EXPECT_EQ(points->crs().authid(), QStringLiteral("EPSG:4326"));
  expectPoints(points, sites, want, 1e-6);
  expectPairs(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context), sites, want, 1e-6, false);
  EXPECT_TRUE(result.logContains(QStringLiteral("Geographic CRS: the radius and the distances are in metres")))
    << result.log.join('\n').toStdString();
}

// DEVICE=0 (Auto) writes what DEVICE=1 (CPU) writes; without a GPU, Auto says it runs on the CPU.
TEST_F(PointNeighboursAlgorithmTest, AutoGivesTheSameOutputAsCpu)
{
  auto input = mixedLayer(31);
  std::vector<std::vector<QgsFeature>> points, pairs;
  for (int device : {1, 0})
  {
    QgsProcessingContext context;
    const RunResult result = run(input.get(),
                                 {{QStringLiteral("RADIUS"), 8.0},
                                  {QStringLiteral("K"), 4},
                                  {QStringLiteral("DEVICE"), device},
                                  {QStringLiteral("PAIRS_AS_LINES"), true},
                                  {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                  {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                                 context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    if (device == 0 && !gpugeo::probeGpu().usable)
    {
      EXPECT_TRUE(result.logContains(QStringLiteral("Device: no usable GPU"))) << result.log.join('\n').toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("running on the CPU"))) << result.log.join('\n').toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU"))) << result.log.join('\n').toStdString();
    }
    points.push_back(featuresOf(outputLayer(result, QStringLiteral("OUTPUT"), context)));
    pairs.push_back(featuresOf(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context)));
  }
  ASSERT_EQ(points[0].size(), points[1].size());
  ASSERT_GT(pairs[0].size(), 100u);
  ASSERT_EQ(pairs[0].size(), pairs[1].size());
  for (size_t i = 0; i < points[0].size(); ++i)
  {
    EXPECT_EQ(points[0][i].attributes(), points[1][i].attributes()) << "point " << i;
    EXPECT_TRUE(points[0][i].geometry().equals(points[1][i].geometry())) << "point " << i;
  }
  for (size_t i = 0; i < pairs[0].size(); ++i)
  {
    EXPECT_EQ(pairs[0][i].attributes(), pairs[1][i].attributes()) << "pair " << i;
    EXPECT_TRUE(pairs[0][i].geometry().equals(pairs[1][i].geometry())) << "pair " << i;
  }
}

// More pairs than MAX_PAIRS: an error naming both numbers, and no file, of the pairs or the points.
// Exactly MAX_PAIRS pairs are allowed.
TEST_F(PointNeighboursAlgorithmTest, TooManyPairsFailBeforeAnythingIsWritten)
{
  auto input = mixedLayer();
  const BruteForce want = bruteForce(sitesOf(*input), 10.0, 0);
  const long count = long(want.pairs.size());
  const RunResult refused = run(input.get(), {{QStringLiteral("RADIUS"), 10.0},
                                              {QStringLiteral("DEVICE"), 1},
                                              {QStringLiteral("MAX_PAIRS"), double(count - 1)},
                                              {QStringLiteral("OUTPUT"), path("points.gpkg")},
                                              {QStringLiteral("OUTPUT_PAIRS"), path("pairs.gpkg")}});
  EXPECT_FALSE(refused.ok);
  EXPECT_TRUE(refused.error.contains(
    QStringLiteral("The query gives %1 pairs, more than the maximum of %2").arg(count).arg(count - 1)))
    << refused.error.toStdString();
  EXPECT_TRUE(refused.error.contains(QStringLiteral("MAX_PAIRS"))) << refused.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("pairs.gpkg")));
  EXPECT_FALSE(QFile::exists(path("points.gpkg")));

  const RunResult allowed = run(input.get(), {{QStringLiteral("RADIUS"), 10.0},
                                              {QStringLiteral("DEVICE"), 1},
                                              {QStringLiteral("MAX_PAIRS"), double(count)},
                                              {QStringLiteral("OUTPUT"), path("points.gpkg")},
                                              {QStringLiteral("OUTPUT_PAIRS"), path("pairs.gpkg")}});
  ASSERT_TRUE(allowed.ok) << allowed.error.toStdString();
  QgsVectorLayer pairs(path("pairs.gpkg"), QStringLiteral("pairs"), QStringLiteral("ogr"));
  EXPECT_EQ(pairs.featureCount(), count);
}

// One point: no neighbour, NULL nearest and mean. Identical points: each the others' neighbour at
// distance 0, the nearest the first other one. Collinear points at exactly the radius.
TEST_F(PointNeighboursAlgorithmTest, SinglePointIdenticalPointsAndCollinearPoints)
{
  {
    auto input = layer();
    addPoint(*input, 500000.5, 5000000.25, 1);
    QgsProcessingContext context;
    const RunResult result = run(input.get(), {{QStringLiteral("RADIUS"), 100.0},
                                               {QStringLiteral("DEVICE"), 1},
                                               {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                               {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                                 context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    const std::vector<QgsFeature> points = featuresOf(outputLayer(result, QStringLiteral("OUTPUT"), context));
    ASSERT_EQ(points.size(), 1u);
    EXPECT_EQ(points[0].attribute(QStringLiteral("NB_COUNT")).toInt(), 0);
    EXPECT_TRUE(points[0].attribute(QStringLiteral("NN_FID")).isNull());
    EXPECT_TRUE(points[0].attribute(QStringLiteral("NN_DIST")).isNull());
    EXPECT_TRUE(points[0].attribute(QStringLiteral("MEAN_DIST")).isNull());
    EXPECT_EQ(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context)->featureCount(), 0);
  }
  for (const bool collinear : {false, true})
  {
    SCOPED_TRACE(collinear ? "collinear" : "identical");
    auto input = layer();
    for (int i = 0; i < 70; ++i)  // more than a leaf of 64
      addPoint(*input, 500000.0 + (collinear ? 2.0 * i : 0.0), 5000000.0, i);
    const std::vector<Site> sites = sitesOf(*input);
    const BruteForce want = bruteForce(sites, 2.0, 0);
    QgsProcessingContext context;
    const RunResult result = run(input.get(), {{QStringLiteral("RADIUS"), 2.0},
                                               {QStringLiteral("DEVICE"), 1},
                                               {QStringLiteral("OUTPUT"), QStringLiteral("memory:")},
                                               {QStringLiteral("OUTPUT_PAIRS"), QStringLiteral("memory:")}},
                                 context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    expectPoints(outputLayer(result, QStringLiteral("OUTPUT"), context), sites, want, 0.0);
    expectPairs(outputLayer(result, QStringLiteral("OUTPUT_PAIRS"), context), sites, want, 0.0, false);
    EXPECT_EQ(want.pairs.size(), collinear ? 69u : 70u * 69u / 2u);
    EXPECT_EQ(want.sites[5].nearest, collinear ? 4 : 0);
  }
}

TEST_F(PointNeighboursAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  struct Case
  {
    QString name;
    std::function<void(QgsVectorLayer&)> fill;
    QVariantMap parameters;
    QString expected;
    QString type = QStringLiteral("Point");
    QString crs = QStringLiteral("EPSG:32633");
  };
  const auto threePoints = [](QgsVectorLayer& l) {
    addPoint(l, 0, 0, 1);
    addPoint(l, 3, 4, 2);
    addPoint(l, 10, 0, 3);
  };
  const QString radius = QStringLiteral("RADIUS"), k = QStringLiteral("K");
  const std::vector<Case> cases = {
    {"radius 0 and K 0", threePoints, {{radius, 0.0}, {k, 0}},
     "Give a radius greater than zero, or a number of nearest neighbours K."},
    {"K negative", threePoints, {{radius, 5.0}, {k, -1}}, "must be a whole number from 0 to 1024; got -1."},
    {"K above 1024", threePoints, {{radius, 5.0}, {k, 1025}}, "must be a whole number from 0 to 1024; got 1025."},
    {"radius negative", threePoints, {{radius, -1.0}}, "must be a number, 0 or more; got -1."},
    {"empty layer", [](QgsVectorLayer&) {}, {{radius, 5.0}},
     "The input layer has no point to use (0 features without geometry, 0 with an empty geometry)."},
    {"only null geometries",
     [](QgsVectorLayer& l) {
       add(l, QgsGeometry(), 1);
       add(l, QgsGeometry(), 2);
     },
     {{radius, 5.0}},
     "no point to use (2 features without geometry"},
    {"a NaN coordinate",
     [&](QgsVectorLayer& l) {
       threePoints(l);
       add(l, QgsGeometry(new QgsPoint(7.0, std::nan(""))), 4);
     },
     {{radius, 5.0}},
     "1 of 4 points have a NaN coordinate"},
    {"a line layer",
     [](QgsVectorLayer& l) { add(l, QgsGeometry::fromWkt(QStringLiteral("LineString(0 0, 1 1)")), 1); },
     {{radius, 5.0}},
     "must be a point layer",
     QStringLiteral("LineString")},
    {"latitudes out of range",
     [](QgsVectorLayer& l) {
       addPoint(l, 10, 45, 1);
       addPoint(l, 10, 90.5, 2);
       addPoint(l, 10, -91, 3);
     },
     {{radius, 5000.0}},
     "2 of 3 points have a NaN or infinite coordinate, a latitude outside -90..90 or a longitude outside -720..720 degrees",
     QStringLiteral("Point"),
     QStringLiteral("EPSG:4326")},
  };
  for (const Case& c : cases)
  {
    auto input = layer(c.crs, c.type);
    c.fill(*input);
    QVariantMap parameters = c.parameters;
    parameters.insert(QStringLiteral("DEVICE"), 1);
    parameters.insert(QStringLiteral("OUTPUT"), path("bad.gpkg"));
    parameters.insert(QStringLiteral("OUTPUT_PAIRS"), path("bad_pairs.gpkg"));
    const RunResult result = run(input.get(), parameters);
    EXPECT_FALSE(result.ok) << c.name.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.name.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad.gpkg"))) << c.name.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad_pairs.gpkg"))) << c.name.toStdString();
  }
}

// 200,000 points with pairs: past 60% the run is writing the points (the third of four steps:
// 50% to 75%); canceled there, it deletes the half-written GeoPackage and writes no pairs. A second
// run with a probe in the feedback shows where the cancel lands: while writing the points, the
// GeoPackage already on disk.
TEST_F(PointNeighboursAlgorithmTest, CancelLeavesNoOutputBehind)
{
  std::mt19937_64 rng(37);
  std::uniform_real_distribution<double> ux(500000.0, 520000.0), uy(5000000.0, 5020000.0);
  auto input = layer();
  QgsFeatureList features;
  for (int i = 0; i < 200000; ++i)
  {
    QgsFeature f(input->fields());
    const double x = ux(rng);
    f.setGeometry(QgsGeometry(new QgsPoint(x, uy(rng))));
    f.setAttributes(QgsAttributes() << i << QString());
    features << f;
  }
  ASSERT_TRUE(input->dataProvider()->addFeatures(features));
  QVariantMap parameters{{QStringLiteral("RADIUS"), 20.0},
                         {QStringLiteral("DEVICE"), 1},
                         {QStringLiteral("OUTPUT"), path("canceled.gpkg")},
                         {QStringLiteral("OUTPUT_PAIRS"), path("canceled_pairs.gpkg")}};
  const RunResult result = run(input.get(), parameters, true);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled; no output was written."))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("canceled.gpkg")));
  EXPECT_FALSE(QFile::exists(path("canceled.gpkg-wal")));
  EXPECT_FALSE(QFile::exists(path("canceled_pairs.gpkg")));

  // the probe: runAlgorithm's cancel rule, noting the progress and the file then
  std::unique_ptr<QgsProcessingAlgorithm> algorithm(
    QgsApplication::processingRegistry()->createAlgorithmById(QStringLiteral("gpugeo:pointneighbours")));
  ASSERT_TRUE(algorithm);
  QgsProcessingContext context;
  context.setProject(QgsProject::instance());
  context.temporaryLayerStore()->addMapLayer(input.get());
  parameters.insert(QStringLiteral("INPUT"), input->id());
  gpugeo::test::RecordingFeedback feedback;
  double canceledAt = -1;
  bool fileThen = false;
  QObject::connect(&feedback, &QgsFeedback::progressChanged, [&](double progress) {
    if (progress > 60 && !feedback.isCanceled())
    {
      canceledAt = progress;
      fileThen = QFile::exists(path("canceled.gpkg"));
      feedback.cancel();
    }
  });
  bool ok = true;
  algorithm->run(parameters, context, &feedback, &ok);
  context.temporaryLayerStore()->takeMapLayer(input.get());
  EXPECT_FALSE(ok);
  EXPECT_GT(canceledAt, 60.0);
  EXPECT_LT(canceledAt, 75.0);
  EXPECT_TRUE(fileThen);
  EXPECT_FALSE(QFile::exists(path("canceled.gpkg")));
  EXPECT_FALSE(QFile::exists(path("canceled_pairs.gpkg")));
}

// A multipoint GeoPackage written to a GeoPackage: the parts share their feature's fid, so the
// output numbers its features anew (RegeneratePrimaryKey, as QGIS's "Multipart to singleparts").
// (Before: the later parts' fid was NULL, which the writer turned into the next free fid, that of a
// later input feature: "UNIQUE constraint failed".) Single points keep the input's fids, gaps and all.
TEST_F(PointNeighboursAlgorithmTest, MultipointGeoPackageToGeoPackage)
{
  auto memory = layer(QStringLiteral("EPSG:32633"), QStringLiteral("MultiPoint"));
  add(*memory, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500000 5000000),(500001 5000000))")), 1);
  add(*memory, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500002 5000000))")), 2);
  add(*memory, QgsGeometry::fromWkt(QStringLiteral("MultiPoint((500003 5000000),(500004 5000000))")), 3);
  QgsVectorFileWriter::SaveVectorOptions options;
  options.driverName = QStringLiteral("GPKG");
  options.layerName = QStringLiteral("points");
  ASSERT_EQ(QgsVectorFileWriter::writeAsVectorFormatV3(memory.get(), path("input.gpkg"), QgsCoordinateTransformContext(),
                                                       options),
            QgsVectorFileWriter::NoError);
  QgsVectorLayer input(path("input.gpkg"), QStringLiteral("input"), QStringLiteral("ogr"));
  ASSERT_TRUE(input.isValid());
  ASSERT_EQ(input.fields().lookupField(QStringLiteral("fid")), 0);
  const std::vector<Site> sites = sitesOf(input);
  ASSERT_EQ(sites.size(), 5u);

  const RunResult result = run(&input, {{QStringLiteral("RADIUS"), 1.5},
                                        {QStringLiteral("DEVICE"), 1},
                                        {QStringLiteral("OUTPUT"), path("neighbours.gpkg")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  QgsVectorLayer output(path("neighbours.gpkg"), QStringLiteral("output"), QStringLiteral("ogr"));
  ASSERT_TRUE(output.isValid());
  EXPECT_EQ(output.featureCount(), 5);
  const BruteForce want = bruteForce(sites, 1.5, 0);
  const std::vector<QgsFeature> got = featuresOf(&output);
  ASSERT_EQ(got.size(), sites.size());
  for (size_t i = 0; i < got.size(); ++i)
  {
    EXPECT_EQ(got[i].attribute(QStringLiteral("val")), sites[i].val) << "site " << i;
    EXPECT_EQ(got[i].attribute(QStringLiteral("NB_COUNT")).toInt(), want.sites[i].count) << "site " << i;
  }

  // Single points, fids 1 and 3 after a deletion: the output keeps them.
  auto single = layer(QStringLiteral("EPSG:32633"), QStringLiteral("Point"));
  add(*single, QgsGeometry::fromWkt(QStringLiteral("Point(500000 5000000)")), 1);
  add(*single, QgsGeometry::fromWkt(QStringLiteral("Point(500001 5000000)")), 2);
  add(*single, QgsGeometry::fromWkt(QStringLiteral("Point(500003 5000000)")), 3);
  ASSERT_EQ(QgsVectorFileWriter::writeAsVectorFormatV3(single.get(), path("single.gpkg"), QgsCoordinateTransformContext(),
                                                       options),
            QgsVectorFileWriter::NoError);
  QgsVectorLayer singleInput(path("single.gpkg"), QStringLiteral("single"), QStringLiteral("ogr"));
  ASSERT_TRUE(singleInput.isValid());
  ASSERT_TRUE(singleInput.dataProvider()->deleteFeatures(QgsFeatureIds{2}));
  const RunResult kept = run(&singleInput, {{QStringLiteral("RADIUS"), 5.0},
                                            {QStringLiteral("DEVICE"), 1},
                                            {QStringLiteral("OUTPUT"), path("single_out.gpkg")}});
  ASSERT_TRUE(kept.ok) << kept.error.toStdString();
  QgsVectorLayer keptOutput(path("single_out.gpkg"), QStringLiteral("output"), QStringLiteral("ogr"));
  ASSERT_TRUE(keptOutput.isValid());
  const std::vector<QgsFeature> keptFeatures = featuresOf(&keptOutput);
  ASSERT_EQ(keptFeatures.size(), 2u);
  EXPECT_EQ(keptFeatures[0].id(), 1);
  EXPECT_EQ(keptFeatures[1].id(), 3);
  EXPECT_EQ(keptFeatures[0].attribute(QStringLiteral("NN_FID")).toLongLong(), 3);
  EXPECT_EQ(keptFeatures[1].attribute(QStringLiteral("NN_FID")).toLongLong(), 1);
}
