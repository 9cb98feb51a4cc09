#include "tiled_rasters.h"

#include <algorithm>

#if defined(__unix__)
#include <sys/resource.h>
#endif

#include <QObject>

#include <qgsexception.h>
#include <qgsfeedback.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingutils.h>

namespace gpugeo {

namespace {

QString mib(int64_t bytes)
{
  return QString::fromStdString(gdal::mebibytes(bytes));
}

}  // namespace

Elevations DemTileSource::scan(int64_t tile, QgsFeedback* feedback) const
{
  return {GdalElevationSource::scan(tile, tile, nullptr, feedbackControl(feedback), feedbackProgress(feedback)), {}};
}

CodeTileSource::Counts CodeTileSource::scan(QgsFeedback* feedback, uint8_t* codes) const
{
  return GdalCodeSource::scan(codes, feedbackControl(feedback), feedbackProgress(feedback));
}

TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, const DemRaster& raster, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend, int64_t gpuInMemoryBytesPerCell,
                      int64_t halo)
{
  TilingPlan plan = gdal::planTiling(budgetMiB, forceTiled, raster.width, raster.height, inMemoryBytesPerCell,
                                     tileBytesPerCell, threads, backend, gpuInMemoryBytesPerCell, halo);
  if (budgetMiB > 0)
    plan.budgetSource = "MEMORY_BUDGET";
  if (plan.fits)
    return plan;
  if (plan.neededBytes == 0)
    throw QgsProcessingException(
      QObject::tr("The GPU's budget of %1 MiB (half its %2 MiB free, at most the memory budget) cannot hold even a "
                  "tile of 16 x 16 cells; run it on the CPU (DEVICE=1).")
        .arg(mib(plan.gpuBudgetBytes))
        .arg(mib(plan.gpuFreeBytes)));
  throw QgsProcessingException(
    QObject::tr("A memory budget of %1 MiB cannot hold even tiles of 16 x 16 cells (%2 threads) with the graph of "
                "their perimeters over this DEM of %3 x %4 cells: that needs %5 MiB. Raise MEMORY_BUDGET.")
      .arg(mib(plan.budgetBytes))
      .arg(std::max(1, threads))
      .arg(raster.width)
      .arg(raster.height)
      .arg(mib(plan.neededBytes)));
}

void logTilingPlan(const TilingPlan& plan, QgsProcessingFeedback* feedback)
{
  if (!plan.tiled)
  {
    feedback->pushInfo(QObject::tr("In memory: the run needs about %1 MiB, within the budget of %2 MiB (%3).")
                         .arg(mib(plan.inMemoryBytes), mib(plan.budgetBytes),
                              QString::fromStdString(plan.budgetSource)));
    if (plan.options.backend == Backend::Gpu)
      feedback->pushInfo(QObject::tr("On the GPU: about %1 MiB, within its budget of %2 MiB (half its %3 MiB free, at "
                                     "most the memory budget).")
                           .arg(mib(plan.gpuInMemoryBytes), mib(plan.gpuBudgetBytes), mib(plan.gpuFreeBytes)));
    return;
  }
  const bool gpu = plan.options.backend == Backend::Gpu;
  feedback->pushInfo(QObject::tr("Tile by tile: the in-memory run would need about %1 MiB; the budget is %2 MiB (%3). "
                                 "Tiles of %4 x %5 cells, %6 at a time on the CPU; GDAL's block cache held at %7 MiB.")
                       .arg(mib(plan.inMemoryBytes), mib(plan.budgetBytes), QString::fromStdString(plan.budgetSource))
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
