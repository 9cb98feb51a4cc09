// gpugeo:voronoiraster through the QGIS API: memory layers in, GeoTIFFs and a polygon layer out,
// every pixel checked against the native brute-force reference.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <QFile>
#include <QTemporaryDir>

#include <gdal.h>

#include <qgsapplication.h>
#include <qgscoordinatetransform.h>
#include <qgspalettedrasterrenderer.h>
#include <qgsrasterlayer.h>
#include <qgssinglebandpseudocolorrenderer.h>
#include <qgsfeature.h>
#include <qgsgeometry.h>
#include <qgslinestring.h>
#include <qgsmultilinestring.h>
#include <qgsprocessingalgorithm.h>
#include <qgsprocessingcontext.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingregistry.h>
#include <qgsproject.h>
#include <qgsvectorlayer.h>

#include "core/backend.h"
#include "processing_test_support.h"
#include "voronoi/voronoi_reference.h"

namespace {

using gpugeo::test::RecordingFeedback;
using gpugeo::test::RunResult;

class VoronoiRasterAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // A memory point layer (EPSG:32633) with an integer field "val" and a text field "name".
  std::unique_ptr<QgsVectorLayer> layer(const QString& geometryType = QStringLiteral("Point")) const
  {
    return std::make_unique<QgsVectorLayer>(geometryType + QStringLiteral("?crs=EPSG:32633&field=val:integer&field=name:string"),
                                            QStringLiteral("sites"), QStringLiteral("memory"));
  }

  static void addPoint(QgsVectorLayer& target, double x, double y, const QVariant& val, const QString& wkt = QString())
  {
    QgsFeature feature(target.fields());
    feature.setGeometry(wkt.isEmpty()                            ? QgsGeometry::fromPointXY(QgsPointXY(x, y))
                        : wkt == QStringLiteral("MultiPoint EMPTY") ? gpugeo::test::emptyMultiPoint()
                                                                    : QgsGeometry::fromWkt(wkt));
    feature.setAttributes(QgsAttributes() << val << QStringLiteral("site %1").arg(val.toString()));
    target.dataProvider()->addFeature(feature);
  }

  // cancelMidway: cancel once the run is past 60% (while labelling and writing).
  RunResult run(QgsVectorLayer* input, QVariantMap parameters, bool cancelMidway = false)
  {
    QgsProcessingContext context;
    return run(input, parameters, context, cancelMidway);
  }

  RunResult run(QgsVectorLayer* input, QVariantMap parameters, QgsProcessingContext& context, bool cancelMidway = false)
  {
    return runAlgorithm(QStringLiteral("gpugeo:voronoiraster"), input, parameters, context, cancelMidway);
  }
};

std::vector<std::pair<double, double>> randomSites(int count, uint32_t seed, double x0, double y0, double w, double h)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ux(x0, x0 + w), uy(y0, y0 + h);
  std::vector<std::pair<double, double>> sites;
  for (int i = 0; i < count; ++i)
    sites.emplace_back(ux(rng), uy(rng));
  return sites;
}

}  // namespace

