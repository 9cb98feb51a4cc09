#include "dem_reader.h"

#include <algorithm>
#include <cmath>

#include <QFileInfo>
#include <QObject>

#include <qgsexception.h>
#include <qgsfeedback.h>
#include <qgsprocessingfeedback.h>
#include <qgsproviderregistry.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "gdal/dem_conventions.h"
#include "gdal/geotiff_output.h"

namespace gpugeo {

namespace {

// Cells per band of rows read or written: the buffers stay near 32 MB.
constexpr int64_t kBandCells = int64_t(1) << 22;

// Rows per band: a whole number of the writer's blocks where a band holds several.
int64_t bandRowsFor(int64_t width, int64_t height)
{
  int64_t rows = std::max<int64_t>(1, kBandCells / width);
  if (rows >= GeoTiffWriter::kBlockSize)
    rows = rows / GeoTiffWriter::kBlockSize * GeoTiffWriter::kBlockSize;
  return std::min(rows, height);
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
  static_cast<gdal::GdalRaster&>(raster) = gdal::openGdalRaster(
    source.gdalName.toStdString(), band,
    source.crs.isValid() ? source.crs.toWkt(QgsCoordinateReferenceSystem::WKT_PREFERRED_GDAL).toStdString()
                         : std::string());
  raster.crs = source.crs;
  raster.outputFormat = source.outputFormat;
  return raster;
}

Elevations readElevations(const DemRaster& raster, QgsFeedback* feedback)
{
  std::vector<float> z(static_cast<size_t>(raster.width * raster.height));
  const gdal::GdalElevationSource source(raster);
  return {source.scan(raster.width, bandRowsFor(raster.width, raster.height), z.data(), feedbackControl(feedback),
                      feedbackProgress(feedback)),
          std::move(z)};
}

RunControl feedbackControl(QgsFeedback* feedback)
{
  RunControl control;
  if (feedback)
    control.canceled = [feedback] { return feedback->isCanceled(); };
  return control;
}

std::function<void(double)> feedbackProgress(QgsFeedback* feedback)
{
  if (!feedback)
    return nullptr;
  return [feedback](double fraction) { feedback->setProgress(100.0 * fraction); };
}

std::unique_ptr<GeoTiffWriter> demRasterWriter(const QString& path, const DemRaster& raster, GDALDataType type,
                                               std::optional<double> noData)
{
  return std::make_unique<GeoTiffWriter>(path.toStdString(), raster, type, noData, raster.outputFormat);
}

void writeDemRaster(const QString& path, const DemRaster& raster, GDALDataType type, std::optional<double> noData,
                    const std::function<void(int64_t, int64_t, void*)>& fill, FinishedRasters& finished,
                    QgsFeedback* feedback)
{
  std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(path, raster, type, noData);
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
  finishDemRaster(std::move(writer), finished);
}

void finishDemRaster(std::unique_ptr<GeoTiffWriter> writer, FinishedRasters& finished)
{
  finished.add(QString::fromStdString(writer->finish()));
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

void reportElevations(const DemRaster& raster, const gdal::ElevationCounts& elevations,
                      QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(describeDem(raster, elevations.valid));
  reportCellSizes(raster, feedback);
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

void reportCellSizes(const DemRaster& raster, QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(QString::fromStdString(raster.cellSizeNote));
  for (const std::string& warning : raster.warnings)
    feedback->pushWarning(QString::fromStdString(warning));
}

QString describeDem(const DemRaster& raster, int64_t validCells)
{
  const QString noData = raster.noData ? QObject::tr("nodata %1").arg(number(*raster.noData))
                                       : QObject::tr("no nodata value (NaN is nodata)");
  return QObject::tr("DEM: band %1 (%2) of %3, %4 x %5 cells, %6; %7 cells hold a value.")
    .arg(raster.band)
    .arg(QString::fromUtf8(GDALGetDataTypeName(raster.dataType)), QString::fromStdString(raster.path))
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

namespace {

// Two geotransforms describe the same grid (to a millionth of a cell).
bool sameGeoTransform(const double* a, const double* b)
{
  const double tolerance = 1e-6 * std::min(std::fabs(a[1]), std::fabs(a[5]));
  for (int i = 0; i < 6; ++i)
    if (!(std::fabs(a[i] - b[i]) <= tolerance))
      return false;
  return true;
}

QString geoTransformText(const double* gt)
{
  return QStringLiteral("%1, %2, %3, %4, %5, %6")
    .arg(number(gt[0]), number(gt[1]), number(gt[2]), number(gt[3]), number(gt[4]), number(gt[5]));
}

}  // namespace

void requireDemGrid(const DemRaster& other, const DemRaster& dem, const QString& parameterName,
                    QgsProcessingFeedback* feedback)
{
  if (other.width != dem.width || other.height != dem.height || !sameGeoTransform(other.geoTransform, dem.geoTransform))
    throw QgsProcessingException(
      QObject::tr("The %1 raster must have the DEM's grid: it has %2 x %3 cells and the geotransform (%4); "
                  "the DEM has %5 x %6 cells and (%7). Resample it onto the DEM's grid first (GDAL's Warp "
                  "(reproject) with the DEM's extent and cell size).")
        .arg(parameterName)
        .arg(other.width)
        .arg(other.height)
        .arg(geoTransformText(other.geoTransform))
        .arg(dem.width)
        .arg(dem.height)
        .arg(geoTransformText(dem.geoTransform)));
  if (other.crs.isValid() && dem.crs.isValid() && other.crs != dem.crs)
    feedback->pushWarning(QObject::tr("The %1 raster's CRS (%2) differs from the DEM's (%3); its cells are taken to be "
                                      "the DEM's.")
                            .arg(parameterName, other.crs.userFriendlyIdentifier(), dem.crs.userFriendlyIdentifier()));
}

float elevationOutputNoData(const DemRaster& raster, const gdal::ElevationCounts& dem, QgsProcessingFeedback* feedback)
{
  std::string why;
  const float noData = gdal::filledNoData(raster.noData, dem.roundedToNoData, &why);
  if (!why.empty())
    feedback->pushWarning(QObject::tr("The input's nodata value %1 cannot mark nodata in a float32 raster here (out "
                                      "of range, or equal to an elevation once rounded to float32): the output's "
                                      "nodata is NaN.")
                            .arg(*raster.noData, 0, 'g', 17));
  return noData;
}

}  // namespace gpugeo
