// gpugeo:qtmvoronoi through the QGIS API: memory point layers in (EPSG:4326 and EPSG:3857), memory
// polygon layers and a GeoTIFF out. Every cell and pixel is checked against the native long-double
// reference; the regions against the cells they are made of.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <QFile>

#include <gdal.h>

#include <qgscoordinatetransform.h>
#include <qgsfeature.h>
#include <qgsfeatureiterator.h>
#include <qgsgeometry.h>
#include <qgspalettedrasterrenderer.h>
#include <qgsprocessingutils.h>
#include <qgsrasterlayer.h>
#include <qgsvectorlayer.h>

#include "processing_test_support.h"
#include "sphere/earth.h"
#include "sphere/qtm.h"
#include "sphere/sphere_reference.h"

namespace {

using gpugeo::test::RunResult;
namespace sphere = gpugeo::sphere;
namespace ref = gpugeo::sphere::reference;

struct Site
{
  double lon, lat;
};

class QtmVoronoiAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // A memory point layer with an integer field "val" and a text field "name".
  static std::unique_ptr<QgsVectorLayer> layer(const QString& crs = QStringLiteral("EPSG:4326"),
                                               const QString& type = QStringLiteral("Point"))
  {
    return std::make_unique<QgsVectorLayer>(type + QStringLiteral("?crs=") + crs +
                                              QStringLiteral("&field=val:integer&field=name:string"),
                                            QStringLiteral("sites"), QStringLiteral("memory"));
  }

  static void add(QgsVectorLayer& target, const QgsGeometry& geometry, const QVariant& val)
  {
    QgsFeature feature(target.fields());
    feature.setGeometry(geometry);
    feature.setAttributes(QgsAttributes() << val << QStringLiteral("site %1").arg(val.toString()));
    target.dataProvider()->addFeature(feature);
  }

  RunResult run(QgsVectorLayer* input, const QVariantMap& parameters, QgsProcessingContext& context,
                bool cancelMidway = false)
  {
    return runAlgorithm(QStringLiteral("gpugeo:qtmvoronoi"), input, parameters, context, cancelMidway);
  }

  RunResult run(QgsVectorLayer* input, const QVariantMap& parameters, bool cancelMidway = false)
  {
    QgsProcessingContext context;
    return run(input, parameters, context, cancelMidway);
  }
};

// Random sites, and a few on the poles and the antimeridian.
std::vector<Site> someSites(int random, uint32_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> lon(-180.0, 180.0), z(-1.0, 1.0);
  std::vector<Site> sites = {{0.0, 90.0}, {-180.0, 10.0}, {179.99, -35.0}, {45.0, -90.0}};
  for (int i = 0; i < random; ++i)
    sites.push_back({lon(rng), std::asin(z(rng)) * 180.0 / M_PI});
  return sites;
}

// Whether label `got` is the reference's nearest site to p, or ties with it within 1e-14 radian.
bool nearestOrTie(const std::vector<ref::Point>& sites, const ref::Point& p, int32_t got)
{
  const int32_t want = ref::nearest(sites, p);
  return got == want ||
         (got >= 0 && got < int32_t(sites.size()) &&
          ref::angle(sites[size_t(got)], p) - ref::angle(sites[size_t(want)], p) < 1e-14L);
}

}  // namespace