TEST_F(VoronoiRasterAlgorithmTest, LabelsDistancesAndPolygonsMatchTheBruteForceReference)
{
  const auto sites = randomSites(300, 7, 500000.0, 4100000.0, 9000.0, 6000.0);
  auto input = layer();
  for (size_t i = 0; i < sites.size(); ++i)
    addPoint(*input, sites[i].first, sites[i].second, int(1000 + 3 * i));
  const QVariantMap parameters{{QStringLiteral("FIELD"), QStringLiteral("val")},
                               {QStringLiteral("EXTENT"), QStringLiteral("499500,509500,4099800,4106300 [EPSG:32633]")},
                               {QStringLiteral("PIXEL_SIZE"), 25.0},
                               {QStringLiteral("DEVICE"), 1},
                               {QStringLiteral("OUTPUT"), path("alloc.tif")},
                               {QStringLiteral("OUTPUT_DISTANCE"), path("dist.tif")},
                               {QStringLiteral("OUTPUT_POLYGONS"), path("regions.gpkg")}};
  const RunResult result = run(input.get(), parameters);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTPUT")).toString(), path("alloc.tif"));

  int width = 0, height = 0;
  double transform[6], noData = 0;
  const auto labels = readRaster<int32_t>(path("alloc.tif"), GDT_Int32, width, height, transform, &noData);
  ASSERT_EQ(width, 400);
  ASSERT_EQ(height, 260);
  EXPECT_DOUBLE_EQ(transform[0], 499500.0);
  EXPECT_DOUBLE_EQ(transform[3], 4106300.0);
  EXPECT_DOUBLE_EQ(transform[1], 25.0);
  EXPECT_DOUBLE_EQ(transform[5], -25.0);
  EXPECT_EQ(noData, -2147483648.0);
  int dw = 0, dh = 0;
  double dt[6];
  const auto distances = readRaster<float>(path("dist.tif"), GDT_Float32, dw, dh, dt);

  std::vector<double> xs, ys;
  for (const auto& [x, y] : sites)
  {
    xs.push_back(x);
    ys.push_back(y);
  }
  const gpugeo::voronoi::Grid grid{499500.0, 4106300.0, 25.0, width, height};
  const auto reference =
    gpugeo::voronoi::referenceLabels(grid, gpugeo::voronoi::Sites{xs.data(), ys.data(), int64_t(xs.size())}, 0, height);
  std::vector<int64_t> pixelsOfSite(sites.size(), 0);
  for (size_t i = 0; i < labels.size(); ++i)
  {
    ASSERT_EQ(labels[i], 1000 + 3 * reference.site[i]) << "pixel " << i;
    ASSERT_EQ(distances[i], reference.distance[i]) << "pixel " << i;
    ++pixelsOfSite[static_cast<size_t>(reference.site[i])];
  }

  // One multipolygon per site with pixels, its area that of its pixels, valid, with the site's
  // attributes.
  QgsVectorLayer regions(path("regions.gpkg"), QStringLiteral("regions"), QStringLiteral("ogr"));
  ASSERT_TRUE(regions.isValid());
  EXPECT_EQ(regions.wkbType(), QgsWkbTypes::MultiPolygon);
  int64_t withPixels = 0;
  for (int64_t count : pixelsOfSite)
    withPixels += count > 0;
  EXPECT_EQ(regions.featureCount(), withPixels);
  QgsFeature feature;
  QgsFeatureIterator it = regions.getFeatures();
  double totalArea = 0.0;
  while (it.nextFeature(feature))
  {
    const int64_t siteId = feature.attribute(QStringLiteral("site_id")).toLongLong();
    ASSERT_GE(siteId, 1);
    ASSERT_LE(siteId, int64_t(sites.size()));
    EXPECT_EQ(feature.attribute(QStringLiteral("val")).toInt(), 1000 + 3 * (siteId - 1));
    EXPECT_EQ(feature.attribute(QStringLiteral("name")).toString(), QStringLiteral("site %1").arg(1000 + 3 * (siteId - 1)));
    EXPECT_TRUE(feature.geometry().isGeosValid()) << "site " << siteId;
    EXPECT_NEAR(feature.geometry().area(), pixelsOfSite[siteId - 1] * 625.0, 1e-6) << "site " << siteId;
    totalArea += feature.geometry().area();
  }
  EXPECT_NEAR(totalArea, 400.0 * 260.0 * 625.0, 1e-3);
  EXPECT_TRUE(std::any_of(result.log.begin(), result.log.end(), [](const QString& l) { return l.startsWith("Backend: CPU"); }));
  EXPECT_TRUE(std::any_of(result.log.begin(), result.log.end(), [](const QString& l) { return l.startsWith("Stage times: read"); }));
}

