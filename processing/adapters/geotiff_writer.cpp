#include "geotiff_writer.h"

#include <qgscoordinatereferencesystem.h>

namespace gpugeo {

QString lastGdalError()
{
  return QString::fromStdString(gdal::lastGdalError());
}

GeoTiffWriter::GeoTiffWriter(const QString& path, const GridGeometry& grid, GDALDataType type,
                             std::optional<double> noData, const QgsCoordinateReferenceSystem& crs,
                             const gdal::OutputFormat& format)
  : gdal::GeoTiffWriter(path.toStdString(), grid.width, grid.height, geoTransformOf(grid).data(),
                        crs.isValid() ? crs.toWkt(QgsCoordinateReferenceSystem::WKT_PREFERRED_GDAL).toStdString()
                                      : std::string(),
                        type, noData, format)
{
}

std::array<double, 6> GeoTiffWriter::geoTransformOf(const GridGeometry& grid)
{
  return {grid.originX, grid.pixelSize, 0.0, grid.originY, 0.0, -grid.pixelSize};
}

FinishedRasters::~FinishedRasters()
{
  if (!mKept)
    for (const QString& path : mOutputs)
      gdal::deleteGeoTiff(path.toStdString());
  for (const QString& path : mTemporary)
    gdal::deleteGeoTiff(path.toStdString());
}

}  // namespace gpugeo
