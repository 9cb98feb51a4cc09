// gpugeo:dbscan through the QGIS API: memory point and multipoint layers in, memory layers and
// GeoPackages out. Every feature's cluster and cluster size is checked against a brute-force DBSCAN
// computed here (plain double loops), and against QGIS's own native:dbscanclustering run on the same
// layer with the same parameters.
//
// The test points lie on a 1/64 m grid (UTM-sized coordinates), so every coordinate difference is
// exact: the brute force, QGIS's KD-tree and the algorithm (which measures from the centre of the
// extent) square the same numbers, and points at exactly EPS count alike in all three.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <QFile>

#include <qgsfeature.h>
#include <qgsfeatureiterator.h>
#include <qgsgeometry.h>
#include <qgsgeometrycollection.h>
#include <qgspoint.h>
#include <qgsprocessingregistry.h>
#include <qgsprocessingutils.h>
#include <qgsvectorlayer.h>

#include "core/backend.h"
#include "processing_test_support.h"

namespace {

using gpugeo::test::featuresOf;
using gpugeo::test::RunResult;

struct XY
{
  double x, y;
};

// The brute-force DBSCAN of the help text, on the sites in layer order: a site is core when at
// least minSize sites, itself included, lie within eps (inclusive); core sites within eps of each
// other are in one cluster; a non-core site with a core site within eps is a border site and joins
// the cluster of its lowest-index core neighbour (noise with DBSCAN*). Clusters are numbered from 1
// in order of their first core site (as QGIS numbers them).
struct DbscanReference
{
  std::vector<int> cluster;                         // per site; 0: noise
  std::vector<bool> core;                           // per site
  std::vector<std::vector<size_t>> coreNeighbours;  // per site, ascending (itself when core)
  std::vector<int> size;                            // size[c - 1]: members of cluster c
  int borderCount = 0, noiseCount = 0;
};

DbscanReference bruteForceDbscan(const std::vector<XY>& sites, int minSize, double eps, bool borderIsNoise)
{
  const size_t n = sites.size();
  const double eps2 = eps * eps;
  std::vector<std::vector<size_t>> within(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
    {
      const double dx = sites[i].x - sites[j].x, dy = sites[i].y - sites[j].y;
      if (dx * dx + dy * dy <= eps2)
        within[i].push_back(j);
    }
  DbscanReference ref;
  ref.core.resize(n);
  for (size_t i = 0; i < n; ++i)
    ref.core[i] = within[i].size() >= size_t(minSize);
  // connected components of the core sites
  std::vector<int> component(n, -1);
  int components = 0;
  for (size_t i = 0; i < n; ++i)
  {
    if (!ref.core[i] || component[i] >= 0)
      continue;
    std::vector<size_t> stack{i};
    component[i] = components;
    while (!stack.empty())
    {
      const size_t a = stack.back();
      stack.pop_back();
      for (size_t b : within[a])
        if (ref.core[b] && component[b] < 0)
        {
          component[b] = components;
          stack.push_back(b);
        }
    }
    ++components;
  }
  ref.coreNeighbours.resize(n);
  std::vector<int> label(n, -1);
  for (size_t i = 0; i < n; ++i)
  {
    for (size_t j : within[i])
      if (ref.core[j])
        ref.coreNeighbours[i].push_back(j);
    if (ref.core[i])
      label[i] = component[i];
    else if (!ref.coreNeighbours[i].empty())
    {
      ++ref.borderCount;
      if (!borderIsNoise)
        label[i] = component[ref.coreNeighbours[i].front()];
    }
    else
      ++ref.noiseCount;
  }
  std::map<int, int> number;
  for (size_t i = 0; i < n; ++i)
    if (ref.core[i] && !number.count(component[i]))
      number[component[i]] = int(number.size()) + 1;
  ref.cluster.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
  {
    if (label[i] < 0)
      continue;
    const int id = number.at(label[i]);
    ref.cluster[i] = id;
    if (int(ref.size.size()) < id)
      ref.size.resize(size_t(id), 0);
    ++ref.size[size_t(id - 1)];
  }
  return ref;
}

double onGrid(double v)
{
  return std::round(v * 64.0) / 64.0;
}

constexpr double kX0 = 500000.0, kY0 = 5000000.0;

// The sites of the border-point construction below, by their position in the layer.
constexpr int kAPositions[] = {5, 10, 15, 20};  // core points of cluster A
constexpr int kB1Position = 30;                  // the core point of B next to P
constexpr int kPPosition = 40;                   // P: a border point of both A and B
constexpr int kA1Position = 50;                  // the core point of A next to P
constexpr int kBPositions[] = {60, 70, 80, 90};  // core points of cluster B

// Five Gaussian blobs (sigma 12 to 40 m) and 250 uniformly random points in a 3 km square; 10 exact
// duplicates; a stack of 6 identical points; a 5 x 5 lattice of spacing 15 m (with EPS 15 and
// MIN_SIZE 5: the inner 3 x 3 core through neighbours at exactly EPS, the edges border, the corners
// noise); shuffled. Then, at fixed positions, two clusters A and B and a point P between them,
// 14 m from a core point of each and not core itself: a border point whose lowest-index core
// neighbour (b1, position 30) is in B although A has the first core point (position 5).
std::vector<XY> clusteredPoints(uint32_t seed)
{
  std::mt19937_64 rng(seed);
  struct Blob
  {
    double x, y, sigma;
    int count;
  };
  std::vector<XY> points;
  for (const Blob& b : {Blob{600, 700, 18, 80}, Blob{2200, 800, 25, 120}, Blob{1500, 2000, 12, 60},
                        Blob{400, 2500, 30, 100}, Blob{2600, 2600, 40, 50}})
  {
    std::normal_distribution<double> dx(b.x, b.sigma), dy(b.y, b.sigma);
    for (int i = 0; i < b.count; ++i)
      points.push_back({kX0 + onGrid(dx(rng)), kY0 + onGrid(dy(rng))});
  }
  std::uniform_int_distribution<int> ticks(0, 3000 * 64);
  for (int i = 0; i < 250; ++i)
    points.push_back({kX0 + ticks(rng) / 64.0, kY0 + ticks(rng) / 64.0});
  for (int i = 0; i < 10; ++i)
  {
    const XY copy = points[size_t(i * 41)];
    points.push_back(copy);
  }
  for (int i = 0; i < 6; ++i)
    points.push_back({kX0 + 3500.0, kY0 + 300.0});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j)
      points.push_back({kX0 + 3500.0 + 15.0 * i, kY0 + 1000.0 + 15.0 * j});
  std::shuffle(points.begin(), points.end(), rng);

  const double ax = kX0 + 5000.0, ay = kY0 + 500.0;  // a1; P at +14 m, b1 at +28 m
  std::map<int, XY> construction;
  const XY aOthers[] = {{-5, 5}, {-5, -5}, {-10, 0}, {-5, 0}}, bOthers[] = {{33, 0}, {38, 0}, {33, 5}, {33, -5}};
  for (int i = 0; i < 4; ++i)
  {
    construction[kAPositions[i]] = {ax + aOthers[i].x, ay + aOthers[i].y};
    construction[kBPositions[i]] = {ax + bOthers[i].x, ay + bOthers[i].y};
  }
  construction[kB1Position] = {ax + 28.0, ay};
  construction[kPPosition] = {ax + 14.0, ay};
  construction[kA1Position] = {ax, ay};
  for (const auto& [position, p] : construction)  // ascending: each lands at its position
    points.insert(points.begin() + position, p);
  return points;
}

class DbscanAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // QGIS's native algorithms, for native:dbscanclustering (processing_test_main.cpp registers only
  // gpugeo's provider).
  static void SetUpTestSuite()
  {
    registerNativeAlgorithms();
  }

