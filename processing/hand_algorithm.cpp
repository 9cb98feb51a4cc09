#include "hand_algorithm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/tiled/tiled_dem.h"
#include "flow_direction_input.h"
#include "flowdirection_algorithm.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

namespace tiled = dem::tiled;

// What the in-memory run holds per cell: the elevations, the directions (and their copy), the streams
// as read (float) and as marks, the paths' ends and lengths (int64 each), the two outputs.
constexpr int64_t kInMemoryBytesPerCell = 36;
// The GPU's arrays per cell: the directions, two copies of the ends, lengths and successors.
constexpr int64_t kGpuBytesPerCell = 50;
// From this many threads the CPU resolves the paths through the tiles side by side.
constexpr int kThreadsForTiles = 4;

// A stream raster read as marks: 1 where a cell holds a value other than 0, else 0 (nodata too).
class StreamMarks : public tiled::RasterSource<uint8_t>
{
public:
  explicit StreamMarks(const tiled::RasterSource<float>& values) : mValues(values) {}
  int64_t width() const override { return mValues.width(); }
  int64_t height() const override { return mValues.height(); }
  void read(const tiled::Window& window, uint8_t* out) const override
  {
    std::vector<float> values(std::size_t(window.cells()));
    mValues.read(window, values.data());
    for (std::size_t i = 0; i < values.size(); ++i)
      out[i] = mark(values[i]);
  }
  static uint8_t mark(float value) { return std::isfinite(value) && value != 0.f ? 1 : 0; }

private:
  const tiled::RasterSource<float>& mValues;
};

// About the 99th percentile of the finite values given (every stride-th kept), for the styles; filled
// from the tiles' threads.
class TopSample
{
public:
  explicit TopSample(int64_t cells) : mStride(std::max<int64_t>(1, cells / 1000000)) {}
  void add(const float* values, int64_t count)
  {
    std::lock_guard<std::mutex> lock(mMutex);
    for (int64_t i = 0; i < count; ++i)
      if (std::isfinite(values[i]) && mSeen++ % mStride == 0)
        mValues.push_back(values[i]);
  }
  double top()
  {
    if (mValues.empty())
      return 1.0;
    const std::size_t k = std::min(mValues.size() - 1, std::size_t(double(mValues.size()) * 0.99));
    std::nth_element(mValues.begin(), mValues.begin() + std::ptrdiff_t(k), mValues.end());
    return std::max(1.0, double(mValues[k]));
  }

private:
  int64_t mStride, mSeen = 0;
  std::vector<float> mValues;
  std::mutex mMutex;
};

}  // namespace

QString HandAlgorithm::name() const
{
  return QStringLiteral("hand");
}

QString HandAlgorithm::displayName() const
{
  return QObject::tr("Height above drainage (HAND)");
}

QStringList HandAlgorithm::tags() const
{
  return QObject::tr("dem,hand,height above nearest drainage,elevation above stream,vertical distance,channel,stream,"
                     "flood,inundation,d8,hydrology,gpu,cuda")
    .split(',');
}

QString HandAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString HandAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString HandAlgorithm::iconFile() const
{
  return QStringLiteral("hand.svg");
}

QString HandAlgorithm::shortDescription() const
{
  return QObject::tr("Each cell's height above the stream cell its D8 flow path reaches first, and the distance "
                     "along the path to it: the terrain model behind flood-inundation maps.");
}

