#include "breachdepressions_algorithm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsprocessingcontext.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "core/errors.h"
#include "dem/tiled/tiled_dem.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace tiled = dem::tiled;

namespace {

// What the in-memory run holds per cell: the DEM, the cut copy, the filled copy and its flat mask, the
// raised copy and the flats' scratch arrays, the channels' windows side by side.
constexpr int64_t kInMemoryBytesPerCell = 36;
// A cell of a tile's working window in the tiled run, its margin (tiled::breachMargin) counted: the
// channels' window or the flats', whichever holds more.
constexpr int64_t kTileBytesPerCell = std::max(tiled::kBreachBytesPerWindowCell, tiled::kFlatsBytesPerTileCell);
constexpr float kChangeNoData = std::numeric_limits<float>::quiet_NaN();
// The longest channel a user may ask for: each tile's window reaches three times as far around it.
constexpr int kMostLength = 10000;

// Bytes a cell of the DEM for the in-memory run: its arrays, and the channels' windows on the threads
// (tiles of 1,024² with breachMargin's margin, clipped to the raster), shared out over the cells.
int64_t inMemoryBytesPerCell(int64_t width, int64_t height, const dem::BreachLimits& limits, int threads)
{
  const int64_t side = 1024 + 2 * tiled::breachMargin(limits);
  const int64_t window = std::min(width + 2, side) * std::min(height + 2, side);
  const int64_t tiles = ((width + 1023) / 1024) * ((height + 1023) / 1024);
  const int64_t windows = std::min<int64_t>(std::max(threads, 1), tiles) * window * tiled::kBreachBytesPerWindowCell;
  return kInMemoryBytesPerCell + (windows + width * height - 1) / (width * height);
}

// The whole breach of a DEM in memory: on the GPU every step on the device; on the CPU the channels on
// the threads (the tiled cut over the grid in memory), then the fill and the flats.
dem::BreachedDem breachInMemory(Backend backend, const dem::Grid& grid, const dem::BreachLimits& limits, int threads,
                                const RunControl& control, StageTimes& times)
{
  if (backend == Backend::Gpu)
    return dem::breachDepressions(backend, grid, limits, threads, control, &times);
  dem::BreachCounts counts;
  std::vector<float> cut;
  {
    ScopedStage stage(times, "breach (channels)");
    cut = tiled::cutChannelsOnThreads(grid, limits, threads, control, &counts);
  }
  return dem::finishBreach(backend, grid, cut, counts, threads, control, &times);
}

// The change breached − input in metres (NaN where the input is nodata).
void changeOf(const float* dem, const float* breached, int64_t count, float* change)
{
  for (int64_t i = 0; i < count; ++i)
    change[i] = std::isnan(dem[i]) ? kChangeNoData : float(double(breached[i]) - double(dem[i]));
}

}  // namespace

void BreachDepressionsAlgorithm::Tally::addRow(const float* dem, const float* breached, int64_t count, double cellArea)
{
  for (int64_t i = 0; i < count; ++i)
  {
    const double change = double(breached[i]) - double(dem[i]);
    if (change < 0.0)
    {
      ++lowered;
      deepestCut = std::max(deepestCut, -change);
      volumeRemoved -= change * cellArea;
    }
    else if (change > 0.0)
    {
      ++raised;
      highestRaise = std::max(highestRaise, change);
      volumeAdded += change * cellArea;
    }
  }
}

QString BreachDepressionsAlgorithm::name() const
{
  return QStringLiteral("breachdepressions");
}

QString BreachDepressionsAlgorithm::displayName() const
{
  return QObject::tr("Breach depressions");
}

QStringList BreachDepressionsAlgorithm::tags() const
{
  return QObject::tr("dem,breach,breaching,sinks,pits,depressions,fill,least-cost,culvert,hydrology,elevation,terrain,"
                     "gpu,cuda")
    .split(',');
}

