#include "streamnetwork_algorithm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgslinestring.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "flow_direction_input.h"
#include "flowdirection_algorithm.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

namespace tiled = dem::tiled;

// What the in-memory run holds per cell: the elevations, the directions, the accumulation's validity
// marks, cells and area, the stream marks and inflows, the segments.
constexpr int64_t kInMemoryBytesPerCell = 34;
// And per segment: its first and last cells, downstream segment, cells, length units, length, drop,
// area, upstream cells, orders and the orders' work. Every source has at least the threshold's cells
// upstream, none of them another source's, and a tree has fewer junctions than sources: at most
// 2 x cells / threshold segments, and never more than the cells.
constexpr int64_t kBytesPerSegment = 104;
// And per segment when only the rasters are written (dem::StreamFields::Orders): its first cell,
// downstream segment, Strahler order and the orders' work, and on the GPU's path the last cells, cells
// and lengths the device returns (with their narrow copies while they are widened) before they are dropped.
constexpr int64_t kRasterBytesPerSegment = 52;
// The GPU's: the accumulation's, then the network's (the larger).
constexpr int64_t kGpuBytesPerCell = std::max(dem::kGpuAccumulationBytesPerCell, dem::kGpuStreamsBytesPerCell);
// The tiled run: the accumulation's tiles, then the network's (the larger).
constexpr int64_t kTileBytesPerCell = std::max(tiled::kAccumulationBytesPerTileCell, tiled::kStreamsBytesPerTileCell);
// Strahler orders past this are written as it in the Byte order raster (no real network comes near).
constexpr int kMaxOrderInRaster = 255;

// THRESHOLD in the native threshold's units (cells, or 1e-6 m² of area), clamped to int64.
dem::StreamThreshold thresholdOf(double value, int units)
{
  const double scale = units == StreamNetworkAlgorithm::SquareKilometres ? 1e12
                       : units == StreamNetworkAlgorithm::SquareMetres   ? 1e6
                                                                           : 1.0;
  const double scaled = std::ceil(value * scale);
  const int64_t limit = std::numeric_limits<int64_t>::max();
  const int64_t clamped = scaled >= 9.2e18 ? limit : std::max<int64_t>(1, int64_t(scaled));
  dem::StreamThreshold threshold;
  if (units == StreamNetworkAlgorithm::Cells)
    threshold.minCells = clamped;
  else
    threshold.minArea = clamped;
  return threshold;
}

// The in-memory run's bytes per cell with its segments at most (kBytesPerSegment, or
// kRasterBytesPerSegment without the lines): the threshold in cells, or the area threshold over the
// largest cell's area.
int64_t inMemoryBytesPerCell(const dem::StreamThreshold& threshold, bool lines, const DemRaster& raster)
{
  double largest = 0;
  for (std::size_t y = 0; y < raster.cellWidth.size(); ++y)
    largest = std::max(largest, raster.cellWidth[y] * raster.cellHeight[y] * 1e6);
  const double cells = std::max({1.0, double(threshold.minCells),
                                 largest > 0 ? std::floor(double(threshold.minArea) / largest) : 1.0});
  const double perSegment = double(lines ? kBytesPerSegment : kRasterBytesPerSegment);
  return kInMemoryBytesPerCell + int64_t(std::ceil(std::min(1.0, 2.0 / cells) * perSegment));
}

uint8_t orderByte(int32_t strahler)
{
  return uint8_t(std::clamp(strahler, 0, kMaxOrderInRaster));
}

}  // namespace

// --- The lines -------------------------------------------------------------------------------------

