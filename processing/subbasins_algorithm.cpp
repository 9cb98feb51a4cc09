#include "subbasins_algorithm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>

#include "adapters/band_geometry.h"
#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/regions.h"
#include "dem/tiled/raster_io.h"
#include "flow_direction_input.h"
#include "flowdirection_algorithm.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

namespace tiled = dem::tiled;

// What the in-memory run holds per cell: the directions (and their copy for the exits), the labels and
// the polygons' sets.
constexpr int64_t kInMemoryBytesPerCell = 14;
// The GPU's arrays per cell (the watersheds' labelling): the directions, two labels and two successors.
constexpr int64_t kGpuBytesPerCell = 41;
// From this many threads the CPU labels through the tiles side by side (as gpugeo:watersheds).
constexpr int kThreadsForTiles = 4;
// The exits are found in windows of this many cells a side.
constexpr int64_t kExitWindow = 1024;

// A segment raster read as ids: a positive whole number is a segment; 0, negative and infinite values
// and nodata are none; anything else (a fraction, past Int32) is refused, naming the cell.
class SegmentIds : public tiled::RasterSource<int32_t>
{
public:
  explicit SegmentIds(const DemRaster& raster) : mValues(raster) {}
  int64_t width() const override { return mValues.width(); }
  int64_t height() const override { return mValues.height(); }
  void read(const tiled::Window& window, int32_t* out) const override
  {
    std::vector<double> values(std::size_t(window.cells()));
    mValues.read(window, values.data());
    for (std::size_t i = 0; i < values.size(); ++i)
    {
      const double v = values[i];
      if (!std::isfinite(v) || v <= 0)
        out[i] = 0;
      else if (v != std::floor(v) || v > double(std::numeric_limits<int32_t>::max() - 1))
        throw QgsProcessingException(
          QObject::tr("STREAMS holds %1 at column %2, row %3: not a segment id (a whole number from 1 to 2147483646; "
                      "0 and nodata for no stream), as gpugeo:streamnetwork's segment raster holds.")
            .arg(number(v))
            .arg(window.x0 + int64_t(i) % window.width)
            .arg(window.y0 + int64_t(i) / window.width));
      else
        out[i] = int32_t(v);
    }
  }

private:
  gdal::GdalValueSource mValues;
};

// The exits of the segments, refusing segments that are not chains with the reason.
tiled::SegmentExits exitsOf(const DemRaster& streams, const tiled::RasterSource<uint8_t>& directions, int threads,
                            const RunControl& control)
{
  try
  {
    return tiled::segmentExits(SegmentIds(streams), directions, kExitWindow, threads, control);
  }
  catch (const InvalidInput& e)
  {
    throw QgsProcessingException(QObject::tr("%1. STREAMS must be a segment raster of these directions, such as "
                                             "gpugeo:streamnetwork's OUTPUT.")
                                   .arg(QString::fromStdString(e.what())));
  }
}

}  // namespace

// --- The polygons ----------------------------------------------------------------------------------

class SubbasinsAlgorithm::PolygonWriter
{
public:
  PolygonWriter(const SubbasinsAlgorithm& algorithm, const QVariantMap& parameters, QgsProcessingContext& context,
                const DemRaster& raster, const tiled::SegmentExits& exits)
    : mParameters(parameters), mRaster(raster), mExits(exits)
  {
    mFields.append(QgsField(QStringLiteral("id"), QVariant::Int));
    mFields.append(QgsField(QStringLiteral("down_id"), QVariant::Int));
    mFields.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
    mFields.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
    mSink = algorithm.createSink(parameters, QStringLiteral("OUTPUT_POLYGONS"), context, mId, mFields,
                                 QgsWkbTypes::MultiPolygon, raster.crs);
  }

