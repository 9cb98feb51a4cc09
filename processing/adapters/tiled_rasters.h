// GDAL behind the tiled DEM tools (native/dem/tiled): a DEM band read window by window with the
// in-memory reader's conversions, GeoTIFF outputs written window by window, and the choice between
// the in-memory and the tiled path from a memory budget.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <QString>

#include <gdal.h>

#include "adapters/dem_reader.h"
#include "adapters/geotiff_writer.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"

class QgsProcessingFeedback;

namespace gpugeo {

// The lock every read and write of the tiled runs' GDAL datasets takes: GDAL's block cache is shared
// by the whole process, and a read that fills it may write back another dataset's dirty blocks; with
// the writes to that dataset on another thread, blocks shared by two tiles lost one tile's cells.
std::mutex& gdalTileMutex();

// A DEM band (openDemRaster) as float32 elevations, window by window: NaN for nodata, infinite values
// and values beyond float32 (readElevations's rules, bit for bit). scan() reads every window once
// first and counts the cells, in an Elevations without z.
class DemTileSource : public dem::tiled::RasterSource<float>
{
public:
  // Throws QgsProcessingException when the dataset does not open.
  explicit DemTileSource(const DemRaster& raster);
  ~DemTileSource() override;
  int64_t width() const override { return mRaster.width; }
  int64_t height() const override { return mRaster.height; }
  void read(const dem::tiled::Window& window, float* out) const override;

  // Reads the whole band in windows of `tile` cells a side (cancel and progress on `feedback`) and
  // returns its counts, minimum and maximum.
  Elevations scan(int64_t tile, QgsFeedback* feedback);

private:
  DemRaster mRaster;
  GDALDatasetH mDataset = nullptr;
  mutable Elevations mCounts;  // filled while mScanning
  bool mScanning = false;
};

// A band of codes (flow directions) read window by window and decoded through `table` (value 0..255
// -> code, -1 for a value the encoding lacks; NaN and 255 -> 255, nodata). scan() reads every window
// first and counts the valid cells and the values the table lacks (the first of them, and whether
// they all fit `otherTable`).
class CodeTileSource : public dem::tiled::RasterSource<uint8_t>
{
public:
  struct Counts
  {
    int64_t valid = 0, invalid = 0;
    double firstInvalid = 0.0;
    int64_t firstInvalidCell = -1;  // y * width + x
    bool otherTableFits = true;
  };

