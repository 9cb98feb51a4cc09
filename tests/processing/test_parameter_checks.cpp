// What every gpugeo algorithm refuses before it reads or writes anything (processing/parameter_checks):
// an output over a file the run reads (the same path, a symbolic link, a hard link, another spelling of
// the path), two outputs on one file, NaN, infinities and out-of-range values in numeric parameters
// (with the parameter's name and range), a CRS QGIS does not know, an extent that is not finite. Every
// algorithm of the provider is tried, through checkParameterValues() (the dialog, qgis_process) and
// through run() (models, scripts), and the input is byte for byte unchanged afterwards.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <limits>
#include <memory>

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QTextStream>

#include <gdal.h>
#include <ogr_srs_api.h>

#include <qgsapplication.h>
#include <qgsgeometry.h>
#include <qgsprocessingalgorithm.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingprovider.h>
#include <qgsprocessingregistry.h>
#include <qgsvectorfilewriter.h>
#include <qgsvectorlayer.h>

#include "processing_test_support.h"

namespace {

using gpugeo::test::RecordingFeedback;

QByteArray digest(const QString& path)
{
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    return QByteArray();
  return QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256);
}

class ParameterChecksTest : public gpugeo::test::AlgorithmTest
{
protected:
  void SetUp() override
  {
    AlgorithmTest::SetUp();
    writePoints(path("points.gpkg"));
    writeDem(path("dem.tif"));
    writeMesh(path("mesh.2dm"));
  }

  static void writePoints(const QString& file)
  {
    QgsVectorLayer layer(QStringLiteral("Point?crs=EPSG:32633&field=id:integer"), QStringLiteral("points"),
                         QStringLiteral("memory"));
    QgsFeatureList features;
    for (int i = 0; i < 12; ++i)
    {
      QgsFeature f(layer.fields());
      f.setGeometry(QgsGeometry::fromPointXY(QgsPointXY(500000.0 + 37.0 * (i % 4), 4100000.0 + 23.0 * (i / 4))));
      f.setAttributes(QgsAttributes() << i);
      features << f;
    }
    ASSERT_TRUE(layer.dataProvider()->addFeatures(features));
    QgsVectorFileWriter::SaveVectorOptions options;
    options.driverName = QStringLiteral("GPKG");
    options.layerName = QStringLiteral("points");
    QString error;
    ASSERT_EQ(QgsVectorFileWriter::writeAsVectorFormatV3(&layer, file, QgsCoordinateTransformContext(), options,
                                                         &error),
              QgsVectorFileWriter::NoError)
      << error.toStdString();
  }

  static void writeDem(const QString& file)
  {
    GDALDatasetH dataset =
      GDALCreate(GDALGetDriverByName("GTiff"), file.toUtf8().constData(), 12, 10, 1, GDT_Float32, nullptr);
    ASSERT_TRUE(dataset);
    double transform[6] = {500000.0, 30.0, 0.0, 4100000.0, 0.0, -30.0};
    GDALSetGeoTransform(dataset, transform);
    OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
    OSRImportFromEPSG(srs, 32633);
    char* wkt = nullptr;
    OSRExportToWkt(srs, &wkt);
    GDALSetProjection(dataset, wkt);
    CPLFree(wkt);
    OSRDestroySpatialReference(srs);
    std::vector<float> z(120);
    for (int i = 0; i < 120; ++i)
      z[size_t(i)] = float(100 + (i % 12) * 2 + (i / 12) * 3 + (i * 7919 % 5));
    EXPECT_EQ(GDALRasterIO(GDALGetRasterBand(dataset, 1), GF_Write, 0, 0, 12, 10, z.data(), 12, 10, GDT_Float32, 0, 0),
              CE_None);
    GDALClose(dataset);
  }

  static void writeMesh(const QString& file)
  {
    QFile out(file);
    ASSERT_TRUE(out.open(QIODevice::WriteOnly | QIODevice::Text));
    QTextStream text(&out);
    text << "MESH2D\nND 1 0 0 0\nND 2 10 0 1\nND 3 10 10 2\nND 4 0 10 3\nE3T 1 1 2 3 1\nE3T 2 1 3 4 1\n";
  }