  static std::unique_ptr<QgsVectorLayer> layer(const QString& type = QStringLiteral("Point"),
                                               const QString& crs = QStringLiteral("EPSG:32633"))
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

  // The points as features (val: their position), with a feature without geometry at position 3.
  static std::unique_ptr<QgsVectorLayer> pointLayer(const std::vector<XY>& points)
  {
    auto input = layer();
    for (size_t i = 0; i < points.size(); ++i)
    {
      if (i == 3)
        add(*input, QgsGeometry(), 9003);
      add(*input, QgsGeometry(new QgsPoint(points[i].x, points[i].y)), int(i));
    }
    return input;
  }

  // The sites of a layer as the algorithm reads them, and each feature's site (-1: none): points and
  // single-part multipoints; features without geometry, empty ones and multipoints of several
  // points give none.
  static std::vector<XY> sitesOf(QgsVectorLayer& layer, std::vector<int>& siteOfFeature)
  {
    std::vector<XY> sites;
    siteOfFeature.clear();
    for (const QgsFeature& f : featuresOf(&layer))
    {
      int site = -1;
      if (f.hasGeometry())
      {
        const QgsAbstractGeometry* g = f.geometry().constGet();
        if (const auto* collection = qgsgeometry_cast<const QgsGeometryCollection*>(g))
          g = collection->numGeometries() == 1 ? collection->geometryN(0) : nullptr;
        if (const auto* p = qgsgeometry_cast<const QgsPoint*>(g))
          if (!p->isEmpty())
          {
            site = int(sites.size());
            sites.push_back({p->x(), p->y()});
          }
      }
      siteOfFeature.push_back(site);
    }
    return sites;
  }

