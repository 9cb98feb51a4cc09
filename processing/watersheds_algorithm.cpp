#include "watersheds_algorithm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeaturerequest.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/band_geometry.h"
#include "adapters/geotiff_writer.h"
#include "adapters/grid_points.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/regions.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/travel_time.h"
#include "flow_direction_input.h"
#include "flowdirection_algorithm.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

namespace tiled = dem::tiled;

// What the in-memory run holds per cell: the directions, the grid's validity (float), the
// accumulation for snapping (two int64), the labels and the polygons' sets (int32 each).
constexpr int64_t kInMemoryBytesPerCell = 29;
// The GPU's arrays per cell: the directions, two labels and two successors.
constexpr int64_t kGpuBytesPerCell = 41;
// From this many threads the CPU labels through the tiles side by side (one thread walks faster
// than two through the tiles' two passes).
constexpr int kThreadsForTiles = 4;

// The directions as elevations for the snapping: NaN on nodata, else 0.
class DirectionsAsElevations : public tiled::RasterSource<float>
{
public:
  explicit DirectionsAsElevations(const tiled::RasterSource<uint8_t>& directions) : mDirections(directions) {}
  int64_t width() const override { return mDirections.width(); }
  int64_t height() const override { return mDirections.height(); }
  void read(const tiled::Window& window, float* out) const override
  {
    std::vector<uint8_t> codes(std::size_t(window.cells()));
    mDirections.read(window, codes.data());
    for (std::size_t i = 0; i < codes.size(); ++i)
      out[i] = codes[i] == dem::kNoData ? std::numeric_limits<float>::quiet_NaN() : 0.f;
  }

private:
  const tiled::RasterSource<uint8_t>& mDirections;
};

QString outletName(QgsFeatureId id)
{
  return featureName(QStringLiteral("OUTLETS"), id);
}

// The error for outlets that no cell can take: on nodata with no valid cell within the distance.
[[noreturn]] void refuseOutletsOnNodata(const QStringList& names, double snapDistance)
{
  throw QgsProcessingException(
    snapDistance > 0
      ? QObject::tr("%1 outlet(s) lie on nodata with no valid cell within SNAP_DISTANCE (%2 m): %3.")
          .arg(names.size())
          .arg(number(snapDistance), names.mid(0, 10).join(QStringLiteral("; ")))
      : QObject::tr("%1 outlet(s) lie on nodata cells (SNAP_DISTANCE 0 takes the cell under the point): %2.")
          .arg(names.size())
          .arg(names.mid(0, 10).join(QStringLiteral("; "))));
}

}  // namespace

QString WatershedsAlgorithm::name() const
{
  return QStringLiteral("watersheds");
}

QString WatershedsAlgorithm::displayName() const
{
  return QObject::tr("Watersheds of outlets");
}

QStringList WatershedsAlgorithm::tags() const
{
  return QObject::tr("dem,watershed,catchment,basin,outlet,pour point,gauge,culvert,subcatchment,nested,snap,d8,"
                     "hydrology,gpu,cuda")
    .split(',');
}

QString WatershedsAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString WatershedsAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString WatershedsAlgorithm::iconFile() const
{
  return QStringLiteral("watersheds.svg");
}

QString WatershedsAlgorithm::shortDescription() const
{
  return QObject::tr("The watershed of every outlet point (gauges, culverts) on D8 flow directions, each outlet "
                     "snapped to the largest upstream area nearby; nested outlets keep their own part.");
}