QString BreachDepressionsAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString BreachDepressionsAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString BreachDepressionsAlgorithm::iconFile() const
{
  return QStringLiteral("breachdepressions.svg");
}

QString BreachDepressionsAlgorithm::shortDescription() const
{
  return QObject::tr("Drains the depressions of a DEM by cutting short channels through what dams them, filling only "
                     "what no channel within a maximum length and depth can drain.");
}

QString BreachDepressionsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Breaches the depressions of a digital elevation model (DEM): where a short channel can drain a "
           "depression, the channel is cut through the cells that dam it; what cannot be drained so is filled. "
           "Afterwards every cell drains with plain D8, as after <i>Fill depressions</i>, but where the depressions "
           "are the DEM's noise (a road embankment over a culvert, pits of a few centimetres) far fewer cells "
           "change, and the flow keeps to the valley instead of crossing filled flats. Use the result for flow "
           "directions, accumulation and stream networks.</p>"
           "<p><b>Input DEM</b>, <b>Band number</b>: as in <i>Fill depressions</i> (nodata, NaN and infinite "
           "values are nodata; values taken as float32). <b>Maximum breach length</b> (MAX_LENGTH, cells, 50 by "
           "default, at most 10,000): the most cells one channel may lower; the run's memory and time grow with "
           "it. <b>Maximum breach depth</b> (MAX_DEPTH, metres, "
           "optional; empty: no limit): how far above the depression's bottom a cell that a channel cuts may "
           "stand. A depression that no channel within both limits drains is filled.</p>"
           "<p><b>Method</b>, after Lindsay (2016)'s hybrid breaching and filling, in five steps: (1) every "
           "single-cell pit is raised to its lowest neighbour; (2) a depression's <i>bottom</i> is an 8-connected "
           "set of cells of equal elevation with no lower neighbour and no <i>edge cell</i> (on the raster's border "
           "or next to nodata, where water leaves the grid); (3) each bottom searches for a channel: a path of at "
           "most MAX_LENGTH cells, through valid cells at most MAX_DEPTH above the bottom, to a cell lower than "
           "the bottom or on the edge; of all such paths the one of least cost is taken, the cost being the sum "
           "of its cells' heights above the bottom (the depth it cuts), then the one of fewest cells (ties to the "
           "lowest cell in row order): Lindsay's least-cost breaching; (4) the channel's cells "
           "are lowered to fall from the bottom to its outlet, one float32 step (a unit in the last place) a cell, "
           "where they stand higher; where channels cross, the lower value is kept; (5) what is left is filled "
           "(<i>Fill depressions</i>) and its flats are drained by Barnes, Lehman &amp; Mulla's (2014) gradient "
           "(<i>Resolve flats</i>). Unlike Lindsay's, which breaches the depressions one after another in order "
           "of elevation, each channel here is searched on the DEM with its pits raised, independently of the "
           "others: the result is the same on the CPU, on the GPU and tile by tile.</p>"
           "<p><b>Outputs</b>: the <b>Breached DEM</b> (Float32 GeoTIFF with the input's size, geotransform and "
           "CRS; nodata as in <i>Fill depressions</i>) and, optionally, the <b>Change</b> (OUTPUT_CHANGE, Float32, "
           "breached minus input in metres: negative where a channel lowered a cell, positive where a cell was "
           "filled or raised; nodata NaN), styled red to blue. The log and the outputs count the pits raised "
           "(PITS_RAISED), the bottoms (DEPRESSIONS) and those a channel drains (BREACHED), the cells lowered "
           "and raised (LOWERED_CELLS, RAISED_CELLS) and the volumes removed and added in m³ (VOLUME_REMOVED, "
           "VOLUME_ADDED, from the cell sizes below).</p>"
           "<p><b>Caveats</b>: a channel is lowered by float32 steps only, so it is nearly level with the "
           "bottom, not graded to its outlet; with no MAX_DEPTH a depression walled in on every side within "
           "MAX_LENGTH is cut through its lowest wall however high (set MAX_DEPTH to fill such a depression "
           "instead); breaching usually changes fewer cells than "
           "filling, but not always (a small depression behind a long plateau). With the GPU every step runs "
           "there, but the few channels whose search reaches far from its depression, which are searched on the "
           "CPU's threads. Tile by tile, the channels are searched on the CPU's threads.</p>") +
         cellSizeHelp() +
         QObject::tr(
           "<p><b>References</b>: J. B. Lindsay (2016), Efficient hybrid breaching-filling sink removal methods "
           "for flow path enforcement in digital elevation models, Hydrological Processes 30(6), 846&ndash;857, "
           "doi:10.1002/hyp.10648. R. Barnes, C. Lehman, D. Mulla (2014), Priority-Flood: an optimal "
           "depression-filling and watershed-labeling algorithm for digital elevation models, Computers &amp; "
           "Geosciences 62, 117&ndash;127; An efficient assignment of drainage direction over flat surfaces in "
           "raster digital elevation models, Computers &amp; Geosciences 62, 128&ndash;135.</p>") +
         rangesHelp(*this) + deviceHelp() + tilingHelp(false);
}