  RunResult run(const QString& id, QgsVectorLayer* input, const QVariantMap& parameters, QgsProcessingContext& context,
                bool cancelMidway = false)
  {
    return runAlgorithm(id, input, parameters, context, cancelMidway);
  }

  static QVariantMap parameters(int minSize, double eps, bool borderIsNoise, int device = 1)
  {
    return {{QStringLiteral("MIN_SIZE"), minSize},
            {QStringLiteral("EPS"), eps},
            {QStringLiteral("DBSCAN*"), borderIsNoise},
            {QStringLiteral("DEVICE"), device},
            {QStringLiteral("OUTPUT"), QStringLiteral("memory:")}};
  }

  // gpugeo:dbscan's output against the brute force: every input feature in order with its
  // attributes; its cluster id the brute force's (numbered by first core site), NULL for noise and for
  // features without a site; its cluster size the cluster's member count in the output.
  static void expectReference(const std::vector<QgsFeature>& input, const std::vector<QgsFeature>& output,
                              const std::vector<int>& siteOfFeature, const DbscanReference& ref,
                              const QString& idField = QStringLiteral("CLUSTER_ID"),
                              const QString& sizeField = QStringLiteral("CLUSTER_SIZE"))
  {
    ASSERT_EQ(output.size(), input.size());
    std::map<int, int> members;
    int highest = 0;
    for (size_t i = 0; i < output.size(); ++i)
    {
      const QgsFeature& f = output[i];
      const int site = siteOfFeature[i];
      const std::string where = "feature " + std::to_string(i) + " (site " + std::to_string(site) + ")";
      EXPECT_EQ(f.attribute(QStringLiteral("val")), input[i].attribute(QStringLiteral("val"))) << where;
      EXPECT_EQ(f.attribute(QStringLiteral("name")), input[i].attribute(QStringLiteral("name"))) << where;
      if (input[i].hasGeometry())
        EXPECT_TRUE(f.geometry().equals(input[i].geometry())) << where;
      else  // a GeoPackage gives a feature without geometry back with an empty one (QGIS's own too)
        EXPECT_TRUE(!f.hasGeometry() || f.geometry().isEmpty()) << where << " " << f.geometry().asWkt().toStdString();
      const QVariant id = f.attribute(idField), size = f.attribute(sizeField);
      if (site < 0 || ref.cluster[size_t(site)] == 0)
      {
        EXPECT_TRUE(id.isNull()) << where;
        EXPECT_TRUE(size.isNull()) << where;
        continue;
      }
      const int want = ref.cluster[size_t(site)];
      EXPECT_EQ(id.toInt(), want) << where << (ref.core[size_t(site)] ? " (core)" : " (border)");
      EXPECT_EQ(size.toInt(), ref.size[size_t(want - 1)]) << where;
      ++members[id.toInt()];
      if (!ref.core[size_t(site)])
        continue;
      // numbered in order of the first core point
      EXPECT_LE(id.toInt(), highest + 1) << where;
      highest = std::max(highest, id.toInt());
    }
    EXPECT_EQ(int(members.size()), int(ref.size.size()));
    for (const auto& [id, count] : members)
      EXPECT_EQ(count, ref.size[size_t(id - 1)]) << "cluster " << id;
  }