class StreamNetworkAlgorithm::LineWriter
{
public:
  LineWriter(const StreamNetworkAlgorithm& algorithm, const QVariantMap& parameters, QgsProcessingContext& context,
             const DemRaster& raster, const dem::StreamNetwork& network)
    : mParameters(parameters), mRaster(raster), mNetwork(network)
  {
    mFields.append(QgsField(QStringLiteral("id"), QVariant::Int));
    mFields.append(QgsField(QStringLiteral("down_id"), QVariant::Int));
    mFields.append(QgsField(QStringLiteral("strahler"), QVariant::Int));
    mFields.append(QgsField(QStringLiteral("shreve"), QVariant::LongLong));
    mFields.append(QgsField(QStringLiteral("length_m"), QVariant::Double));
    mFields.append(QgsField(QStringLiteral("drop_m"), QVariant::Double));
    mFields.append(QgsField(QStringLiteral("slope"), QVariant::Double));
    mFields.append(QgsField(QStringLiteral("up_km2"), QVariant::Double));
    mFields.append(QgsField(QStringLiteral("up_cells"), QVariant::LongLong));
    mFields.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
    mSink = algorithm.createSink(parameters, QStringLiteral("OUTPUT_LINES"), context, mId, mFields,
                                 QgsWkbTypes::LineString, raster.crs);
  }

  // Segment k (1-based) with its cells, segmentLine()'s.
  void write(int32_t k, const std::vector<int64_t>& cells)
  {
    const std::size_t i = std::size_t(k - 1);
    const double* gt = mRaster.geoTransform;
    QVector<double> x, y;
    x.reserve(int(cells.size()) + 1);
    y.reserve(int(cells.size()) + 1);
    for (const int64_t c : cells)
    {
      const double column = double(c % mRaster.width) + 0.5, row = double(c / mRaster.width) + 0.5;
      x << gt[0] + column * gt[1] + row * gt[2];
      y << gt[3] + column * gt[4] + row * gt[5];
    }
    if (x.size() == 1)  // a one-cell segment that flows into none: a line of no length at its centre
    {
      x << x.front();
      y << y.front();
      ++mPointLines;
    }
    QgsFeature feature(mFields);
    feature.setGeometry(QgsGeometry(new QgsLineString(x, y)));
    const double length = mNetwork.length[i], drop = mNetwork.drop[i];
    const int32_t down = mNetwork.down[i];
    QgsAttributes attributes;
    attributes << k << (down > 0 ? QVariant(down) : QVariant(QVariant::Int)) << mNetwork.strahler[i]
               << QVariant::fromValue<qlonglong>(mNetwork.shreve[i]) << length
               << (std::isfinite(drop) ? QVariant(drop) : QVariant(QVariant::Double))
               << (std::isfinite(drop) && length > 0 ? QVariant(drop / length) : QVariant(QVariant::Double))
               << double(mNetwork.area[i]) * 1e-12 << QVariant::fromValue<qlonglong>(mNetwork.upstreamCells[i])
               << QVariant::fromValue<qlonglong>(mNetwork.cells[i]);
    feature.setAttributes(attributes);
    if (!mSink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(mSink.get(), mParameters, QStringLiteral("OUTPUT_LINES")));
  }

  const QString& id() const { return mId; }
  int64_t pointLines() const { return mPointLines; }

private:
  const QVariantMap& mParameters;
  const DemRaster& mRaster;
  const dem::StreamNetwork& mNetwork;
  QgsFields mFields;
  QString mId;
  std::unique_ptr<QgsFeatureSink> mSink;
  int64_t mPointLines = 0;
};

// --- The algorithm ---------------------------------------------------------------------------------

QString StreamNetworkAlgorithm::name() const
{
  return QStringLiteral("streamnetwork");
}

QString StreamNetworkAlgorithm::displayName() const
{
  return QObject::tr("Stream network");
}

QStringList StreamNetworkAlgorithm::tags() const
{
  return QObject::tr("dem,stream,channel,network,drainage,river,strahler,shreve,order,segment,link,junction,"
                     "threshold,d8,hydrology,gpu,cuda")
    .split(',');
}

QString StreamNetworkAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString StreamNetworkAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString StreamNetworkAlgorithm::iconFile() const
{
  return QStringLiteral("streamnetwork.svg");
}

QString StreamNetworkAlgorithm::shortDescription() const
{
  return QObject::tr("The channels where the upstream area reaches a threshold, cut into segments at junctions: a "
                     "raster of segments and one line per segment with its Strahler and Shreve orders, downstream "
                     "segment, length, drop, slope and upstream area.");
}

