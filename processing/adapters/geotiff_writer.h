// Writes a single-band GeoTIFF row band by row band (tiled, integers compressed, BigTIFF when needed), so a
// raster never has to be whole in memory. A writer that is destroyed before finish() deletes its
// file: a failed or canceled run leaves nothing behind that looks like a result.
#pragma once

#include <cstdint>
#include <optional>

#include <QString>

#include <gdal.h>

class QgsCoordinateReferenceSystem;

namespace gpugeo {

struct GridGeometry
{
  double originX = 0.0;  // top-left corner
  double originY = 0.0;
  double pixelSize = 1.0;
  int64_t width = 0;
  int64_t height = 0;
};

class GeoTiffWriter
{
public:
  // Throws QgsProcessingException when the file cannot be created (the message says why).
  GeoTiffWriter(const QString& path, const GridGeometry& grid, GDALDataType type, std::optional<double> noData,
                const QgsCoordinateReferenceSystem& crs);
  ~GeoTiffWriter();
  GeoTiffWriter(const GeoTiffWriter&) = delete;
  GeoTiffWriter& operator=(const GeoTiffWriter&) = delete;

  // Writes rows [row0, row0 + rows) from `data` (rows * width values of the raster's type).
  void writeRows(int64_t row0, int64_t rows, const void* data);
  // Flushes and closes; throws on a write error (and deletes the file).
  void finish();

  const QString& path() const { return mPath; }

  // Rows per block of the files written (bands are best written in multiples of it).
  static constexpr int kBlockSize = 256;

private:
  void discard();

  QString mPath;
  GDALDatasetH mDataset = nullptr;
  GDALDataType mType;
  int64_t mWidth = 0;
};

}  // namespace gpugeo
