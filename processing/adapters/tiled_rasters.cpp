#include "tiled_rasters.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#if defined(__unix__)
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#endif

#include <QObject>

#include <cpl_error.h>

#include <qgsexception.h>
#include <qgsfeedback.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingutils.h>

#include "core/errors.h"

namespace gpugeo {

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kReadBytesPerCell = 8;       // a window read as float64
constexpr int64_t kReadBuffer = 32 * kMiB;     // the in-memory run's band of rows read as float64
constexpr int64_t kGraphBytesPerPerimeterCell = 48;

// Bytes available now (MemAvailable), or 0 where /proc/meminfo cannot tell.
int64_t availableMemory()
{
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

// What a tiled run holds with square tiles of `side` cells.
int64_t tiledBytes(const DemRaster& raster, int64_t side, int64_t tileBytesPerCell, int threads)
{
  const int64_t w = std::min(side, raster.width), h = std::min(side, raster.height);
  const int64_t tiles = ((raster.width + w - 1) / w) * ((raster.height + h - 1) / h);
  return int64_t(threads) * (w + 2) * (h + 2) * (tileBytesPerCell + kReadBytesPerCell) +
         tiles * (2 * w + 2 * h) * kGraphBytesPerPerimeterCell;
}

QString mib(int64_t bytes)
{
  const double value = double(bytes) / double(kMiB);
  return value >= 10 ? QString::number(value, 'f', 0) : QString::number(value, 'g', 2);
}

// Opens a dataset read-only without GDAL's messages; throws QgsProcessingException when it fails.
GDALDatasetH openForTiles(const QString& name)
{
  GDALAllRegister();
  CPLErrorReset();
  CPLPushErrorHandler(CPLQuietErrorHandler);
  GDALDatasetH dataset = GDALOpen(name.toUtf8().constData(), GA_ReadOnly);
  CPLPopErrorHandler();
  if (!dataset)
    throw QgsProcessingException(QObject::tr("Could not open %1: %2").arg(name, lastGdalError()));
  return dataset;
}

// A window of band `band` as float64 (the caller holds gdalTileMutex()).
std::vector<double> readWindow(GDALDatasetH dataset, const DemRaster& raster, const dem::tiled::Window& window)
{
  std::vector<double> values(std::size_t(window.cells()));
  CPLErrorReset();
  if (GDALRasterIO(GDALGetRasterBand(dataset, raster.band), GF_Read, int(window.x0), int(window.y0),
                   int(window.width), int(window.height), values.data(), int(window.width), int(window.height),
                   GDT_Float64, 0, 0) != CE_None)
    throw QgsProcessingException(QObject::tr("Could not read columns %1 to %2, rows %3 to %4 of %5: %6")
                                   .arg(window.x0)
                                   .arg(window.x0 + window.width - 1)
                                   .arg(window.y0)
                                   .arg(window.y0 + window.height - 1)
                                   .arg(raster.gdalName, lastGdalError()));
  return values;
}

}  // namespace

std::mutex& gdalTileMutex()
{
  static std::mutex mutex;
  return mutex;
}

DemTileSource::DemTileSource(const DemRaster& raster) : mRaster(raster), mDataset(openForTiles(raster.gdalName))
{
}

DemTileSource::~DemTileSource()
{
  if (mDataset)
    GDALClose(mDataset);
}

void DemTileSource::read(const dem::tiled::Window& window, float* out) const
{
  // The band as float64, then readDemRows's and readElevations's rules: NaN stays nodata; the nodata
  // value, compared in the band's own type, becomes NaN; the scale and offset; values that are not
  // finite as float32 become NaN and are counted.
  std::lock_guard<std::mutex> lock(gdalTileMutex());
  const std::vector<double> values = readWindow(mDataset, mRaster, window);
  const bool count = mScanning;
  const bool float32 = mRaster.dataType == GDT_Float32;
  const bool scaled = mRaster.scale != 1.0 || mRaster.offset != 0.0;
  const double noData = mRaster.noData.value_or(0.0);
  const float noData32 = static_cast<float>(noData);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < values.size(); ++i)
  {
    double v = values[i];
    if (std::isnan(v) || (mRaster.noData && (float32 ? static_cast<float>(v) == noData32 : v == noData)))
    {
      out[i] = nan;
      continue;
    }
    if (scaled)
      v = v * mRaster.scale + mRaster.offset;
    const float f = static_cast<float>(v);
    if (std::isnan(v) || !std::isfinite(f))
    {
      out[i] = nan;
      if (count)
        mCounts.notFinite += !std::isnan(v);
      continue;
    }
    out[i] = f;
    if (!count)
      continue;
    ++mCounts.valid;
    mCounts.minimum = std::min(mCounts.minimum, double(f));
    mCounts.maximum = std::max(mCounts.maximum, double(f));
    mCounts.roundedToNoData += mRaster.noData.has_value() && f == noData32;
  }
}

