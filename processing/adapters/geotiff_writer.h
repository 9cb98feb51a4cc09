// Writes a single-band GeoTIFF row band by row band (tiled, integers compressed, BigTIFF when needed), so a
// raster never has to be whole in memory. A writer that is destroyed before finish() deletes its
// file: a failed or canceled run leaves nothing behind that looks like a result.
#pragma once

#include <cstdint>
#include <optional>

#include <QString>
#include <QStringList>

#include <gdal.h>

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
  // Writes the window [x0, x0 + width) x [row0, row0 + rows) from `data` (row-major, of the raster's
  // type), in any order (the tiled DEM tools' tiles); not flushed, so that GDAL's block cache
  // gathers blocks that several windows share.
  void writeWindow(int64_t x0, int64_t row0, int64_t width, int64_t rows, const void* data);
  // Flushes and closes; returns the path. Throws on a write error (and deletes the file).
  QString finish();

  const QString& path() const { return mPath; }

  // Rows per block of the files written (bands are best written in multiples of it), and the
  // largest floating raster (cells) written compressed.
  static constexpr int kBlockSize = 256;
  static constexpr int64_t kSmallRaster = 1 << 20;
  // The blocks of the Cloud Optimized GeoTIFFs written (makeCloudOptimized).
  static constexpr int kBlockSizeForCog = 256;

private:
  void discard();

  QString mPath;
  GDALDatasetH mDataset = nullptr;
  GDALDataType mType;
  int64_t mWidth = 0;
};

// Rewrites the finished GeoTIFF at `path` as a Cloud Optimized GeoTIFF through GDAL's COG driver
// (blocks of 256, DEFLATE with a predictor on all cores, BigTIFF when needed, overviews: nearest
// for integer rasters, average for floating ones), reading it block by block; the file is replaced
// only once the copy is whole. Throws QgsProcessingException (the copy deleted) when GDAL cannot.
void makeCloudOptimized(const QString& path);

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