  struct Case
  {
    QString id;
    QString input;  // file name in the test folder
    QVariantMap parameters;
  };

  std::vector<Case> cases() const
  {
    const QVariantMap meshLevels{
      {QStringLiteral("DATASET_GROUPS"), QVariantList{0}},
      {QStringLiteral("DATASET_TIME"), QVariantMap{{QStringLiteral("type"), QStringLiteral("static")}}},
      {QStringLiteral("INCREMENT"), 1.0}};
    std::vector<Case> all = {
      {QStringLiteral("gpugeo:voronoiraster"), QStringLiteral("points.gpkg"), {{QStringLiteral("PIXEL_SIZE"), 10.0}}},
      {QStringLiteral("gpugeo:qtmvoronoi"), QStringLiteral("points.gpkg"), {}},
      {QStringLiteral("gpugeo:pointneighbours"), QStringLiteral("points.gpkg"), {{QStringLiteral("RADIUS"), 50.0}}},
      {QStringLiteral("gpugeo:dbscan"), QStringLiteral("points.gpkg"), {{QStringLiteral("EPS"), 40.0}}},
      {QStringLiteral("gpugeo:meshcontours"), QStringLiteral("mesh.2dm"), meshLevels},
      {QStringLiteral("gpugeo:filldepressions"), QStringLiteral("dem.tif"), {}},
      {QStringLiteral("gpugeo:flowdirection"), QStringLiteral("dem.tif"), {}},
      {QStringLiteral("gpugeo:flowaccumulation"), QStringLiteral("dem.tif"), {}},
      {QStringLiteral("gpugeo:isochrones"), QStringLiteral("dem.tif"), {}},
    };
    if (QgsApplication::processingRegistry()->algorithmById(QStringLiteral("gpugeo:spherevoronoi")))
    {
      all.push_back({QStringLiteral("gpugeo:spherevoronoi"), QStringLiteral("points.gpkg"), {}});
      all.push_back({QStringLiteral("gpugeo:voronoipolygons"), QStringLiteral("points.gpkg"), {}});
    }
    return all;
  }

  // Every destination of the algorithm set to a temporary output, then `overrides`.
  QVariantMap parametersOf(const QgsProcessingAlgorithm& algorithm, const Case& c, const QVariantMap& overrides) const
  {
    QVariantMap p = c.parameters;
    p.insert(QStringLiteral("INPUT"), path(c.input));
    p.insert(QStringLiteral("DEVICE"), 1);
    for (const QgsProcessingParameterDefinition* d : algorithm.destinationParameterDefinitions())
      p.insert(d->name(), QgsProcessing::TEMPORARY_OUTPUT);
    for (auto it = overrides.begin(); it != overrides.end(); ++it)
      p.insert(it.key(), it.value());
    return p;
  }

  // checkParameterValues() and run() both refuse `parameters` with a message containing `expected`.
  static void expectRefused(const QString& id, const QVariantMap& parameters, const QString& expected,
                            const std::string& what)
  {
    std::unique_ptr<QgsProcessingAlgorithm> algorithm(QgsApplication::processingRegistry()->createAlgorithmById(id));
    ASSERT_TRUE(algorithm) << id.toStdString();
    QgsProcessingContext context;
    QString message;
    EXPECT_FALSE(algorithm->checkParameterValues(parameters, context, &message)) << what;
    EXPECT_TRUE(message.contains(expected)) << what << ": " << message.toStdString();
    RecordingFeedback feedback;
    bool ok = true;
    QString error;
    try
    {
      algorithm->run(parameters, context, &feedback, &ok);
    }
    catch (const QgsProcessingException& e)
    {
      error = e.what();
    }
    EXPECT_FALSE(ok) << what;
    if (error.isEmpty())
      error = feedback.log.join('\n');
    EXPECT_TRUE(error.contains(expected)) << what << ": " << error.toStdString();
  }

