#include "geotiff_writer.h"

#include <QFileInfo>
#include <QObject>

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>

#include <qgscoordinatereferencesystem.h>
#include <qgsexception.h>

namespace gpugeo {

namespace {

QString lastGdalError()
{
  const char* message = CPLGetLastErrorMsg();
  return message && *message ? QString::fromUtf8(message) : QObject::tr("unknown GDAL error");
}

}  // namespace

GeoTiffWriter::GeoTiffWriter(const QString& path, const GridGeometry& grid, GDALDataType type,
                             std::optional<double> noData, const QgsCoordinateReferenceSystem& crs)
  : mPath(path), mType(type), mWidth(grid.width)
{
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix != QLatin1String("tif") && suffix != QLatin1String("tiff"))
    throw QgsProcessingException(QObject::tr("%1: only GeoTIFF outputs (.tif) are supported.").arg(path));
  GDALAllRegister();
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  if (!driver)
    throw QgsProcessingException(QObject::tr("GDAL has no GeoTIFF driver."));

  // LZW keeps label rasters (long runs of one value) small; the compression runs on all cores.
  char** options = nullptr;
  options = CSLSetNameValue(options, "TILED", "YES");
  options = CSLSetNameValue(options, "BLOCKXSIZE", "256");
  options = CSLSetNameValue(options, "BLOCKYSIZE", "256");
  options = CSLSetNameValue(options, "COMPRESS", "LZW");
  options = CSLSetNameValue(options, "NUM_THREADS", "ALL_CPUS");
  options = CSLSetNameValue(options, "BIGTIFF", "IF_SAFER");
  if (type == GDT_Float32 || type == GDT_Float64)
    options = CSLSetNameValue(options, "PREDICTOR", "3");
  CPLErrorReset();
  mDataset = GDALCreate(driver, path.toUtf8().constData(), static_cast<int>(grid.width), static_cast<int>(grid.height),
                        1, type, options);
  CSLDestroy(options);
  if (!mDataset)
    throw QgsProcessingException(QObject::tr("Could not create %1: %2").arg(path, lastGdalError()));

  double transform[6] = {grid.originX, grid.pixelSize, 0.0, grid.originY, 0.0, -grid.pixelSize};
  GDALSetGeoTransform(mDataset, transform);
  if (crs.isValid())
    GDALSetProjection(mDataset, crs.toWkt(QgsCoordinateReferenceSystem::WKT_PREFERRED_GDAL).toUtf8().constData());
  if (noData)
    GDALSetRasterNoDataValue(GDALGetRasterBand(mDataset, 1), *noData);
}

GeoTiffWriter::~GeoTiffWriter()
{
  if (mDataset)
    discard();
}

void GeoTiffWriter::writeRows(int64_t row0, int64_t rows, const void* data)
{
  CPLErrorReset();
  const CPLErr status = GDALRasterIO(GDALGetRasterBand(mDataset, 1), GF_Write, 0, static_cast<int>(row0),
                                     static_cast<int>(mWidth), static_cast<int>(rows), const_cast<void*>(data),
                                     static_cast<int>(mWidth), static_cast<int>(rows), mType, 0, 0);
  if (status != CE_None)
  {
    const QString error = lastGdalError();
    discard();
    throw QgsProcessingException(QObject::tr("Could not write %1 (disk full?): %2").arg(mPath, error));
  }
}

void GeoTiffWriter::finish()
{
  CPLErrorReset();
  GDALFlushCache(mDataset);
  const bool failed = CPLGetLastErrorType() == CE_Failure;
  const QString error = lastGdalError();
  GDALClose(mDataset);
  mDataset = nullptr;
  if (failed || CPLGetLastErrorType() == CE_Failure)
  {
    GDALDeleteDataset(GDALGetDriverByName("GTiff"), mPath.toUtf8().constData());
    throw QgsProcessingException(QObject::tr("Could not finish %1: %2").arg(mPath, error));
  }
}

void GeoTiffWriter::discard()
{
  GDALClose(mDataset);
  mDataset = nullptr;
  CPLPushErrorHandler(CPLQuietErrorHandler);
  GDALDeleteDataset(GDALGetDriverByName("GTiff"), mPath.toUtf8().constData());
  CPLPopErrorHandler();
}

}  // namespace gpugeo