  // Segment k's (0-based, the exits' order) polygons from band `index` of `polygons`, with its cells and area.
  void write(int32_t k, const BandPolygons& polygons, std::size_t index, int64_t cells, double area)
  {
    QgsFeature feature(mFields);
    if (cells > 0)
    {
      const double* gt = mRaster.geoTransform;
      feature.setGeometry(
        QgsGeometry(bandMultiPolygon(polygons, index, false, AxisMap{gt[0], gt[1], gt[3], -gt[5]}).release()));
    }
    const int32_t down = mExits.down[std::size_t(k)];
    QgsAttributes attributes;
    attributes << mExits.id[std::size_t(k)] << (down > 0 ? QVariant(down) : QVariant(QVariant::Int))
               << QVariant::fromValue<qlonglong>(cells) << area * 1e-6;
    feature.setAttributes(attributes);
    if (!mSink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(mSink.get(), mParameters, QStringLiteral("OUTPUT_POLYGONS")));
  }
  const QString& id() const { return mId; }

private:
  const QVariantMap& mParameters;
  const DemRaster& mRaster;
  const tiled::SegmentExits& mExits;
  QgsFields mFields;
  QString mId;
  std::unique_ptr<QgsFeatureSink> mSink;
};

// --- The algorithm ---------------------------------------------------------------------------------

QString SubbasinsAlgorithm::name() const
{
  return QStringLiteral("subbasins");
}

QString SubbasinsAlgorithm::displayName() const
{
  return QObject::tr("Subbasins");
}

QStringList SubbasinsAlgorithm::tags() const
{
  return QObject::tr("dem,subbasin,subcatchment,catchment,watershed,basin,stream,segment,reach,link,d8,hydrology,"
                     "gpu,cuda")
    .split(',');
}

QString SubbasinsAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString SubbasinsAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString SubbasinsAlgorithm::iconFile() const
{
  return QStringLiteral("subbasins.svg");
}

QString SubbasinsAlgorithm::shortDescription() const
{
  return QObject::tr("The catchment of every stream segment: each cell labelled with the segment its D8 flow path "
                     "reaches first, as a raster and one polygon per segment keyed by the segment's id.");
}

QString SubbasinsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Subbasins of a stream network: every cell belongs to the segment of the first stream cell its D8 "
           "flow path meets; the cells of a segment's subbasin drain into it between its first cell and its exit "
           "(the catchments TauDEM calls the watersheds of stream reaches, and GRASS r.watershed the "
           "half-basins' union).</p>"
           "<p><b>Flow direction raster</b> (INPUT, <b>Band number</b>) and <b>Encoding</b>: D8 directions as "
           "<i>Flow direction</i> writes them (ESRI codes 1 = E &hellip; 128 = NE, or 0 to 7 clockwise from "
           "east). <b>Stream segments</b> (STREAMS, band 1): a raster of segment ids on the same grid, "
           "<i>Stream network</i>'s OUTPUT (whole numbers from 1; 0, negative values, nodata and cells without a "
           "direction are no stream). "
           "Each id should be one chain of cells down the directions: an id that leaves its cells at two places, "
           "or never (its cells loop), is refused naming it; an id whose cells branch is taken as one segment "
           "with its exit where it leaves them.</p>"
           "<p><b>Outputs</b>: <b>Subbasins</b> (OUTPUT, Int32: each cell's segment id; 0 is nodata, where the "
           "path reaches no stream cell: it leaves the raster, ends in a pit or on nodata first); "
           "<b>Subbasin polygons</b> (OUTPUT_POLYGONS): one multipolygon per segment with <tt>id</tt>, "
           "<tt>down_id</tt> (the segment its exit flows into, NULL for none), <tt>cells</tt> and "
           "<tt>area_km2</tt> (its subbasin's own cells and area, the cell sizes below). Joined to "
           "<i>Stream network</i>'s lines by <tt>id</tt>.</p>"
           "<p><b>Method</b>: each segment's exit (its cell whose successor is not of the segment) is an outlet "
           "of <i>Watersheds</i>: every cell takes the first outlet down its path; the CPU and the GPU, in memory "
           "or tile by tile, give the same labels. The polygons are traced from the "
           "labels' cell edges.</p>") +
         cellSizeHelp() + rangesHelp(*this) + deviceHelp() + tilingHelp(false);
}