  static bool runs(const QString& id, const QVariantMap& parameters, QString* error = nullptr)
  {
    std::unique_ptr<QgsProcessingAlgorithm> algorithm(QgsApplication::processingRegistry()->createAlgorithmById(id));
    QgsProcessingContext context;
    QString message;
    if (!algorithm->checkParameterValues(parameters, context, &message))
    {
      if (error)
        *error = message;
      return false;
    }
    RecordingFeedback feedback;
    bool ok = false;
    try
    {
      algorithm->run(parameters, context, &feedback, &ok);
    }
    catch (const QgsProcessingException& e)
    {
      if (error)
        *error = e.what();
    }
    return ok;
  }
};

}  // namespace

// Each output of each algorithm given the input's own file: refused up front, the input untouched.
TEST_F(ParameterChecksTest, AnOutputOverTheInputIsRefusedOnEveryAlgorithm)
{
  for (const Case& c : cases())
  {
    std::unique_ptr<QgsProcessingAlgorithm> algorithm(QgsApplication::processingRegistry()->createAlgorithmById(c.id));
    ASSERT_TRUE(algorithm) << c.id.toStdString();
    const QByteArray before = digest(path(c.input));
    ASSERT_FALSE(before.isEmpty());
    int destinations = 0;
    for (const QgsProcessingParameterDefinition* d : algorithm->destinationParameterDefinitions())
    {
      ++destinations;
      const std::string what = c.id.toStdString() + " " + d->name().toStdString();
      expectRefused(c.id, parametersOf(*algorithm, c, {{d->name(), path(c.input)}}),
                    QStringLiteral("would be written over INPUT"), what);
      EXPECT_EQ(digest(path(c.input)), before) << what;
    }
    EXPECT_GE(destinations, 1) << c.id.toStdString();
  }
}

// The case: TRAVEL_TIME the input and a later output unwritable. Refused before anything is
// written, so the input survives (it used to be deleted with the failed run's outputs).
TEST_F(ParameterChecksTest, IsochronesKeepTheirInputWhenALaterOutputCannotBeWritten)
{
  const QByteArray before = digest(path("dem.tif"));
  const QVariantMap p{{QStringLiteral("INPUT"), path("dem.tif")},
                      {QStringLiteral("DEVICE"), 1},
                      {QStringLiteral("TRAVEL_TIME"), path("dem.tif")},
                      {QStringLiteral("WATERSHED"), QStringLiteral("/proc/no/such/folder/ws.gpkg")}};
  expectRefused(QStringLiteral("gpugeo:isochrones"), p, QStringLiteral("would be written over INPUT"), "isochrones");
  EXPECT_EQ(digest(path("dem.tif")), before);
}

// Other names of the input's file: a symbolic link, a hard link, "./" and "../" in the path; and the
// MANNING raster of gpugeo:isochrones, an input too.
TEST_F(ParameterChecksTest, LinksAndOtherSpellingsOfAnInputAreTheInput)
{
  ASSERT_EQ(::symlink(path("dem.tif").toUtf8().constData(), path("soft.tif").toUtf8().constData()), 0);
  ASSERT_EQ(::link(path("dem.tif").toUtf8().constData(), path("hard.tif").toUtf8().constData()), 0);
  QDir(mDir.path()).mkdir(QStringLiteral("sub"));
  const QString dotted = mDir.path() + QStringLiteral("/sub/../dem.tif");
  const QString fill = QStringLiteral("gpugeo:filldepressions");
  for (const QString& output : {path("soft.tif"), path("hard.tif"), dotted, mDir.path() + QStringLiteral("/./dem.tif")})
    expectRefused(fill, {{QStringLiteral("INPUT"), path("dem.tif")}, {QStringLiteral("OUTPUT"), output}},
                  QStringLiteral("would be written over INPUT"), output.toStdString());
  // A link as the input, the real file as the output.
  expectRefused(fill, {{QStringLiteral("INPUT"), path("soft.tif")}, {QStringLiteral("OUTPUT"), path("dem.tif")}},
                QStringLiteral("would be written over INPUT"), "link as input");
  QFile::copy(path("dem.tif"), path("manning.tif"));
  expectRefused(QStringLiteral("gpugeo:isochrones"),
                {{QStringLiteral("INPUT"), path("dem.tif")},
                 {QStringLiteral("MANNING"), path("manning.tif")},
                 {QStringLiteral("VELOCITY_MODEL"), 2},
                 {QStringLiteral("TRAVEL_TIME"), path("manning.tif")}},
                QStringLiteral("would be written over MANNING"), "the Manning raster");
  // A copy is another file: allowed.
  QFile::copy(path("dem.tif"), path("copy.tif"));
  QString error;
  EXPECT_TRUE(runs(fill, {{QStringLiteral("INPUT"), path("dem.tif")}, {QStringLiteral("OUTPUT"), path("copy.tif")},
                          {QStringLiteral("DEVICE"), 1}},
                   &error))
    << error.toStdString();
}

