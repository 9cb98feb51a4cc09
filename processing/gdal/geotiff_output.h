// The DEM tools' outputs (and every other raster the provider writes): single-band GeoTIFFs, tiled,
// integers compressed, BigTIFF when needed, written band of rows by band of rows or window by window
// so that a raster never has to be whole in memory; then, where asked, made Cloud Optimized; the
// user's GDAL creation options over the writer's own. A writer that is destroyed before finish()
// deletes its file: a failed or canceled run leaves nothing behind that looks like a result.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gdal.h>

#include "dem/tiled/raster_io.h"
#include "gdal/gdal_raster.h"
#include "gdal/output_format.h"

namespace gpugeo::gdal {

class GeoTiffWriter
{
public:
  // A raster of width x height cells of `type` with `geoTransform` (6 values) and the CRS `crsWkt`
  // (empty: none), written in `format` (its options assumed checked: outputFormat()). Throws
  // InvalidInput for a path that does not end in .tif or .tiff, WriteFailed when the file cannot be
  // created (the message says why).
  GeoTiffWriter(const std::string& path, int64_t width, int64_t height, const double* geoTransform,
                const std::string& crsWkt, GDALDataType type, std::optional<double> noData,
                const OutputFormat& format = {});
  // One of the raster's size, geotransform and CRS.
  GeoTiffWriter(const std::string& path, const GdalRaster& like, GDALDataType type, std::optional<double> noData,
                const OutputFormat& format = {});
  ~GeoTiffWriter();
  GeoTiffWriter(const GeoTiffWriter&) = delete;
  GeoTiffWriter& operator=(const GeoTiffWriter&) = delete;

  // Writes rows [row0, row0 + rows) from `data` (rows * width values of the raster's type) and
  // flushes them. Throws WriteFailed (the file deleted) when GDAL cannot.
  void writeRows(int64_t row0, int64_t rows, const void* data);
  // Writes the window [x0, x0 + width) x [row0, row0 + rows) from `data` (row-major, of the raster's
  // type), in any order (the tiled DEM tools' tiles); not flushed, so that GDAL's block cache
  // gathers blocks that several windows share. The caller holds gdalTileMutex() where other
  // threads use GDAL (GeoTiffSink does).
  void writeWindow(int64_t x0, int64_t row0, int64_t width, int64_t rows, const void* data);
  // Flushes and closes, then rewrites the file as a COG where the format asks for it; returns the
  // path. Throws WriteFailed on a write error (and deletes the file).
  std::string finish();
  // Closes the file unfinished and deletes it.
  void discard();

  const std::string& path() const { return mPath; }
  GDALDataType type() const { return mType; }

  // Rows per block of the files written (bands are best written in multiples of it), and the
  // largest floating raster (cells) written compressed.
  static constexpr int kBlockSize = 256;
  static constexpr int64_t kSmallRaster = 1 << 20;
  // The blocks of the Cloud Optimized GeoTIFFs written (makeCloudOptimized).
  static constexpr int kBlockSizeForCog = 256;

private:
  // Throws WriteFailed once the file is closed (a write failed, or discard() or finish() ran).
  void requireOpen() const;
  // Throws WriteFailed with GDAL's error, the file deleted.
  [[noreturn]] void failWrite();

  std::string mPath;
  GDALDatasetH mDataset = nullptr;
  GDALDataType mType;
  int64_t mWidth = 0;
  OutputFormat mFormat;
};

// A GeoTiffWriter written window by window from the tiled DEM tools' threads: each window converted
// by convert(in, count, out) into the output's type (on the tile's thread: `convert` must be
// thread-safe), then written under gdalTileMutex().
template <typename T>
class GeoTiffSink : public dem::tiled::RasterSink<T>
{
public:
  GeoTiffSink(GeoTiffWriter& writer, std::function<void(const T*, int64_t, void*)> convert)
    : mWriter(writer), mBytes(GDALGetDataTypeSizeBytes(writer.type())), mConvert(std::move(convert))
  {
  }
  void write(const dem::tiled::Window& window, const T* in) override
  {
    std::vector<unsigned char> buffer(std::size_t(window.cells() * mBytes));
    mConvert(in, window.cells(), buffer.data());
    std::lock_guard<std::mutex> lock(gdalTileMutex());
    mWriter.writeWindow(window.x0, window.y0, window.width, window.height, buffer.data());
  }

private:
  GeoTiffWriter& mWriter;
  int64_t mBytes;
  std::function<void(const T*, int64_t, void*)> mConvert;  // called from the tiles' threads at once
};

// A GeoTiffSink conversion for an output of T's own type: NaN written as `noData`.
template <typename T>
std::function<void(const T*, int64_t, void*)> nanAsNoData(T noData)
{
  return [noData](const T* in, int64_t count, void* buffer) {
    T* out = static_cast<T*>(buffer);
    for (int64_t i = 0; i < count; ++i)
      out[i] = std::isnan(in[i]) ? noData : in[i];
  };
}

// Rewrites the finished GeoTIFF at `path` as a Cloud Optimized GeoTIFF through GDAL's COG driver
// (blocks of 256, DEFLATE with a predictor on all cores, BigTIFF when needed, overviews: nearest
// for integer rasters, average for floating ones; `creationOptions`, the COG driver's, over these),
// reading it block by block; the file is replaced only once the copy is whole. Throws WriteFailed
// (the copy deleted) when GDAL cannot, Error when this GDAL has no COG driver.
void makeCloudOptimized(const std::string& path, const std::vector<std::string>& creationOptions = {});

// Deletes a GeoTIFF (and its sidecar files) quietly; nothing where there is none.
void deleteGeoTiff(const std::string& path);

}  // namespace gpugeo::gdal