SubbasinsAlgorithm* SubbasinsAlgorithm::createInstance() const
{
  return new SubbasinsAlgorithm();
}

void SubbasinsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Flow direction raster")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(FlowDirectionAlgorithm::encodingParameter(QObject::tr("Encoding of the flow directions")));
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("STREAMS"),
                                                     QObject::tr("Stream segments (Stream network's OUTPUT)")));
  addDeviceParameter();
  addTilingParameters(false);
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Subbasins")));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_POLYGONS"),
                                                     QObject::tr("Subbasin polygons"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("SUBBASINS"), QObject::tr("Subbasins")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("LABELLED_CELLS"), QObject::tr("Cells in a subbasin")));
}

bool SubbasinsAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                       QgsProcessingFeedback*)
{
  const auto source = [&](const QString& name) {
    return demSourceOf(parameterAsRasterLayer(parameters, name, context), name, parameters.value(name));
  };
  mSource = source(QStringLiteral("INPUT"));
  mSource.outputFormat = outputFormat(parameters, context);
  mStreamsSource = source(QStringLiteral("STREAMS"));
  return true;
}

SubbasinsAlgorithm::Request SubbasinsAlgorithm::readRequest(const QVariantMap& parameters,
                                                            QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  r.labelsPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  r.wantPolygons = outputRequested(parameters, QStringLiteral("OUTPUT_POLYGONS"));
  return r;
}

SubbasinsAlgorithm::Inputs SubbasinsAlgorithm::openInputs(const Request& request,
                                                          QgsProcessingFeedback* feedback) const
{
  Inputs in{openDemRaster(mSource, request.band), openDemRaster(mStreamsSource, 1)};
  requireDemGrid(in.streams, in.directions, QStringLiteral("STREAMS"), feedback);
  return in;
}

QVariantMap SubbasinsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                        QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const Request request = readRequest(parameters, context);
  const Inputs in = openInputs(request, feedback);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), in.directions,
                                     kInMemoryBytesPerCell, tiled::kWatershedsBytesPerTileCell, cpuThreads(),
                                     device.backend, kGpuBytesPerCell);
  logTilingPlan(plan, feedback);
  FinishedRasters finished;
  Outcome outcome;
  if (plan.tiled)
    runTiled(device, plan, feedback, [&](const TilingPlan& on) {
      outcome = executeTiled(request, in, on, parameters, context, feedback, times, finished);
    });
  else
    outcome = executeInMemory(device, request, in, parameters, context, feedback, times, finished);
  logOutcome(outcome, feedback);
  logStageTimes(times, feedback);
  finished.keep();

  mLabelsPath = request.labelsPath;
  mPolygonsId = outcome.polygonsId;
  mLabels.clear();
  for (const int32_t id : outcome.exits.id)  // past LabelRasterStyle::kMaxClasses, a ramp over them
    mLabels << id;
  int64_t labelled = 0;
  for (const int64_t cells : outcome.sheds.ownCells)
    labelled += cells;
  QVariantMap outputs{{QStringLiteral("OUTPUT"), request.labelsPath},
                      {QStringLiteral("SUBBASINS"), qlonglong(outcome.exits.id.size())},
                      {QStringLiteral("LABELLED_CELLS"), qlonglong(labelled)}};
  if (request.wantPolygons)
    outputs.insert(QStringLiteral("OUTPUT_POLYGONS"), outcome.polygonsId);
  return outputs;
}