  // QGIS's output against ours and the brute force: the same features and fields, the same cluster id
  // on every core point (so the same partition of them), noise NULL in both, each border point in the
  // cluster of one of its core neighbours, each size its cluster's member count, the same number of
  // clusters. With DBSCAN*, the same output value for value. Returns the map from our cluster ids to
  // QGIS's (the identity).
  static std::map<int, int> expectSameAsQgis(const std::vector<QgsFeature>& ours, const std::vector<QgsFeature>& qgis,
                                             const std::vector<int>& siteOfFeature, const DbscanReference& ref,
                                             bool borderIsNoise)
  {
    std::map<int, int> toQgis, fromQgis;
    EXPECT_EQ(ours.size(), qgis.size());
    if (ours.size() != qgis.size())
      return toQgis;
    EXPECT_EQ(ours.front().fields().names(), qgis.front().fields().names());
    std::map<int, int> qgisMembers;
    std::map<int, int> qgisSize;
    for (size_t i = 0; i < ours.size(); ++i)
    {
      const int site = siteOfFeature[i];
      const std::string where = "feature " + std::to_string(i) + " (site " + std::to_string(site) + ")";
      EXPECT_EQ(qgis[i].attribute(QStringLiteral("val")), ours[i].attribute(QStringLiteral("val"))) << where;
      const QVariant a = ours[i].attribute(QStringLiteral("CLUSTER_ID")), b = qgis[i].attribute(QStringLiteral("CLUSTER_ID"));
      const QVariant bSize = qgis[i].attribute(QStringLiteral("CLUSTER_SIZE"));
      if (!b.isNull())
      {
        ++qgisMembers[b.toInt()];
        qgisSize[b.toInt()] = bSize.toInt();
      }
      if (site < 0 || ref.cluster[size_t(site)] == 0)
      {
        EXPECT_TRUE(b.isNull()) << where << " is noise or has no point";
        EXPECT_TRUE(bSize.isNull()) << where;
        continue;
      }
      EXPECT_FALSE(b.isNull()) << where;
      if (ref.core[size_t(site)])
      {
        const auto [to, newTo] = toQgis.emplace(a.toInt(), b.toInt());
        const auto [from, newFrom] = fromQgis.emplace(b.toInt(), a.toInt());
        EXPECT_EQ(to->second, b.toInt()) << where << ": our cluster " << a.toInt() << " is split in QGIS's";
        EXPECT_EQ(from->second, a.toInt()) << where << ": QGIS's cluster " << b.toInt() << " is split in ours";
        EXPECT_EQ(a.toInt(), b.toInt()) << where << ": a core point numbered otherwise than by QGIS";
      }
    }
    // border points: in the cluster of one of their core neighbours (core points all mapped by now)
    for (size_t i = 0; i < ours.size(); ++i)
    {
      const int site = siteOfFeature[i];
      if (site < 0 || ref.cluster[size_t(site)] == 0 || ref.core[size_t(site)])
        continue;
      std::set<int> allowed;
      for (size_t c : ref.coreNeighbours[size_t(site)])
        allowed.insert(toQgis[ref.cluster[c]]);
      EXPECT_TRUE(allowed.count(qgis[i].attribute(QStringLiteral("CLUSTER_ID")).toInt()))
        << "border feature " << i << " in QGIS's cluster " << qgis[i].attribute(QStringLiteral("CLUSTER_ID")).toInt();
    }
    for (const auto& [id, count] : qgisMembers)
      EXPECT_EQ(qgisSize[id], count) << "QGIS's cluster " << id;
    EXPECT_EQ(qgisMembers.size(), ref.size.size());
    if (borderIsNoise)
      for (size_t i = 0; i < ours.size(); ++i)
      {
        EXPECT_EQ(ours[i].attributes(), qgis[i].attributes()) << "feature " << i;
        EXPECT_EQ(ours[i].hasGeometry(), qgis[i].hasGeometry()) << "feature " << i;
        if (ours[i].hasGeometry())
          EXPECT_TRUE(ours[i].geometry().equals(qgis[i].geometry())) << "feature " << i;
      }
    return toQgis;
  }

  // Runs gpugeo:dbscan and native:dbscanclustering on `input` and checks both against the brute force.
  void compareAll(QgsVectorLayer* input, int minSize, double eps, bool borderIsNoise, DbscanReference* refOut = nullptr,
                  std::map<int, int>* toQgis = nullptr, std::vector<QgsFeature>* oursOut = nullptr,
                  std::vector<QgsFeature>* qgisOut = nullptr)
  {
    std::vector<int> siteOfFeature;
    const std::vector<XY> sites = sitesOf(*input, siteOfFeature);
    const DbscanReference ref = bruteForceDbscan(sites, minSize, eps, borderIsNoise);
    const std::vector<QgsFeature> inputFeatures = featuresOf(input);

    QgsProcessingContext context;
    const RunResult ours = run(QStringLiteral("gpugeo:dbscan"), input, parameters(minSize, eps, borderIsNoise), context);
    ASSERT_TRUE(ours.ok) << ours.error.toStdString();
    QgsVectorLayer* ourLayer = outputLayer(ours, QStringLiteral("OUTPUT"), context);
    ASSERT_TRUE(ourLayer);
    EXPECT_EQ(ourLayer->wkbType(), input->wkbType());
    EXPECT_EQ(ourLayer->crs(), input->crs());
    EXPECT_EQ(ourLayer->fields().names(), (QStringList{"val", "name", "CLUSTER_ID", "CLUSTER_SIZE"}));
    const std::vector<QgsFeature> ourFeatures = featuresOf(ourLayer);
    expectReference(inputFeatures, ourFeatures, siteOfFeature, ref);
    EXPECT_EQ(ours.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt(), int(ref.size.size()));
    EXPECT_TRUE(ours.log.contains(QStringLiteral("%1 clusters.").arg(ref.size.size()))) << ours.log.join('\n').toStdString();

    QgsProcessingContext qgisContext;
    QVariantMap qgisParameters = parameters(minSize, eps, borderIsNoise);
    qgisParameters.remove(QStringLiteral("DEVICE"));
    const RunResult qgis = run(QStringLiteral("native:dbscanclustering"), input, qgisParameters, qgisContext);
    ASSERT_TRUE(qgis.ok) << qgis.error.toStdString();
    QgsVectorLayer* qgisLayer = outputLayer(qgis, QStringLiteral("OUTPUT"), qgisContext);
    ASSERT_TRUE(qgisLayer);
    const std::vector<QgsFeature> qgisFeatures = featuresOf(qgisLayer);
    EXPECT_EQ(qgis.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt(),
              ours.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt());
    const std::map<int, int> map = expectSameAsQgis(ourFeatures, qgisFeatures, siteOfFeature, ref, borderIsNoise);
    if (refOut)
      *refOut = ref;
    if (toQgis)
      *toQgis = map;
    if (oursOut)
      *oursOut = ourFeatures;
    if (qgisOut)
      *qgisOut = qgisFeatures;
  }
};

}  // namespace