QString WatershedsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>From a D8 flow direction raster and a layer of outlet points: the cells that drain to each outlet, as "
           "a raster of outlet numbers and one polygon per outlet. Where outlets nest (a gauge upstream of "
           "another), each keeps its own part: a cell belongs to the first outlet its flow path meets.</p>"
           "<p><b>Flow direction raster</b>, <b>Band number</b>, <b>Encoding</b>: D8 directions as <i>Flow "
           "direction</i> writes them (ESRI codes 1 = E &hellip; 128 = NE, or 0 to 7 clockwise from east); the "
           "directions of a filled DEM, so that every cell drains. <b>Outlets</b>: a point layer in any CRS "
           "(transformed to the raster's), numbered 1, 2, &hellip; in the layer's order. <b>Snap distance</b> "
           "(metres; 0: the cell under the point): each outlet moves to the cell of largest upstream area within "
           "the distance (ties to the first in row order), so that a gauge put beside a stream lands on it; the "
           "upstream areas are accumulated from the directions.</p>"
           "<p><b>Outputs</b>: <b>Watersheds</b>, an Int32 raster of outlet numbers (0, nodata: draining to no "
           "outlet), one colour per outlet. <b>Watershed polygons</b>: one feature per outlet with the outlet's "
           "attributes and outlet (its number), snap_m (how far it moved), cells and area_km2 (its own part), "
           "total_km2 (with every outlet nested upstream: what GRASS <i>r.water.outlet</i> gives for it alone) "
           "and down (the outlet it drains into, empty for none). Polygons follow the cells' edges (4-connected, "
           "holes included); the polygons of nested outlets together cover the outermost one's watershed. Two "
           "outlets on one cell: the first takes it, the second gets no polygon.</p>"
           "<p><b>Method</b>: each cell follows its D8 path to the first outlet cell it meets (Jenson &amp; "
           "Domingue 1988). The CPU and the GPU, in memory or tile by tile, give the same labels. A path that ends "
           "in a pit, off the raster or in a loop reaches no outlet.</p>"
           "<p><b>References</b>: S. K. Jenson, J. O. Domingue (1988), Extracting topographic structure from "
           "digital elevation data for geographic information system analysis, Photogrammetric Engineering and "
           "Remote Sensing 54(11), 1593&ndash;1600.</p>") +
         cellSizeHelp() + rangesHelp(*this) + deviceHelp() + tilingHelp(false);
}

WatershedsAlgorithm* WatershedsAlgorithm::createInstance() const
{
  return new WatershedsAlgorithm();
}

void WatershedsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Flow direction raster")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(FlowDirectionAlgorithm::encodingParameter(QObject::tr("Encoding of the flow directions")));
  addParameter(new QgsProcessingParameterFeatureSource(
    QStringLiteral("OUTLETS"), QObject::tr("Outlets"), QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("SNAP_DISTANCE"), QObject::tr("Snap distance (metres)"),
                                                QgsProcessingParameterNumber::Double, 100.0, false, 0.0));
  addDeviceParameter();
  addTilingParameters(false);
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Watersheds")));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_POLYGONS"),
                                                     QObject::tr("Watershed polygons"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLETS_COUNT"), QObject::tr("Outlets")));
}

bool WatershedsAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                        QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  return true;
}

WatershedsAlgorithm::Request WatershedsAlgorithm::readRequest(const QVariantMap& parameters,
                                                             QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  r.snapDistance = parameterAsDouble(parameters, QStringLiteral("SNAP_DISTANCE"), context);
  r.labelsPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  r.wantPolygons = outputRequested(parameters, QStringLiteral("OUTPUT_POLYGONS"));
  return r;
}

std::vector<WatershedsAlgorithm::Outlet> WatershedsAlgorithm::readOutlets(const QVariantMap& parameters,
                                                                         QgsProcessingContext& context,
                                                                         const DemRaster& raster, QgsFields& fields,
                                                                         QgsProcessingFeedback* feedback) const
{
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("OUTLETS"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("OUTLETS")));
  requirePointSource(*source, QStringLiteral("OUTLETS"));
  fields = source->fields();
  std::vector<Outlet> outlets;
  for (GridPoint& g : readGridPoints(*source, QStringLiteral("OUTLETS"), QObject::tr("the flow direction raster"),
                                     raster, context.transformContext(), feedback))
    outlets.push_back(Outlet{std::move(g)});
  feedback->pushInfo(QObject::tr("%1 outlets.").arg(outlets.size()));
  return outlets;
}

