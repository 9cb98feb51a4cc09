// gpugeo:isochrones tile by tile (dem/tiled): the chain's rasters (filled, flat mask, directions,
// accumulation, travel times) in raw files of a scratch folder, each stage reading the one before
// window by window; the optional outputs written as their stage makes them, the travel times as the
// bands are traced.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>

#include "adapters/number_text.h"
#include "adapters/tiled_rasters.h"
#include "core/errors.h"
#include "dem/detail/dem_cuda.h"
#include "dem/isochrone_chain.h"
#include "dem/tiled/tiled_dem.h"
#include "flowdirection_algorithm.h"
#include "isochrones_algorithm.h"

namespace gpugeo {

namespace {

// A GeoTIFF output of the chain (when asked for): its writer and its sink.
template <typename T>
struct OptionalOutput
{
  std::unique_ptr<GeoTiffWriter> writer;
  std::unique_ptr<TiffTileSink<T>> sink;

  OptionalOutput(const QString& path, const DemRaster& raster, GDALDataType type, double noData,
                 std::function<void(const T*, int64_t, void*)> convert)
  {
    if (path.isEmpty())
      return;
    writer = demRasterWriter(path, raster, type, noData);
    sink = std::make_unique<TiffTileSink<T>>(*writer, std::move(convert));
  }
  void finish(FinishedRasters& finished)
  {
    if (writer)
      finishDemRaster(std::move(writer), finished);
  }
};

// One tiled run of the chain: the scratch folder and its rasters (each dropped once no later stage
// reads it), the tiles' options, the progress over the run's steps and the log's totals. Each stage
// reads the rasters of the stages before and writes its own, and its output when asked for.
class TiledChain
{
  static constexpr double kTimeNoData = IsochronesAlgorithm::kTimeNoData;
  static constexpr int32_t kCellsNoData = IsochronesAlgorithm::kCellsNoData;

public:
  TiledChain(const DemRaster& raster, const TilingPlan& plan, const RunControl& control,
             QgsProcessingMultiStepFeedback& steps, QgsProcessingFeedback* feedback, StageTimes& times,
             FinishedRasters& finished)
    : mRaster(raster),
      mRows{raster.cellWidth, raster.cellHeight},
      mOptions(plan.options),
      mControl(control),
      mSteps(steps),
      mFeedback(feedback),
      mTimes(times),
      mFinished(finished),
      mScratch(scratchParent()),
      mFolder(mScratch.path())
  {
  }

  // The filled DEM (FILLED too, when `path` is given); returns the cells the fill raised.
  int64_t fill(const DemTileSource& source, const QString& path, float noData)
  {
    begin(1, QObject::tr("Filling depressions tile by tile"));
    mFilled = raw<float>("filled.f32");
    OptionalOutput<float> output(path, mRaster, GDT_Float32, double(noData), nanAsNoData(noData));
    dem::tiled::TeeSink<float> sink(*mFilled, output.sink.get());
    int64_t raised = 0;
    std::mutex counting;
    const auto observe = [&](const dem::tiled::Window& t, const float* z, const float* f) {
      int64_t mine = 0;
      for (int64_t i = 0; i < t.cells(); ++i)
        mine += f[i] > z[i];
      std::lock_guard<std::mutex> lock(counting);
      raised += mine;
    };
    mOptions.onTile = tileProgress(&mSteps, 2);
    dem::tiled::TiledReport report;
    dem::tiled::fillTiled(source, mRows, sink, mOptions, mControl, &report, observe);
    finish(report, output);
    return raised;
  }