QString HandAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Height above the nearest drainage (HAND, Nobre et al. 2011): every cell follows its D8 flow path "
           "down to the first stream cell it meets; its height is its elevation minus that stream cell's. Cells "
           "below a given height above their stream are the ones a flood of that depth in the stream reaches "
           "(the input of HAND flood maps).</p>"
           "<p><b>DEM</b> (INPUT, <b>Band number</b>): the elevations, usually the filled or breached DEM the "
           "directions came from. <b>Flow direction raster</b> (DIRECTIONS, band 1) and <b>Encoding</b>: D8 "
           "directions as <i>Flow direction</i> writes them (ESRI codes 1 = E &hellip; 128 = NE, or 0 to 7 "
           "clockwise from east). <b>Stream raster</b> (STREAMS, band 1): every cell holding a value other than "
           "0 and nodata is a stream cell, e.g. <i>Flow accumulation</i>'s upstream area above a threshold "
           "(Raster calculator: <tt>\"area@1\" &gt; 1</tt>). The three rasters must share the DEM's grid.</p>"
           "<p><b>Outputs</b>: <b>Height above nearest drainage</b> (OUTPUT, Float32, metres; 0 on stream cells) "
           "and, optionally, <b>Distance to nearest drainage</b> (OUTPUT_DISTANCE, Float32, metres along the flow "
           "path: each step the cell's width, height or diagonal at its row). Nodata is %1 in both where a cell "
           "is nodata in any input or its path reaches no stream cell: it leaves the raster, ends in a pit or on "
           "nodata, or loops. The log counts the stream cells and the cells that reach a stream and those that "
           "do not; a stream raster with no stream cell on the DEM's data gives outputs of nodata only, with a "
           "warning.</p>"
           "<p><b>Method</b>: each cell's path is followed to the first stream cell (one walk per path on the "
           "CPU; on the GPU, each cell repeatedly takes over its successor's successor). The path lengths are "
           "summed as integers in a fixed unit (a power of two of a metre, fine enough that the rounding stays "
           "below float32's): the CPU and the GPU, in memory or tile by tile, give the same bits. Heights are "
           "negative where a path climbs (a DEM that was not filled, or not the directions' own).</p>"
           "<p><b>References</b>: A. D. Nobre et al. (2011), Height Above the Nearest Drainage &ndash; a "
           "hydrologically relevant new terrain model, Journal of Hydrology 404(1&ndash;2), 13&ndash;29. "
           "C. D. Renn&oacute; et al. (2008), HAND, a new terrain descriptor using SRTM-DEM, Remote Sensing of "
           "Environment 112(9), 3469&ndash;3481.</p>")
           .arg(number(double(kNoData))) +
         cellSizeHelp() + rangesHelp(*this) + deviceHelp() + tilingHelp(false);
}

HandAlgorithm* HandAlgorithm::createInstance() const
{
  return new HandAlgorithm();
}

void HandAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("DEM")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(
    new QgsProcessingParameterRasterLayer(QStringLiteral("DIRECTIONS"), QObject::tr("Flow direction raster")));
  addParameter(FlowDirectionAlgorithm::encodingParameter(QObject::tr("Encoding of the flow directions")));
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("STREAMS"),
                                                     QObject::tr("Stream raster (cells other than 0 and nodata)")));
  addDeviceParameter();
  addTilingParameters(false);
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"),
                                                           QObject::tr("Height above nearest drainage")));
  addParameter(new QgsProcessingParameterRasterDestination(
    QStringLiteral("OUTPUT_DISTANCE"), QObject::tr("Distance to nearest drainage"), QVariant(), true, false));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("STREAM_CELLS"), QObject::tr("Stream cells")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("DRAINED_CELLS"), QObject::tr("Cells reaching a stream")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("UNDRAINED_CELLS"), QObject::tr("Cells reaching none")));
}

bool HandAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context, QgsProcessingFeedback*)
{
  const auto source = [&](const QString& name) {
    return demSourceOf(parameterAsRasterLayer(parameters, name, context), name, parameters.value(name));
  };
  mSource = source(QStringLiteral("INPUT"));
  mSource.outputFormat = outputFormat(parameters, context);
  mDirectionsSource = source(QStringLiteral("DIRECTIONS"));
  mStreamsSource = source(QStringLiteral("STREAMS"));
  return true;
}

HandAlgorithm::Request HandAlgorithm::readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  r.heightPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  if (outputRequested(parameters, QStringLiteral("OUTPUT_DISTANCE")))
    r.distancePath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_DISTANCE"), context);
  return r;
}

HandAlgorithm::Inputs HandAlgorithm::openInputs(const Request& request, QgsProcessingFeedback* feedback) const
{
  Inputs in{openDemRaster(mSource, request.band), openDemRaster(mDirectionsSource, 1), openDemRaster(mStreamsSource, 1)};
  requireDemGrid(in.directions, in.dem, QStringLiteral("DIRECTIONS"), feedback);
  requireDemGrid(in.streams, in.dem, QStringLiteral("STREAMS"), feedback);
  return in;
}