QString StreamNetworkAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Extracts a stream network from D8 flow directions: every cell whose upstream area (or number of "
           "upstream cells) reaches the threshold is a stream cell, and the stream cells are cut into segments "
           "at junctions, each with its orders and its downstream segment, so that the network can be routed "
           "along.</p>"
           "<p><b>DEM</b> (INPUT, <b>Band number</b>): the elevations, for the lines' drops and slopes (usually "
           "the filled or breached DEM the directions came from; without the lines a run in memory reads only "
           "its grid, not its elevations). <b>Flow direction raster</b> (DIRECTIONS, band "
           "1) and <b>Encoding</b>: D8 directions as <i>Flow direction</i> writes them (ESRI codes 1 = E &hellip; "
           "128 = NE, or 0 to 7 clockwise from east), on the DEM's grid. <b>Threshold</b> (THRESHOLD) in "
           "<b>Threshold units</b> (THRESHOLD_UNITS: 0 = upstream area in km², 1 = in m², 2 = upstream cells): a "
           "cell is a stream cell when its upstream area, or count, the cell itself included, is at least the "
           "threshold (the accumulation of <i>Flow accumulation</i>, computed here from the directions).</p>"
           "<p><b>Segments</b>: a segment starts at a source (a stream cell no stream cell flows into) or a "
           "junction (one two or more stream cells flow into) and runs down to the cell before the next junction, "
           "or to the end of its path (off the raster, into a pit or onto nodata). Segments are numbered 1, 2, "
           "&hellip; by their first cells, row by row from the top left.</p>"
           "<p><b>Outputs</b>: <b>Stream segments</b> (OUTPUT, Int32: each stream cell's segment id; 0 is nodata); "
           "optionally <b>Strahler order</b> (OUTPUT_ORDER, Byte: each stream cell's segment's order; 0 is "
           "nodata); <b>Stream lines</b> (OUTPUT_LINES): one line per segment, whole, through its cells' centres "
           "and on to the first cell of the segment it flows into, so that lines meet at junctions. Fields: "
           "<tt>id</tt>; <tt>down_id</tt> (the segment it flows into, NULL at an outlet); <tt>strahler</tt> "
           "(Strahler 1957: 1 at a source, the highest order flowing in, plus one where two or more bring it); "
           "<tt>shreve</tt> (Shreve 1966: the number of sources upstream); <tt>length_m</tt> (the line's length "
           "in metres, each step the width, height or diagonal of the cell it leaves); <tt>drop_m</tt> (the "
           "elevation of its first cell minus that of the line's last point); <tt>slope</tt> (drop over length, "
           "m/m); <tt>up_km2</tt> and <tt>up_cells</tt> (upstream area and cells at its last cell); "
           "<tt>cells</tt> (its own cells). A segment of one cell that flows into none is a line of no length "
           "at the cell's centre (slope NULL). The log counts the stream cells, segments and outlets; a threshold "
           "above every cell's upstream area gives empty outputs, with a warning. Every segment holds memory for "
           "the whole run, tile by tile too (about 20 bytes, 100 with the lines): a run whose segments would "
           "pass the memory budget stops and says what it needs (raise the threshold or leave out the lines).</p>"
           "<p><b>Method</b>: the accumulation as <i>Flow accumulation</i>'s; each stream cell's segment found from "
           "the segment's first cell (tile by tile: chains joined across the tiles' edges by a graph over the "
           "tiles' perimeters); the orders over the tree of segments, upstream first. "
           "Lengths are exact sums in a fixed-point unit: the CPU and the GPU, in memory or tile by tile, give "
           "the same segments and the same numbers. Peers: GRASS <i>r.stream.extract</i>, SAGA <i>Channel Network and "
           "Drainage Basins</i>, TauDEM <i>Stream Reach and Watershed</i>.</p>"
           "<p><b>References</b>: A. N. Strahler (1957), Quantitative analysis of watershed geomorphology, "
           "Transactions of the American Geophysical Union 38(6), 913&ndash;920. R. L. Shreve (1966), Statistical "
           "law of stream numbers, Journal of Geology 74(1), 17&ndash;37.</p>") +
         cellSizeHelp() + rangesHelp(*this) + deviceHelp() + tilingHelp(false);
}

StreamNetworkAlgorithm* StreamNetworkAlgorithm::createInstance() const
{
  return new StreamNetworkAlgorithm();
}

void StreamNetworkAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("DEM")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(
    new QgsProcessingParameterRasterLayer(QStringLiteral("DIRECTIONS"), QObject::tr("Flow direction raster")));
  addParameter(FlowDirectionAlgorithm::encodingParameter(QObject::tr("Encoding of the flow directions")));
  auto threshold = std::make_unique<QgsProcessingParameterNumber>(
    QStringLiteral("THRESHOLD"), QObject::tr("Threshold (upstream area or cells)"),
    QgsProcessingParameterNumber::Double, 1.0, false, 0.0);
  setMinimumExcluded(*threshold);
  addParameter(threshold.release());
  addParameter(new QgsProcessingParameterEnum(
    QStringLiteral("THRESHOLD_UNITS"), QObject::tr("Threshold units"),
    QStringList{QObject::tr("Upstream area (km²)"), QObject::tr("Upstream area (m²)"), QObject::tr("Upstream cells")},
    false, SquareKilometres));
  addDeviceParameter();
  addTilingParameters(false);
  addParameter(
    new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Stream segments")));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_ORDER"),
                                                           QObject::tr("Strahler order"), QVariant(), true, false));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_LINES"), QObject::tr("Stream lines"),
                                                     QgsProcessing::TypeVectorLine, QVariant(), true, true));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("STREAM_CELLS"), QObject::tr("Stream cells")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("SEGMENTS"), QObject::tr("Segments")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLETS"), QObject::tr("Outlets (segments flowing into none)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("MAX_STRAHLER"), QObject::tr("Highest Strahler order")));
}

bool StreamNetworkAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                           QgsProcessingFeedback*)
{
  const auto source = [&](const QString& name) {
    return demSourceOf(parameterAsRasterLayer(parameters, name, context), name, parameters.value(name));
  };
  mSource = source(QStringLiteral("INPUT"));
  mSource.outputFormat = outputFormat(parameters, context);
  mDirectionsSource = source(QStringLiteral("DIRECTIONS"));
  return true;
}

StreamNetworkAlgorithm::Request StreamNetworkAlgorithm::readRequest(const QVariantMap& parameters,
                                                                    QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  r.threshold = thresholdOf(parameterAsDouble(parameters, QStringLiteral("THRESHOLD"), context),
                            parameterAsEnum(parameters, QStringLiteral("THRESHOLD_UNITS"), context));
  r.segmentsPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  if (outputRequested(parameters, QStringLiteral("OUTPUT_ORDER")))
    r.orderPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_ORDER"), context);
  r.wantLines = outputRequested(parameters, QStringLiteral("OUTPUT_LINES"));
  return r;
}

StreamNetworkAlgorithm::Inputs StreamNetworkAlgorithm::openInputs(const Request& request,
                                                                  QgsProcessingFeedback* feedback) const
{
  Inputs in{openDemRaster(mSource, request.band), openDemRaster(mDirectionsSource, 1)};
  requireDemGrid(in.directions, in.dem, QStringLiteral("DIRECTIONS"), feedback);
  return in;
}

QVariantMap StreamNetworkAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                            QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const Request request = readRequest(parameters, context);
  const Inputs in = openInputs(request, feedback);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), in.dem,
                                     inMemoryBytesPerCell(request.threshold, request.wantLines, in.dem), kTileBytesPerCell,
                                     cpuThreads(), device.backend, kGpuBytesPerCell);
  logTilingPlan(plan, feedback);
  FinishedRasters finished;
  Outcome outcome;
  if (plan.tiled)
    runTiled(device, plan, feedback, [&](const TilingPlan& on) {
      outcome = executeTiled(request, in, on, parameters, context, feedback, times, finished);
    });
  else
    outcome = executeInMemory(device, request, in, parameters, context, feedback, times, finished);
  logOutcome(request, outcome, feedback);
  logStageTimes(times, feedback);
  finished.keep();

  mSegmentsPath = request.segmentsPath;
  mOrderPath = request.orderPath;
  mLinesId = outcome.linesId;
  mSegments = outcome.segments;
  mMaxStrahler = outcome.maxStrahler;
  QVariantMap outputs{{QStringLiteral("OUTPUT"), request.segmentsPath},
                      {QStringLiteral("STREAM_CELLS"), qlonglong(outcome.streamCells)},
                      {QStringLiteral("SEGMENTS"), qlonglong(outcome.segments)},
                      {QStringLiteral("OUTLETS"), qlonglong(outcome.outlets)},
                      {QStringLiteral("MAX_STRAHLER"), outcome.maxStrahler}};
  if (!request.orderPath.isEmpty())
    outputs.insert(QStringLiteral("OUTPUT_ORDER"), request.orderPath);
  if (request.wantLines)
    outputs.insert(QStringLiteral("OUTPUT_LINES"), outcome.linesId);
  return outputs;
}