  // The flat mask (then dropped) and the D8 directions through it (FLOWDIR too, when `path` is given).
  void directions(const QString& path)
  {
    begin(2, QObject::tr("Resolving flats and computing flow directions tile by tile"));
    mDirections = raw<uint8_t>("directions.u8");
    auto mask = raw<int32_t>("flat_mask.i32");
    mOptions.onTile = roundsProgress(&mSteps);
    dem::tiled::TiledReport flats;
    dem::tiled::flatMaskTiled(*mFilled, mRows, *mask, dem::FlatGradient::Combined, mFolder, mOptions, mControl,
                              &flats);
    add(flats);
    OptionalOutput<uint8_t> output(path, mRaster, GDT_Byte, 255.0, [](const uint8_t* in, int64_t count, void* buffer) {
      uint8_t* out = static_cast<uint8_t*>(buffer);
      for (int64_t i = 0; i < count; ++i)
        out[i] = FlowDirectionAlgorithm::encode(in[i], FlowDirectionAlgorithm::Esri);
    });
    dem::tiled::TeeSink<uint8_t> sink(*mDirections, output.sink.get());
    mOptions.onTile = tileProgress(&mSteps, 1);
    dem::tiled::TiledReport report;
    dem::tiled::directionsTiled(*mFilled, mRows, sink, mOptions, mControl, &report, mask.get());
    finish(report, output);
    drop(mask, "flat_mask.i32");
  }

  // The accumulated area, and the counts when an outlet point is to be snapped to them (the automatic
  // outlet's count is in the summary); ACCUMULATION too, when `path` is given.
  dem::tiled::AccumulationSummary accumulation(bool keepCells, const QString& path)
  {
    begin(3, QObject::tr("Accumulating flow tile by tile"));
    if (keepCells)
      mCells = raw<int64_t>("cells.i64");
    mArea = raw<int64_t>("area.i64");
    // Counts past Int32 (DEMs of more than 2^31 cells) are written as Float64, exact to 2^53.
    const bool wide = mRaster.width * mRaster.height > int64_t(std::numeric_limits<int32_t>::max());
    const GDALDataType type = wide ? GDT_Float64 : GDT_Int32;
    OptionalOutput<int64_t> output(path, mRaster, type, double(kCellsNoData),
                                   [wide](const int64_t* in, int64_t count, void* buffer) {
                                     for (int64_t i = 0; i < count; ++i)
                                       if (wide)
                                         static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : kCellsNoData;
                                       else
                                         static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : kCellsNoData;
                                   });
    dem::tiled::DiscardSink<int64_t> noCells;  // no outlet point is snapped to the counts
    dem::tiled::TeeSink<int64_t> sink(mCells ? static_cast<dem::tiled::RasterSink<int64_t>&>(*mCells) : noCells,
                          output.sink.get());
    mOptions.onTile = tileProgress(&mSteps, 2);
    dem::tiled::TiledReport report;
    const dem::tiled::AccumulationSummary summary =
      dem::tiled::accumulationTiled(*mDirections, mRows, sink, *mArea, mOptions, mControl, &report);
    finish(report, output);
    return summary;
  }

  // The cell of highest count within `radius` of (x, y), and its count; the counts are dropped.
  std::pair<int64_t, int64_t> snapOutlet(int64_t x, int64_t y, double radius)
  {
    const int64_t outlet =
      dem::tiled::snapOutletTiled(*mFilled, mCells.get(), mRows, x, y, radius, mOptions.tileWidth);
    int64_t count = 0;
    if (outlet >= 0)
      mCells->read(dem::tiled::Window{outlet % mRaster.width, outlet / mRaster.width, 1, 1}, &count);
    drop(mCells, "cells.i64");
    return {outlet, count};
  }

  // The travel times to `outlet`; the filled DEM, the directions and the area are dropped after.
  dem::tiled::TravelSummary travelTimes(const DemTileSource* manning, int64_t outlet, const dem::VelocityModel& model)
  {
    begin(4, QObject::tr("Computing travel times tile by tile"));
    mMinutes = raw<double>("minutes.f64");
    mOptions.onTile = tileProgress(&mSteps, 2);
    dem::tiled::TiledReport report;
    const dem::tiled::TravelSummary travel = dem::tiled::travelTimeTiled(
      *mFilled, *mDirections, *mArea, manning, mRows, outlet, model, *mMinutes, mOptions, mControl, &report);
    add(report);
    drop(mFilled, "filled.f32");
    drop(mDirections, "directions.u8");
    drop(mArea, "area.i64");
    return travel;
  }