TEST_F(VoronoiRasterAlgorithmTest, DefaultsMultipointsNullsAndSkippedGeometries)
{
  auto input = layer(QStringLiteral("MultiPoint"));
  addPoint(*input, 0, 0, 5, QStringLiteral("MultiPoint((0 0),(100 0))"));
  addPoint(*input, 0, 0, QVariant(), QStringLiteral("MultiPoint((0 50))"));
  addPoint(*input, 0, 0, 7, QStringLiteral("MultiPoint((100 50))"));
  QgsFeature noGeometry(input->fields());
  noGeometry.setAttributes(QgsAttributes() << 9 << QStringLiteral("none"));
  input->dataProvider()->addFeature(noGeometry);
  addPoint(*input, 0, 0, 11, QStringLiteral("MultiPoint EMPTY"));

  const RunResult result = run(input.get(), {{QStringLiteral("FIELD"), QStringLiteral("val")},
                                             {QStringLiteral("DEVICE"), 1},
                                             {QStringLiteral("OUTPUT"), path("alloc.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.log.filter(QStringLiteral("Skipped 1 features without geometry and 1 with an empty geometry")).size() == 1)
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.log.filter(QStringLiteral("1 sites have a NULL label")).size() == 1);
  int width = 0, height = 0;
  double transform[6], noData = 0;
  const auto labels = readRaster<int32_t>(path("alloc.tif"), GDT_Int32, width, height, transform, &noData);
  // Extent 100 x 50, pixel size 100 / 1000.
  EXPECT_EQ(width, 1000);
  EXPECT_EQ(height, 500);
  EXPECT_DOUBLE_EQ(transform[1], 0.1);
  // Quadrants: top-left (0,50) NULL -> nodata, top-right (100,50) -> 7, bottom row -> 5 (both parts).
  EXPECT_EQ(labels[0], int32_t(noData));
  EXPECT_EQ(labels[999], 7);
  EXPECT_EQ(labels[size_t(499) * 1000], 5);
  EXPECT_EQ(labels[size_t(499) * 1000 + 999], 5);
}

TEST_F(VoronoiRasterAlgorithmTest, AutoGivesTheSameRasterAsCpu)
{
  const auto sites = randomSites(2000, 11, 0.0, 0.0, 1000.0, 700.0);
  auto input = layer();
  for (size_t i = 0; i < sites.size(); ++i)
    addPoint(*input, sites[i].first, sites[i].second, int(i));
  for (int device : {0, 1})
  {
    const RunResult result = run(input.get(), {{QStringLiteral("DEVICE"), device},
                                               {QStringLiteral("PIXEL_SIZE"), 0.5},
                                               {QStringLiteral("OUTPUT"), path(QStringLiteral("alloc%1.tif").arg(device))},
                                               {QStringLiteral("OUTPUT_DISTANCE"), path(QStringLiteral("dist%1.tif").arg(device))}});
    ASSERT_TRUE(result.ok) << result.error.toStdString();
  }
  int w = 0, h = 0;
  double t[6];
  EXPECT_EQ(readRaster<int32_t>(path("alloc0.tif"), GDT_Int32, w, h, t), readRaster<int32_t>(path("alloc1.tif"), GDT_Int32, w, h, t));
  EXPECT_EQ(readRaster<float>(path("dist0.tif"), GDT_Float32, w, h, t), readRaster<float>(path("dist1.tif"), GDT_Float32, w, h, t));
}

// COG and CREATION_OPTIONS: both rasters written as asked (the distances compressed too), the values
// bit for bit those of the default run; options GDAL does not take refused, nothing written.
TEST_F(VoronoiRasterAlgorithmTest, OutputFormatAsAsked)
{
  const auto sites = randomSites(300, 5, 0.0, 0.0, 1000.0, 700.0);
  auto input = layer();
  for (size_t i = 0; i < sites.size(); ++i)
    addPoint(*input, sites[i].first, sites[i].second, int(i));
  const auto runAs = [&](const QString& name, const QVariantMap& format) {
    QVariantMap parameters{{QStringLiteral("DEVICE"), 1},
                           {QStringLiteral("PIXEL_SIZE"), 0.5},
                           {QStringLiteral("OUTPUT"), path(name + QStringLiteral("_alloc.tif"))},
                           {QStringLiteral("OUTPUT_DISTANCE"), path(name + QStringLiteral("_dist.tif"))}};
    for (auto it = format.begin(); it != format.end(); ++it)
      parameters.insert(it.key(), it.value());
    return run(input.get(), parameters);
  };
  const auto image = [](const QString& file, const char* item) {
    GDALDatasetH dataset = GDALOpen(file.toUtf8().constData(), GA_ReadOnly);
    if (!dataset)
      return std::string("(does not open)");
    const char* value = GDALGetMetadataItem(dataset, item, "IMAGE_STRUCTURE");
    const std::string out = value ? value : "";
    GDALClose(dataset);
    return out;
  };
  ASSERT_TRUE(runAs(QStringLiteral("plain"), {}).ok);
  EXPECT_EQ(image(path("plain_dist.tif"), "COMPRESSION"), "");  // large floating rasters plain by default
  const RunResult zstd = runAs(QStringLiteral("zstd"), {{QStringLiteral("CREATION_OPTIONS"), QStringLiteral("COMPRESS=ZSTD")}});
  ASSERT_TRUE(zstd.ok) << zstd.error.toStdString();
  const RunResult cog = runAs(QStringLiteral("cog"), {{QStringLiteral("COG"), true}});
  ASSERT_TRUE(cog.ok) << cog.error.toStdString();
  for (const QString& name : {QStringLiteral("zstd"), QStringLiteral("cog")})
  {
    SCOPED_TRACE(name.toStdString());
    for (const QString& raster : {QStringLiteral("_alloc.tif"), QStringLiteral("_dist.tif")})
    {
      EXPECT_EQ(image(path(name + raster), "COMPRESSION"), name == QStringLiteral("zstd") ? "ZSTD" : "DEFLATE");
      EXPECT_EQ(image(path(name + raster), "LAYOUT"), name == QStringLiteral("cog") ? "COG" : "");
    }
    int w = 0, h = 0;
    double t[6];
    EXPECT_EQ(readRaster<int32_t>(path(name + "_alloc.tif"), GDT_Int32, w, h, t),
              readRaster<int32_t>(path("plain_alloc.tif"), GDT_Int32, w, h, t));
    EXPECT_EQ(readRaster<float>(path(name + "_dist.tif"), GDT_Float32, w, h, t),
              readRaster<float>(path("plain_dist.tif"), GDT_Float32, w, h, t));
  }
  const RunResult refused = runAs(QStringLiteral("refused"), {{QStringLiteral("CREATION_OPTIONS"), QStringLiteral("PHOTO=1")}});
  EXPECT_FALSE(refused.ok);
  EXPECT_TRUE(refused.error.contains(QStringLiteral("PHOTO"))) << refused.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("refused_alloc.tif")));
  EXPECT_FALSE(QFile::exists(path("refused_dist.tif")));
}

// Loaded into a project (as from the toolbox), the allocation raster gets one colour per label and
// the distance raster a colour ramp from 0 to the largest distance.
TEST_F(VoronoiRasterAlgorithmTest, OutputsLoadedIntoAProjectGetDefaultStyles)
{
  auto input = layer();
  addPoint(*input, 0, 0, 4);
  addPoint(*input, 100, 40, 9);
  addPoint(*input, 50, 80, 4);
  QgsProcessingContext context;
  const QString allocation = path("styled.tif"), distance = path("styled_distance.tif");
  context.addLayerToLoadOnCompletion(allocation, QgsProcessingContext::LayerDetails(QStringLiteral("allocation"), QgsProject::instance()));
  context.addLayerToLoadOnCompletion(distance, QgsProcessingContext::LayerDetails(QStringLiteral("distance"), QgsProject::instance()));
  const RunResult result = run(input.get(),
                               {{QStringLiteral("FIELD"), QStringLiteral("val")},
                                {QStringLiteral("PIXEL_SIZE"), 1.0},
                                {QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("OUTPUT"), allocation},
                                {QStringLiteral("OUTPUT_DISTANCE"), distance}},
                               context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();

  QgsProcessingLayerPostProcessorInterface* labelStyle = context.layerToLoadOnCompletionDetails(allocation).postProcessor();
  ASSERT_TRUE(labelStyle);
  QgsRasterLayer labels(allocation, QStringLiteral("allocation"));
  ASSERT_TRUE(labels.isValid());
  RecordingFeedback feedback;
  labelStyle->postProcessLayer(&labels, context, &feedback);
  auto* paletted = dynamic_cast<QgsPalettedRasterRenderer*>(labels.renderer());
  ASSERT_TRUE(paletted);
  QList<double> values;
  for (const QgsPalettedRasterRenderer::Class& c : paletted->classes())
    values << c.value;
  EXPECT_EQ(values, (QList<double>{4, 9}));

  QgsProcessingLayerPostProcessorInterface* rampStyle = context.layerToLoadOnCompletionDetails(distance).postProcessor();
  ASSERT_TRUE(rampStyle);
  QgsRasterLayer distances(distance, QStringLiteral("distance"));
  rampStyle->postProcessLayer(&distances, context, &feedback);
  auto* ramp = dynamic_cast<QgsSingleBandPseudoColorRenderer*>(distances.renderer());
  ASSERT_TRUE(ramp);
  EXPECT_EQ(ramp->classificationMin(), 0.0);
  EXPECT_GT(ramp->classificationMax(), 40.0);
}

// An EXTENT in another CRS is transformed to the layer's CRS, as QGIS's own algorithms do.
TEST_F(VoronoiRasterAlgorithmTest, ExtentInAnotherCrsIsTransformed)
{
  auto input = layer();
  addPoint(*input, 500000, 4000000, 1);
  addPoint(*input, 501000, 4001000, 2);
  const RunResult result = run(input.get(), {{QStringLiteral("EXTENT"), QStringLiteral("14.99,15.01,36.1,36.12 [EPSG:4326]")},
                                             {QStringLiteral("PIXEL_SIZE"), 10.0},
                                             {QStringLiteral("DEVICE"), 1},
                                             {QStringLiteral("OUTPUT"), path("reprojected.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  const QgsCoordinateTransform transform(QgsCoordinateReferenceSystem(QStringLiteral("EPSG:4326")),
                                         QgsCoordinateReferenceSystem(QStringLiteral("EPSG:32633")), QgsProject::instance());
  const QgsRectangle expected = transform.transformBoundingBox(QgsRectangle(14.99, 36.1, 15.01, 36.12));
  int width = 0, height = 0;
  double t[6];
  readRaster<int32_t>(path("reprojected.tif"), GDT_Int32, width, height, t);
  EXPECT_NEAR(t[0], expected.xMinimum(), 1e-6);
  EXPECT_NEAR(t[3], expected.yMaximum(), 1e-6);
  EXPECT_EQ(width, int(std::ceil(expected.width() / 10.0)));
  EXPECT_EQ(height, int(std::ceil(expected.height() / 10.0)));
}

TEST_F(VoronoiRasterAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  struct Case
  {
    QString name;
    std::function<void(QgsVectorLayer&)> fill;
    QVariantMap parameters;
    QString expected;
  };
  auto twoPoints = [](QgsVectorLayer& l) {
    addPoint(l, 0, 0, 1);
    addPoint(l, 10, 10, 2);
  };
  const std::vector<Case> cases = {
    {"empty layer", [](QgsVectorLayer&) {}, {}, "no point to use"},
    {"only null geometries",
     [](QgsVectorLayer& l) {
       QgsFeature f(l.fields());
       l.dataProvider()->addFeature(f);
     },
     {},
     "1 features without geometry"},
    {"zero pixel size", twoPoints, {{QStringLiteral("PIXEL_SIZE"), 0.0}},
     "PIXEL_SIZE (Pixel size) must be a number greater than 0; got 0."},
    {"negative pixel size", twoPoints, {{QStringLiteral("PIXEL_SIZE"), -3.0}},
     "PIXEL_SIZE (Pixel size) must be a number greater than 0; got -3."},
    {"points on one line", [](QgsVectorLayer& l) {
       addPoint(l, 0, 0, 1);
       addPoint(l, 0, 10, 2);
     },
     {},
     "has no area"},
    {"zero-area extent", twoPoints, {{QStringLiteral("EXTENT"), QStringLiteral("0,10,5,5 [EPSG:32633]")}}, "has no area"},
    {"too many pixels", twoPoints, {{QStringLiteral("PIXEL_SIZE"), 0.0001}}, "limits of 2^31"},
    {"too wide", twoPoints, {{QStringLiteral("EXTENT"), QStringLiteral("0,20000000,0,1 [EPSG:32633]")}, {QStringLiteral("PIXEL_SIZE"), 1.0}}, "2^24 pixels a side"},
    {"fractional label", [](QgsVectorLayer& l) {
       QgsVectorLayer* layer = &l;
       layer->dataProvider()->addAttributes({QgsField(QStringLiteral("real"), QVariant::Double)});
       layer->updateFields();
       QgsFeature f(layer->fields());
       f.setGeometry(QgsGeometry::fromPointXY(QgsPointXY(0, 0)));
       f.setAttributes(QgsAttributes() << 1 << QStringLiteral("a") << 2.5);
       layer->dataProvider()->addFeature(f);
       f.setGeometry(QgsGeometry::fromPointXY(QgsPointXY(5, 5)));
       layer->dataProvider()->addFeature(f);
     },
     {{QStringLiteral("FIELD"), QStringLiteral("real")}},
     "not a whole number"},
  };
  for (const Case& c : cases)
  {
    auto input = layer();
    c.fill(*input);
    QVariantMap parameters = c.parameters;
    parameters.insert(QStringLiteral("DEVICE"), 1);
    parameters.insert(QStringLiteral("OUTPUT"), path("bad.tif"));
    parameters.insert(QStringLiteral("OUTPUT_DISTANCE"), path("bad_distance.tif"));
    const RunResult result = run(input.get(), parameters);
    EXPECT_FALSE(result.ok) << c.name.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.name.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad.tif"))) << c.name.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad_distance.tif"))) << c.name.toStdString();
  }
}

TEST_F(VoronoiRasterAlgorithmTest, GpuRequestedWithoutAGpuNamesTheReason)
{
  if (gpugeo::probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  auto input = layer();
  addPoint(*input, 0, 0, 1);
  addPoint(*input, 10, 10, 2);
  const RunResult result = run(input.get(), {{QStringLiteral("DEVICE"), 2}, {QStringLiteral("OUTPUT"), path("gpu.tif")}});
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QString::fromStdString(gpugeo::probeGpu().reason))) << result.error.toStdString();
  EXPECT_TRUE(result.error.contains(QStringLiteral("DEVICE=GPU"))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("gpu.tif")));
}

