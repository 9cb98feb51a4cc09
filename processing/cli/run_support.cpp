#include "cli/run_support.h"

#include <cstdlib>
#include <filesystem>

#include "core/errors.h"
#include "core/parallel.h"

namespace gpugeo::cli {

gdal::GdalRaster openInput(RunContext& ctx, const std::string& path, int band)
{
  gdal::GdalRaster raster = ctx.crs.empty() ? gdal::openGdalRaster(path, band) : gdal::openGdalRaster(path, band, ctx.crs);
  ctx.report.info(path + ", band " + std::to_string(band) + ": " + std::to_string(raster.width) + " x " +
                  std::to_string(raster.height) + " cells; " + raster.cellSizeNote);
  for (const std::string& w : raster.warnings)
    ctx.report.warning(w);
  return raster;
}

Setup setUp(RunContext& ctx, const gdal::GdalRaster& raster, int64_t inMemoryBytesPerCell, int64_t tileBytesPerCell,
            int64_t gpuInMemoryBytesPerCell)
{
  Setup s;
  const int threads = ctx.threads > 0 ? ctx.threads : defaultThreadCount();
  // Rank 0 hands the tiles out and writes: only the workers of a distributed run need a device.
  const bool works = !ctx.cluster || !ctx.cluster->distributed() || !ctx.coordinator();
  s.device = works ? resolveBackend(ctx.device, threads) : resolveBackend(Backend::Cpu, threads);
  s.plan = gdal::planTiling(ctx.budgetMiB, true, raster.width, raster.height, inMemoryBytesPerCell, tileBytesPerCell,
                            threads, s.device.backend, gpuInMemoryBytesPerCell);
  if (!s.plan.fits && ctx.tileSide <= 0)
    throw InvalidInput("the memory budget of " + gdal::mebibytes(s.plan.budgetBytes) +
                       " MiB cannot hold even tiles of 16 x 16 cells; it needs about " +
                       gdal::mebibytes(s.plan.neededBytes) + " MiB (--memory-budget)");
  s.options = s.plan.options;
  if (ctx.tileSide > 0)
  {
    s.options.tileWidth = s.options.tileHeight = ctx.tileSide;
    s.options.hostKeepBytes = 0;  // the plan's leftover was for its own tiles
  }
  // Every rank cuts the DEM into rank 0's tiles.
  if (ctx.cluster)
    ctx.cluster->share([&](dem::tiled::Archive& a) {
      a.value(s.options.tileWidth);
      a.value(s.options.tileHeight);
    });
  s.options.threads = threads;
  s.options.backend = s.device.backend;
  s.options.cluster = ctx.cluster;
  // A GPU worker's tiles in flight on the device and the flat mask's kept tiles, for rank 0's tile
  // side (the plan sized them for its own).
  if (s.device.backend == Backend::Gpu && s.plan.gpuBudgetBytes > 0)
    gdal::shareGpuBudget(s.plan.gpuBudgetBytes, threads, s.options);
  const int ranks = ctx.cluster ? ctx.cluster->size() : 1;
  ctx.report.info("Tiles of " + std::to_string(s.options.tileWidth) + " x " + std::to_string(s.options.tileHeight) +
                  " cells; memory budget " + gdal::mebibytes(s.plan.budgetBytes) + " MiB (" + s.plan.budgetSource +
                  ") per rank; " +
                  (ranks > 1 ? std::to_string(ranks - 1) + " worker rank(s) besides rank 0, each with " +
                                 std::to_string(threads) + " tile(s) at once"
                             : std::to_string(threads) + " tile(s) at once on " +
                                 (s.device.backend == Backend::Gpu ? "the GPU (" + s.device.deviceName + ")"
                                                                   : std::string("the CPU"))) +
                  ".");
  if (!s.device.note.empty())
    ctx.report.info(s.device.note);
  return s;
}

gdal::ElevationCounts scanElevations(RunContext& ctx, const gdal::GdalElevationSource& source, const Setup& setup)
{
  const gdal::ElevationCounts counts =
    source.scan(setup.options.tileWidth, setup.options.tileHeight, nullptr, ctx.control,
                [&](double fraction) { ctx.report.progress(fraction); });
  if (counts.valid == 0)
    throw InvalidInput("the DEM has no cell with a value");
  ctx.report.info(std::to_string(counts.valid) + " cells hold an elevation, from " + gdal::numberText(counts.minimum) +
                  " to " + gdal::numberText(counts.maximum) + ".");
  if (counts.notFinite > 0)
    ctx.report.warning(std::to_string(counts.notFinite) +
                       " cells hold infinite values or values beyond float32: they are taken as nodata.");
  return counts;
}

FinishedFiles::~FinishedFiles()
{
  for (const std::string& path : mPaths)
    gdal::deleteGeoTiff(path);
}

void FinishedFiles::keep()
{
  for (const std::string& path : mPaths)
    releasePath(path);
  mPaths.clear();
}

Scratch::Scratch(RunContext& ctx, const std::string& firstOutput)
{
  if (ctx.coordinator())
  {
    std::string parent = ctx.scratchParent;
    if (parent.empty() && ctx.cluster && ctx.cluster->distributed())
      parent = std::filesystem::absolute(firstOutput).parent_path().string();
    if (parent.empty())
      parent = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    mFolder = std::make_unique<dem::tiled::ScratchFolder>(parent);
    mPath = mFolder->path();
    guardPath(mPath);
  }
  if (ctx.cluster)
    ctx.cluster->share([&](dem::tiled::Archive& a) { a.string(mPath); });
}

Scratch::~Scratch()
{
  if (!mFolder)
    return;
  mFolder.reset();
  releasePath(mPath);
}

void logTiledRun(RunContext& ctx, const dem::tiled::TiledReport& report, int passes, const StageTimes& times)
{
  ctx.report.info(std::to_string(report.tiles) + " tiles of " + std::to_string(report.tileWidth) + " x " +
                  std::to_string(report.tileHeight) + " cells, " + std::to_string(passes) +
                  " passes over the DEM; the perimeters' graph held " + gdal::mebibytes(report.graphBytes) +
                  " MiB, a tile in flight " + gdal::mebibytes(report.tileBytes) + " MiB.");
  std::string line;
  for (const auto& [stage, ms] : times.entries())
    line += (line.empty() ? "" : "; ") + stage + " " + gdal::numberText(ms / 1000.0) + " s";
  ctx.report.info("Stage times: " + line + ".");
}

}  // namespace gpugeo::cli
