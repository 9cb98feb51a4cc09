#include "dem_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <QFileInfo>
#include <QObject>

#include <cpl_error.h>

#include <qgsellipsoidutils.h>
#include <qgsexception.h>
#include <qgsfeedback.h>
#include <qgsprocessingfeedback.h>
#include <qgsproviderregistry.h>
#include <qgsrasterlayer.h>
#include <qgsunittypes.h>

#include "adapters/geotiff_writer.h"
#include "adapters/number_text.h"
#include "core/errors.h"

namespace gpugeo {

namespace {

// Cells per band of rows read or written: the buffers stay near 32 MB.
constexpr int64_t kBandCells = int64_t(1) << 22;
constexpr double kPi = 3.14159265358979323846;

struct DatasetCloser
{
  void operator()(void* dataset) const
  {
    if (dataset)
      GDALClose(dataset);
  }
};
using Dataset = std::unique_ptr<void, DatasetCloser>;

Dataset openQuietly(const QString& name, GDALAccess access)
{
  GDALAllRegister();
  CPLErrorReset();
  CPLPushErrorHandler(CPLQuietErrorHandler);
  Dataset dataset(GDALOpen(name.toUtf8().constData(), access));
  CPLPopErrorHandler();
  return dataset;
}

// Rows per band: a whole number of the writer's blocks where a band holds several.
int64_t bandRowsFor(int64_t width, int64_t height)
{
  int64_t rows = std::max<int64_t>(1, kBandCells / width);
  if (rows >= GeoTiffWriter::kBlockSize)
    rows = rows / GeoTiffWriter::kBlockSize * GeoTiffWriter::kBlockSize;
  return std::min(rows, height);
}

void projectedCellSizes(DemRaster& raster)
{
  double toMetres = 1.0;
  QString unitName = QObject::tr("metres");
  if (!raster.crs.isValid())
  {
    raster.warnings << QObject::tr("The DEM has no CRS: its cell sizes are taken to be in metres.");
  }
  else
  {
    const QgsUnitTypes::DistanceUnit units = raster.crs.mapUnits();
    if (units == QgsUnitTypes::DistanceUnknownUnit)
      raster.warnings << QObject::tr("The units of the DEM's CRS (%1) are unknown: its cell sizes are taken to be in "
                                     "metres.")
                           .arg(raster.crs.userFriendlyIdentifier());
    else
    {
      toMetres = QgsUnitTypes::fromUnitToUnitFactor(units, QgsUnitTypes::DistanceMeters);
      unitName = QgsUnitTypes::toString(units);
    }
  }
  const double width = raster.geoTransform[1] * toMetres;
  const double height = -raster.geoTransform[5] * toMetres;
  raster.cellWidth.assign(static_cast<size_t>(raster.height), width);
  raster.cellHeight.assign(static_cast<size_t>(raster.height), height);
  raster.cellSizeNote = QObject::tr("Cells of %1 x %2 m (%3 x %4 %5).")
                          .arg(number(width), number(height), number(raster.geoTransform[1]),
                               number(-raster.geoTransform[5]), unitName);
}

void geographicCellSizes(DemRaster& raster)
{
  if (raster.crs.mapUnits() != QgsUnitTypes::DistanceDegrees)
    throw QgsProcessingException(QObject::tr("The DEM's geographic CRS (%1) is not in degrees; reproject it first.")
                                   .arg(raster.crs.userFriendlyIdentifier()));
  const double* gt = raster.geoTransform;
  const double top = gt[3], bottom = gt[3] + double(raster.height) * gt[5];
  if (top > 90.0 + 1e-9 || bottom < -90.0 - 1e-9)
    throw QgsProcessingException(QObject::tr("The DEM's rows run from latitude %1 to %2, beyond the poles: is its CRS "
                                             "(%3) right?")
                                   .arg(number(top), number(bottom), raster.crs.userFriendlyIdentifier()));
  const QString acronym = raster.crs.ellipsoidAcronym();
  QgsEllipsoidUtils::EllipsoidParameters ellipsoid = QgsEllipsoidUtils::ellipsoidParameters(acronym);
  double a = ellipsoid.semiMajor, b = ellipsoid.semiMinor;
  if (ellipsoid.valid && a > 0 && !(b > 0) && ellipsoid.inverseFlattening > 0)
    b = a * (1.0 - 1.0 / ellipsoid.inverseFlattening);
  QString ellipsoidName = acronym;
  if (!ellipsoid.valid || !(a > 0) || !(b > 0) || b > a)
  {
    raster.warnings << QObject::tr("The ellipsoid of the DEM's CRS (%1) is unknown: WGS 84's is used for the cell "
                                   "sizes.")
                         .arg(acronym.isEmpty() ? raster.crs.userFriendlyIdentifier() : acronym);
    a = 6378137.0;
    b = 6356752.314245179;
    ellipsoidName = QStringLiteral("WGS 84");
  }
  const double e2 = 1.0 - (b * b) / (a * a);
  const double toRadians = kPi / 180.0;
  const double dLon = gt[1] * toRadians, dLat = -gt[5] * toRadians;
  raster.cellWidth.resize(static_cast<size_t>(raster.height));
  raster.cellHeight.resize(static_cast<size_t>(raster.height));
  for (int64_t y = 0; y < raster.height; ++y)
  {
    const double phi = (gt[3] + (double(y) + 0.5) * gt[5]) * toRadians;
    const double s = std::sin(phi);
    const double w = 1.0 - e2 * s * s;
    const double n = a / std::sqrt(w);                  // prime vertical radius of curvature
    const double m = a * (1.0 - e2) / (w * std::sqrt(w));  // meridian radius of curvature
    raster.cellWidth[static_cast<size_t>(y)] = n * std::cos(phi) * dLon;
    raster.cellHeight[static_cast<size_t>(y)] = m * dLat;
  }
  const size_t last = static_cast<size_t>(raster.height - 1);
  raster.cellSizeNote =
    QObject::tr("Cells of %1 x %2 degrees; in metres from the ellipsoid %3 (a = %4 m, b = %5 m) at each row's "
                "latitude: %6 x %7 m in the first row, %8 x %9 m in the last.")
      .arg(number(gt[1]), number(-gt[5]), ellipsoidName, number(a), number(b))
      .arg(number(raster.cellWidth[0]), number(raster.cellHeight[0]), number(raster.cellWidth[last]),
           number(raster.cellHeight[last]));
}

}  // namespace

DemSource demSourceOf(const QgsRasterLayer* layer, const QString& parameterName, const QVariant& parameterValue)
{
  if (!layer || !layer->isValid())
    throw QgsProcessingException(QObject::tr("Could not load the raster layer %1 (%2).")
                                   .arg(parameterName, parameterValue.toString()));
  if (layer->providerType() != QLatin1String("gdal"))
    throw QgsProcessingException(QObject::tr("%1 must be a raster file that GDAL reads (a GeoTIFF, say); this layer "
                                             "comes from the %2 provider. Save it as a GeoTIFF first.")
                                   .arg(parameterName, layer->providerType()));
  DemSource source;
  source.gdalName = layer->source();
  // A plain file: its path (the source may carry QGIS options after a '|').
  const QVariantMap parts = QgsProviderRegistry::instance()->decodeUri(QStringLiteral("gdal"), layer->source());
  const QString path = parts.value(QStringLiteral("path")).toString();
  if (!path.isEmpty() && parts.value(QStringLiteral("layerName")).toString().isEmpty() && QFileInfo::exists(path))
    source.gdalName = path;
  source.crs = layer->crs();
  return source;
}

DemRaster openDemRaster(const DemSource& source, int band)
{
  DemRaster raster;
  raster.gdalName = source.gdalName;
  raster.band = band;
  raster.crs = source.crs;
  raster.cogOutputs = source.cogOutputs;
  Dataset dataset = openQuietly(source.gdalName, GA_ReadOnly);
  if (!dataset)
    throw QgsProcessingException(QObject::tr("Could not open %1: %2").arg(source.gdalName, lastGdalError()));
  const int bands = GDALGetRasterCount(dataset.get());
  if (band < 1 || band > bands)
    throw QgsProcessingException(QObject::tr("The raster has %1 band(s); there is no band %2 (BAND counts from 1).")
                                   .arg(bands)
                                   .arg(band));
  raster.width = GDALGetRasterXSize(dataset.get());
  raster.height = GDALGetRasterYSize(dataset.get());
  if (raster.width * raster.height > dem::kMaxCells)
    throw QgsProcessingException(QObject::tr("The DEM has %1 x %2 = %3 cells, more than the limit of 2,147,483,647 "
                                             "(2^31 - 1) cells: clip it into pieces or resample it to larger cells.")
                                   .arg(raster.width)
                                   .arg(raster.height)
                                   .arg(raster.width * raster.height));
  double* gt = raster.geoTransform;
  if (GDALGetGeoTransform(dataset.get(), gt) != CE_None)
    throw QgsProcessingException(QObject::tr("%1 has no georeference (geotransform), so its cell sizes are unknown: "
                                             "georeference it first.")
                                   .arg(source.gdalName));
  for (int i = 0; i < 6; ++i)
    if (!std::isfinite(gt[i]))
      throw QgsProcessingException(QObject::tr("The geotransform of %1 holds a value that is not a number.")
                                     .arg(source.gdalName));
  if (gt[2] != 0.0 || gt[4] != 0.0)
    throw QgsProcessingException(QObject::tr("The DEM's geotransform is rotated or sheared (rotation terms %1 and "
                                             "%2): the tools need a north-up grid. Warp it first (GDAL's Warp "
                                             "(reproject), gdalwarp).")
                                   .arg(number(gt[2]), number(gt[4])));
  if (!(gt[1] > 0.0) || !(gt[5] < 0.0))
    throw QgsProcessingException(QObject::tr("The DEM is not stored north-up (pixel width %1, pixel height %2; a "
                                             "positive width and a negative height are expected): warp it first "
                                             "(GDAL's Warp (reproject), gdalwarp).")
                                   .arg(number(gt[1]), number(gt[5])));
  GDALRasterBandH handle = GDALGetRasterBand(dataset.get(), band);
  raster.dataType = GDALGetRasterDataType(handle);
  if (GDALDataTypeIsComplex(raster.dataType))
    throw QgsProcessingException(QObject::tr("Band %1 holds complex numbers (%2), not elevations or codes: make a real "
                                             "raster of it first (its real part or its magnitude, with the Raster "
                                             "calculator).")
                                   .arg(band)
                                   .arg(QString::fromLatin1(GDALGetDataTypeName(raster.dataType))));
  int hasNoData = 0;
  const double noData = GDALGetRasterNoDataValue(handle, &hasNoData);
  if (hasNoData)
    raster.noData = noData;
  int hasScale = 0, hasOffset = 0;
  const double scale = GDALGetRasterScale(handle, &hasScale);
  const double offset = GDALGetRasterOffset(handle, &hasOffset);
  if (hasScale && std::isfinite(scale) && scale != 0.0)
    raster.scale = scale;
  if (hasOffset && std::isfinite(offset))
    raster.offset = offset;
  if (raster.scale != 1.0 || raster.offset != 0.0)
    raster.warnings << QObject::tr("The band's values are scaled: elevation = %1 x value + %2.")
                         .arg(number(raster.scale), number(raster.offset));

  if (raster.crs.isValid() && raster.crs.isGeographic())
    geographicCellSizes(raster);
  else
    projectedCellSizes(raster);
  return raster;
}

namespace {

// The band read band of rows by band (bandRowsFor rows at a time) as `type`: into target(row0, rows),
// then consume(row0, rows); with cancel and progress.
void readRowBands(const DemRaster& raster, GDALDataType type, const std::function<void*(int64_t, int64_t)>& target,
                  const std::function<void(int64_t, int64_t)>& consume, QgsFeedback* feedback)
{
  Dataset dataset = openQuietly(raster.gdalName, GA_ReadOnly);
  if (!dataset)
    throw QgsProcessingException(QObject::tr("Could not open %1: %2").arg(raster.gdalName, lastGdalError()));
  GDALRasterBandH band = GDALGetRasterBand(dataset.get(), raster.band);
  const int64_t width = raster.width, height = raster.height;
  const int64_t bandRows = bandRowsFor(width, height);
  for (int64_t row0 = 0; row0 < height; row0 += bandRows)
  {
    if (feedback && feedback->isCanceled())
      throw Canceled();
    const int64_t rows = std::min(bandRows, height - row0);
    CPLErrorReset();
    if (GDALRasterIO(band, GF_Read, 0, static_cast<int>(row0), static_cast<int>(width), static_cast<int>(rows),
                     target(row0, rows), static_cast<int>(width), static_cast<int>(rows), type, 0, 0) != CE_None)
      throw QgsProcessingException(
        QObject::tr("Could not read rows %1 to %2 of %3: %4")
          .arg(row0)
          .arg(row0 + rows - 1)
          .arg(raster.gdalName, lastGdalError()));
    consume(row0, rows);
    if (feedback)
      feedback->setProgress(100.0 * double(row0 + rows) / double(height));
  }
}

// A float32 band without scale or offset read straight into the elevations (no float64 buffer, no
// second copy); nodata values and infinities become NaN, as readDemRows and readElevations make them.
void readFloat32Elevations(const DemRaster& raster, Elevations& out, QgsFeedback* feedback)
{
  const int64_t width = raster.width;
  const float noData32 = static_cast<float>(raster.noData.value_or(0.0));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float minimum = std::numeric_limits<float>::infinity(), maximum = -minimum;
  readRowBands(
    raster, GDT_Float32, [&](int64_t row0, int64_t) -> void* { return out.z.data() + row0 * width; },
    [&](int64_t row0, int64_t rows) {
      float* z = out.z.data() + row0 * width;
      for (int64_t i = 0; i < rows * width; ++i)
      {
        const float f = z[i];
        if (std::isnan(f) || (raster.noData && f == noData32))
        {
          z[i] = nan;
          continue;
        }
        if (!std::isfinite(f))
        {
          ++out.notFinite;
          z[i] = nan;
          continue;
        }
        ++out.valid;
        minimum = std::min(minimum, f);
        maximum = std::max(maximum, f);
      }
    },
    feedback);
  if (out.valid > 0)
  {
    out.minimum = minimum;
    out.maximum = maximum;
  }
}

}  // namespace

void readDemRows(const DemRaster& raster, const std::function<void(int64_t, int64_t, const double*)>& consume,
                 QgsFeedback* feedback)
{
  std::vector<double> values(static_cast<size_t>(bandRowsFor(raster.width, raster.height) * raster.width));
  const bool float32 = raster.dataType == GDT_Float32;
  const bool scaled = raster.scale != 1.0 || raster.offset != 0.0;
  const double noData = raster.noData.value_or(0.0);
  const float noData32 = static_cast<float>(noData);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  readRowBands(
    raster, GDT_Float64, [&](int64_t, int64_t) -> void* { return values.data(); },
    [&](int64_t row0, int64_t rows) {
      const size_t count = static_cast<size_t>(rows * raster.width);
      for (size_t i = 0; i < count; ++i)
      {
        double& v = values[i];
        if (std::isnan(v))
          continue;
        // The nodata value compared in the band's type: a float32 band's value 1.1f against a
        // nodata tag written "1.1".
        if (raster.noData && (float32 ? static_cast<float>(v) == noData32 : v == noData))
          v = nan;
        else if (scaled)
          v = v * raster.scale + raster.offset;
      }
      consume(row0, rows, values.data());
    },
    feedback);
}

Elevations readElevations(const DemRaster& raster, QgsFeedback* feedback)
{
  Elevations out;
  out.z.resize(static_cast<size_t>(raster.width * raster.height));
  if (raster.dataType == GDT_Float32 && raster.scale == 1.0 && raster.offset == 0.0)
  {
    readFloat32Elevations(raster, out, feedback);
    return out;
  }
  const float noData32 = static_cast<float>(raster.noData.value_or(0.0));
  double minimum = std::numeric_limits<double>::infinity(), maximum = -minimum;
  readDemRows(
    raster,
    [&](int64_t row0, int64_t rows, const double* values) {
      float* z = out.z.data() + row0 * raster.width;
      const int64_t count = rows * raster.width;
      for (int64_t i = 0; i < count; ++i)
      {
        const double v = values[i];
        const float f = static_cast<float>(v);
        if (std::isnan(v) || !std::isfinite(f))
        {
          out.notFinite += !std::isnan(v);
          z[i] = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        z[i] = f;
        ++out.valid;
        minimum = std::min(minimum, double(f));
        maximum = std::max(maximum, double(f));
        out.roundedToNoData += raster.noData.has_value() && f == noData32;
      }
    },
    feedback);
  if (out.valid > 0)
  {
    out.minimum = minimum;
    out.maximum = maximum;
  }
  return out;
}

void writeDemRaster(const QString& path, const DemRaster& raster, GDALDataType type, std::optional<double> noData,
                    const std::function<void(int64_t, int64_t, void*)>& fill, FinishedRasters& finished,
                    QgsFeedback* feedback)
{
  const double* gt = raster.geoTransform;
  const GridGeometry geometry{gt[0], gt[3], gt[1], raster.width, raster.height};
  auto writer = std::make_unique<GeoTiffWriter>(path, geometry, type, noData, raster.crs);
  const int64_t bandRows = bandRowsFor(raster.width, raster.height);
  std::vector<unsigned char> buffer(static_cast<size_t>(bandRows * raster.width) *
                                    static_cast<size_t>(GDALGetDataTypeSizeBytes(type)));
  for (int64_t row0 = 0; row0 < raster.height; row0 += bandRows)
  {
    if (feedback && feedback->isCanceled())
      throw Canceled();  // the writer, destroyed unfinished, deletes its file
    const int64_t rows = std::min(bandRows, raster.height - row0);
    fill(row0, rows, buffer.data());
    writer->writeRows(row0, rows, buffer.data());
    if (feedback)
      feedback->setProgress(100.0 * double(row0 + rows) / double(raster.height));
  }
  finishDemRaster(std::move(writer), raster, finished);
}

void finishDemRaster(std::unique_ptr<GeoTiffWriter> writer, const DemRaster& raster, FinishedRasters& finished)
{
  const QString path = writer->finish();
  finished.add(path);
  const double* gt = raster.geoTransform;
  if (gt[5] != -gt[1])
  {
    Dataset dataset = openQuietly(path, GA_Update);
    if (!dataset || GDALSetGeoTransform(dataset.get(), const_cast<double*>(gt)) != CE_None)
      throw QgsProcessingException(QObject::tr("Could not set the geotransform of %1: %2").arg(path, lastGdalError()));
    CPLErrorReset();
    dataset.reset();
    if (CPLGetLastErrorType() == CE_Failure)
      throw QgsProcessingException(QObject::tr("Could not finish %1: %2").arg(path, lastGdalError()));
  }
  if (raster.cogOutputs)
    makeCloudOptimized(path);
}

LoadedDem loadDem(const DemSource& source, int band, gpugeo::StageTimes& times, QgsFeedback* progress,
                  QgsProcessingFeedback* feedback)
{
  feedback->setProgressText(QObject::tr("Reading the DEM"));
  LoadedDem out;
  {
    gpugeo::ScopedStage stage(times, "read");
    out.raster = openDemRaster(source, band);
    out.elevations = readElevations(out.raster, progress);
  }
  reportElevations(out.raster, out.elevations, feedback);
  return out;
}

void reportElevations(const DemRaster& raster, const Elevations& elevations, QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(describeDem(raster, elevations.valid));
  feedback->pushInfo(raster.cellSizeNote);
  for (const QString& warning : raster.warnings)
    feedback->pushWarning(warning);
  if (elevations.notFinite > 0)
    feedback->pushWarning(QObject::tr("%1 cells hold an infinite value (or one beyond the float32 range); they are "
                                      "taken as nodata.")
                            .arg(elevations.notFinite));
  if (elevations.valid == 0)
    throw QgsProcessingException(QObject::tr("The DEM has no valid cell: all %1 cells of band %2 are nodata.")
                                   .arg(raster.width * raster.height)
                                   .arg(raster.band));
  feedback->pushInfo(
    QObject::tr("Elevations from %1 to %2.").arg(number(elevations.minimum), number(elevations.maximum)));
}

QString describeDem(const DemRaster& raster, int64_t validCells)
{
  const QString noData = raster.noData ? QObject::tr("nodata %1").arg(number(*raster.noData))
                                       : QObject::tr("no nodata value (NaN is nodata)");
  return QObject::tr("DEM: band %1 (%2) of %3, %4 x %5 cells, %6; %7 cells hold a value.")
    .arg(raster.band)
    .arg(QString::fromUtf8(GDALGetDataTypeName(raster.dataType)), raster.gdalName)
    .arg(raster.width)
    .arg(raster.height)
    .arg(noData)
    .arg(validCells);
}

QString cellSizeHelp()
{
  return QObject::tr(
    "<p><b>Cell sizes</b> are in metres: in a projected CRS the pixel's width and height converted to metres (a "
    "raster without CRS is taken to be in metres); in a geographic CRS, from the CRS's ellipsoid at each row's "
    "latitude. Non-square cells and sizes that change from row to row are used as they are; sizes from 1 mm to "
    "1,000 km are taken. The raster must be north-up: a rotated or sheared geotransform is refused (warp it first "
    "with <i>Warp (reproject)</i>).</p>");
}

}  // namespace gpugeo
