// What the processing tests share: a feedback that records the log, a fixture that runs an
// algorithm by id through the QGIS API (a temporary folder for outputs, cancel on request), and a
// GeoTIFF reader. main() is in processing_test_main.cpp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <QStringList>
#include <QTemporaryDir>

#include <gdal.h>

#include <qgsapplication.h>
#include <qgsmultipoint.h>
#include <qgsnativealgorithms.h>
#include <qgsprocessingalgorithm.h>
#include <qgsprocessingcontext.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingregistry.h>
#include <qgsprocessingutils.h>
#include <qgsproject.h>
#include <qgsvectorlayer.h>

namespace gpugeo::test {

// Collects what an algorithm logs.
class RecordingFeedback : public QgsProcessingFeedback
{
public:
  void pushInfo(const QString& info) override { log << info; }
  void pushWarning(const QString& warning) override { log << QStringLiteral("WARNING ") + warning; }
  void reportError(const QString& error, bool) override { log << QStringLiteral("ERROR ") + error; }
  bool logContains(const QString& text) const
  {
    for (const QString& line : log)
      if (line.contains(text))
        return true;
    return false;
  }
  QStringList log;
};

struct RunResult
{
  bool ok = false;
  QVariantMap outputs;
  QString error;
  QStringList log;

  bool logContains(const QString& text) const
  {
    return std::any_of(log.begin(), log.end(), [&](const QString& line) { return line.contains(text); });
  }
};

// An empty multipoint geometry, built directly: QgsGeometry::fromWkt("MultiPoint EMPTY") leaks a
// QgsPoint in QGIS 3.22 (QgsGeometryCollection::fromCollectionWkt's early return for EMPTY never
// deletes the part prototype QgsMultiPoint::fromWkt hands it; fixed in later releases).
inline QgsGeometry emptyMultiPoint()
{
  return QgsGeometry(new QgsMultiPoint());
}

// Every feature of a layer, in its order.
inline std::vector<QgsFeature> featuresOf(QgsVectorLayer* layer)
{
  std::vector<QgsFeature> features;
  QgsFeature f;
  QgsFeatureIterator it = layer->getFeatures();
  while (it.nextFeature(f))
    features.push_back(f);
  return features;
}

class AlgorithmTest : public ::testing::Test
{
protected:
  void SetUp() override { ASSERT_TRUE(mDir.isValid()); }

  QString path(const QString& name) const { return mDir.filePath(name); }

  // QGIS's native algorithms, for tests that compare with them (processing_test_main.cpp registers
  // only gpugeo's provider).
  static void registerNativeAlgorithms()
  {
    QgsProcessingRegistry* registry = QgsApplication::processingRegistry();
    if (!registry->providerById(QStringLiteral("native")))
      registry->addProvider(new QgsNativeAlgorithms(registry));
  }

  // The layer output `name` of a run names (a memory layer the context holds, or a file it loads).
  static QgsVectorLayer* outputLayer(const RunResult& result, const QString& name, QgsProcessingContext& context)
  {
    return qobject_cast<QgsVectorLayer*>(
      QgsProcessingUtils::mapLayerFromString(result.outputs.value(name).toString(), context));
  }

  // Runs algorithm `id` with INPUT = `input` (added to the context's temporary store for the run).
  // cancelMidway: cancel once the run is past 60%.
  static RunResult runAlgorithm(const QString& id, QgsMapLayer* input, QVariantMap parameters,
                                QgsProcessingContext& context, bool cancelMidway = false)
  {
    std::unique_ptr<QgsProcessingAlgorithm> algorithm(QgsApplication::processingRegistry()->createAlgorithmById(id));
    EXPECT_TRUE(algorithm) << id.toStdString();
    if (!algorithm)
      return {};
    context.setProject(QgsProject::instance());
    context.temporaryLayerStore()->addMapLayer(input);
    parameters.insert(QStringLiteral("INPUT"), input->id());
    RecordingFeedback feedback;
    if (cancelMidway)
      QObject::connect(&feedback, &QgsFeedback::progressChanged, [&feedback](double progress) {
        if (progress > 60)
          feedback.cancel();
      });
    RunResult result;
    try
    {
      result.outputs = algorithm->run(parameters, context, &feedback, &result.ok);
    }
    catch (const QgsProcessingException& e)
    {
      result.error = e.what();
    }
    if (!result.ok && result.error.isEmpty())
      for (const QString& line : feedback.log)
        if (line.startsWith(QStringLiteral("ERROR")))
          result.error += line;
    context.temporaryLayerStore()->takeMapLayer(input);
    result.log = feedback.log;
    return result;
  }

  template <typename T>
  static std::vector<T> readRaster(const QString& file, GDALDataType type, int& width, int& height, double* transform,
                                   double* noData = nullptr)
  {
    GDALDatasetH dataset = GDALOpen(file.toUtf8().constData(), GA_ReadOnly);
    EXPECT_TRUE(dataset) << file.toStdString();
    if (!dataset)
      return {};
    width = GDALGetRasterXSize(dataset);
    height = GDALGetRasterYSize(dataset);
    GDALGetGeoTransform(dataset, transform);
    GDALRasterBandH band = GDALGetRasterBand(dataset, 1);
    EXPECT_EQ(GDALGetRasterDataType(band), type) << file.toStdString();
    if (noData)
    {
      int has = 0;
      *noData = GDALGetRasterNoDataValue(band, &has);
      EXPECT_TRUE(has) << file.toStdString();
    }
    std::vector<T> values(static_cast<size_t>(width) * height);
    EXPECT_EQ(GDALRasterIO(band, GF_Read, 0, 0, width, height, values.data(), width, height, type, 0, 0), CE_None);
    GDALClose(dataset);
    return values;
  }

  QTemporaryDir mDir;
};

}  // namespace gpugeo::test