SubbasinsAlgorithm::Outcome SubbasinsAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                                const Inputs& in, const QVariantMap& parameters,
                                                                QgsProcessingContext& context,
                                                                QgsProcessingFeedback* feedback, StageTimes& times,
                                                                FinishedRasters& finished) const
{
  QgsProcessingMultiStepFeedback steps(4, feedback);
  const RunControl control = runControl(feedback);
  const DemRaster& raster = in.directions;
  const int64_t w = raster.width, h = raster.height;

  // --- Read the directions (checking their codes), then find the segments' exits.
  steps.setProgressText(QObject::tr("Reading the flow directions"));
  std::vector<uint8_t> directions(static_cast<std::size_t>(w * h));
  const CodeTileSource codes = directionSource(raster, request.encoding);
  {
    ScopedStage stage(times, "read");
    reportDirections(raster, codes.scan(&steps, directions.data()), request.encoding, feedback);
  }
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Finding the segments' exits"));
  Outcome outcome;
  {
    ScopedStage stage(times, "read (segments)");
    outcome.exits = exitsOf(in.streams, tiled::MemoryRaster<uint8_t>(w, h, directions), cpuThreads(), control);
  }

  // --- Label the subbasins, trace their polygons.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Labelling the subbasins"));
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    ScopedStage stage(times, "subbasins");
    if (backend == Backend::Cpu && cpuThreads() >= kThreadsForTiles)
      outcome.sheds = tiled::watershedsOnThreads(directions, tiled::RowSizes{raster.cellWidth, raster.cellHeight},
                                                 outcome.exits.cell, cpuThreads(), control);
    else
      outcome.sheds = dem::watersheds(backend, directions, w, h, raster.cellWidth.data(), raster.cellHeight.data(),
                                      outcome.exits.cell, cpuThreads(), control);
  });
  std::vector<uint8_t>().swap(directions);
  BandPolygons polygons;
  const int32_t count = int32_t(outcome.exits.id.size());
  if (request.wantPolygons && count > 0)
  {
    std::vector<int32_t> sets(outcome.sheds.labels.size());
    for (std::size_t i = 0; i < sets.size(); ++i)
      sets[i] = outcome.sheds.labels[i] - 1;
    runWithCpuFallback(device, feedback, [&](Backend backend) {
      ScopedStage stage(times, "polygons");
      polygons = dem::traceRegions(backend, sets.data(), w, h, count, cpuThreads(), control);
    });
  }

  // --- Write the labels as segment ids, then the polygons.
  steps.setCurrentStep(3);
  steps.setProgressText(QObject::tr("Writing the subbasins"));
  ScopedStage stage(times, "write");
  const std::vector<int32_t>& ids = outcome.exits.id;
  writeDemRaster(
    request.labelsPath, raster, GDT_Int32, 0.0,
    [&](int64_t row0, int64_t rows, void* buffer) {
      auto* out = static_cast<int32_t*>(buffer);
      for (int64_t i = 0; i < rows * w; ++i)
      {
        const int32_t label = outcome.sheds.labels[std::size_t(row0 * w + i)];
        out[i] = label > 0 ? ids[std::size_t(label - 1)] : 0;
      }
    },
    finished, &steps);
  if (request.wantPolygons)
  {
    PolygonWriter writer(*this, parameters, context, raster, outcome.exits);
    for (int32_t k = 0; k < count; ++k)
    {
      if ((k & 0xfff) == 0 && control.isCanceled())
        throw Canceled();
      writer.write(k, polygons, std::size_t(k), outcome.sheds.ownCells[std::size_t(k)],
                   outcome.sheds.ownArea[std::size_t(k)]);
    }
    outcome.polygonsId = writer.id();
  }
  return outcome;
}