  // The bands of `interval` minutes and their polygons (each band to `onBand` as traced, when given);
  // the travel times written to TRAVEL_TIME on the way.
  dem::tiled::TiledBands bands(double interval, int32_t count, const QString& timePath,
                               const dem::tiled::BandObserver& onBand, const std::vector<uint8_t>& tilesWithTimes)
  {
    begin(5, QObject::tr("Tracing the watershed and the isochrones tile by tile"));
    std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(timePath, mRaster, GDT_Float64, kTimeNoData);
    TiffTileSink<double> sink(*writer, nanAsNoData(kTimeNoData));
    mOptions.onTile = tileProgress(&mSteps, 1);
    dem::tiled::TiledReport report;
    dem::tiled::TiledBands traced =
      dem::tiled::bandsTiled(*mMinutes, mRows, interval, count, &sink, mOptions, mControl, &report, onBand,
                             &tilesWithTimes);
    add(report);
    ScopedStage stage(mTimes, "write (finish)");
    finishDemRaster(std::move(writer), mFinished);
    return traced;
  }

  // The log: the scratch space, the tiles, the passes, the graph and tile memory.
  void log() const
  {
    mFeedback->pushInfo(QObject::tr("Scratch space: %1 MiB at most, in %2 (removed when the run ends).")
                          .arg(double(std::max(mScratchPeak, mScratch.bytes())) / 1048576.0, 0, 'f', 0)
                          .arg(QString::fromStdString(mFolder)));
    logTiledRun(mTotals, mPasses, mFeedback);
  }

private:
  template <typename T>
  std::unique_ptr<dem::tiled::RawFileRaster<T>> raw(const char* name) const
  {
    return std::make_unique<dem::tiled::RawFileRaster<T>>(mFolder + "/" + name, mRaster.width, mRaster.height);
  }
  template <typename T>
  void drop(std::unique_ptr<dem::tiled::RawFileRaster<T>>& raster, const char* name) const
  {
    if (!raster)
      return;
    raster.reset();
    std::filesystem::remove(mFolder + "/" + name);  // its disk space for the stages after
  }
  void begin(int step, const QString& text)
  {
    mSteps.setCurrentStep(step);
    mFeedback->setProgressText(text);
  }
  void add(const dem::tiled::TiledReport& report)
  {
    mScratchPeak = std::max(mScratchPeak, mScratch.bytes());
    mTimes.merge(report.times);
    mPasses += report.passes;
    mTotals.tileWidth = report.tileWidth;
    mTotals.tileHeight = report.tileHeight;
    mTotals.tiles = report.tiles;
    mTotals.graphBytes = std::max(mTotals.graphBytes, report.graphBytes);
    mTotals.tileBytes = std::max(mTotals.tileBytes, report.tileBytes);
  }
  template <typename T>
  void finish(const dem::tiled::TiledReport& report, OptionalOutput<T>& output)
  {
    add(report);
    output.finish(mFinished);
  }

  const DemRaster& mRaster;
  const dem::tiled::RowSizes mRows;
  dem::tiled::TiledOptions mOptions;
  const RunControl mControl;
  QgsProcessingMultiStepFeedback& mSteps;
  QgsProcessingFeedback* mFeedback;
  StageTimes& mTimes;
  FinishedRasters& mFinished;
  dem::tiled::ScratchFolder mScratch;
  const std::string mFolder;
  std::unique_ptr<dem::tiled::RawFileRaster<float>> mFilled;
  std::unique_ptr<dem::tiled::RawFileRaster<uint8_t>> mDirections;
  std::unique_ptr<dem::tiled::RawFileRaster<int64_t>> mCells, mArea;
  std::unique_ptr<dem::tiled::RawFileRaster<double>> mMinutes;
  dem::tiled::TiledReport mTotals;  // the largest graph and tile of the stages
  int mPasses = 1;                  // the count (DemTileSource::scan)
  int64_t mScratchPeak = 0;         // disk space in the scratch folder after each stage
};

}  // namespace

IsochronesAlgorithm::Outcome IsochronesAlgorithm::executeTiled(const Request& request, const DemRaster& raster,
                                                               const TilingPlan& plan, const QVariantMap& parameters,
                                                               QgsProcessingContext& context,
                                                               QgsProcessingFeedback* feedback, StageTimes& times,
                                                               FinishedRasters& finished)
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(7, feedback);
  Outcome outcome;

