// gpugeo:voronoipolygons through the QGIS API against GEOS's Voronoi diagram
// (QgsGeometry::voronoiDiagram, clipped to the same rectangle): polygon for polygon, the symmetric
// difference within 1e-9 of the area; every polygon valid and holding its point; the areas summing
// to the buffered extent; attributes, duplicates, the tolerance, collinear points, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <QFile>

#include <qgsfeature.h>
#include <qgsgeometry.h>
#include <qgsspatialindex.h>
#include <qgsvectorlayer.h>

#include "processing_test_support.h"

namespace {

using gpugeo::test::RunResult;
using gpugeo::test::featuresOf;

struct Xy
{
  double x, y;
};

class VoronoiPolygonsAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  static std::unique_ptr<QgsVectorLayer> layer(const std::vector<Xy>& points, const QString& crs = "EPSG:32633")
  {
    auto l = std::make_unique<QgsVectorLayer>(QStringLiteral("Point?crs=") + crs +
                                                QStringLiteral("&field=val:integer&field=name:string"),
                                              QStringLiteral("sites"), QStringLiteral("memory"));
    QgsFeatureList features;
    for (std::size_t i = 0; i < points.size(); ++i)
    {
      QgsFeature f(l->fields());
      f.setGeometry(QgsGeometry::fromPointXY(QgsPointXY(points[i].x, points[i].y)));
      f.setAttributes(QgsAttributes() << int(i) << QStringLiteral("p%1").arg(i));
      features << f;
    }
    l->dataProvider()->addFeatures(features);
    l->updateExtents();
    return l;
  }

  RunResult run(QgsVectorLayer* input, QVariantMap parameters, QgsProcessingContext& context)
  {
    parameters.insert(QStringLiteral("OUTPUT"), QStringLiteral("memory:"));
    return runAlgorithm(QStringLiteral("gpugeo:voronoipolygons"), input, parameters, context);
  }

  // Runs with BUFFER and compares every polygon with GEOS's cell of the same point.
  void compareWithGeos(const std::vector<Xy>& points, double buffer, const QString& crs = "EPSG:32633")
  {
    std::unique_ptr<QgsVectorLayer> input = layer(points, crs);
    QgsRectangle extent = input->extent();
    extent.setXMinimum(extent.xMinimum() - extent.width() * buffer / 100.0);
    extent.setXMaximum(extent.xMaximum() + input->extent().width() * buffer / 100.0);
    extent.setYMinimum(extent.yMinimum() - extent.height() * buffer / 100.0);
    extent.setYMaximum(extent.yMaximum() + input->extent().height() * buffer / 100.0);
    QgsProcessingContext context;
    const RunResult result = run(input.get(), {{QStringLiteral("BUFFER"), buffer}}, context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    QgsVectorLayer* output = outputLayer(result, QStringLiteral("OUTPUT"), context);
    ASSERT_TRUE(output);

    // GEOS's cells of the distinct points, clipped to the rectangle, found by the point they hold.
    QgsMultiPointXY all;
    for (const Xy& p : points)
      all << QgsPointXY(p.x, p.y);
    const QgsGeometry rectangle = QgsGeometry::fromRect(extent);
    const QgsGeometry diagram = QgsGeometry::fromMultiPointXY(all).voronoiDiagram(rectangle);
    ASSERT_FALSE(diagram.isNull());
    std::vector<QgsGeometry> cells;
    QgsSpatialIndex index;
    for (const QgsGeometry& part : diagram.asGeometryCollection())
    {
      QgsFeature cell(QgsFeatureId(cells.size()));
      cell.setGeometry(part.intersection(rectangle));
      index.addFeature(cell);
      cells.push_back(cell.geometry());
    }

    double areaSum = 0.0;
    int compared = 0;
    for (const QgsFeature& f : featuresOf(output))
    {
      const int i = f.attribute(QStringLiteral("val")).toInt();
      const QgsGeometry ours = f.geometry();
      const QgsPointXY site(points[std::size_t(i)].x, points[std::size_t(i)].y);
      EXPECT_TRUE(ours.isGeosValid()) << "point " << i;
      EXPECT_TRUE(ours.intersects(QgsGeometry::fromPointXY(site))) << "point " << i;
      EXPECT_EQ(ours.wkbType(), QgsWkbTypes::Polygon);
      areaSum += ours.area();
      const QgsGeometry siteGeometry = QgsGeometry::fromPointXY(site);
      QgsGeometry geos;
      const double pad = 1e-6 * std::max(extent.width(), extent.height());
      for (QgsFeatureId id : index.intersects(QgsRectangle(site.x() - pad, site.y() - pad, site.x() + pad, site.y() + pad)))
        if (cells[std::size_t(id)].intersects(siteGeometry))  // a site on the rectangle's edge is on its cell's
          geos = cells[std::size_t(id)];
      ASSERT_FALSE(geos.isNull()) << "GEOS has no cell for point " << i;
      const double difference = ours.symDifference(geos).area();
      EXPECT_LE(difference, 1e-9 * geos.area()) << "point " << i << ": ours " << ours.asWkt(12).toStdString()
                                                << " GEOS " << geos.asWkt(12).toStdString();
      ++compared;
    }
    EXPECT_EQ(compared, int(cells.size()));
    EXPECT_NEAR(areaSum, extent.area(), 1e-9 * extent.area());
  }
};

std::vector<Xy> uniform(uint32_t seed, int n, double x0, double y0, double size)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, size);
  std::vector<Xy> points;
  for (int i = 0; i < n; ++i)
    points.push_back({x0 + u(rng), y0 + u(rng)});
  return points;
}

}  // namespace

