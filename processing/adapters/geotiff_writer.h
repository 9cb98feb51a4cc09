// The GeoTIFF outputs of the QGIS algorithms: the GDAL layer's writer (gdal/geotiff_output.h: tiled,
// integers compressed, BigTIFF when needed, deleted unless finished) made from QGIS's types, and the
// guard that deletes a run's finished rasters unless the run succeeds.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <QString>
#include <QStringList>

#include <gdal.h>

#include "gdal/geotiff_output.h"

class QgsCoordinateReferenceSystem;

namespace gpugeo {

// GDAL's last error message, or "unknown GDAL error" (for the adapters' messages).
QString lastGdalError();

struct GridGeometry
{
  double originX = 0.0;  // top-left corner
  double originY = 0.0;
  double pixelSize = 1.0;
  int64_t width = 0;
  int64_t height = 0;
};

class GeoTiffWriter : public gdal::GeoTiffWriter
{
public:
  using gdal::GeoTiffWriter::GeoTiffWriter;
  // A raster of square pixels on `grid`, in `crs` (none where it is invalid), written in `format`.
  // Throws InvalidInput or WriteFailed as gdal::GeoTiffWriter does.
  GeoTiffWriter(const QString& path, const GridGeometry& grid, GDALDataType type, std::optional<double> noData,
                const QgsCoordinateReferenceSystem& crs, const gdal::OutputFormat& format = {});

private:
  static std::array<double, 6> geoTransformOf(const GridGeometry& grid);
};

// The rasters a run has finished writing. Unless keep() is called (the run succeeded), they are
// deleted when the guard goes: a run that fails or is canceled after a raster was complete leaves
// nothing behind. Temporary rasters are deleted in any case.
class FinishedRasters
{
public:
  FinishedRasters() = default;
  ~FinishedRasters();
  FinishedRasters(const FinishedRasters&) = delete;
  FinishedRasters& operator=(const FinishedRasters&) = delete;

  void add(const QString& path) { mOutputs << path; }
  void addTemporary(const QString& path) { mTemporary << path; }
  void keep() { mKept = true; }

private:
  QStringList mOutputs;
  QStringList mTemporary;
  bool mKept = false;
};

}  // namespace gpugeo