BreachDepressionsAlgorithm* BreachDepressionsAlgorithm::createInstance() const
{
  return new BreachDepressionsAlgorithm();
}

void BreachDepressionsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Input DEM")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("MAX_LENGTH"),
                                                QObject::tr("Maximum breach length (cells)"),
                                                QgsProcessingParameterNumber::Integer, 50, false, 1, kMostLength));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("MAX_DEPTH"),
                                                QObject::tr("Maximum breach depth (m, empty: no limit)"),
                                                QgsProcessingParameterNumber::Double, QVariant(), true, 0.0));
  addDeviceParameter();
  addTilingParameters(false);
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Breached DEM")));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_CHANGE"),
                                                           QObject::tr("Change (breached − input)"), QVariant(), true,
                                                           false));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("PITS_RAISED"), QObject::tr("Single-cell pits raised")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("DEPRESSIONS"), QObject::tr("Depression bottoms")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("BREACHED"), QObject::tr("Depressions breached")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("LOWERED_CELLS"), QObject::tr("Cells lowered")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("RAISED_CELLS"), QObject::tr("Cells raised")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("VOLUME_REMOVED"), QObject::tr("Volume removed (m³)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("VOLUME_ADDED"), QObject::tr("Volume added (m³)")));
}

bool BreachDepressionsAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                               QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  return true;
}

BreachDepressionsAlgorithm::Request BreachDepressionsAlgorithm::readRequest(const QVariantMap& parameters,
                                                                            QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.limits.maxLength = parameterAsInt(parameters, QStringLiteral("MAX_LENGTH"), context);
  // Empty (not given, NULL or a blank text): no limit; a number, or an expression QGIS evaluates, else.
  const QVariant depth = parameters.value(QStringLiteral("MAX_DEPTH"));
  if (depth.isValid() && !depth.isNull() &&
      !(depth.type() == QVariant::String && depth.toString().trimmed().isEmpty()))
    r.limits.maxDepth = parameterAsDouble(parameters, QStringLiteral("MAX_DEPTH"), context);
  r.outputPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  if (outputRequested(parameters, QStringLiteral("OUTPUT_CHANGE")))
    r.changePath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_CHANGE"), context);
  return r;
}