SubbasinsAlgorithm::Outcome SubbasinsAlgorithm::executeTiled(const Request& request, const Inputs& in,
                                                             const TilingPlan& plan, const QVariantMap& parameters,
                                                             QgsProcessingContext& context,
                                                             QgsProcessingFeedback* feedback, StageTimes& times,
                                                             FinishedRasters& finished) const
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(4, feedback);
  const RunControl control = runControl(feedback);
  const DemRaster& raster = in.directions;
  const int64_t w = raster.width, h = raster.height;
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  tiled::ScratchFolder scratch(scratchParent());

  // --- Read the directions once (checking their codes), then find the segments' exits.
  steps.setProgressText(QObject::tr("Reading the flow directions (checking their codes)"));
  const CodeTileSource directions = directionSource(raster, request.encoding);
  {
    ScopedStage stage(times, "read (check)");
    reportDirections(raster, directions.scan(&steps), request.encoding, feedback);
  }
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Finding the segments' exits"));
  Outcome outcome;
  {
    ScopedStage stage(times, "read (segments)");
    outcome.exits = exitsOf(in.streams, directions, cpuThreads(), control);
  }
  const std::vector<int32_t>& ids = outcome.exits.id;
  const int32_t count = int32_t(ids.size());

  // --- Label tile by tile, into the output (as segment ids) and, for the polygons, the scratch folder.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Labelling the subbasins tile by tile"));
  std::unique_ptr<GeoTiffWriter> labelsWriter = demRasterWriter(request.labelsPath, raster, GDT_Int32, 0.0);
  TiffTileSink<int32_t> labelsSink(*labelsWriter, [&](const int32_t* in, int64_t cells, void* buffer) {
    auto* out = static_cast<int32_t*>(buffer);
    for (int64_t i = 0; i < cells; ++i)
      out[i] = in[i] > 0 ? ids[std::size_t(in[i] - 1)] : 0;
  });
  std::unique_ptr<tiled::RawFileRaster<int32_t>> labels;
  if (request.wantPolygons)
    labels = std::make_unique<tiled::RawFileRaster<int32_t>>(scratch.path() + "/labels.i32", w, h,
                                                             tiled::RawFile::Mode::Create);
  tiled::TeeSink<int32_t> sink(labelsSink, labels.get());
  tiled::TiledOptions options = plan.options;
  options.onTile = tileProgress(&steps, 2);
  tiled::TiledReport report;
  outcome.sheds = tiled::watershedsTiled(directions, rows, outcome.exits.cell, sink, options, control, &report);
  times.merge(report.times);
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(labelsWriter), finished);
  }

  // --- The polygons tile by tile, each segment's written as it is traced.
  steps.setCurrentStep(3);
  if (request.wantPolygons)
  {
    steps.setProgressText(QObject::tr("Tracing the subbasins' polygons tile by tile"));
    PolygonWriter writer(*this, parameters, context, raster, outcome.exits);
    if (count > 0)
    {
      options.onTile = tileProgress(&steps, 1);
      tiled::TiledReport traced;
      tiled::labelPolygonsTiled(*labels, rows, count, options, control, &traced,
                                [&](int32_t k, int64_t cells, double area, BandPolygons& polygons) {
                                  writer.write(k, polygons, 0, cells, area);
                                  polygons = BandPolygons();
                                });
      times.merge(traced.times);
    }
    outcome.polygonsId = writer.id();
  }
  logTiledRun(report, 2, feedback);
  return outcome;
}

void SubbasinsAlgorithm::logOutcome(const Outcome& outcome, QgsProcessingFeedback* feedback)
{
  int64_t labelled = 0;
  for (const int64_t cells : outcome.sheds.ownCells)
    labelled += cells;
  if (outcome.exits.id.empty())
    feedback->pushWarning(QObject::tr("STREAMS holds no segment on the grid: there are no subbasins, and the outputs "
                                      "are empty (the raster holds nodata only)."));
  feedback->pushInfo(QObject::tr("%1 subbasins; %2 cells drain into a segment.")
                       .arg(outcome.exits.id.size())
                       .arg(labelled));
}

QVariantMap SubbasinsAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mLabelsPath))
    context.layerToLoadOnCompletionDetails(mLabelsPath).setPostProcessor(new LabelRasterStyle(mLabels));
  if (!mPolygonsId.isEmpty() && context.willLoadLayerOnCompletion(mPolygonsId))
    context.layerToLoadOnCompletionDetails(mPolygonsId).setPostProcessor(new OutlineStyle(nullptr, 0));
  return QVariantMap();
}

}  // namespace gpugeo