  CodeTileSource(const DemRaster& raster, const std::array<int16_t, 256>& table,
                 const std::array<int16_t, 256>& otherTable);
  ~CodeTileSource() override;
  int64_t width() const override { return mRaster.width; }
  int64_t height() const override { return mRaster.height; }
  void read(const dem::tiled::Window& window, uint8_t* out) const override;
  Counts scan(QgsFeedback* feedback);

private:
  static int16_t decode(const std::array<int16_t, 256>& table, double value);
  DemRaster mRaster;
  std::array<int16_t, 256> mTable, mOtherTable;
  GDALDatasetH mDataset = nullptr;
  mutable Counts mCounts;  // under gdalTileMutex()
  bool mScanning = false;
};

// A GeoTIFF output (GeoTiffWriter) written window by window from the tiles' threads: each window
// converted by convert(in, count, out) into the output's type (on the tile's thread: `convert` must
// be thread-safe), then written under gdalTileMutex().
template <typename T>
class TiffTileSink : public dem::tiled::RasterSink<T>
{
public:
  TiffTileSink(GeoTiffWriter& writer, GDALDataType type, std::function<void(const T*, int64_t, void*)> convert)
    : mWriter(writer), mBytes(GDALGetDataTypeSizeBytes(type)), mConvert(std::move(convert))
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

// A TiffTileSink conversion for an output of T's own type: NaN written as `noData`.
template <typename T>
std::function<void(const T*, int64_t, void*)> nanAsNoData(T noData)
{
  return [noData](const T* in, int64_t count, void* buffer) {
    T* out = static_cast<T*>(buffer);
    for (int64_t i = 0; i < count; ++i)
      out[i] = std::isnan(in[i]) ? noData : in[i];
  };
}

// A GeoTiffWriter for an output of the DEM's size, geotransform and CRS (writeDemRaster's file).
std::unique_ptr<GeoTiffWriter> demRasterWriter(const QString& path, const DemRaster& raster, GDALDataType type,
                                               std::optional<double> noData);
// Whether a DEM tool runs in memory or tile by tile, and with which tiles.
struct TilingPlan
{
  bool tiled = false;
  int64_t budgetBytes = 0;     // the memory budget
  int64_t inMemoryBytes = 0;   // what the in-memory run would hold
  QString budgetSource;        // where the budget came from, for the log
  int64_t gdalCacheBytes = 0;  // GDAL's block cache during a tiled run (GdalCacheLimit)
  // On the GPU: its memory free at the start, its budget (half of that, at most the budget), and
  // what the in-memory GPU run would hold.
  int64_t gpuFreeBytes = 0, gpuBudgetBytes = 0, gpuInMemoryBytes = 0;
  dem::tiled::TiledOptions options;  // options.backend: the resolved device
};

// Holds GDAL's block cache (process-wide) at most at `bytes` while it lives, then gives back the
// limit it found: its default, 5% of the RAM, would otherwise keep much of a tiled run's rasters.
class GdalCacheLimit
{
public:
  explicit GdalCacheLimit(int64_t bytes);
  ~GdalCacheLimit();
  // Lowers the limit to `bytes` for the rest of its life (GDAL writes out the blocks past it): for
  // the last stage of a run, when no raster is read again.
  void shrink(int64_t bytes) const;
  GdalCacheLimit(const GdalCacheLimit&) = delete;
  GdalCacheLimit& operator=(const GdalCacheLimit&) = delete;

private:
  int64_t mPrevious;
};

// Gives the heap pages that freed memory left back to the system (glibc keeps them for reuse
// otherwise, so that a stage's peak would count what the stages before it freed). Nothing where the C
// library is not glibc.
void returnFreedMemory();

// The memory a tool may use: `budgetMiB` if above 0, else half the memory available now
// (MemAvailable of /proc/meminfo; 4 GiB where it cannot be read). The in-memory run needs
// `inMemoryBytesPerCell` per cell plus its band of rows read as float64 (up to 32 MiB); a tiled run,
// for each tile in flight (one a thread), `tileBytesPerCell` plus 8 (the window read as float64) per
// cell of the tile and its halo, plus 48 bytes per perimeter cell of every tile for the graph, plus
// GDAL's block cache, held during the run at an eighth of the budget (128 KiB to 256 MiB). Runs tiled when
// `forceTiled` or the in-memory need passes the budget, with the largest square tiles (a multiple of 256 cells a side, GeoTIFF's
// blocks, up to 4,096; smaller budgets: multiples of 16, down to 16) that fit. Throws
// QgsProcessingException when not even 16 x 16 tiles fit, naming the budget needed.
// On the GPU (`backend`), also tiled where the in-memory GPU run (`gpuInMemoryBytesPerCell`) would pass
// the GPU's budget, half its free memory (at most the budget), or its 2^30 cells; the tiles then also
// fit that budget, as many at a time on the GPU as it holds (dem::tiled::kGpuBytesPerTileCell), at
// most one a thread, and what the budget has left beyond them keeps the flat mask's tiles between
// its rounds (TiledOptions::gpuKeepBytes).
TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, const DemRaster& raster, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend = Backend::Cpu,
                      int64_t gpuInMemoryBytesPerCell = 0);

// The log lines of a plan and of a finished tiled run (tiles, passes, graph and peak bytes).
void logTilingPlan(const TilingPlan& plan, QgsProcessingFeedback* feedback);
void logTiledRun(const dem::tiled::TiledReport& report, int extraPasses, QgsProcessingFeedback* feedback);

// Where tiled runs put their scratch folders: QGIS's processing temporary folder.
std::string scratchParent();

// Progress over the rounds of a tiled run whose number is not known ahead (the flats'): 10% a
// round, up to 99.
std::function<void(int, int64_t, int64_t)> roundsProgress(QgsFeedback* feedback);

// Progress 0 to 100 over the passes of a tiled run, for TiledOptions::onTile.
std::function<void(int, int64_t, int64_t)> tileProgress(QgsFeedback* feedback, int passes);

}  // namespace gpugeo