TEST_F(QtmVoronoiAlgorithmTest, CellsRegionsAndRasterAgreeWithTheReference)
{
  const int level = 5;
  const std::vector<Site> sites = someSites(60, 3);
  auto input = layer();
  for (size_t i = 0; i < sites.size(); ++i)
    add(*input, QgsGeometry::fromPointXY(QgsPointXY(sites[i].lon, sites[i].lat)), int(100 + i));
  QgsProcessingContext context;
  // as the toolbox asks for it: the raster loaded into the project when done
  context.addLayerToLoadOnCompletion(path("labels.tif"),
                                     QgsProcessingContext::LayerDetails(QStringLiteral("labels"), QgsProject::instance()));
  const RunResult result = run(input.get(),
                               {{QStringLiteral("LEVEL"), level},
                                {QStringLiteral("FIELD"), QStringLiteral("val")},
                                {QStringLiteral("PIXEL_SIZE"), 2.0},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("OUTPUT_REGIONS"), QStringLiteral("memory:")},
                                {QStringLiteral("OUTPUT_CELLS"), QStringLiteral("memory:")},
                                {QStringLiteral("OUTPUT_RASTER"), path("labels.tif")}},
                               context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();

  std::vector<double> lon, lat;
  for (const Site& s : sites)
  {
    lon.push_back(s.lon);
    lat.push_back(s.lat);
  }
  const std::vector<ref::Point> refSites = ref::siteVectors(sphere::SiteSet{lon.data(), lat.data(), int64_t(sites.size())});

  // Cells: every one, its address, label (1-based site_id) and distance.
  QgsVectorLayer* cells = outputLayer(result, QStringLiteral("OUTPUT_CELLS"), context);
  ASSERT_TRUE(cells);
  EXPECT_EQ(cells->crs().authid(), QStringLiteral("EPSG:4326"));
  ASSERT_EQ(cells->featureCount(), long(sphere::qtmCellCount(level)));
  std::map<int64_t, int64_t> cellsOfSite;
  std::map<int64_t, double> areaOfSite;
  QgsFeature f;
  QgsFeatureIterator it = cells->getFeatures();
  while (it.nextFeature(f))
  {
    const uint64_t id = f.attribute(QStringLiteral("cell_id")).toULongLong();
    ASSERT_LT(id, sphere::qtmCellCount(level));
    EXPECT_EQ(f.attribute(QStringLiteral("address")).toString().toStdString(), sphere::qtmAddress(id, level));
    const int32_t site = int32_t(f.attribute(QStringLiteral("site_id")).toLongLong() - 1);
    const ref::Point centre = ref::qtmCentre(id, level);
    EXPECT_TRUE(nearestOrTie(refSites, centre, site)) << "cell " << id << " labelled " << site;
    // float64 (a float32 would be off by up to 1 m at 10,000 km)
    EXPECT_NEAR(f.attribute(QStringLiteral("dist_km")).toDouble(),
                double(ref::angle(refSites[size_t(site)], centre)) * sphere::kEarthRadiusKm, 1e-6)
      << "cell " << id;
    ++cellsOfSite[site];
    areaOfSite[site] += sphere::qtmCellArea(id, level);
  }

  // Regions: one per site with cells, made of exactly those cells, valid, holding their site
  // (sites at a pole or on the antimeridian may lie on the boundary), with the input's attributes.
  QgsVectorLayer* regions = outputLayer(result, QStringLiteral("OUTPUT_REGIONS"), context);
  ASSERT_TRUE(regions);
  EXPECT_EQ(regions->featureCount(), long(cellsOfSite.size()));
  EXPECT_EQ(regions->wkbType(), QgsWkbTypes::MultiPolygon);
  double total = 0;
  it = regions->getFeatures();
  while (it.nextFeature(f))
  {
    const int64_t site = f.attribute(QStringLiteral("site_id")).toLongLong() - 1;
    ASSERT_TRUE(site >= 0 && site < int64_t(sites.size()));
    EXPECT_EQ(f.attribute(QStringLiteral("val")).toInt(), int(100 + site));
    EXPECT_EQ(f.attribute(QStringLiteral("qtm_cells")).toLongLong(), cellsOfSite[site]) << "site " << site;
    const double km2 = f.attribute(QStringLiteral("area_km2")).toDouble();
    EXPECT_NEAR(km2, areaOfSite[site] * sphere::kEarthRadiusKm * sphere::kEarthRadiusKm, 1e-9 * km2) << "site " << site;
    total += km2;
    const QgsGeometry geometry = f.geometry();
    EXPECT_TRUE(geometry.isGeosValid()) << "site " << site;
    const QgsGeometry point = QgsGeometry::fromPointXY(QgsPointXY(sites[size_t(site)].lon, sites[size_t(site)].lat));
    EXPECT_TRUE(geometry.intersects(point) || geometry.distance(point) < 1e-9) << "site " << site;
  }
  EXPECT_NEAR(total, 4 * M_PI * sphere::kEarthRadiusKm * sphere::kEarthRadiusKm, 1e-9 * total);

  // Raster: 180 x 90 pixels of 2 degrees, each the FIELD value of the site nearest its centre.
  int width = 0, height = 0;
  double t[6];
  const std::vector<int32_t> pixels = readRaster<int32_t>(path("labels.tif"), GDT_Int32, width, height, t);
  ASSERT_EQ(width, 180);
  ASSERT_EQ(height, 90);
  EXPECT_EQ(t[0], -180.0);
  EXPECT_EQ(t[3], 90.0);
  EXPECT_EQ(t[1], 2.0);
  const sphere::LonLatGrid grid{-180.0, 90.0, 2.0, 2.0, width, height};
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c)
    {
      const int32_t site = pixels[size_t(r) * size_t(width) + size_t(c)] - 100;
      EXPECT_TRUE(nearestOrTie(refSites, ref::gridPoint(grid, r, c), site)) << "pixel " << c << "," << r;
    }

  // Loaded into a project, the raster gets a paletted style with the labels it holds.
  QgsProcessingLayerPostProcessorInterface* style =
    context.layerToLoadOnCompletionDetails(path("labels.tif")).postProcessor();
  ASSERT_TRUE(style);
  QgsRasterLayer raster(path("labels.tif"), QStringLiteral("labels"));
  gpugeo::test::RecordingFeedback feedback;
  style->postProcessLayer(&raster, context, &feedback);
  const auto* paletted = dynamic_cast<QgsPalettedRasterRenderer*>(raster.renderer());
  ASSERT_TRUE(paletted);
  std::set<int> held(pixels.begin(), pixels.end());
  QList<double> values;
  for (const QgsPalettedRasterRenderer::Class& c : paletted->classes())
    values << c.value;
  EXPECT_EQ(values, (QList<double>(held.begin(), held.end())));
}