Elevations DemTileSource::scan(int64_t tile, QgsFeedback* feedback)
{
  mCounts = Elevations();
  mCounts.minimum = std::numeric_limits<double>::infinity();
  mCounts.maximum = -std::numeric_limits<double>::infinity();
  mScanning = true;
  std::vector<float> cells;
  for (int64_t y0 = 0; y0 < mRaster.height; y0 += tile)
  {
    for (int64_t x0 = 0; x0 < mRaster.width; x0 += tile)
    {
      if (feedback && feedback->isCanceled())
      {
        mScanning = false;
        throw Canceled();
      }
      const dem::tiled::Window window{x0, y0, std::min(tile, mRaster.width - x0), std::min(tile, mRaster.height - y0)};
      cells.resize(std::size_t(window.cells()));
      read(window, cells.data());
    }
    if (feedback)
      feedback->setProgress(100.0 * double(std::min(mRaster.height, y0 + tile)) / double(mRaster.height));
  }
  mScanning = false;
  Elevations out = mCounts;
  if (out.valid == 0)
    out.minimum = out.maximum = 0.0;
  return out;
}

CodeTileSource::CodeTileSource(const DemRaster& raster, const std::array<int16_t, 256>& table,
                               const std::array<int16_t, 256>& otherTable)
  : mRaster(raster), mTable(table), mOtherTable(otherTable), mDataset(openForTiles(raster.gdalName))
{
}

CodeTileSource::~CodeTileSource()
{
  if (mDataset)
    GDALClose(mDataset);
}

int16_t CodeTileSource::decode(const std::array<int16_t, 256>& table, double value)
{
  if (std::isnan(value))
    return 255;
  if (!(value >= 0.0 && value <= 255.0) || value != std::floor(value))
    return -1;
  return table[size_t(value)];
}

void CodeTileSource::read(const dem::tiled::Window& window, uint8_t* out) const
{
  std::lock_guard<std::mutex> lock(gdalTileMutex());
  const std::vector<double> values = readWindow(mDataset, mRaster, window);
  Counts& counts = mCounts;
  for (std::size_t i = 0; i < values.size(); ++i)
  {
    const int16_t code = decode(mTable, values[i]);
    out[i] = uint8_t(code < 0 ? 255 : code);
    if (!mScanning)
      continue;
    counts.otherTableFits = counts.otherTableFits && decode(mOtherTable, values[i]) >= 0;
    if (code < 0 && counts.invalid++ == 0)
    {
      counts.firstInvalid = values[i];
      counts.firstInvalidCell = (window.y0 + int64_t(i) / window.width) * mRaster.width + window.x0 +
                                int64_t(i) % window.width;
    }
    counts.valid += code >= 0 && code != 255;
  }
}

CodeTileSource::Counts CodeTileSource::scan(QgsFeedback* feedback)
{
  mCounts = Counts();
  mScanning = true;
  // Bands of whole rows (about 4 million cells), so that the first value the encoding lacks is the
  // first in row-major order, as the in-memory reader finds it.
  const int64_t bandRows = std::max<int64_t>(1, (int64_t(1) << 22) / mRaster.width);
  std::vector<uint8_t> cells;
  for (int64_t y0 = 0; y0 < mRaster.height; y0 += bandRows)
  {
    if (feedback && feedback->isCanceled())
    {
      mScanning = false;
      throw Canceled();
    }
    const dem::tiled::Window rows{0, y0, mRaster.width, std::min(bandRows, mRaster.height - y0)};
    cells.resize(std::size_t(rows.cells()));
    read(rows, cells.data());
    if (feedback)
      feedback->setProgress(100.0 * double(rows.y0 + rows.height) / double(mRaster.height));
  }
  mScanning = false;
  return mCounts;
}

std::unique_ptr<GeoTiffWriter> demRasterWriter(const QString& path, const DemRaster& raster, GDALDataType type,
                                               std::optional<double> noData)
{
  const double* gt = raster.geoTransform;
  const GridGeometry geometry{gt[0], gt[3], gt[1], raster.width, raster.height};
  return std::make_unique<GeoTiffWriter>(path, geometry, type, noData, raster.crs);
}

TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, const DemRaster& raster, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend, int64_t gpuInMemoryBytesPerCell)
{
  TilingPlan plan;
  threads = std::max(1, threads);
  if (budgetMiB > 0)
  {
    plan.budgetBytes = budgetMiB * kMiB;
    plan.budgetSource = QObject::tr("MEMORY_BUDGET");
  }
  else
  {
    const int64_t available = availableMemory();
    plan.budgetBytes = available > 0 ? available / 2 : 4096 * kMiB;
    plan.budgetSource = available > 0 ? QObject::tr("half the memory available now (%1 MiB)").arg(mib(available))
                                      : QObject::tr("a default of 4096 MiB (the available memory is unknown)");
  }
  const int64_t cells = raster.width * raster.height;
  plan.inMemoryBytes = cells * inMemoryBytesPerCell + std::min(kReadBuffer, cells * kReadBytesPerCell);
  plan.tiled = forceTiled || plan.inMemoryBytes > plan.budgetBytes;
  plan.options.backend = backend;
  if (backend == Backend::Gpu)
  {
    plan.gpuFreeBytes = dem::tiled::freeGpuMemory();
    plan.gpuBudgetBytes = std::min(plan.budgetBytes, plan.gpuFreeBytes / 2);
    plan.gpuInMemoryBytes = cells * gpuInMemoryBytesPerCell + 64 * kMiB;
    plan.tiled = plan.tiled || plan.gpuInMemoryBytes > plan.gpuBudgetBytes || cells > dem::kGpuMostCells;
  }
  if (!plan.tiled)
    return plan;
  plan.gdalCacheBytes = std::clamp(plan.budgetBytes / 8, kMiB / 8, 256 * kMiB);  // (a block of 256 x 256 float32 is 256 KiB)
  const int64_t forTiles = plan.budgetBytes - plan.gdalCacheBytes;
  int64_t side = 0;
  for (int64_t s = 4096; s >= 256 && side == 0; s -= 256)
    if (tiledBytes(raster, s, tileBytesPerCell, threads) <= forTiles)
      side = s;
  for (int64_t s = 240; s >= 16 && side == 0; s -= 16)
    if (tiledBytes(raster, s, tileBytesPerCell, threads) <= forTiles)
      side = s;
  if (backend == Backend::Gpu)
  {
    // One tile at a time on the GPU: the largest side (a multiple of 256, else of 16) that fits its budget.
    const auto fitsGpu = [&](int64_t s) { return (s + 2) * (s + 2) * dem::tiled::kGpuBytesPerTileCell <= plan.gpuBudgetBytes; };
    while (side > 256 && !fitsGpu(side))
      side -= 256;
    while (side > 16 && !fitsGpu(side))
      side -= 16;
    if (side > 0 && !fitsGpu(side))
      throw QgsProcessingException(
        QObject::tr("The GPU's budget of %1 MiB (half its %2 MiB free, at most the memory budget) cannot hold even a "
                    "tile of 16 x 16 cells; run it on the CPU (DEVICE=1).")
          .arg(mib(plan.gpuBudgetBytes))
          .arg(mib(plan.gpuFreeBytes)));
  }
  if (side == 0)
    throw QgsProcessingException(
      QObject::tr("A memory budget of %1 MiB cannot hold even tiles of 16 x 16 cells (%2 threads) with the graph of "
                  "their perimeters over this DEM of %3 x %4 cells: that needs %5 MiB. Raise MEMORY_BUDGET.")
        .arg(mib(plan.budgetBytes))
        .arg(threads)
        .arg(raster.width)
        .arg(raster.height)
        .arg(mib(tiledBytes(raster, 16, tileBytesPerCell, threads) + plan.gdalCacheBytes)));
  plan.options.tileWidth = plan.options.tileHeight = side;
  plan.options.threads = threads;
  if (backend == Backend::Gpu)
  {
    const int64_t perTile = (side + 2) * (side + 2) * dem::tiled::kGpuBytesPerTileCell;
    plan.options.gpuTiles = int(std::clamp<int64_t>(plan.gpuBudgetBytes / perTile, 1, threads));
    // What the GPU's budget has left beyond the tiles in flight keeps the flat mask's tiles between
    // its rounds.
    plan.options.gpuKeepBytes = std::max<int64_t>(0, plan.gpuBudgetBytes - plan.options.gpuTiles * perTile);
  }
  return plan;
}