// Two outputs on one file: refused; three sinks in one GeoPackage, each with its own layer name: run.
TEST_F(ParameterChecksTest, TwoOutputsOnOneFileAreRefusedUnlessEachNamesItsLayer)
{
  expectRefused(QStringLiteral("gpugeo:voronoiraster"),
                {{QStringLiteral("INPUT"), path("points.gpkg")},
                 {QStringLiteral("PIXEL_SIZE"), 10.0},
                 {QStringLiteral("OUTPUT"), path("a.tif")},
                 {QStringLiteral("OUTPUT_DISTANCE"), path("a.tif")}},
                QStringLiteral("are both set to"), "voronoi raster");
  EXPECT_FALSE(QFile::exists(path("a.tif")));
  // One output a link to the other's file, which does not exist yet (a dangling link).
  ASSERT_EQ(::symlink(path("a.tif").toUtf8().constData(), path("to-a.tif").toUtf8().constData()), 0);
  expectRefused(QStringLiteral("gpugeo:voronoiraster"),
                {{QStringLiteral("INPUT"), path("points.gpkg")},
                 {QStringLiteral("PIXEL_SIZE"), 10.0},
                 {QStringLiteral("OUTPUT"), path("a.tif")},
                 {QStringLiteral("OUTPUT_DISTANCE"), path("to-a.tif")}},
                QStringLiteral("are both set to"), "a dangling link");
  EXPECT_FALSE(QFile::exists(path("a.tif")));
  expectRefused(QStringLiteral("gpugeo:flowaccumulation"),
                {{QStringLiteral("INPUT"), path("dem.tif")},
                 {QStringLiteral("OUTPUT_CELLS"), path("b.tif")},
                 {QStringLiteral("OUTPUT_AREA"), path("b")}},  // the default extension makes it b.tif
                QStringLiteral("are both set to"), "flow accumulation");
  const QVariantMap oneFile{{QStringLiteral("INPUT"), path("dem.tif")},
                            {QStringLiteral("DEVICE"), 1},
                            {QStringLiteral("TRAVEL_TIME"), QgsProcessing::TEMPORARY_OUTPUT},
                            {QStringLiteral("WATERSHED"), path("c.gpkg")},
                            {QStringLiteral("ISOCHRONES"), path("c.gpkg")},
                            {QStringLiteral("TIME_AREA"), path("c.gpkg")}};
  expectRefused(QStringLiteral("gpugeo:isochrones"), oneFile, QStringLiteral("are both set to"), "isochrones");
  EXPECT_FALSE(QFile::exists(path("c.gpkg")));

  QVariantMap layers = oneFile;
  const QString uri = QStringLiteral("ogr:dbname='%1' table=\"%2\" (geom)").arg(path("c.gpkg"));
  layers.insert(QStringLiteral("WATERSHED"), uri.arg(QStringLiteral("watershed")));
  layers.insert(QStringLiteral("ISOCHRONES"), uri.arg(QStringLiteral("bands")));
  layers.insert(QStringLiteral("TIME_AREA"), uri.arg(QStringLiteral("time_area")));
  QString error;
  EXPECT_TRUE(runs(QStringLiteral("gpugeo:isochrones"), layers, &error)) << error.toStdString();
  for (const char* name : {"watershed", "bands", "time_area"})
  {
    QgsVectorLayer layer(path("c.gpkg") + QStringLiteral("|layername=") + name, QString::fromLatin1(name),
                         QStringLiteral("ogr"));
    EXPECT_TRUE(layer.isValid()) << name;
  }
}