QVariantMap HandAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                   QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const Request request = readRequest(parameters, context);
  const Inputs in = openInputs(request, feedback);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), in.dem,
                                     kInMemoryBytesPerCell, tiled::kHandBytesPerTileCell, cpuThreads(),
                                     device.backend, kGpuBytesPerCell);
  logTilingPlan(plan, feedback);
  FinishedRasters finished;
  Outcome outcome;
  if (plan.tiled)
    runTiled(device, plan, feedback,
             [&](const TilingPlan& on) { outcome = executeTiled(request, in, on, feedback, times, finished); });
  else
    outcome = executeInMemory(device, request, in, feedback, times, finished);
  logOutcome(outcome, feedback);
  logStageTimes(times, feedback);
  finished.keep();

  mHeightPath = request.heightPath;
  mDistancePath = request.distancePath;
  mHeightTop = outcome.heightTop;
  mDistanceTop = outcome.distanceTop;
  QVariantMap outputs{{QStringLiteral("OUTPUT"), request.heightPath},
                      {QStringLiteral("STREAM_CELLS"), qlonglong(outcome.streamCells)},
                      {QStringLiteral("DRAINED_CELLS"), qlonglong(outcome.drained)},
                      {QStringLiteral("UNDRAINED_CELLS"), qlonglong(outcome.undrained)}};
  if (!request.distancePath.isEmpty())
    outputs.insert(QStringLiteral("OUTPUT_DISTANCE"), request.distancePath);
  return outputs;
}

HandAlgorithm::Outcome HandAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                      const Inputs& in, QgsProcessingFeedback* feedback,
                                                      StageTimes& times, FinishedRasters& finished) const
{
  QgsProcessingMultiStepFeedback steps(5, feedback);
  const RunControl control = runControl(feedback);
  const DemRaster& raster = in.dem;
  const int64_t cells = raster.width * raster.height;

  // --- Read the elevations, the directions (checking their codes) and the stream marks.
  const LoadedDem dem = loadDem(mSource, request.band, times, &steps, feedback);
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Reading the flow directions"));
  std::vector<uint8_t> directions(static_cast<std::size_t>(cells));
  CodeTileSource::Counts counts;
  {
    ScopedStage stage(times, "read (directions)");
    counts = directionSource(in.directions, request.encoding).scan(&steps, directions.data());
  }
  reportDirections(in.directions, counts, request.encoding, feedback);
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Reading the streams"));
  std::vector<uint8_t> streams(static_cast<std::size_t>(cells));
  {
    ScopedStage stage(times, "read (streams)");
    const std::vector<float> values = readElevations(in.streams, &steps).z;
    for (std::size_t i = 0; i < values.size(); ++i)
      streams[i] = StreamMarks::mark(values[i]);
  }

  // --- Follow the paths to the streams.
  steps.setCurrentStep(3);
  steps.setProgressText(QObject::tr("Following the flow paths to the streams"));
  const dem::Grid grid = raster.grid(dem.elevations.z.data());
  dem::DrainageHeights heights;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    ScopedStage stage(times, "height above drainage");
    if (backend == Backend::Cpu && cpuThreads() >= kThreadsForTiles)
      heights = tiled::handOnThreads(grid, directions, streams, cpuThreads(), control);
    else
      heights = dem::heightAboveDrainage(backend, grid, directions, streams, control);
  });
  Outcome outcome{heights.streamCells, heights.drained, heights.undrained};

  // --- Write the heights and the distances.
  steps.setCurrentStep(4);
  steps.setProgressText(QObject::tr("Writing the heights above the nearest drainage"));
  ScopedStage stage(times, "write");
  const auto write = [&](const QString& path, const std::vector<float>& values) {
    writeDemRaster(
      path, raster, GDT_Float32, double(kNoData),
      [&](int64_t row0, int64_t rows, void* buffer) {
        nanAsNoData(kNoData)(values.data() + row0 * raster.width, rows * raster.width, buffer);
      },
      finished, &steps);
    TopSample sample(cells);
    sample.add(values.data(), cells);
    return sample.top();
  };
  outcome.heightTop = write(request.heightPath, heights.height);
  if (!request.distancePath.isEmpty())
    outcome.distanceTop = write(request.distancePath, heights.distance);
  return outcome;
}