// MIN_SIZE 5, EPS 15 m: blobs, noise, duplicates, ties at EPS, and a border point of two clusters.
TEST_F(DbscanAlgorithmTest, ClustersMatchTheBruteForceAndQgisDbscan)
{
  const std::vector<XY> points = clusteredPoints(41);
  auto input = pointLayer(points);
  DbscanReference ref;
  std::map<int, int> toQgis;
  std::vector<QgsFeature> ours, qgis;
  compareAll(input.get(), 5, 15.0, false, &ref, &toQgis, &ours, &qgis);
  ASSERT_FALSE(HasFatalFailure());

  // the data covers what it should
  EXPECT_GE(ref.size.size(), 8u);
  EXPECT_GE(ref.borderCount, 20);
  EXPECT_GE(ref.noiseCount, 100);
  // the lattice (points at exactly EPS): inner 3 x 3 core, edges border, corners noise
  int latticeCore = 0, latticeBorder = 0, latticeNoise = 0;
  std::vector<int> siteOfFeature;
  const std::vector<XY> sites = sitesOf(*input, siteOfFeature);
  for (size_t s = 0; s < sites.size(); ++s)
    if (sites[s].x >= kX0 + 3500.0 && sites[s].y >= kY0 + 1000.0 && sites[s].y <= kY0 + 1060.0)
    {
      latticeCore += ref.core[s];
      latticeBorder += !ref.core[s] && ref.cluster[s] > 0;
      latticeNoise += ref.cluster[s] == 0;
    }
  EXPECT_EQ(latticeCore, 9);
  EXPECT_EQ(latticeBorder, 12);
  EXPECT_EQ(latticeNoise, 4);

  // P (feature kPPosition + 1, after the feature without geometry at 3): a border point whose
  // lowest-index core neighbour b1 is in cluster B; QGIS's gives it to the first cluster it builds,
  // A (the one of the core point at position 5), as the help says.
  const size_t p = kPPosition + 1, a1 = kA1Position + 1, b1 = kB1Position + 1, aFirst = kAPositions[0] + 1;
  const int siteP = siteOfFeature[p];
  ASSERT_FALSE(ref.core[size_t(siteP)]);
  EXPECT_EQ(ref.coreNeighbours[size_t(siteP)].size(), 2u);
  const int clusterA = ours[a1].attribute(QStringLiteral("CLUSTER_ID")).toInt();
  const int clusterB = ours[b1].attribute(QStringLiteral("CLUSTER_ID")).toInt();
  EXPECT_NE(clusterA, clusterB);
  EXPECT_EQ(ours[aFirst].attribute(QStringLiteral("CLUSTER_ID")).toInt(), clusterA);
  EXPECT_EQ(ours[p].attribute(QStringLiteral("CLUSTER_ID")).toInt(), clusterB);
  EXPECT_EQ(qgis[p].attribute(QStringLiteral("CLUSTER_ID")).toInt(), toQgis[clusterA]);
}

// DBSCAN*: only core points are clustered; the whole output equals QGIS's, value for value (both
// number the clusters by their first core point, the order in which QGIS builds them).
TEST_F(DbscanAlgorithmTest, DbscanStarOutputEqualsQgisDbscan)
{
  auto input = pointLayer(clusteredPoints(43));
  DbscanReference ref;
  std::map<int, int> toQgis;
  compareAll(input.get(), 5, 15.0, true, &ref, &toQgis);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GE(ref.size.size(), 8u);
  EXPECT_GE(ref.borderCount, 20);
  for (const auto& [ours, qgis] : toQgis)
    EXPECT_EQ(ours, qgis);
}