  // --- Read: the DEM's counts; the Manning raster; the outlet point checked against the data ---------
  feedback->setProgressText(QObject::tr("Reading the DEM (counting its cells)"));
  DemTileSource source(raster);
  Elevations counts;
  {
    ScopedStage stage(times, "read (counts)");
    counts = source.scan(plan.options.tileWidth, &steps);
  }
  reportElevations(raster, counts, feedback);
  outcome.validCells = counts.valid;
  if (counts.valid == 0)
    throw QgsProcessingException(QObject::tr("The DEM has no valid cell: all %1 cells of band %2 are nodata.")
                                   .arg(raster.width * raster.height)
                                   .arg(raster.band));
  std::unique_ptr<DemTileSource> manning;
  if (const std::optional<DemRaster> n = openManning(request, raster, feedback))
  {
    manning = std::make_unique<DemTileSource>(*n);
    feedback->pushInfo(QObject::tr("Manning's n from %1; DEM cells without a valid n (nodata, or not above 0) use "
                                   "MANNING_OVERLAND = %2.")
                         .arg(mManningSource.gdalName, number(request.model.overlandN)));
  }
  const dem::tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  if (request.outletCell &&
      dem::tiled::snapOutletTiled(source, nullptr, rows, request.outletCell->first, request.outletCell->second,
                                  request.snapDistance, plan.options.tileWidth) < 0)
    throw QgsProcessingException(outletOffDataError(request));
  dem::validateModel(request.model);

  // --- The chain, stage by stage through the scratch folder ----------------------------------------
  TiledChain chain(raster, plan, runControl(feedback), steps, feedback, times, finished);
  outcome.raisedCells = chain.fill(source, request.filledPath, filledNoData(raster, counts.roundedToNoData));
  chain.directions(request.directionPath);
  const dem::tiled::AccumulationSummary summary =
    chain.accumulation(request.outletCell.has_value(), request.accumulationPath);
  if (request.outletCell)
    std::tie(outcome.outlet, outcome.outletCells) =
      chain.snapOutlet(request.outletCell->first, request.outletCell->second, request.snapDistance);
  else
    std::tie(outcome.outlet, outcome.outletCells) = std::make_pair(summary.largestCell, summary.largestCells);
  if (outcome.outlet < 0)
    throw QgsProcessingException(QObject::tr("The DEM has no valid cell to be an outlet."));
  const dem::tiled::TravelSummary travel = chain.travelTimes(manning.get(), outcome.outlet, request.model);
  outcome.watershedCells = travel.watershedCells;
  outcome.watershedArea = travel.watershedArea;
  outcome.minSpeed = travel.minSpeed;
  outcome.maxSpeed = travel.maxSpeed;
  outcome.minTime = travel.minTime;
  outcome.maxTime = travel.maxTime;

  // --- The bands: ISOCHRONES written band by band as each is traced (a few bands' polygons in memory
  // at a time), TRAVEL_TIME on the way (the tiles without a time not read) -------------------------
  dem::ChainOptions bandOptions;
  bandOptions.interval = request.interval;
  bandOptions.maxBands = kMaxBands;
  outcome.bands = dem::detail::chainBandCount(outcome.maxTime, bandOptions, outcome.interval);
  std::unique_ptr<BandWriter> bandWriter;
  dem::tiled::BandObserver onBand;
  if (request.wantIsochrones)
  {
    bandWriter = std::make_unique<BandWriter>(*this, parameters, context, raster);
    onBand = [&](int32_t band, int64_t cells, double area, BandPolygons& polygons) {
      if (feedback->isCanceled())
        throw Canceled();
      if (band == 0)
        cache.shrink(16 * 1024 * 1024);  // the rasters are written: the polygons need no block cache
      bandWriter->writeAndFree(band, outcome.interval, cells, area, polygons);
    };
  }
  returnFreedMemory();  // the earlier stages' graphs and tiles, before the bands' pieces
  dem::tiled::TiledBands traced =
    chain.bands(outcome.interval, outcome.bands, request.timePath, onBand, travel.tilesWithTimes);
  if (bandWriter)
    outcome.isochronesId = bandWriter->id();
  outcome.bandCells = std::move(traced.bandCells);
  outcome.bandArea = std::move(traced.bandArea);
  outcome.bandPolygons = std::move(traced.bands);
  outcome.watershed = std::move(traced.watershed);
  chain.log();
  return outcome;
}

}  // namespace gpugeo
