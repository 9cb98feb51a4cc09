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

// Writes each window to a scratch raster and, when asked for, to an output too.
template <typename T>
class TeeSink : public dem::tiled::RasterSink<T>
{
public:
  TeeSink(dem::tiled::RasterSink<T>& scratch, dem::tiled::RasterSink<T>* output) : mScratch(scratch), mOutput(output) {}
  void write(const dem::tiled::Window& window, const T* in) override
  {
    mScratch.write(window, in);
    if (mOutput)
      mOutput->write(window, in);
  }

private:
  dem::tiled::RasterSink<T>& mScratch;
  dem::tiled::RasterSink<T>* mOutput;
};

// A sink that keeps nothing (the counts, when no outlet point is snapped to them).
class DiscardSink : public dem::tiled::RasterSink<int64_t>
{
public:
  void write(const dem::tiled::Window&, const int64_t*) override {}
};

// Closes a scratch raster and removes its file: its disk space for the stages after.
template <typename T>
void drop(std::unique_ptr<dem::tiled::RawFileRaster<T>>& raster, const std::string& path)
{
  if (!raster)
    return;
  raster.reset();
  std::filesystem::remove(path);
}

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
    sink = std::make_unique<TiffTileSink<T>>(*writer, type, std::move(convert));
  }
  void finish(const DemRaster& raster, FinishedRasters& finished)
  {
    if (writer)
      finishDemRaster(std::move(writer), raster, finished);
  }
};

}  // namespace