// Other parameters on the same points: MIN_SIZE 1 (every point core: isolated points are clusters of
// one), EPS 0 (only exact duplicates are near: the duplicates and the stack), a large MIN_SIZE and
// EPS.
TEST_F(DbscanAlgorithmTest, OtherMinSizesAndDistances)
{
  auto input = pointLayer(clusteredPoints(47));
  struct Case
  {
    int minSize;
    double eps;
    bool star;
  };
  for (const Case& c : {Case{1, 15.0, false}, Case{2, 0.0, false}, Case{6, 0.0, true}, Case{12, 40.0, false}})
  {
    SCOPED_TRACE("MIN_SIZE " + std::to_string(c.minSize) + ", EPS " + std::to_string(c.eps));
    DbscanReference ref;
    compareAll(input.get(), c.minSize, c.eps, c.star, &ref);
    if (c.eps == 0.0)
      EXPECT_GE(ref.size.size(), 1u);
    else
      EXPECT_GE(ref.size.size(), 5u);
  }
}

// FIELD_NAME and SIZE_FIELD_NAME are the new fields' names; a multipoint layer: single-part
// multipoints are their point, a multipoint of two points, a feature without geometry and an empty
// multipoint get NULL (and are nobody's neighbours); to a GeoPackage.
TEST_F(DbscanAlgorithmTest, CustomFieldNamesMultipointsAndFeaturesWithoutPoints)
{
  const std::vector<XY> points = clusteredPoints(53);
  auto input = layer(QStringLiteral("MultiPoint"));
  for (size_t i = 0; i < points.size(); ++i)
  {
    if (i == 7)
      add(*input, QgsGeometry(), 9007);
    if (i == 8)
      add(*input, gpugeo::test::emptyMultiPoint(), 9008);
    if (i == 9)  // in the middle of a dense blob: would be core
      add(*input,
          QgsGeometry::fromMultiPointXY({QgsPointXY(kX0 + 2200.0, kY0 + 800.0), QgsPointXY(kX0 + 2200.5, kY0 + 800.0)}),
          9009);
    add(*input, QgsGeometry::fromMultiPointXY({QgsPointXY(points[i].x, points[i].y)}), int(i));
  }
  std::vector<int> siteOfFeature;
  const std::vector<XY> sites = sitesOf(*input, siteOfFeature);
  ASSERT_EQ(sites.size(), points.size());
  const DbscanReference ref = bruteForceDbscan(sites, 5, 15.0, false);

  QVariantMap p = parameters(5, 15.0, false);
  p.insert(QStringLiteral("FIELD_NAME"), QStringLiteral("CL_ID"));
  p.insert(QStringLiteral("SIZE_FIELD_NAME"), QStringLiteral("CL_N"));
  p.insert(QStringLiteral("OUTPUT"), path("clusters.gpkg"));
  QgsProcessingContext context;
  const RunResult result = run(QStringLiteral("gpugeo:dbscan"), input.get(), p, context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(result.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt(), int(ref.size.size()));
  QgsVectorLayer output(path("clusters.gpkg"), QStringLiteral("clusters"), QStringLiteral("ogr"));
  ASSERT_TRUE(output.isValid());
  EXPECT_EQ(output.wkbType(), QgsWkbTypes::MultiPoint);
  EXPECT_GE(output.fields().lookupField(QStringLiteral("CL_ID")), 0);
  EXPECT_GE(output.fields().lookupField(QStringLiteral("CL_N")), 0);
  EXPECT_LT(output.fields().lookupField(QStringLiteral("CLUSTER_ID")), 0);
  EXPECT_LT(output.fields().lookupField(QStringLiteral("CLUSTER_SIZE")), 0);
  expectReference(featuresOf(input.get()), featuresOf(&output), siteOfFeature, ref, QStringLiteral("CL_ID"),
                  QStringLiteral("CL_N"));
  EXPECT_TRUE(result.log.contains(QStringLiteral("WARNING Skipped 1 features without geometry and 1 with an empty geometry.")))
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.log.contains(QStringLiteral("WARNING Skipped 1 multipoint features of more than one point.")))
    << result.log.join('\n').toStdString();
}