QVariantMap WatershedsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                         QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const Request request = readRequest(parameters, context);
  const DemRaster raster = openDemRaster(mSource, request.band);
  std::vector<Outlet> outlets;
  {
    ScopedStage stage(times, "read (outlets)");
    outlets = readOutlets(parameters, context, raster, mOutletFields, feedback);
  }
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
                                     kInMemoryBytesPerCell, tiled::kWatershedsBytesPerTileCell, cpuThreads(),
                                     device.backend, kGpuBytesPerCell);
  logTilingPlan(plan, feedback);
  FinishedRasters finished;
  Outcome outcome;
  if (plan.tiled)
    runTiled(device, plan, feedback, [&](const TilingPlan& on) {
      outcome = executeTiled(request, raster, on, outlets, parameters, context, feedback, times, finished);
    });
  else
    outcome = executeInMemory(device, request, raster, outlets, feedback, times, finished);

  QVariantMap outputs{{QStringLiteral("OUTPUT"), request.labelsPath},
                      {QStringLiteral("OUTLETS_COUNT"), qlonglong(outlets.size())}};
  if (!plan.tiled)
    logOutlets(outlets, raster, outcome.sheds, feedback);
  if (request.wantPolygons && !plan.tiled)
  {
    ScopedStage stage(times, "write (polygons)");
    PolygonWriter polygons(*this, parameters, context, raster, mOutletFields, outlets, outcome.sheds);
    for (int32_t k = 0; k < int32_t(outlets.size()); ++k)
    {
      if (feedback->isCanceled())
        throw Canceled();
      polygons.write(k, outcome.polygons, std::size_t(k));
    }
    outputs.insert(QStringLiteral("OUTPUT_POLYGONS"), polygons.id());
  }
  else if (request.wantPolygons)
    outputs.insert(QStringLiteral("OUTPUT_POLYGONS"), outcome.polygonsId);  // written as traced
  logStageTimes(times, feedback);
  finished.keep();
  mLabelsPath = request.labelsPath;
  mPolygonsId = outputs.value(QStringLiteral("OUTPUT_POLYGONS")).toString();
  mLabels.clear();
  for (int k = 1; k <= int(std::min<std::size_t>(outlets.size(), LabelRasterStyle::kMaxClasses)); ++k)
    mLabels << k;
  return outputs;
}