StreamNetworkAlgorithm::Outcome StreamNetworkAlgorithm::executeInMemory(
  const BackendChoice& device, const Request& request, const Inputs& in, const QVariantMap& parameters,
  QgsProcessingContext& context, QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished) const
{
  QgsProcessingMultiStepFeedback steps(6, feedback);
  const RunControl control = runControl(feedback);
  const DemRaster& raster = in.dem;
  const int64_t w = raster.width, h = raster.height;

  // --- Read the elevations (only the lines' drops need them) and the directions (checking their codes).
  LoadedDem dem;
  if (request.wantLines)
    dem = loadDem(mSource, request.band, times, &steps, feedback);
  else
    reportCellSizes(raster, feedback);
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Reading the flow directions"));
  std::vector<uint8_t> directions(static_cast<std::size_t>(w * h));
  {
    ScopedStage stage(times, "read (directions)");
    const CodeTileSource::Counts counts = directionSource(in.directions, request.encoding).scan(&steps, directions.data());
    reportDirections(in.directions, counts, request.encoding, feedback);
  }

  // --- Accumulate over the directions (their valid cells, as the tiled run), then cut the network.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Accumulating flow"));
  dem::Accumulation accumulation;
  const std::vector<float> valid = directionsAsElevations(directions);
  try
  {
    runWithCpuFallback(device, feedback, [&](Backend backend) {
      accumulation =
        dem::flowAccumulation(backend, raster.grid(valid.data()), directions, cpuThreads(), control, &times);
    });
  }
  catch (const dem::LoopedDirections& e)
  {
    throw QgsProcessingException(
      QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(request.encoding)));
  }
  steps.setCurrentStep(3);
  steps.setProgressText(QObject::tr("Cutting the stream network into segments"));
  dem::StreamNetwork network;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    ScopedStage stage(times, "stream network");
    // Without the lines the network reads no elevation: the grid's are the directions' valid cells.
    const float* z = request.wantLines ? dem.elevations.z.data() : valid.data();
    network = dem::streamNetwork(backend, raster.grid(z), directions, accumulation,
                                 request.threshold, cpuThreads(), control,
                                 request.wantLines ? dem::StreamFields::Full : dem::StreamFields::Orders);
  });
  std::vector<int64_t>().swap(accumulation.cells);
  std::vector<int64_t>().swap(accumulation.area);
  Outcome outcome;
  summarize(network, outcome);

  // --- Write the segments and the orders, then the lines.
  steps.setCurrentStep(4);
  steps.setProgressText(QObject::tr("Writing the stream rasters"));
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      request.segmentsPath, raster, GDT_Int32, 0.0,
      [&](int64_t row0, int64_t rows, void* buffer) {
        std::memcpy(buffer, network.segment.data() + row0 * w, std::size_t(rows * w) * sizeof(int32_t));
      },
      finished, &steps);
    if (!request.orderPath.isEmpty())
      writeDemRaster(
        request.orderPath, raster, GDT_Byte, 0.0,
        [&](int64_t row0, int64_t rows, void* buffer) {
          auto* out = static_cast<uint8_t*>(buffer);
          for (int64_t i = 0; i < rows * w; ++i)
          {
            const int32_t k = network.segment[std::size_t(row0 * w + i)];
            out[i] = k > 0 ? orderByte(network.strahler[std::size_t(k - 1)]) : 0;
          }
        },
        finished, &steps);
  }
  steps.setCurrentStep(5);
  if (request.wantLines)
  {
    steps.setProgressText(QObject::tr("Writing the stream lines"));
    ScopedStage stage(times, "write (lines)");
    LineWriter writer(*this, parameters, context, raster, network);
    for (int32_t k = 1; k <= int32_t(network.first.size()); ++k)
    {
      if ((k & 0xfff) == 0)
      {
        if (control.isCanceled())
          throw Canceled();
        steps.setProgress(100.0 * double(k) / double(network.first.size()));
      }
      writer.write(k, dem::segmentLine(network, directions, w, h, k));
    }
    outcome.linesId = writer.id();
    outcome.pointLines = writer.pointLines();
  }
  return outcome;
}