TEST_F(VoronoiRasterAlgorithmTest, CancelLeavesNoOutputBehind)
{
  const auto sites = randomSites(5000, 13, 0.0, 0.0, 1000.0, 1000.0);
  auto input = layer();
  for (size_t i = 0; i < sites.size(); ++i)
    addPoint(*input, sites[i].first, sites[i].second, int(i));
  const RunResult result = run(input.get(),
                               {{QStringLiteral("DEVICE"), 1},
                                {QStringLiteral("PIXEL_SIZE"), 0.1},
                                {QStringLiteral("OUTPUT"), path("canceled.tif")},
                                {QStringLiteral("OUTPUT_DISTANCE"), path("canceled_distance.tif")}},
                               true);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled"))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("canceled.tif")));
  EXPECT_FALSE(QFile::exists(path("canceled_distance.tif")));
}

// Lines and polygons as sites: a multipart line is one site, field labels, the regions one
// multipolygon per feature with its attributes; polygons inside at distance 0 (holes not), or the
// distance to the boundary; a layer of empty geometries only is refused.
TEST_F(VoronoiRasterAlgorithmTest, LinesAndPolygonsAreSitesWholeFeatures)
{
  auto lines = layer(QStringLiteral("MultiLineString"));
  addPoint(*lines, 0, 0, 5, QStringLiteral("MultiLineString((0 0, 0 100),(100 0, 100 100))"));
  addPoint(*lines, 0, 0, 7, QStringLiteral("MultiLineString((50 0, 50 100))"));
  {
    // Empty geometries built rather than parsed: QGIS 3.22 leaks "MultiLineString EMPTY" from WKT.
    QgsFeature empty(lines->fields());
    empty.setGeometry(QgsGeometry(new QgsMultiLineString()));
    empty.setAttributes(QgsAttributes() << 9 << QStringLiteral("site 9"));
    lines->dataProvider()->addFeature(empty);
  }
  const RunResult result = run(lines.get(), {{QStringLiteral("FIELD"), QStringLiteral("val")},
                                             {QStringLiteral("DEVICE"), 1},
                                             {QStringLiteral("PIXEL_SIZE"), 1.0},
                                             {QStringLiteral("OUTPUT"), path("lines.tif")},
                                             {QStringLiteral("OUTPUT_DISTANCE"), path("lines_d.tif")},
                                             {QStringLiteral("OUTPUT_POLYGONS"), path("lines.gpkg")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(result.log.filter(QStringLiteral("2 line features.")).size(), 1) << result.log.join('\n').toStdString();
  int width = 0, height = 0;
  double transform[6];
  const auto labels = readRaster<int32_t>(path("lines.tif"), GDT_Int32, width, height, transform);
  const auto distance = readRaster<float>(path("lines_d.tif"), GDT_Float32, width, height, transform);
  ASSERT_EQ(width, 100);
  ASSERT_EQ(height, 100);
  for (int c = 0; c < 100; ++c)
  {
    // Column c's centre x = c + 0.5: nearest line x = 0, 50 or 100 (the ties at 25 and 75 fall on no centre).
    const double x = c + 0.5;
    const double d0 = std::min(x, 100.0 - x), d1 = std::fabs(x - 50.0);
    EXPECT_EQ(labels[size_t(40 * 100 + c)], d0 < d1 ? 5 : 7) << c;
    EXPECT_FLOAT_EQ(distance[size_t(40 * 100 + c)], float(std::min(d0, d1))) << c;
  }
  QgsVectorLayer regions(path("lines.gpkg"), QStringLiteral("regions"), QStringLiteral("ogr"));
  ASSERT_TRUE(regions.isValid());
  EXPECT_EQ(regions.featureCount(), 2);
  QgsFeature feature;
  QgsFeatureIterator it = regions.getFeatures();
  double area = 0;
  while (it.nextFeature(feature))
  {
    area += feature.geometry().area();
    if (feature.attribute(QStringLiteral("val")).toInt() == 5)
    {
      EXPECT_EQ(feature.attribute(QStringLiteral("site_id")).toLongLong(), 1);
      EXPECT_NEAR(feature.geometry().area(), 5000.0, 1e-6);  // x < 25 and x > 75
    }
  }
  EXPECT_NEAR(area, 10000.0, 1e-6);

  auto polygons = layer(QStringLiteral("Polygon"));
  addPoint(*polygons, 0, 0, 1, QStringLiteral("Polygon((0 0, 40 0, 40 40, 0 40, 0 0),(10 10, 10 30, 30 30, 30 10, 10 10))"));
  addPoint(*polygons, 0, 0, 2, QStringLiteral("Polygon((60 0, 100 0, 100 40, 60 40, 60 0))"));
  for (int mode : {0, 1})
  {
    const RunResult r = run(polygons.get(), {{QStringLiteral("DEVICE"), 1},
                                             {QStringLiteral("PIXEL_SIZE"), 1.0},
                                             {QStringLiteral("POLYGON_DISTANCE"), mode},
                                             {QStringLiteral("OUTPUT"), path(QStringLiteral("p%1.tif").arg(mode))},
                                             {QStringLiteral("OUTPUT_DISTANCE"), path(QStringLiteral("pd%1.tif").arg(mode))}});
    ASSERT_TRUE(r.ok) << r.error.toStdString();
    const auto l = readRaster<int32_t>(path(QStringLiteral("p%1.tif").arg(mode)), GDT_Int32, width, height, transform);
    const auto d = readRaster<float>(path(QStringLiteral("pd%1.tif").arg(mode)), GDT_Float32, width, height, transform);
    ASSERT_EQ(width, 100);
    ASSERT_EQ(height, 40);
    auto at = [&](int c, int row) { return size_t(row * width + c); };
    // (5.5, 34.5): inside the first polygon's shell, 5.5 from its left and top sides (6.4 from the hole).
    EXPECT_EQ(l[at(5, 5)], 1);
    EXPECT_FLOAT_EQ(d[at(5, 5)], mode == 0 ? 0.f : 5.5f);
    // (20.5, 19.5): in the hole, 9.5 from its sides (x = 30 is 9.5 away, y = 10 is 9.5 away).
    EXPECT_EQ(l[at(20, 20)], 1);
    EXPECT_FLOAT_EQ(d[at(20, 20)], 9.5f);
    // (80.5, 19.5): inside the second polygon.
    EXPECT_EQ(l[at(80, 20)], 2);
    EXPECT_FLOAT_EQ(d[at(80, 20)], mode == 0 ? 0.f : 19.5f);
  }

  auto empty = layer(QStringLiteral("LineString"));
  QgsFeature emptyLine(empty->fields());
  emptyLine.setGeometry(QgsGeometry(new QgsLineString()));
  emptyLine.setAttributes(QgsAttributes() << 1 << QStringLiteral("site 1"));
  empty->dataProvider()->addFeature(emptyLine);
  const RunResult refused = run(empty.get(), {{QStringLiteral("DEVICE"), 1}, {QStringLiteral("OUTPUT"), path("e.tif")}});
  EXPECT_FALSE(refused.ok);
  EXPECT_TRUE(refused.error.contains(QStringLiteral("no feature to use"))) << refused.error.toStdString();
}