WatershedsAlgorithm::Outcome WatershedsAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                                  const DemRaster& raster,
                                                                  std::vector<Outlet>& outlets,
                                                                  QgsProcessingFeedback* feedback, StageTimes& times,
                                                                  FinishedRasters& finished)
{
  QgsProcessingMultiStepFeedback steps(4, feedback);
  const RunControl control = runControl(feedback);
  const int64_t w = raster.width;

  // --- Read the directions, checking their codes.
  steps.setProgressText(QObject::tr("Reading the flow directions"));
  std::vector<uint8_t> directions(std::size_t(raster.width * raster.height));
  CodeTileSource::Counts counts;
  {
    ScopedStage stage(times, "read");
    counts = directionSource(raster, request.encoding).scan(&steps, directions.data());
  }
  reportDirections(raster, counts, request.encoding, feedback);
  const std::vector<float> z = directionsAsElevations(directions);
  const dem::Grid grid = raster.grid(z.data());

  // --- Snap: each outlet to the largest upstream area within the distance.
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Snapping the outlets"));
  QStringList onNodata;
  if (request.snapDistance > 0)
  {
    dem::Accumulation accumulation;
    try
    {
      ScopedStage stage(times, "accumulation (snap)");
      runWithCpuFallback(device, feedback, [&](Backend backend) {
        accumulation = dem::flowAccumulation(backend, grid, directions, cpuThreads(), control);
      });
    }
    catch (const dem::LoopedDirections& e)
    {
      throw QgsProcessingException(QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(request.encoding)));
    }
    accumulation.cells.swap(accumulation.area);  // snapOutlet takes the highest: the largest upstream area
    for (Outlet& o : outlets)
    {
      if (!dem::validCellWithin(grid, o.column, o.row, request.snapDistance))
      {
        onNodata << outletName(o.id);
        continue;
      }
      o.cell = dem::snapOutlet(grid, accumulation, o.column, o.row, request.snapDistance);
    }
  }
  else
    for (Outlet& o : outlets)
    {
      o.cell = o.row * w + o.column;
      if (directions[std::size_t(o.cell)] == dem::kNoData)
        onNodata << outletName(o.id);
    }
  if (!onNodata.isEmpty())
    refuseOutletsOnNodata(onNodata, request.snapDistance);
  std::vector<int64_t> cells;
  for (const Outlet& o : outlets)
    cells.push_back(o.cell);

  // --- Label the watersheds, trace their polygons.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Labelling the watersheds"));
  Outcome outcome;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    ScopedStage stage(times, "watersheds");
    if (backend == Backend::Cpu && cpuThreads() >= kThreadsForTiles)
      outcome.sheds = tiled::watershedsOnThreads(directions, tiled::RowSizes{raster.cellWidth, raster.cellHeight},
                                                 cells, cpuThreads(), control);
    else
      outcome.sheds = dem::watersheds(backend, directions, raster.width, raster.height, raster.cellWidth.data(),
                                      raster.cellHeight.data(), cells, cpuThreads(), control);
  });
  if (request.wantPolygons)
  {
    std::vector<int32_t> sets(outcome.sheds.labels.size());
    for (std::size_t i = 0; i < sets.size(); ++i)
      sets[i] = outcome.sheds.labels[i] - 1;
    runWithCpuFallback(device, feedback, [&](Backend backend) {
      ScopedStage stage(times, "polygons");
      outcome.polygons = dem::traceRegions(backend, sets.data(), raster.width, raster.height,
                                           int32_t(outlets.size()), cpuThreads(), control);
    });
  }

  // --- Write the labels.
  steps.setCurrentStep(3);
  steps.setProgressText(QObject::tr("Writing the watersheds"));
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      request.labelsPath, raster, GDT_Int32, 0.0,
      [&](int64_t row0, int64_t rows, void* buffer) {
        std::memcpy(buffer, outcome.sheds.labels.data() + row0 * w, std::size_t(rows * w) * sizeof(int32_t));
      },
      finished, &steps);
  }
  return outcome;
}