QVariantMap BreachDepressionsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                                QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const Request request = readRequest(parameters, context);
  const DemRaster raster = openDemRaster(mSource, request.band);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan =
    planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
               parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
               inMemoryBytesPerCell(raster.width, raster.height, request.limits, cpuThreads()),
               kTileBytesPerCell, cpuThreads(), device.backend, dem::kGpuBreachBytesPerCell,
               tiled::breachMargin(request.limits));
  logTilingPlan(plan, feedback);
  Tally tally;
  FinishedRasters finished;
  Outcome outcome;
  if (plan.tiled)
    runTiled(device, plan, feedback, [&](const TilingPlan& on) {
      tally = Tally();
      outcome = executeTiled(raster, on, request, feedback, times, tally, finished);
    });
  else
    outcome = executeInMemory(device, request, feedback, times, tally, finished);
  const dem::BreachCounts& counts = outcome.counts;
  logOutcome(counts, tally, outcome.valid, feedback);
  logStageTimes(times, feedback);
  finished.keep();

  mChangePath = request.changePath;
  mChangeRange = std::max(tally.deepestCut, tally.highestRaise);
  QVariantMap outputs{{QStringLiteral("OUTPUT"), request.outputPath},
                      {QStringLiteral("PITS_RAISED"), qlonglong(counts.pitsRaised)},
                      {QStringLiteral("DEPRESSIONS"), qlonglong(counts.bottoms)},
                      {QStringLiteral("BREACHED"), qlonglong(counts.breached)},
                      {QStringLiteral("LOWERED_CELLS"), qlonglong(tally.lowered)},
                      {QStringLiteral("RAISED_CELLS"), qlonglong(tally.raised)},
                      {QStringLiteral("VOLUME_REMOVED"), tally.volumeRemoved},
                      {QStringLiteral("VOLUME_ADDED"), tally.volumeAdded}};
  if (!request.changePath.isEmpty())
    outputs.insert(QStringLiteral("OUTPUT_CHANGE"), request.changePath);
  return outputs;
}

BreachDepressionsAlgorithm::Outcome BreachDepressionsAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                              QgsProcessingFeedback* feedback, StageTimes& times,
                                                              Tally& tally, FinishedRasters& finished) const
{
  QgsProcessingMultiStepFeedback steps(4, feedback);
  LoadedDem loaded = loadDem(mSource, request.band, times, &steps, feedback);
  const DemRaster& raster = loaded.raster;
  const Elevations& dem = loaded.elevations;
  const RunControl control = runControl(feedback);
  const dem::Grid grid = raster.grid(dem.z.data());

  // --- The channels, the fill and the flats: all on the device, or on the CPU's threads.
  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Searching the channels, filling what is left and draining its flats"));
  dem::BreachedDem breached;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    breached = breachInMemory(backend, grid, request.limits, cpuThreads(), control, times);
  });
  steps.setCurrentStep(2);
  for (int64_t y = 0; y < raster.height; ++y)
    tally.addRow(dem.z.data() + y * raster.width, breached.z.data() + y * raster.width, raster.width,
                 raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)]);

  // --- The outputs.
  steps.setCurrentStep(3);
  feedback->setProgressText(QObject::tr("Writing the breached DEM"));
  const float noData = elevationOutputNoData(raster, dem, feedback);
  ScopedStage stage(times, "write");
  writeDemRaster(
    request.outputPath, raster, GDT_Float32, double(noData),
    [&](int64_t row0, int64_t rows, void* buffer) {
      nanAsNoData(noData)(breached.z.data() + row0 * raster.width, rows * raster.width, buffer);
    },
    finished, &steps);
  if (!request.changePath.isEmpty())
    writeDemRaster(
      request.changePath, raster, GDT_Float32, double(kChangeNoData),
      [&](int64_t row0, int64_t rows, void* buffer) {
        changeOf(dem.z.data() + row0 * raster.width, breached.z.data() + row0 * raster.width, rows * raster.width,
                 static_cast<float*>(buffer));
      },
      finished, &steps);
  return {breached.counts, dem.valid};
}