StreamNetworkAlgorithm::Outcome StreamNetworkAlgorithm::executeTiled(const Request& request, const Inputs& in,
                                                                     const TilingPlan& plan,
                                                                     const QVariantMap& parameters,
                                                                     QgsProcessingContext& context,
                                                                     QgsProcessingFeedback* feedback,
                                                                     StageTimes& times, FinishedRasters& finished) const
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(5, feedback);
  const RunControl control = runControl(feedback);
  const DemRaster& raster = in.dem;
  const int64_t w = raster.width, h = raster.height;
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  tiled::ScratchFolder scratch(scratchParent());

  // --- Read the elevations and the directions once, counting the cells and checking the codes.
  steps.setProgressText(QObject::tr("Reading the DEM and the flow directions (checking them)"));
  const DemTileSource elevations(raster);
  const CodeTileSource directions = directionSource(in.directions, request.encoding);
  {
    ScopedStage stage(times, "read (check)");
    reportElevations(raster, elevations.scan(plan.options.tileWidth, &steps), feedback);
    reportDirections(in.directions, directions.scan(&steps), request.encoding, feedback);
  }

  // --- Accumulate tile by tile into the scratch folder.
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Accumulating flow tile by tile"));
  tiled::RawFileRaster<int64_t> cells(scratch.path() + "/cells.i64", w, h, tiled::RawFile::Mode::Create);
  tiled::RawFileRaster<int64_t> area(scratch.path() + "/area.i64", w, h, tiled::RawFile::Mode::Create);
  tiled::TiledOptions options = plan.options;
  options.onTile = tileProgress(&steps, 2);
  tiled::TiledReport accumulated;
  try
  {
    tiled::accumulationTiled(directions, rows, cells, area, options, control, &accumulated);
  }
  catch (const dem::LoopedDirections& e)
  {
    throw QgsProcessingException(
      QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(request.encoding)));
  }
  times.merge(accumulated.times);

  // --- The network tile by tile: the segments written as the tiles finish, kept for the orders and lines.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Cutting the stream network into segments tile by tile"));
  std::unique_ptr<GeoTiffWriter> segmentsWriter = demRasterWriter(request.segmentsPath, raster, GDT_Int32, 0.0);
  TiffTileSink<int32_t> segmentsSink(*segmentsWriter, [](const int32_t* values, int64_t count, void* buffer) {
    std::memcpy(buffer, values, std::size_t(count) * sizeof(int32_t));
  });
  std::unique_ptr<tiled::RawFileRaster<int32_t>> kept;
  if (!request.orderPath.isEmpty())
    kept = std::make_unique<tiled::RawFileRaster<int32_t>>(scratch.path() + "/segments.i32", w, h,
                                                           tiled::RawFile::Mode::Create);
  tiled::StreamCellSink streamCells(directions);
  tiled::DiscardSink<int32_t> noLines;
  tiled::TeeSink<int32_t> keep(request.wantLines ? static_cast<tiled::RasterSink<int32_t>&>(streamCells) : noLines,
                               kept.get());
  tiled::TeeSink<int32_t> sink(segmentsSink, &keep);
  options.onTile = tileProgress(&steps, 2);
  tiled::TiledReport report;
  const dem::StreamNetwork network =
    tiled::streamNetworkTiled(elevations, directions, cells, area, rows, request.threshold, sink, options, control,
                              &report, request.wantLines ? dem::StreamFields::Full : dem::StreamFields::Orders);
  times.merge(report.times);
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(segmentsWriter), finished);
  }
  Outcome outcome;
  summarize(network, outcome);

  // --- The orders from the kept segments, then the lines from the kept stream cells.
  steps.setCurrentStep(3);
  if (kept)
  {
    steps.setProgressText(QObject::tr("Writing the Strahler orders"));
    ScopedStage stage(times, "write (orders)");
    std::vector<int32_t> segments;
    writeDemRaster(
      request.orderPath, raster, GDT_Byte, 0.0,
      [&](int64_t row0, int64_t count, void* buffer) {
        segments.resize(std::size_t(count * w));
        kept->read(tiled::Window{0, row0, w, count}, segments.data());
        auto* out = static_cast<uint8_t*>(buffer);
        for (std::size_t i = 0; i < segments.size(); ++i)
          out[i] = segments[i] > 0 ? orderByte(network.strahler[std::size_t(segments[i] - 1)]) : 0;
      },
      finished, &steps);
  }
  steps.setCurrentStep(4);
  if (request.wantLines)
  {
    steps.setProgressText(QObject::tr("Writing the stream lines"));
    ScopedStage stage(times, "write (lines)");
    LineWriter writer(*this, parameters, context, raster, network);
    streamCells.lines(
      network, [&](int32_t k, const std::vector<int64_t>& line) { writer.write(k, line); }, control);
    outcome.linesId = writer.id();
    outcome.pointLines = writer.pointLines();
  }
  logTiledRun(report, 1 + accumulated.passes, feedback);
  return outcome;
}