TEST_F(VoronoiPolygonsAlgorithmTest, RandomAndClusteredPointsAreGeosCells)
{
  compareWithGeos(uniform(1, 600, 500000.0, 5100000.0, 20000.0), 10.0);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<Xy> clusters;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 150; ++i)
      clusters.push_back({400000.0 + 3000.0 * k + std::pow(10.0, 2 - k) * g(rng), 5000000.0 + 1000.0 * k +
                                                                                 std::pow(10.0, 2 - k) * g(rng)});
  compareWithGeos(clusters, 5.0);
  // Collinear: strips. (Not at 0, 0: QGIS 3.22's memory layers leave a point there out of their extent.)
  compareWithGeos({{1, 1}, {5, 5}, {10, 10}, {15, 15}}, 0.0);
}

// Real points: the centroids of the states and provinces of QGIS's world map, in degrees.
TEST_F(VoronoiPolygonsAlgorithmTest, WorldProvincesAreGeosCells)
{
  const QString world = QStringLiteral("/usr/share/qgis/resources/data/world_map.gpkg");
  if (!QFile::exists(world))
    GTEST_SKIP() << "QGIS's world map is not installed";
  QgsVectorLayer provinces(world + QStringLiteral("|layername=states_provinces"), QStringLiteral("p"),
                           QStringLiteral("ogr"));
  ASSERT_TRUE(provinces.isValid());
  std::vector<Xy> points;
  for (const QgsFeature& f : featuresOf(&provinces))
  {
    const QgsPointXY c = f.geometry().centroid().asPoint();
    points.push_back({c.x(), c.y()});
  }
  ASSERT_GT(points.size(), 3000u);
  compareWithGeos(points, 2.0, QStringLiteral("EPSG:4326"));
}

TEST_F(VoronoiPolygonsAlgorithmTest, DuplicatesToleranceAndAttributes)
{
  std::vector<Xy> points = uniform(3, 50, 0.0, 0.0, 100.0);
  points.push_back(points[7]);           // 50: a copy of 7
  points.push_back({points[9].x + 0.01, points[9].y});  // 51: within 0.05 of 9
  std::unique_ptr<QgsVectorLayer> input = layer(points);
  QgsProcessingContext context;
  RunResult result = run(input.get(), {}, context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  std::vector<QgsFeature> out = featuresOf(outputLayer(result, QStringLiteral("OUTPUT"), context));
  ASSERT_EQ(out.size(), 51u);  // 50 is a duplicate
  for (std::size_t k = 0; k < out.size(); ++k)
    EXPECT_EQ(out[k].attribute(QStringLiteral("name")).toString(),
              QStringLiteral("p%1").arg(out[k].attribute(QStringLiteral("val")).toInt()));
  EXPECT_TRUE(result.logContains(QStringLiteral("1 points lie on an earlier point")));

  QgsProcessingContext context2;
  result = run(input.get(), {{QStringLiteral("TOLERANCE"), 0.05}, {QStringLiteral("COPY_ATTRIBUTES"), false}},
               context2);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  QgsVectorLayer* plain = outputLayer(result, QStringLiteral("OUTPUT"), context2);
  ASSERT_EQ(plain->fields().count(), 1);
  EXPECT_EQ(plain->fields().at(0).name(), QStringLiteral("id"));
  out = featuresOf(plain);
  ASSERT_EQ(out.size(), 50u);  // 50 and 51 merged
  for (std::size_t k = 0; k < out.size(); ++k)
    EXPECT_EQ(out[k].attribute(0).toLongLong(), qlonglong(k));
}

TEST_F(VoronoiPolygonsAlgorithmTest, PointsOnOneVerticalLineAreRefused)
{
  std::unique_ptr<QgsVectorLayer> input = layer({{5, 0}, {5, 3}, {5, 9}});
  QgsProcessingContext context;
  const RunResult result = run(input.get(), {{QStringLiteral("BUFFER"), 10.0}}, context);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("one vertical or horizontal line"))) << result.error.toStdString();
}
