// GDAL behind the tiled DEM tools (native/dem/tiled) in QGIS: the GDAL layer's window sources
// (gdal/raster_sources.h) with scans that report to a QgsFeedback, its GeoTIFF sinks and memory plan
// (gdal/geotiff_output.h, gdal/tiling_plan.h) under the names the algorithms use, and the log lines
// and progress of a tiled run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "adapters/dem_reader.h"
#include "adapters/geotiff_writer.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "gdal/geotiff_output.h"
#include "gdal/raster_sources.h"
#include "gdal/tiling_plan.h"

class QgsProcessingFeedback;

namespace gpugeo {

using gdal::GdalCacheLimit;
using gdal::nanAsNoData;
using gdal::returnFreedMemory;
using gdal::TilingPlan;
template <typename T>
using TiffTileSink = gdal::GeoTiffSink<T>;

// A DEM band (openDemRaster) as float32 elevations, window by window (gdal::GdalElevationSource:
// readElevations's rules, bit for bit). scan() reads every window once first and counts the cells.
class DemTileSource : public gdal::GdalElevationSource
{
public:
  using gdal::GdalElevationSource::GdalElevationSource;
  // Reads the whole band in windows of `tile` cells a side (cancel and progress on `feedback`) and
  // returns its counts, minimum and maximum, in an Elevations without z.
  Elevations scan(int64_t tile, QgsFeedback* feedback) const;
};

// A band of codes (flow directions) read window by window and decoded (gdal::GdalCodeSource). scan()
// reads every cell (into `codes`, width x height, when not null) and counts the valid cells and the
// values the table lacks (the first of them, and whether they all fit the other table).
class CodeTileSource : public gdal::GdalCodeSource
{
public:
  using gdal::GdalCodeSource::GdalCodeSource;
  Counts scan(QgsFeedback* feedback, uint8_t* codes = nullptr) const;
};

// gdal::planTiling over the DEM, refusing with a QgsProcessingException what does not fit: not even
// 16 x 16 tiles within the budget (naming the budget needed), or not one on the GPU.
TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, const DemRaster& raster, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend = Backend::Cpu,
                      int64_t gpuInMemoryBytesPerCell = 0, int64_t halo = 1);

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