// Input in Web Mercator, with a multipoint and features without geometry: transformed to lon/lat,
// one site a part; Auto (GPU where there is one) gives the CPU's labels.
TEST_F(QtmVoronoiAlgorithmTest, ProjectedInputMultipointsAndAutoEqualsCpu)
{
  auto input = layer(QStringLiteral("EPSG:3857"), QStringLiteral("MultiPoint"));
  const QgsCoordinateTransform toMercator(QgsCoordinateReferenceSystem(QStringLiteral("EPSG:4326")),
                                          QgsCoordinateReferenceSystem(QStringLiteral("EPSG:3857")),
                                          QgsProject::instance());
  const std::vector<Site> sites = {{10, 50}, {-120, -30}, {179.5, 0.5}, {-179.5, -0.5}, {60, 70}};
  for (size_t i = 0; i + 1 < sites.size(); i += 2)
  {
    const QgsPointXY a = toMercator.transform(QgsPointXY(sites[i].lon, sites[i].lat));
    const QgsPointXY b = toMercator.transform(QgsPointXY(sites[i + 1].lon, sites[i + 1].lat));
    add(*input, QgsGeometry::fromMultiPointXY({a, b}), int(i));
  }
  add(*input, QgsGeometry::fromMultiPointXY({toMercator.transform(QgsPointXY(sites[4].lon, sites[4].lat))}), 4);
  add(*input, QgsGeometry(), 99);

  std::vector<std::vector<int32_t>> rasters;
  for (int device : {1, 0})
  {
    QgsProcessingContext context;
    const QString file = path(QStringLiteral("device%1.tif").arg(device));
    const RunResult result = run(input.get(),
                                 {{QStringLiteral("LEVEL"), 4},
                                  {QStringLiteral("PIXEL_SIZE"), 1.0},
                                  {QStringLiteral("DEVICE"), device},
                                  {QStringLiteral("OUTPUT_REGIONS"), QStringLiteral("memory:")},
                                  {QStringLiteral("OUTPUT_RASTER"), file}},
                                 context);
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    bool skipped = false;
    for (const QString& line : result.log)
      skipped = skipped || line.contains(QStringLiteral("Skipped 1 features without geometry"));
    EXPECT_TRUE(skipped) << result.log.join('\n').toStdString();
    QgsVectorLayer* regions = outputLayer(result, QStringLiteral("OUTPUT_REGIONS"), context);
    ASSERT_TRUE(regions);
    EXPECT_EQ(regions->featureCount(), 5);
    QgsFeature f;
    QgsFeatureIterator it = regions->getFeatures();
    while (it.nextFeature(f))
    {
      const int64_t site = f.attribute(QStringLiteral("site_id")).toLongLong() - 1;
      const QgsGeometry point = QgsGeometry::fromPointXY(QgsPointXY(sites[size_t(site)].lon, sites[size_t(site)].lat));
      EXPECT_TRUE(f.geometry().intersects(point)) << "site " << site;
      EXPECT_TRUE(f.geometry().isGeosValid()) << "site " << site;
      EXPECT_EQ(f.attribute(QStringLiteral("val")).toInt(), int(site / 2 * 2)) << "site " << site;
    }
    int width = 0, height = 0;
    double t[6];
    rasters.push_back(readRaster<int32_t>(file, GDT_Int32, width, height, t));
    EXPECT_EQ(width, 360);
  }
  EXPECT_EQ(rasters[0], rasters[1]);
}