GdalCacheLimit::GdalCacheLimit(int64_t bytes) : mPrevious(GDALGetCacheMax64())
{
  if (bytes < mPrevious)
    GDALSetCacheMax64(bytes);
}

GdalCacheLimit::~GdalCacheLimit()
{
  GDALSetCacheMax64(mPrevious);
}

void GdalCacheLimit::shrink(int64_t bytes) const
{
  if (bytes < GDALGetCacheMax64())
    GDALSetCacheMax64(bytes);
}

void returnFreedMemory()
{
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void logTilingPlan(const TilingPlan& plan, QgsProcessingFeedback* feedback)
{
  if (!plan.tiled)
  {
    feedback->pushInfo(QObject::tr("In memory: the run needs about %1 MiB, within the budget of %2 MiB (%3).")
                         .arg(mib(plan.inMemoryBytes), mib(plan.budgetBytes), plan.budgetSource));
    if (plan.options.backend == Backend::Gpu)
      feedback->pushInfo(QObject::tr("On the GPU: about %1 MiB, within its budget of %2 MiB (half its %3 MiB free, at "
                                     "most the memory budget).")
                           .arg(mib(plan.gpuInMemoryBytes), mib(plan.gpuBudgetBytes), mib(plan.gpuFreeBytes)));
    return;
  }
  const bool gpu = plan.options.backend == Backend::Gpu;
  feedback->pushInfo(QObject::tr("Tile by tile: the in-memory run would need about %1 MiB; the budget is %2 MiB (%3). "
                                 "Tiles of %4 x %5 cells, %6 at a time on the CPU; GDAL's block cache held at %7 MiB.")
                       .arg(mib(plan.inMemoryBytes), mib(plan.budgetBytes), plan.budgetSource)
                       .arg(plan.options.tileWidth)
                       .arg(plan.options.tileHeight)
                       .arg(plan.options.threads)
                       .arg(mib(plan.gdalCacheBytes)));
  if (gpu)
    feedback->pushInfo(QObject::tr("On the GPU, %4 tiles at a time: the fill, the flats, the directions, the "
                                   "accumulation and the travel times (the in-memory GPU run would need about %1 MiB; "
                                   "the GPU's budget is %2 MiB, half its %3 MiB free, at most the memory budget; "
                                   "%5 MiB of it keeps the flat mask's tiles between its rounds). The raised flats and "
                                   "the bands run on the CPU.")
                         .arg(mib(plan.gpuInMemoryBytes), mib(plan.gpuBudgetBytes), mib(plan.gpuFreeBytes))
                         .arg(plan.options.gpuTiles)
                         .arg(mib(plan.options.gpuKeepBytes)));
}

void logTiledRun(const dem::tiled::TiledReport& report, int extraPasses, QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(QObject::tr("Tiled run: %1 tiles of up to %2 x %3 cells; %4 passes over the input; %5 MiB for "
                                 "the perimeter graph and %6 MiB per tile in flight.")
                       .arg(report.tiles)
                       .arg(report.tileWidth)
                       .arg(report.tileHeight)
                       .arg(report.passes + extraPasses)
                       .arg(mib(report.graphBytes))
                       .arg(mib(report.tileBytes)));
#if defined(__unix__)
  // The whole process's (QGIS's own memory and earlier runs included): what the budget is checked against.
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    feedback->pushInfo(QObject::tr("Peak resident memory of this process so far: %1 MiB.")
                         .arg(double(usage.ru_maxrss) / 1024.0, 0, 'f', 0));
#endif
}

std::string scratchParent()
{
  return QgsProcessingUtils::tempFolder().toStdString();
}

std::function<void(int, int64_t, int64_t)> roundsProgress(QgsFeedback* feedback)
{
  return [feedback](int round, int64_t done, int64_t tiles) {
    if (feedback)
      feedback->setProgress(std::min(99.0, 10.0 * (round - 1) + 10.0 * double(done) / double(tiles)));
  };
}

std::function<void(int, int64_t, int64_t)> tileProgress(QgsFeedback* feedback, int passes)
{
  return [feedback, passes](int pass, int64_t done, int64_t tiles) {
    if (feedback)
      feedback->setProgress(100.0 * (double(pass - 1) + double(done) / double(tiles)) / double(passes));
  };
}

}  // namespace gpugeo