WatershedsAlgorithm::Outcome WatershedsAlgorithm::executeTiled(const Request& request, const DemRaster& raster,
                                                               const TilingPlan& plan, std::vector<Outlet>& outlets,
                                                               const QVariantMap& parameters,
                                                               QgsProcessingContext& context,
                                                               QgsProcessingFeedback* feedback, StageTimes& times,
                                                               FinishedRasters& finished)
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(4, feedback);
  const RunControl control = runControl(feedback);
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  const int64_t w = raster.width, h = raster.height;
  tiled::TiledOptions options = plan.options;
  tiled::ScratchFolder scratch(scratchParent());

  // --- Read the directions once, checking their codes.
  steps.setProgressText(QObject::tr("Reading the flow directions (checking their codes)"));
  const CodeTileSource source = directionSource(raster, request.encoding);
  CodeTileSource::Counts counts;
  {
    ScopedStage stage(times, "read (check)");
    counts = source.scan(&steps);
  }
  reportDirections(raster, counts, request.encoding, feedback);

  // --- Snap: the upstream areas tile by tile into the scratch folder, then a window around each outlet.
  steps.setCurrentStep(1);
  steps.setProgressText(QObject::tr("Snapping the outlets"));
  QStringList onNodata;
  const DirectionsAsElevations valid(source);
  if (request.snapDistance > 0)
  {
    tiled::RawFileRaster<int64_t> area(scratch.path() + "/area.i64", w, h, tiled::RawFile::Mode::Create);
    tiled::DiscardSink<int64_t> noCells;
    tiled::TiledReport report;
    options.onTile = tileProgress(&steps, 2);
    try
    {
      tiled::accumulationTiled(source, rows, noCells, area, options, control, &report);
    }
    catch (const dem::LoopedDirections& e)
    {
      throw QgsProcessingException(QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(request.encoding)));
    }
    times.merge(report.times);
    for (Outlet& o : outlets)
    {
      o.cell = tiled::snapOutletTiled(valid, &area, rows, o.column, o.row, request.snapDistance, options.tileWidth);
      if (o.cell < 0)
        onNodata << outletName(o.id);
    }
  }
  else
    for (Outlet& o : outlets)
    {
      uint8_t code = dem::kNoData;
      source.read(tiled::Window{o.column, o.row, 1, 1}, &code);
      o.cell = o.row * w + o.column;
      if (code == dem::kNoData)
        onNodata << outletName(o.id);
    }
  if (!onNodata.isEmpty())
    refuseOutletsOnNodata(onNodata, request.snapDistance);
  std::vector<int64_t> cells;
  for (const Outlet& o : outlets)
    cells.push_back(o.cell);

  // --- Label tile by tile, into the output and, for the polygons, the scratch folder.
  steps.setCurrentStep(2);
  steps.setProgressText(QObject::tr("Labelling the watersheds tile by tile"));
  Outcome outcome;
  std::unique_ptr<GeoTiffWriter> labelsWriter = demRasterWriter(request.labelsPath, raster, GDT_Int32, 0.0);
  TiffTileSink<int32_t> labelsSink(*labelsWriter, [](const int32_t* in, int64_t count, void* buffer) {
    std::memcpy(buffer, in, std::size_t(count) * sizeof(int32_t));
  });
  std::unique_ptr<tiled::RawFileRaster<int32_t>> labels;
  if (request.wantPolygons)
    labels = std::make_unique<tiled::RawFileRaster<int32_t>>(scratch.path() + "/labels.i32", w, h,
                                                             tiled::RawFile::Mode::Create);
  tiled::TeeSink<int32_t> sink(labelsSink, labels.get());
  options.onTile = tileProgress(&steps, 2);
  tiled::TiledReport report;
  outcome.sheds = tiled::watershedsTiled(source, rows, cells, sink, options, control, &report);
  times.merge(report.times);
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(labelsWriter), finished);
  }
  logOutlets(outlets, raster, outcome.sheds, feedback);

  // --- The polygons, tile by tile, each outlet's written as it is traced.
  steps.setCurrentStep(3);
  if (request.wantPolygons)
  {
    steps.setProgressText(QObject::tr("Tracing the watersheds' polygons tile by tile"));
    PolygonWriter writer(*this, parameters, context, raster, mOutletFields, outlets, outcome.sheds);
    options.onTile = tileProgress(&steps, 1);
    tiled::TiledReport traced;
    tiled::labelPolygonsTiled(*labels, rows, int32_t(outlets.size()), options, control, &traced,
                              [&](int32_t k, int64_t, double, BandPolygons& polygons) {
                                writer.write(k, polygons, 0);
                                polygons = BandPolygons();
                              });
    times.merge(traced.times);
    outcome.polygonsId = writer.id();
  }
  logTiledRun(report, 1, feedback);
  return outcome;
}

