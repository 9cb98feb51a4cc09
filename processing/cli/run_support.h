// What every tool of the command-line program does the same way: open its input on every rank, take
// rank 0's tiles, scan the input on rank 0, write outputs on rank 0 (the workers' windows forwarded
// to it), keep intermediates in a scratch folder on a file system every rank sees, and log a tiled
// run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gdal.h>

#include "cli/cleanup_guard.h"
#include "cli/dem_commands.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "gdal/gdal_raster.h"
#include "gdal/geotiff_output.h"
#include "gdal/raster_sources.h"
#include "gdal/tiling_plan.h"

namespace gpugeo::cli {

// Opens band `band` of `path` on this rank (every rank reads the tiles it processes itself); rank 0
// logs what it found.
gdal::GdalRaster openInput(RunContext& ctx, const std::string& path, int band);

// The tiles and the device of a run: this rank's plan for the budget (gdal::planTiling, always
// tiled), its device resolved, and rank 0's tile size taken by every rank.
struct Setup
{
  gdal::TilingPlan plan;
  BackendChoice device;
  dem::tiled::TiledOptions options;  // with the cluster and this rank's threads and device
};
Setup setUp(RunContext& ctx, const gdal::GdalRaster& raster, int64_t inMemoryBytesPerCell, int64_t tileBytesPerCell,
            int64_t gpuInMemoryBytesPerCell);

// Rank 0: reads every cell of the DEM once and counts them (throws InvalidInput when none holds a
// value); logs the counts.
gdal::ElevationCounts scanElevations(RunContext& ctx, const gdal::GdalElevationSource& source, const Setup& setup);

// An output raster: on rank 0 a GeoTIFF of the input's grid whose sink converts the tools' values
// (on the workers: the sink forwarding to it, `id` on both sides), written in the run's format.
// finish() closes it (as a COG where asked); a run that fails deletes its finished outputs
// (FinishedFiles).
class FinishedFiles
{
public:
  ~FinishedFiles();
  void add(const std::string& path) { mPaths.push_back(path); }
  void keep();

private:
  std::vector<std::string> mPaths;
};

template <typename T>
class OutputRaster
{
public:
  OutputRaster(RunContext& ctx, int id, const std::string& path, const gdal::GdalRaster& like, GDALDataType type,
               std::optional<double> noData, std::function<void(const T*, int64_t, void*)> convert)
  {
    if (ctx.coordinator())
    {
      guardPath(path);
      mWriter = std::make_unique<gdal::GeoTiffWriter>(path, like, type, noData, ctx.format);
      auto sink = std::make_unique<gdal::GeoTiffSink<T>>(*mWriter, std::move(convert));
      if (ctx.cluster)
        ctx.cluster->addSink(id, *sink);
      mSink = std::move(sink);
    }
    else
      mSink = ctx.cluster->remoteSink<T>(id, like.width, like.height);
  }
  dem::tiled::RasterSink<T>& sink() { return *mSink; }
  void finish(FinishedFiles& finished)
  {
    if (mWriter)
      finished.add(mWriter->finish());
  }

private:
  std::unique_ptr<gdal::GeoTiffWriter> mWriter;
  std::unique_ptr<dem::tiled::RasterSink<T>> mSink;
};

// The run's scratch folder: made by rank 0 (under --scratch; by default the first output's folder in a
// distributed run, which the ranks share, else $TMPDIR or /tmp), its path shared with the workers,
// removed by rank 0 however the run ends.
class Scratch
{
public:
  Scratch(RunContext& ctx, const std::string& firstOutput);
  ~Scratch();
  const std::string& path() const { return mPath; }
  // A raster of the scratch folder: created by rank 0, opened by a worker when it first uses it.
  template <typename T>
  std::unique_ptr<dem::tiled::RawFileRaster<T>> raster(const std::string& name, int64_t width, int64_t height) const
  {
    return std::make_unique<dem::tiled::RawFileRaster<T>>(
      mPath + "/" + name, width, height, mFolder ? dem::tiled::RawFile::Mode::Create : dem::tiled::RawFile::Mode::Update);
  }
  int64_t bytes() const { return mFolder ? mFolder->bytes() : 0; }

private:
  std::unique_ptr<dem::tiled::ScratchFolder> mFolder;
  std::string mPath;
};

// Rank 0's log of a finished tiled run: tiles, passes, the graph's and a tile's memory, stage times.
void logTiledRun(RunContext& ctx, const dem::tiled::TiledReport& report, int passes, const StageTimes& times);

}  // namespace gpugeo::cli