// A geographic layer: EPS in degrees (as QGIS's), with a warning saying so.
TEST_F(DbscanAlgorithmTest, GeographicLayerWarnsThatEpsIsInDegrees)
{
  std::mt19937_64 rng(59);
  auto input = layer(QStringLiteral("Point"), QStringLiteral("EPSG:4326"));
  int val = 0;
  for (const XY& centre : {XY{10.0, 45.0}, XY{10.1, 45.05}, XY{-179.98, 0.0}})
  {
    std::normal_distribution<double> d(0.0, 0.004);
    for (int i = 0; i < 40; ++i)  // on a 1/4096 degree grid, so that differences are exact
    {
      const double x = centre.x + std::round(d(rng) * 4096.0) / 4096.0;  // x first
      add(*input, QgsGeometry(new QgsPoint(x, centre.y + std::round(d(rng) * 4096.0) / 4096.0)), val++);
    }
  }
  std::vector<int> siteOfFeature;
  const DbscanReference ref = bruteForceDbscan(sitesOf(*input, siteOfFeature), 4, 1.0 / 256.0, false);
  EXPECT_GE(ref.size.size(), 3u);
  QgsProcessingContext context;
  const RunResult result = run(QStringLiteral("gpugeo:dbscan"), input.get(), parameters(4, 1.0 / 256.0, false), context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("WARNING The layer has a geographic CRS: the maximum distance is in degrees")))
    << result.log.join('\n').toStdString();
  QgsVectorLayer* output = outputLayer(result, QStringLiteral("OUTPUT"), context);
  ASSERT_TRUE(output);
  expectReference(featuresOf(input.get()), featuresOf(output), siteOfFeature, ref);
}

// DEVICE=0 (Auto) writes what DEVICE=1 (CPU) writes; without a GPU, Auto says it runs on the CPU.
TEST_F(DbscanAlgorithmTest, AutoGivesTheSameOutputAsCpu)
{
  auto input = pointLayer(clusteredPoints(61));
  std::vector<std::vector<QgsFeature>> outputs;
  std::vector<int> counts;
  for (int device : {1, 0})
  {
    QgsProcessingContext context;
    const RunResult result = run(QStringLiteral("gpugeo:dbscan"), input.get(), parameters(5, 15.0, false, device), context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    if (device == 0 && !gpugeo::probeGpu().usable)
    {
      EXPECT_TRUE(result.logContains(QStringLiteral("Device: no usable GPU"))) << result.log.join('\n').toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU"))) << result.log.join('\n').toStdString();
    }
    outputs.push_back(featuresOf(outputLayer(result, QStringLiteral("OUTPUT"), context)));
    counts.push_back(result.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt());
  }
  EXPECT_EQ(counts[0], counts[1]);
  EXPECT_GE(counts[0], 8);
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i)
    EXPECT_EQ(outputs[0][i].attributes(), outputs[1][i].attributes()) << "feature " << i;
}

// A layer without points, as QGIS's DBSCAN takes it: no error, every feature written with empty
// cluster fields, NUM_CLUSTERS 0, a warning in the log; the same output as native:dbscanclustering.
TEST_F(DbscanAlgorithmTest, ALayerWithoutPointsGivesAnEmptyResultAsQgisDoes)
{
  for (int nulls : {0, 2})
  {
    auto input = layer();
    for (int i = 0; i < nulls; ++i)
      add(*input, QgsGeometry(), i);
    QgsProcessingContext context;
    const RunResult ours = run(QStringLiteral("gpugeo:dbscan"), input.get(), parameters(5, 15.0, false), context);
    ASSERT_TRUE(ours.ok) << nulls << ": " << ours.error.toStdString();
    EXPECT_EQ(ours.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt(), 0);
    EXPECT_TRUE(ours.logContains(QStringLiteral("WARNING The input layer has no point to use")))
      << ours.log.join('\n').toStdString();
    QgsProcessingContext qgisContext;
    QVariantMap qgisParameters = parameters(5, 15.0, false);
    qgisParameters.remove(QStringLiteral("DEVICE"));
    const RunResult qgis = run(QStringLiteral("native:dbscanclustering"), input.get(), qgisParameters, qgisContext);
    ASSERT_TRUE(qgis.ok) << qgis.error.toStdString();
    EXPECT_EQ(qgis.outputs.value(QStringLiteral("NUM_CLUSTERS")).toInt(), 0);
    const std::vector<QgsFeature> got = featuresOf(outputLayer(ours, QStringLiteral("OUTPUT"), context));
    const std::vector<QgsFeature> want = featuresOf(outputLayer(qgis, QStringLiteral("OUTPUT"), qgisContext));
    ASSERT_EQ(got.size(), size_t(nulls));
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i].attributes(), want[i].attributes()) << nulls << " feature " << i;
  }
}