void WatershedsAlgorithm::logOutlets(const std::vector<Outlet>& outlets, const DemRaster& raster,
                                     const dem::Watersheds& sheds, QgsProcessingFeedback* feedback)
{
  const int64_t w = raster.width;
  int64_t moved = 0, shared = 0, nested = 0;
  for (std::size_t k = 0; k < outlets.size(); ++k)
  {
    const Outlet& o = outlets[k];
    moved += o.cell != o.row * w + o.column;
    shared += sheds.sameCellAs[k] >= 0;
    nested += sheds.downstream[k] >= 0;
  }
  feedback->pushInfo(QObject::tr("%1 outlets: %2 moved by the snapping, %3 nested in another's watershed, %4 on a "
                                 "cell an earlier outlet took (no watershed of their own).")
                       .arg(outlets.size())
                       .arg(moved)
                       .arg(nested)
                       .arg(shared));
  for (std::size_t k = 0; k < outlets.size() && k < 20; ++k)
  {
    const Outlet& o = outlets[k];
    feedback->pushInfo(QObject::tr("Outlet %1 (%2): column %3, row %4; %5 cells, %6 km² of its own, %7 km² in all.")
                         .arg(k + 1)
                         .arg(outletName(o.id))
                         .arg(o.cell % w)
                         .arg(o.cell / w)
                         .arg(sheds.ownCells[k])
                         .arg(number(sheds.ownArea[k] * 1e-6), number(sheds.totalArea[k] * 1e-6)));
  }
}

WatershedsAlgorithm::PolygonWriter::PolygonWriter(const WatershedsAlgorithm& algorithm, const QVariantMap& parameters,
                                                  QgsProcessingContext& context, const DemRaster& raster,
                                                  const QgsFields& outletFields, const std::vector<Outlet>& outlets,
                                                  const dem::Watersheds& sheds)
  : mParameters(parameters), mRaster(raster), mOutlets(outlets), mSheds(sheds)
{
  QgsFields ours;
  ours.append(QgsField(QStringLiteral("outlet"), QVariant::Int));
  ours.append(QgsField(QStringLiteral("snap_m"), QVariant::Double));
  ours.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
  ours.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
  ours.append(QgsField(QStringLiteral("total_km2"), QVariant::Double));
  ours.append(QgsField(QStringLiteral("down"), QVariant::Int));
  mFields = QgsProcessingUtils::combineFields(outletFields, ours);
  mSink = algorithm.createSink(parameters, QStringLiteral("OUTPUT_POLYGONS"), context, mId, mFields,
                               QgsWkbTypes::MultiPolygon, raster.crs);
}

WatershedsAlgorithm::PolygonWriter::~PolygonWriter() = default;

void WatershedsAlgorithm::PolygonWriter::write(int32_t k, const BandPolygons& polygons, std::size_t index)
{
  const Outlet& o = mOutlets[std::size_t(k)];
  QgsFeature feature(mFields);
  if (mSheds.ownCells[std::size_t(k)] > 0)
  {
    const double* gt = mRaster.geoTransform;
    feature.setGeometry(
      QgsGeometry(bandMultiPolygon(polygons, index, false, AxisMap{gt[0], gt[1], gt[3], -gt[5]}).release()));
  }
  QgsAttributes attributes = o.attributes;
  const int32_t down = mSheds.downstream[std::size_t(k)];
  attributes << k + 1 << snapMetres(mRaster, o.column, o.row, o.cell)
             << QVariant::fromValue<qlonglong>(mSheds.ownCells[std::size_t(k)])
             << mSheds.ownArea[std::size_t(k)] * 1e-6 << mSheds.totalArea[std::size_t(k)] * 1e-6
             << (down >= 0 ? QVariant(down + 1) : QVariant(QVariant::Int));
  feature.setAttributes(attributes);
  if (!mSink->addFeature(feature, QgsFeatureSink::FastInsert))
    throw QgsProcessingException(writeFeatureError(mSink.get(), mParameters, QStringLiteral("OUTPUT_POLYGONS")));
}

QVariantMap WatershedsAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mLabelsPath))
    context.layerToLoadOnCompletionDetails(mLabelsPath).setPostProcessor(new LabelRasterStyle(mLabels));
  if (!mPolygonsId.isEmpty() && context.willLoadLayerOnCompletion(mPolygonsId))
    context.layerToLoadOnCompletionDetails(mPolygonsId).setPostProcessor(new OutlineStyle(nullptr, 0));
  return QVariantMap();
}

}  // namespace gpugeo