void StreamNetworkAlgorithm::summarize(const dem::StreamNetwork& network, Outcome& outcome)
{
  outcome.segments = int64_t(network.first.size());
  outcome.streamCells = network.streamCells;
  for (std::size_t k = 0; k < network.first.size(); ++k)
  {
    outcome.outlets += network.down[k] == 0;
    outcome.maxStrahler = std::max(outcome.maxStrahler, int(network.strahler[k]));
  }
}

void StreamNetworkAlgorithm::logOutcome(const Request& request, const Outcome& outcome, QgsProcessingFeedback* feedback)
{
  if (outcome.segments == 0)
    feedback->pushWarning(
      QObject::tr("No cell's upstream %1 reaches the threshold: there is no stream, and the outputs are empty (the "
                  "rasters hold nodata only). Lower THRESHOLD.")
        .arg(request.threshold.minArea > 0 ? QObject::tr("area") : QObject::tr("cell count")));
  feedback->pushInfo(QObject::tr("%1 stream cells in %2 segments; %3 outlets (segments flowing into none); highest "
                                 "Strahler order %4.")
                       .arg(outcome.streamCells)
                       .arg(outcome.segments)
                       .arg(outcome.outlets)
                       .arg(outcome.maxStrahler));
  if (outcome.pointLines > 0)
    feedback->pushInfo(QObject::tr("%1 segments of one cell flow into none: their lines have no length.")
                         .arg(outcome.pointLines));
}

QVariantMap StreamNetworkAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  const LoadOrder order = std::make_shared<QHash<QString, int>>();
  if (context.willLoadLayerOnCompletion(mSegmentsPath))
  {
    if (mSegments <= LabelRasterStyle::kMaxClasses)
    {
      QVector<int> labels;
      for (int k = 1; k <= int(mSegments); ++k)
        labels << k;
      context.layerToLoadOnCompletionDetails(mSegmentsPath).setPostProcessor(new LabelRasterStyle(labels));
    }
    else
      context.layerToLoadOnCompletionDetails(mSegmentsPath)
        .setPostProcessor(new ContinuousRasterStyle(1.0, double(mSegments), order, 0));
  }
  if (!mOrderPath.isEmpty() && context.willLoadLayerOnCompletion(mOrderPath))
    context.layerToLoadOnCompletionDetails(mOrderPath)
      .setPostProcessor(new ContinuousRasterStyle(1.0, std::max(2.0, double(mMaxStrahler)), order, 1));
  if (!mLinesId.isEmpty() && context.willLoadLayerOnCompletion(mLinesId))
    context.layerToLoadOnCompletionDetails(mLinesId).setPostProcessor(new StreamLineStyle(order, 2));
  return QVariantMap();
}

}  // namespace gpugeo