BreachDepressionsAlgorithm::Outcome BreachDepressionsAlgorithm::executeTiled(const DemRaster& raster, const TilingPlan& plan,
                                                           const Request& request, QgsProcessingFeedback* feedback,
                                                           StageTimes& times, Tally& tally,
                                                           FinishedRasters& finished) const
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(2, feedback);
  feedback->setProgressText(QObject::tr("Reading the DEM (counting its cells)"));
  DemTileSource source(raster);
  Elevations counted;
  {
    ScopedStage stage(times, "read (counts)");
    counted = source.scan(plan.options.tileWidth, &steps);
  }
  reportElevations(raster, counted, feedback);
  const float noData = elevationOutputNoData(raster, counted, feedback);

  std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(request.outputPath, raster, GDT_Float32, double(noData));
  TiffTileSink<float> sink(*writer, nanAsNoData(noData));
  std::unique_ptr<GeoTiffWriter> changeWriter;
  std::unique_ptr<TiffTileSink<float>> changeSink;
  if (!request.changePath.isEmpty())
  {
    changeWriter = demRasterWriter(request.changePath, raster, GDT_Float32, double(kChangeNoData));
    changeSink = std::make_unique<TiffTileSink<float>>(*changeWriter, nanAsNoData(kChangeNoData));
  }
  std::vector<float> change;
  const auto observe = [&](const tiled::Window& t, const float* dem, const float* breached) {
    for (int64_t y = 0; y < t.height; ++y)
      tally.addRow(dem + y * t.width, breached + y * t.width, t.width,
                   raster.cellWidth[size_t(t.y0 + y)] * raster.cellHeight[size_t(t.y0 + y)]);
    if (changeSink)
    {
      change.resize(std::size_t(t.cells()));
      changeOf(dem, breached, t.cells(), change.data());
      changeSink->write(t, change.data());
    }
  };

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Breaching depressions tile by tile"));
  tiled::TiledOptions options = plan.options;
  options.onTile = roundsProgress(&steps);
  tiled::TiledReport report;
  tiled::RaisedCounts flats;
  const tiled::ScratchFolder scratch(scratchParent());
  const dem::BreachCounts counts = tiled::breachDepressionsTiled(
    source, tiled::RowSizes{raster.cellWidth, raster.cellHeight}, sink, request.limits, scratch.path(), options,
    runControl(feedback), &report, &flats, observe);
  times.merge(report.times);
  feedback->pushInfo(QObject::tr("Scratch: %1 MiB in %2, removed now.")
                       .arg(double(scratch.bytes()) / 1048576.0, 0, 'f', 0)
                       .arg(QString::fromStdString(scratch.path())));
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(writer), finished);
    if (changeWriter)
      finishDemRaster(std::move(changeWriter), finished);
  }
  logTiledRun(report, 1, feedback);
  return {counts, counted.valid};
}

void BreachDepressionsAlgorithm::logOutcome(const dem::BreachCounts& counts, const Tally& tally, int64_t valid,
                                            QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(QObject::tr("%1 single-cell pits raised; %2 depression bottoms, %3 drained by a channel (%4 "
                                 "cells cut), %5 filled.")
                       .arg(counts.pitsRaised)
                       .arg(counts.bottoms)
                       .arg(counts.breached)
                       .arg(counts.channelCells)
                       .arg(counts.bottoms - counts.breached));
  feedback->pushInfo(QObject::tr("Of %1 cells, %2 lowered (the deepest by %3 m; %4 m³ removed) and %5 raised (the "
                                 "highest by %6 m; %7 m³ added).")
                       .arg(valid)
                       .arg(tally.lowered)
                       .arg(tally.deepestCut, 0, 'g', 8)
                       .arg(tally.volumeRemoved, 0, 'g', 10)
                       .arg(tally.raised)
                       .arg(tally.highestRaise, 0, 'g', 8)
                       .arg(tally.volumeAdded, 0, 'g', 10));
}

QVariantMap BreachDepressionsAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (!mChangePath.isEmpty() && context.willLoadLayerOnCompletion(mChangePath))
  {
    const double range = mChangeRange > 0.0 ? mChangeRange : 1.0;
    context.layerToLoadOnCompletionDetails(mChangePath)
      .setPostProcessor(new ContinuousRasterStyle(-range, range, nullptr, 0, QStringLiteral("RdBu")));
  }
  return QVariantMap();
}

}  // namespace gpugeo
