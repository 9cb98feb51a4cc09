// The fixture and helpers of the DEM tools' processing tests (test_dem_algorithms.cpp and
// test_dem_tiled_algorithms.cpp): random DEMs written as GeoTIFFs with GDAL, the cell sizes the
// algorithms use, the direction codes, and a run of an algorithm on a raster file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cpl_string.h>
#include <gdal.h>
#include <gdal_utils.h>
#include <ogr_srs_api.h>

#include <qgspalettedrasterrenderer.h>
#include <qgsprocessingutils.h>
#include <qgsrasterlayer.h>
#include <qgssinglebandpseudocolorrenderer.h>

#include "adapters/dem_reader.h"
#include "core/backend.h"
#include "dem/dem.h"
#include "dem/dem_reference.h"
#include "dem_test_support.h"
#include "processing_test_support.h"

namespace gpugeo::test::dem_algorithms {

using gpugeo::test::RecordingFeedback;
using gpugeo::test::RunResult;
namespace dem = gpugeo::dem;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr int kEsri[8] = {1, 2, 4, 8, 16, 32, 64, 128};

using gpugeo::test::TestDem;

// Smooth hills quantised to 0.5 m (flats and ties), noise (pits), nodata holes (some NaN, some the
// nodata value when written).
inline TestDem randomDem(int width, int height, uint32_t seed, int holes = 3)
{
  TestDem d = gpugeo::test::randomHills(width, height, seed, holes);
  // A wide closed basin with a flat floor (a depression whose fill is a big flat).
  for (int y = height / 3; y < height / 3 + 6; ++y)
    for (int x = width / 2; x < width / 2 + 8; ++x)
      if (!std::isnan(d.at(x, y)))
        d.at(x, y) = 60.0f;
  return d;
}

// Writes the bands (the same geotransform) as a GeoTIFF of `type`; NaN cells are written as
// `noData` when given (every other one: the rest stay NaN in a float raster).
inline void writeTiff(const QString& path, const TestDem& d, const std::vector<std::vector<float>>& bands, GDALDataType type,
               std::optional<double> noData, const char* crs = "EPSG:32633", bool geoTransform = true)
{
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  GDALDatasetH dataset = GDALCreate(driver, path.toUtf8().constData(), d.width, d.height, int(bands.size()), type, nullptr);
  ASSERT_TRUE(dataset);
  if (geoTransform)
    GDALSetGeoTransform(dataset, const_cast<double*>(d.geoTransform));
  if (crs)
  {
    OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
    OSRSetFromUserInput(srs, crs);
    char* wkt = nullptr;
    OSRExportToWkt(srs, &wkt);
    GDALSetProjection(dataset, wkt);
    CPLFree(wkt);
    OSRDestroySpatialReference(srs);
  }
  for (size_t b = 0; b < bands.size(); ++b)
  {
    GDALRasterBandH band = GDALGetRasterBand(dataset, int(b) + 1);
    std::vector<double> values(bands[b].size());
    for (size_t i = 0; i < values.size(); ++i)
    {
      const float v = bands[b][i];
      values[i] = std::isnan(v) && noData && (i % 2 == 0 || type != GDT_Float32) ? *noData : double(v);
    }
    if (noData)
      GDALSetRasterNoDataValue(band, *noData);
    ASSERT_EQ(GDALRasterIO(band, GF_Write, 0, 0, d.width, d.height, values.data(), d.width, d.height, GDT_Float64, 0, 0),
              CE_None);
  }
  GDALClose(dataset);
}

inline void writeTiff(const QString& path, const TestDem& d, GDALDataType type = GDT_Float32,
               std::optional<double> noData = -9999.0, const char* crs = "EPSG:32633")
{
  writeTiff(path, d, {d.z}, type, noData, crs);
}

// The cell sizes the algorithms use, from the adapter, over `z`.
struct ReaderGrid
{
  gpugeo::DemRaster raster;
  dem::Grid grid;
};

inline ReaderGrid readerGrid(const QString& path, const std::vector<float>& z, int band = 1)
{
  QgsRasterLayer layer(path, QStringLiteral("dem"), QStringLiteral("gdal"));
  EXPECT_TRUE(layer.isValid());
  ReaderGrid out;
  out.raster = gpugeo::openDemRaster(gpugeo::DemSource{path, layer.crs()}, band);
  out.grid = out.raster.grid(z.data());
  return out;
}

inline bool sameBits(float a, float b)
{
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// 0..7, kNoFlow, kNoData from an output value.
inline uint8_t decodeEsri(uint8_t v)
{
  if (v == 255)
    return dem::kNoData;
  if (v == 0)
    return dem::kNoFlow;
  for (int d = 0; d < 8; ++d)
    if (kEsri[d] == v)
      return uint8_t(d);
  ADD_FAILURE() << "not an ESRI code: " << int(v);
  return 254;
}

inline uint8_t decodeClockwise(uint8_t v)
{
  if (v == 255)
    return dem::kNoData;
  EXPECT_LE(v, 8);
  return v == 8 ? dem::kNoFlow : v;
}

class DemAlgorithmsTest : public gpugeo::test::AlgorithmTest
{
protected:
  RunResult run(const QString& id, const QString& input, QVariantMap parameters, bool cancelMidway = false)
  {
    QgsProcessingContext context;
    return run(id, input, parameters, context, cancelMidway);
  }

  RunResult run(const QString& id, const QString& input, QVariantMap parameters, QgsProcessingContext& context,
                bool cancelMidway = false)
  {
    auto layer = std::make_unique<QgsRasterLayer>(input, QStringLiteral("input"), QStringLiteral("gdal"));
    EXPECT_TRUE(layer->isValid()) << input.toStdString();
    if (!parameters.contains(QStringLiteral("DEVICE")))
      parameters.insert(QStringLiteral("DEVICE"), 1);
    return runAlgorithm(id, layer.get(), parameters, context, cancelMidway);
  }

  template <typename T>
  std::vector<T> read(const QString& file, GDALDataType type, double* noData = nullptr, double* transform = nullptr)
  {
    int width = 0, height = 0;
    double t[6];
    std::vector<T> values = readRaster<T>(file, type, width, height, transform ? transform : t, noData);
    return values;
  }
};

inline const QString kFill = QStringLiteral("gpugeo:filldepressions");
inline const QString kDirection = QStringLiteral("gpugeo:flowdirection");
inline const QString kAccumulation = QStringLiteral("gpugeo:flowaccumulation");
inline const QString kIsochronesId = QStringLiteral("gpugeo:isochrones");


}  // namespace gpugeo::test::dem_algorithms