TEST_F(QtmVoronoiAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  struct Case
  {
    QString name;
    std::vector<Site> sites;
    QVariantMap parameters;
    QString expected;
  };
  const std::vector<Site> two = {{0, 0}, {10, 10}};
  const QString cells = path("cells.gpkg"), raster = path("bad.tif");
  const std::vector<Case> cases = {
    {"no points", {}, {{QStringLiteral("OUTPUT_RASTER"), raster}}, "no point to use"},
    {"latitude out of range", {{0, 0}, {10, 95}, {20, -91}}, {{QStringLiteral("OUTPUT_RASTER"), raster}}, "2 of 3 points"},
    {"longitude no longitude", {{0, 0}, {1e15, 5}, {-721, 0}, {540, 0}}, {{QStringLiteral("OUTPUT_RASTER"), raster}},
     "2 of 4 points have a NaN or infinite coordinate, a latitude outside -90..90 or a longitude outside -720..720"},
    {"cells above level 10", two, {{QStringLiteral("LEVEL"), 11}, {QStringLiteral("OUTPUT_CELLS"), cells}}, "limited to level 10"},
    {"level out of range", two, {{QStringLiteral("LEVEL"), 14}, {QStringLiteral("OUTPUT_RASTER"), raster}}, "LEVEL"},
    {"no output", two, {{QStringLiteral("OUTPUT_REGIONS"), QVariant()}}, "at least one output"},
    {"raster too large", two, {{QStringLiteral("PIXEL_SIZE"), 0.001}, {QStringLiteral("OUTPUT_RASTER"), raster}}, "more than 2^31"},
  };
  for (const Case& c : cases)
  {
    auto input = layer();
    for (const Site& s : c.sites)
      add(*input, QgsGeometry::fromPointXY(QgsPointXY(s.lon, s.lat)), 1);
    QVariantMap parameters = c.parameters;
    parameters.insert(QStringLiteral("DEVICE"), 1);
    const RunResult result = run(input.get(), parameters);
    EXPECT_FALSE(result.ok) << c.name.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected))
      << c.name.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(cells)) << c.name.toStdString();
    EXPECT_FALSE(QFile::exists(raster)) << c.name.toStdString();
  }

  // A point with one NaN coordinate (WKB allows it): refused with the count.
  auto input = layer();
  add(*input, QgsGeometry::fromPointXY(QgsPointXY(5, 5)), 1);
  add(*input, QgsGeometry(std::make_unique<QgsPoint>(std::nan(""), 5.0)), 2);
  const RunResult result = run(input.get(), {{QStringLiteral("DEVICE"), 1}, {QStringLiteral("OUTPUT_RASTER"), raster}});
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("1 of 2 points have a NaN coordinate"))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(raster));
}

// A layer without CRS is taken as longitude and latitude, with a warning saying so; longitudes past
// 180 (up to 360) are taken modulo 360, with a warning: the same cells as their wrapped points.
TEST_F(QtmVoronoiAlgorithmTest, NoCrsAndWrappedLongitudesAreSaid)
{
  std::vector<std::vector<int32_t>> rasters;
  for (int variant = 0; variant < 3; ++variant)
  {
    auto input = layer(variant == 1 ? QString() : QStringLiteral("EPSG:4326"));
    for (const Site& s : someSites(40, 9))
      add(*input, QgsGeometry::fromPointXY(QgsPointXY(variant == 2 && s.lon < 0 ? s.lon + 360.0 : s.lon, s.lat)), 1);
    const QString raster = path(QStringLiteral("wrapped%1.tif").arg(variant));
    const RunResult result = run(input.get(), {{QStringLiteral("DEVICE"), 1},
                                               {QStringLiteral("LEVEL"), 4},
                                               {QStringLiteral("PIXEL_SIZE"), 2.0},
                                               {QStringLiteral("OUTPUT_RASTER"), raster}});
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    EXPECT_EQ(result.logContains(QStringLiteral("WARNING The layer has no CRS")), variant == 1) << variant;
    EXPECT_EQ(result.logContains(QStringLiteral("longitude outside -180..180 degrees")), variant == 2) << variant;
    int width = 0, height = 0;
    double t[6];
    rasters.push_back(readRaster<int32_t>(raster, GDT_Int32, width, height, t));
  }
  EXPECT_EQ(rasters[1], rasters[0]);
  EXPECT_EQ(rasters[2], rasters[0]);
}

TEST_F(QtmVoronoiAlgorithmTest, CancelLeavesNoOutputBehind)
{
  auto input = layer();
  for (const Site& s : someSites(500, 5))
    add(*input, QgsGeometry::fromPointXY(QgsPointXY(s.lon, s.lat)), 1);
  const RunResult result = run(input.get(),
                               {{QStringLiteral("LEVEL"), 8},
                                {QStringLiteral("PIXEL_SIZE"), 0.05},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("OUTPUT_CELLS"), path("cells.gpkg")},
                                {QStringLiteral("OUTPUT_RASTER"), path("canceled.tif")}},
                               true);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled"))) << result.error.toStdString();
  // canceled while writing the cells (past 60% of 4 steps): the half-written GeoPackage is gone too
  EXPECT_FALSE(QFile::exists(path("cells.gpkg")));
  EXPECT_FALSE(QFile::exists(path("canceled.tif")));
}