// Every numeric parameter of every algorithm given NaN, infinity (as qgis_process passes them, text,
// and as numbers) and a value past its range: refused with the parameter's name and its range.
TEST_F(ParameterChecksTest, NumbersMustBeFiniteAndInRange)
{
  int checked = 0;
  for (const Case& c : cases())
  {
    std::unique_ptr<QgsProcessingAlgorithm> algorithm(QgsApplication::processingRegistry()->createAlgorithmById(c.id));
    for (const QgsProcessingParameterDefinition* d : algorithm->parameterDefinitions())
    {
      const auto* number = dynamic_cast<const QgsProcessingParameterNumber*>(d);
      const bool band = d->type() == QgsProcessingParameterBand::typeName();
      if (!number && !band)
        continue;
      std::vector<QVariant> bad{QStringLiteral("nan"), QStringLiteral("inf"), QStringLiteral("-inf"),
                                std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()};
      if (band || number->dataType() == QgsProcessingParameterNumber::Integer)
        bad.push_back(1e12);  // past the integers QGIS reads
      if (number && number->minimum() > -1e300)
        bad.push_back(number->minimum() - 1.0);
      if (number && number->maximum() < 1e300)
        bad.push_back(number->maximum() * 2 + 1.0);
      for (const QVariant& value : bad)
      {
        const std::string what = c.id.toStdString() + " " + d->name().toStdString() + " = " + value.toString().toStdString();
        expectRefused(c.id, parametersOf(*algorithm, c, {{d->name(), value}}), d->name() + QStringLiteral(" ("), what);
        std::unique_ptr<QgsProcessingAlgorithm> fresh(QgsApplication::processingRegistry()->createAlgorithmById(c.id));
        QgsProcessingContext context;
        QString message;
        fresh->checkParameterValues(parametersOf(*algorithm, c, {{d->name(), value}}), context, &message);
        EXPECT_TRUE(message.contains(QStringLiteral(" must be "))) << what << ": " << message.toStdString();
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 25);
}

// An unknown CRS for CRS_OUTPUT, a non-finite EXTENT: refused with what the parameter takes.
TEST_F(ParameterChecksTest, UnknownCrsAndNonFiniteExtentsAreRefused)
{
  expectRefused(QStringLiteral("gpugeo:meshcontours"),
                {{QStringLiteral("INPUT"), path("mesh.2dm")},
                 {QStringLiteral("DATASET_GROUPS"), QVariantList{0}},
                 {QStringLiteral("INCREMENT"), 1.0},
                 {QStringLiteral("CRS_OUTPUT"), QStringLiteral("EPSG:999999")},
                 {QStringLiteral("OUTPUT_LINES"), QgsProcessing::TEMPORARY_OUTPUT}},
                QStringLiteral("CRS_OUTPUT (Output coordinate system): \"EPSG:999999\" is not a coordinate reference"),
                "CRS_OUTPUT");
  for (const QString& extent : {QStringLiteral("nan,1,2,3"), QStringLiteral("0,inf,0,10"), QStringLiteral("-inf,1,0,1"),
                                QStringLiteral("-1e308,1e308,0,1")})
    expectRefused(QStringLiteral("gpugeo:voronoiraster"),
                  {{QStringLiteral("INPUT"), path("points.gpkg")},
                   {QStringLiteral("PIXEL_SIZE"), 10.0},
                   {QStringLiteral("EXTENT"), extent},
                   {QStringLiteral("OUTPUT"), QgsProcessing::TEMPORARY_OUTPUT}},
                  QStringLiteral("EXTENT (Extent) must be four finite numbers"), extent.toStdString());
}