HandAlgorithm::Outcome HandAlgorithm::executeTiled(const Request& request, const Inputs& in, const TilingPlan& plan,
                                                   QgsProcessingFeedback* feedback, StageTimes& times,
                                                   FinishedRasters& finished) const
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(3, feedback);
  const DemRaster& raster = in.dem;
  const int64_t cells = raster.width * raster.height;

  // --- Read the elevations and the directions once, counting the cells and checking the codes.
  steps.setProgressText(QObject::tr("Reading the DEM and the flow directions (checking them)"));
  const DemTileSource elevations(raster);
  const CodeTileSource directions = directionSource(in.directions, request.encoding);
  {
    ScopedStage stage(times, "read (check)");
    reportElevations(raster, elevations.scan(plan.options.tileWidth, &steps), feedback);
    steps.setCurrentStep(1);
    reportDirections(in.directions, directions.scan(&steps), request.encoding, feedback);
  }
  const DemTileSource streamValues(in.streams);
  const StreamMarks streams(streamValues);

  // --- Two passes tile by tile, the outputs written as the second pass's tiles finish.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Following the flow paths to the streams tile by tile"));
  TopSample heightSample(cells), distanceSample(cells);
  std::unique_ptr<GeoTiffWriter> heightWriter = demRasterWriter(request.heightPath, raster, GDT_Float32, kNoData);
  TiffTileSink<float> heightSink(*heightWriter, [&](const float* values, int64_t count, void* buffer) {
    heightSample.add(values, count);
    nanAsNoData(kNoData)(values, count, buffer);
  });
  std::unique_ptr<GeoTiffWriter> distanceWriter;
  std::unique_ptr<TiffTileSink<float>> distanceSink;
  if (!request.distancePath.isEmpty())
  {
    distanceWriter = demRasterWriter(request.distancePath, raster, GDT_Float32, kNoData);
    distanceSink = std::make_unique<TiffTileSink<float>>(
      *distanceWriter, [&](const float* values, int64_t count, void* buffer) {
        distanceSample.add(values, count);
        nanAsNoData(kNoData)(values, count, buffer);
      });
  }
  tiled::TiledOptions options = plan.options;
  options.onTile = tileProgress(&steps, 2);
  tiled::TiledReport report;
  const tiled::HandSummary sum =
    tiled::handTiled(elevations, directions, streams, tiled::RowSizes{raster.cellWidth, raster.cellHeight},
                     heightSink, distanceSink.get(), options, runControl(feedback), &report);
  times.merge(report.times);
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(heightWriter), finished);
    if (distanceWriter)
      finishDemRaster(std::move(distanceWriter), finished);
  }
  logTiledRun(report, 1, feedback);
  Outcome outcome{sum.streamCells, sum.drained, sum.undrained};
  outcome.heightTop = heightSample.top();
  outcome.distanceTop = distanceSample.top();
  return outcome;
}

void HandAlgorithm::logOutcome(const Outcome& outcome, QgsProcessingFeedback* feedback)
{
  if (outcome.streamCells == 0)
    feedback->pushWarning(QObject::tr("STREAMS holds no stream cell on the DEM's data (no value other than 0 and "
                                      "nodata where the DEM and the directions hold one): no cell reaches a stream, "
                                      "and the outputs hold nodata only."));
  feedback->pushInfo(QObject::tr("%1 stream cells; %2 cells reach a stream, %3 reach none (their paths leave the "
                                 "raster, end in a pit or on nodata, or loop).")
                       .arg(outcome.streamCells)
                       .arg(outcome.drained)
                       .arg(outcome.undrained));
}

QVariantMap HandAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mHeightPath))
    context.layerToLoadOnCompletionDetails(mHeightPath).setPostProcessor(new ContinuousRasterStyle(0.0, mHeightTop));
  if (!mDistancePath.isEmpty() && context.willLoadLayerOnCompletion(mDistancePath))
    context.layerToLoadOnCompletionDetails(mDistancePath)
      .setPostProcessor(new ContinuousRasterStyle(0.0, mDistanceTop));
  return QVariantMap();
}

}  // namespace gpugeo