IsochronesAlgorithm::Outcome IsochronesAlgorithm::executeTiled(const Request& request, const DemRaster& raster,
                                                               const TilingPlan& plan, const QVariantMap& parameters,
                                                               QgsProcessingContext& context,
                                                               QgsProcessingFeedback* feedback, StageTimes& times,
                                                               FinishedRasters& finished)
{
  namespace tiled = dem::tiled;
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(7, feedback);
  const int64_t w = raster.width, h = raster.height;
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
                                   .arg(w * h)
                                   .arg(raster.band));
  std::unique_ptr<DemTileSource> manning;
  if (const std::optional<DemRaster> n = openManning(request, raster, feedback))
  {
    manning = std::make_unique<DemTileSource>(*n);
    feedback->pushInfo(QObject::tr("Manning's n from %1; DEM cells without a valid n (nodata, or not above 0) use "
                                   "MANNING_OVERLAND = %2.")
                         .arg(mManningSource.gdalName, number(request.model.overlandN)));
  }
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  const int64_t side = plan.options.tileWidth;
  if (request.outletCell &&
      tiled::snapOutletTiled(source, nullptr, rows, request.outletCell->first, request.outletCell->second,
                             request.snapDistance, side) < 0)
    throw QgsProcessingException(outletOffDataError(request));
  dem::validateModel(request.model);

  const RunControl control = runControl(feedback);
  tiled::TiledOptions options = plan.options;
  tiled::ScratchFolder scratch(scratchParent());
  const std::string folder = scratch.path();
  tiled::TiledReport largest;  // the largest graph and tile of the stages, for the log
  int passes = 1;              // the count
  int64_t scratchPeak = 0;  // disk space held in the scratch folder after each stage
  const auto merge = [&](const tiled::TiledReport& report) {
    scratchPeak = std::max(scratchPeak, scratch.bytes());
    times.merge(report.times);
    passes += report.passes;
    largest.tileWidth = report.tileWidth;
    largest.tileHeight = report.tileHeight;
    largest.tiles = report.tiles;
    largest.graphBytes = std::max(largest.graphBytes, report.graphBytes);
    largest.tileBytes = std::max(largest.tileBytes, report.tileBytes);
  };

  // --- Fill (with the raised cells counted), into the scratch folder and FILLED ----------------------
  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Filling depressions tile by tile"));
  const std::string filledPath = folder + "/filled.f32", directionsPath = folder + "/directions.u8",
                    cellsPath = folder + "/cells.i64", areaPath = folder + "/area.i64";
  auto filled = std::make_unique<tiled::RawFileRaster<float>>(filledPath, w, h);
  {
    const float noData = filledNoData(raster, counts.roundedToNoData);
    OptionalOutput<float> output(request.filledPath, raster, GDT_Float32, double(noData),
                                 [noData](const float* in, int64_t count, void* buffer) {
                                   float* out = static_cast<float*>(buffer);
                                   for (int64_t i = 0; i < count; ++i)
                                     out[i] = std::isnan(in[i]) ? noData : in[i];
                                 });
    TeeSink<float> sink(*filled, output.sink.get());
    std::mutex counting;
    const auto observe = [&](const tiled::Window& t, const float* z, const float* f) {
      int64_t raised = 0;
      for (int64_t i = 0; i < t.cells(); ++i)
        raised += f[i] > z[i];
      std::lock_guard<std::mutex> lock(counting);
      outcome.raisedCells += raised;
    };
    options.onTile = tileProgress(&steps, 2);
    tiled::TiledReport report;
    tiled::fillTiled(source, rows, sink, options, control, &report, observe);
    merge(report);
    output.finish(raster, finished);
  }

  // --- Flats and D8 directions, into the scratch folder and FLOWDIR ---------------------------------
  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Resolving flats and computing flow directions tile by tile"));
  auto directions = std::make_unique<tiled::RawFileRaster<uint8_t>>(directionsPath, w, h);
  const std::string maskPath = folder + "/flat_mask.i32";
  {
    tiled::RawFileRaster<int32_t> mask(maskPath, w, h);
    options.onTile = roundsProgress(&steps);
    tiled::TiledReport flats;
    tiled::flatMaskTiled(*filled, rows, mask, dem::FlatGradient::Combined, folder, options, control, &flats);
    merge(flats);
    OptionalOutput<uint8_t> output(request.directionPath, raster, GDT_Byte, 255.0,
                                   [](const uint8_t* in, int64_t count, void* buffer) {
                                     uint8_t* out = static_cast<uint8_t*>(buffer);
                                     for (int64_t i = 0; i < count; ++i)
                                       out[i] = FlowDirectionAlgorithm::encode(in[i], FlowDirectionAlgorithm::Esri);
                                   });
    TeeSink<uint8_t> sink(*directions, output.sink.get());
    options.onTile = tileProgress(&steps, 1);
    tiled::TiledReport report;
    tiled::directionsTiled(*filled, rows, sink, options, control, &report, &mask);
    merge(report);
    output.finish(raster, finished);
  }
  std::filesystem::remove(maskPath);  // the mask's disk space for the stages after

  // --- Accumulation, into the scratch folder and ACCUMULATION ----------------------------------------
  steps.setCurrentStep(3);
  feedback->setProgressText(QObject::tr("Accumulating flow tile by tile"));
  // The counts are kept only for an outlet point to be snapped to (the automatic outlet's count is the
  // accumulation's summary).
  std::unique_ptr<tiled::RawFileRaster<int64_t>> cells;
  if (request.outletCell)
    cells = std::make_unique<tiled::RawFileRaster<int64_t>>(cellsPath, w, h);
  auto area = std::make_unique<tiled::RawFileRaster<int64_t>>(areaPath, w, h);
  DiscardSink noCells;
  tiled::AccumulationSummary summary;
  {
    // Counts past Int32 (DEMs of more than 2^31 cells) are written as Float64, exact to 2^53.
    const bool wide = w * h > int64_t(std::numeric_limits<int32_t>::max());
    const GDALDataType type = wide ? GDT_Float64 : GDT_Int32;
    OptionalOutput<int64_t> output(request.accumulationPath, raster, type, double(kCellsNoData),
                                   [wide](const int64_t* in, int64_t count, void* buffer) {
                                     for (int64_t i = 0; i < count; ++i)
                                       if (wide)
                                         static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : kCellsNoData;
                                       else
                                         static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : kCellsNoData;
                                   });
    TeeSink<int64_t> sink(cells ? static_cast<tiled::RasterSink<int64_t>&>(*cells) : noCells, output.sink.get());
    options.onTile = tileProgress(&steps, 2);
    tiled::TiledReport report;
    summary = tiled::accumulationTiled(*directions, rows, sink, *area, options, control, &report);
    merge(report);
    output.finish(raster, finished);
  }

  // --- The outlet and the travel times, into the scratch folder --------------------------------------
  steps.setCurrentStep(4);
  feedback->setProgressText(QObject::tr("Computing travel times tile by tile"));
  outcome.outlet = cells ? tiled::snapOutletTiled(*filled, cells.get(), rows, request.outletCell->first,
                                                  request.outletCell->second, request.snapDistance, side)
                         : summary.largestCell;
  if (outcome.outlet < 0)
    throw QgsProcessingException(QObject::tr("The DEM has no valid cell to be an outlet."));
  if (cells)
    cells->read(tiled::Window{outcome.outlet % w, outcome.outlet / w, 1, 1}, &outcome.outletCells);
  else
    outcome.outletCells = summary.largestCells;
  drop(cells, cellsPath);
  tiled::RawFileRaster<double> minutes(folder + "/minutes.f64", w, h);
  {
    options.onTile = tileProgress(&steps, 2);
    tiled::TiledReport report;
    const tiled::TravelSummary travel = tiled::travelTimeTiled(*filled, *directions, *area, manning.get(), rows,
                                                               outcome.outlet, request.model, minutes, options,
                                                               control, &report);
    merge(report);
    outcome.watershedCells = travel.watershedCells;
    outcome.watershedArea = travel.watershedArea;
    outcome.minSpeed = travel.minSpeed;
    outcome.maxSpeed = travel.maxSpeed;
    outcome.minTime = travel.minTime;
    outcome.maxTime = travel.maxTime;
  }
  drop(filled, filledPath);
  drop(directions, directionsPath);
  drop(area, areaPath);

  // --- The bands and their polygons; the travel times written to TRAVEL_TIME on the way ------------
  steps.setCurrentStep(5);
  feedback->setProgressText(QObject::tr("Tracing the watershed and the isochrones tile by tile"));
  dem::ChainOptions bandOptions;
  bandOptions.interval = request.interval;
  bandOptions.maxBands = kMaxBands;
  outcome.bands = dem::detail::chainBandCount(outcome.maxTime, bandOptions, outcome.interval);
  {
    std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(request.timePath, raster, GDT_Float64, kTimeNoData);
    TiffTileSink<double> sink(*writer, GDT_Float64, [](const double* in, int64_t count, void* buffer) {
      double* out = static_cast<double*>(buffer);
      for (int64_t i = 0; i < count; ++i)
        out[i] = std::isnan(in[i]) ? kTimeNoData : in[i];
    });
    options.onTile = tileProgress(&steps, 1);
    // ISOCHRONES band by band as each is traced: one band's polygons in memory at a time.
    std::unique_ptr<BandWriter> bandWriter;
    if (request.wantIsochrones)
      bandWriter = std::make_unique<BandWriter>(*this, parameters, context, raster);
    tiled::BandObserver onBand;
    if (bandWriter)
      onBand = [&](int32_t band, int64_t cells, double area, const BandPolygons& polygons) {
        if (feedback->isCanceled())
          throw Canceled();
        bandWriter->write(band, outcome.interval, cells, area, polygons, 0);
      };
    tiled::TiledReport report;
    tiled::TiledBands traced = tiled::bandsTiled(minutes, rows, outcome.interval, outcome.bands, &sink, options,
                                                 control, &report, onBand);
    if (bandWriter)
      outcome.isochronesId = bandWriter->id();
    merge(report);
    {
      ScopedStage stage(times, "write (finish)");
      finishDemRaster(std::move(writer), raster, finished);
    }
    outcome.bandCells = std::move(traced.bandCells);
    outcome.bandArea = std::move(traced.bandArea);
    outcome.bandPolygons = std::move(traced.bands);
    outcome.watershed = std::move(traced.watershed);
  }
  feedback->pushInfo(QObject::tr("Scratch space: %1 MiB at most, in %2 (removed when the run ends).")
                       .arg(double(std::max(scratchPeak, scratch.bytes())) / 1048576.0, 0, 'f', 0)
                       .arg(QString::fromStdString(folder)));
  logTiledRun(largest, passes - 1, feedback);
  return outcome;
}

}  // namespace gpugeo