TEST_F(DbscanAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  struct Case
  {
    QString name;
    std::function<void(QgsVectorLayer&)> fill;
    QVariantMap parameters;
    QString expected;
    QString type = QStringLiteral("Point");
  };
  const auto threePoints = [](QgsVectorLayer& l) {
    add(l, QgsGeometry(new QgsPoint(0, 0)), 1);
    add(l, QgsGeometry(new QgsPoint(3, 4)), 2);
    add(l, QgsGeometry(new QgsPoint(10, 0)), 3);
  };
  const QString eps = QStringLiteral("EPS"), minSize = QStringLiteral("MIN_SIZE");
  const std::vector<Case> cases = {
    {"EPS negative", threePoints, {{eps, -1.0}},
     "EPS (Maximum distance between clustered points) must be a number, 0 or more; got -1."},
    {"MIN_SIZE 0", threePoints, {{minSize, 0}}, "MIN_SIZE (Minimum cluster size) must be a whole number, 1 or more; got 0."},
    {"empty cluster field name", threePoints, {{QStringLiteral("FIELD_NAME"), QString("")}},
     "The cluster field names must not be empty."},
    {"a NaN coordinate",
     [&](QgsVectorLayer& l) {
       threePoints(l);
       add(l, QgsGeometry(new QgsPoint(std::nan(""), 2.0)), 4);
     },
     {},
     "1 of 4 points have a NaN coordinate"},
    {"a line layer",
     [](QgsVectorLayer& l) { add(l, QgsGeometry::fromWkt(QStringLiteral("LineString(0 0, 1 1)")), 1); },
     {},
     "must be a point layer",
     QStringLiteral("LineString")},
  };
  for (const Case& c : cases)
  {
    auto input = layer(c.type);
    c.fill(*input);
    QVariantMap p = parameters(3, 5.0, false);
    for (auto it = c.parameters.begin(); it != c.parameters.end(); ++it)
      p.insert(it.key(), it.value());
    p.insert(QStringLiteral("OUTPUT"), path("bad.gpkg"));
    QgsProcessingContext context;
    const RunResult result = run(QStringLiteral("gpugeo:dbscan"), input.get(), p, context);
    EXPECT_FALSE(result.ok) << c.name.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.name.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad.gpkg"))) << c.name.toStdString();
  }
}

// Canceled once past 60%: the run reports no progress while it clusters, so 60% is passed when the
// writing starts (the third of three steps, 66.7%), before the sink exists; the GeoPackage it then
// creates is deleted again. A second run with a probe in the feedback shows where the cancel lands.
TEST_F(DbscanAlgorithmTest, CancelLeavesNoOutputBehind)
{
  std::mt19937_64 rng(67);
  std::uniform_real_distribution<double> u(0.0, 5000.0);
  auto input = layer();
  QgsFeatureList features;
  for (int i = 0; i < 20000; ++i)
  {
    QgsFeature f(input->fields());
    const double x = kX0 + u(rng);
    f.setGeometry(QgsGeometry(new QgsPoint(x, kY0 + u(rng))));
    f.setAttributes(QgsAttributes() << i << QString());
    features << f;
  }
  ASSERT_TRUE(input->dataProvider()->addFeatures(features));
  QVariantMap p = parameters(5, 30.0, false);
  p.insert(QStringLiteral("OUTPUT"), path("canceled.gpkg"));
  {
    QgsProcessingContext context;
    const RunResult result = run(QStringLiteral("gpugeo:dbscan"), input.get(), p, context, true);
    EXPECT_FALSE(result.ok);
    EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled; no output was written."))) << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("canceled.gpkg")));
    EXPECT_FALSE(QFile::exists(path("canceled.gpkg-wal")));
  }

  // the probe: runAlgorithm's cancel rule, noting the progress and the file then
  std::unique_ptr<QgsProcessingAlgorithm> algorithm(
    QgsApplication::processingRegistry()->createAlgorithmById(QStringLiteral("gpugeo:dbscan")));
  ASSERT_TRUE(algorithm);
  QgsProcessingContext context;
  context.setProject(QgsProject::instance());
  context.temporaryLayerStore()->addMapLayer(input.get());
  p.insert(QStringLiteral("INPUT"), input->id());
  gpugeo::test::RecordingFeedback feedback;
  double canceledAt = -1;
  double highestBefore = 0;
  bool fileThen = true;
  QObject::connect(&feedback, &QgsFeedback::progressChanged, [&](double progress) {
    if (progress > 60 && !feedback.isCanceled())
    {
      canceledAt = progress;
      fileThen = QFile::exists(path("canceled.gpkg"));
      feedback.cancel();
    }
    else if (!feedback.isCanceled())
      highestBefore = std::max(highestBefore, progress);
  });
  bool ok = true;
  algorithm->run(p, context, &feedback, &ok);
  context.temporaryLayerStore()->takeMapLayer(input.get());
  EXPECT_FALSE(ok);
  EXPECT_NEAR(canceledAt, 200.0 / 3.0, 1e-9);
  EXPECT_LE(highestBefore, 100.0 / 3.0 + 1e-9);
  EXPECT_FALSE(fileThen);
  EXPECT_FALSE(QFile::exists(path("canceled.gpkg")));
}
