#include "filldepressions_algorithm.h"

#include "mpi_launch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/tiled/tiled_dem.h"
#include "parameter_checks.h"

namespace gpugeo {

QString FillDepressionsAlgorithm::name() const
{
  return QStringLiteral("filldepressions");
}

QString FillDepressionsAlgorithm::displayName() const
{
  return QObject::tr("Fill depressions");
}

QStringList FillDepressionsAlgorithm::tags() const
{
  return QObject::tr("dem,fill,sinks,pits,depressions,priority-flood,hydrology,elevation,terrain,gpu,cuda").split(',');
}

QString FillDepressionsAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString FillDepressionsAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString FillDepressionsAlgorithm::iconFile() const
{
  return QStringLiteral("filldepressions.svg");
}

QString FillDepressionsAlgorithm::shortDescription() const
{
  return QObject::tr("Fills the depressions (pits, sinks) of a DEM up to their spill level, exactly as "
                     "Priority-Flood does, on the GPU or all processor cores.");
}

QString FillDepressionsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Fills the depressions of a digital elevation model (DEM), so that water from every cell can flow "
           "out of the grid without going uphill: the first step before flow directions and flow "
           "accumulation.</p>"
           "<p><b>Input DEM</b>: a raster file GDAL reads, north-up. <b>Band number</b>: the band holding the "
           "elevations (1 by default). Cells holding the band's nodata value, NaN or an infinite value are "
           "nodata; the values are taken as float32 (a band with a scale or offset is scaled first).</p>"
           "<p><b>What is filled</b>: cells are 8-connected. An <i>edge cell</i> is a valid cell on the raster's "
           "border or next to a nodata cell: water leaves the grid there (the practice of ArcGIS, SAGA and "
           "WhiteboxTools). The filled elevation of a valid cell is the lowest level at which water standing on "
           "it could leave the grid: the minimum, over the 8-connected paths of valid cells from the cell to an "
           "edge cell, of the highest elevation on the path (the cell and the edge cell included). Cells that "
           "are not in a depression keep their elevation; a depression (a pit, a closed basin) rises to its "
           "spill level, the elevation of the lowest pass out of it. This is what Priority-Flood (Barnes, Lehman "
           "&amp; Mulla 2014) computes when seeded from the edge cells; as it takes only minima and maxima of the "
           "input values, the result equals Priority-Flood's bit for bit, on either backend.</p>"
           "<p><b>Flats</b> (FLATS): a filled depression is a flat surface. <i>Leave flat</i> (0, the default) "
           "changes no elevation beyond the spill level; <i>Flow direction</i> (gpugeo:flowdirection) drains "
           "such flats itself. <i>Resolve flats</i> (1) raises every cell of a flat that has an outlet by "
           "Barnes, Lehman &amp; Mulla's (2014) flat mask, in steps of one float32 unit in the last place: the "
           "cells then fall towards the outlet and away from higher ground, so every cell drains with plain D8. "
           "<i>Epsilon gradient</i> (2) raises each such cell by its number of steps from the flat's outlet "
           "(8-connected), in the same units, so every cell drains towards the nearest outlet. Where a flat is "
           "many steps across and its rim only a few steps higher, a raised cell can reach a rim cell: such "
           "cells are raised in turn, each to one step above its lowest neighbour, so that every cell still "
           "drains with plain D8. Both are determined by the DEM alone (not by a processing order, unlike "
           "Priority-Flood+epsilon); the log counts the cells raised either way.</p>"
           "<p><b>Output</b>: the filled DEM, Float32 GeoTIFF with the input's size, geotransform and CRS; nodata "
           "cells stay nodata, with the input band's nodata value (NaN when it has none or when a float32 value "
           "would collide with it). The log gives the number of raised cells, the deepest fill and the filled "
           "volume (from the cell sizes below).</p>") +
         cellSizeHelp() +
         QObject::tr(
           "<p><b>Method</b>: the raster is cut into tiles flooded in parallel; the tiles are then joined through "
           "the graph of their spill levels and each tile is finished from its border levels, after Barnes "
           "(2016), the parallel tiled Priority-Flood. The GPU path computes the same unique surface.</p>"
           "<p><b>References</b>: R. Barnes, C. Lehman, D. Mulla (2014), Priority-Flood: an optimal "
           "depression-filling and watershed-labeling algorithm for digital elevation models, Computers &amp; "
           "Geosciences 62, 117&ndash;127, doi:10.1016/j.cageo.2013.04.024. R. Barnes (2016), Parallel "
           "Priority-Flood depression filling for trillion cell digital elevation models on desktops or clusters, "
           "Computers &amp; Geosciences 96, 56&ndash;68.</p>") +
         rangesHelp(*this) + deviceHelp() + tilingHelp();
}

FillDepressionsAlgorithm* FillDepressionsAlgorithm::createInstance() const
{
  return new FillDepressionsAlgorithm();
}

void FillDepressionsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Input DEM")));
  // Optional so that qgis_process takes the default (a mandatory band must always be given there).
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(new QgsProcessingParameterEnum(
    QStringLiteral("FLATS"), QObject::tr("Flats"),
    QStringList{QObject::tr("Leave flat"), QObject::tr("Resolve flats (Barnes et al. 2014 gradient)"),
                QObject::tr("Epsilon gradient towards the outlet")},
    false, 0));
  addDeviceParameter();
  addTilingParameters();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Filled DEM")));
}

bool FillDepressionsAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                             QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  return true;
}

namespace {

// What the in-memory run holds per cell: the DEM, the filled copy and the fill's labels; with flats
// resolved, the flat mask, the raised copy and the flats' scratch arrays too.
constexpr int64_t kInMemoryBytesPerCell = 12;
constexpr int64_t kInMemoryBytesPerCellWithFlats = 28;

// The raised cells, the deepest fill and the filled volume, gathered row by row.
struct FillTally
{
  int64_t raised = 0;
  double deepest = 0.0, volume = 0.0;

  void addRow(const float* dem, const float* filled, int64_t count, double cellArea)
  {
    for (int64_t i = 0; i < count; ++i)
    {
      const double depth = double(filled[i]) - double(dem[i]);
      if (depth > 0.0)
      {
        ++raised;
        deepest = std::max(deepest, depth);
        volume += depth * cellArea;
      }
    }
  }

  void log(int64_t valid, QgsProcessingFeedback* feedback) const
  {
    feedback->pushInfo(QObject::tr("Raised %1 of %2 cells; the deepest by %3; filled volume %4 m³.")
                         .arg(raised)
                         .arg(valid)
                         .arg(deepest, 0, 'g', 8)
                         .arg(volume, 0, 'g', 10));
  }
};

void logRaisedFlats(int64_t raised, int64_t raisedInTurn, QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(QObject::tr("Flats: %1 cells raised by their gradient.").arg(raised));
  if (raisedInTurn > 0)
    feedback->pushInfo(QObject::tr("%1 cells next to a flat were overtaken by its raised cells (the flat's rim lies "
                                   "fewer float32 steps above it than the flat is long) and were raised in turn, each "
                                   "to one step above its lowest neighbour, so that every cell drains.")
                         .arg(raisedInTurn));
}

}  // namespace

QVariantMap FillDepressionsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                              QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const int band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  const int flats = parameterAsEnum(parameters, QStringLiteral("FLATS"), context);
  const DemRaster raster = openDemRaster(mSource, band);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan =
    planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
               parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
               flats == 0 ? kInMemoryBytesPerCell : kInMemoryBytesPerCellWithFlats,
               flats == 0 ? dem::tiled::kFillBytesPerTileCell : dem::tiled::kFlatsBytesPerTileCell, cpuThreads(),
               device.backend, flats == 0 ? dem::kGpuFillBytesPerCell : dem::kGpuDirectionBytesPerCell);
  logTilingPlan(plan, feedback);
  if (const std::optional<MpiJob> job = mpiJobOf(parameters, context, feedback))
  {
    const QString output = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
    static const QStringList flatOptions{QStringLiteral("none"), QStringLiteral("resolve"), QStringLiteral("epsilon")};
    runDemProgram(*job, QStringLiteral("filldepressions"),
                  programArguments(parameters, context, mSource, band, plan)
                    << QStringLiteral("--dem") << mSource.gdalName << QStringLiteral("--flats") << flatOptions.value(flats)
                    << QStringLiteral("--output") << output,
                  {output}, feedback);
    return {{QStringLiteral("OUTPUT"), output}};
  }
  if (!plan.tiled)
    return executeInMemory(device, parameters, context, feedback, times);
  QVariantMap outputs;
  runTiled(device, plan, feedback, [&](const TilingPlan& on) {
    outputs = executeTiled(raster, on, flats, parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context),
                           feedback, times);
  });
  return outputs;
}

QVariantMap FillDepressionsAlgorithm::executeTiled(const DemRaster& raster, const TilingPlan& plan, int flats,
                                                   const QString& outputPath, QgsProcessingFeedback* feedback,
                                                   StageTimes& times)
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(flats == 0 ? 2 : 4, feedback);
  feedback->setProgressText(QObject::tr("Reading the DEM (counting its cells)"));
  DemTileSource source(raster);
  Elevations counts;
  {
    ScopedStage stage(times, "read (counts)");
    counts = source.scan(plan.options.tileWidth, &steps);
  }
  reportElevations(raster, counts, feedback);
  const float noData = elevationOutputNoData(raster, counts, feedback);

  std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(outputPath, raster, GDT_Float32, double(noData));
  TiffTileSink<float> sink(*writer, nanAsNoData(noData));
  FillTally tally;
  const auto observe = [&](const dem::tiled::Window& t, const float* dem, const float* filled) {
    for (int64_t y = 0; y < t.height; ++y)
      tally.addRow(dem + y * t.width, filled + y * t.width, t.width,
                   raster.cellWidth[size_t(t.y0 + y)] * raster.cellHeight[size_t(t.y0 + y)]);
  };
  const dem::tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  const RunControl control = runControl(feedback);
  dem::tiled::TiledOptions options = plan.options;
  dem::tiled::TiledReport report;
  int passes = 1;  // the count

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Filling depressions tile by tile"));
  options.onTile = tileProgress(&steps, 2);
  if (flats == 0)
    dem::tiled::fillTiled(source, rows, sink, options, control, &report, observe);
  else
  {
    // The filled DEM, its flat mask and the raised elevations in raw files in the scratch folder
    // (removed however the run ends); the raised DEM is the output.
    const dem::tiled::ScratchFolder scratch(scratchParent());
    dem::tiled::RawFileRaster<float> filled(scratch.path() + "/filled.f32", raster.width, raster.height);
    dem::tiled::RawFileRaster<int32_t> mask(scratch.path() + "/flat_mask.i32", raster.width, raster.height);
    dem::tiled::RawFileRaster<float> work(scratch.path() + "/raised.f32", raster.width, raster.height);
    dem::tiled::fillTiled(source, rows, filled, options, control, &report);
    times.merge(report.times);
    passes += report.passes;

    steps.setCurrentStep(2);
    feedback->setProgressText(QObject::tr("Resolving flats tile by tile"));
    options.onTile = roundsProgress(&steps);
    dem::tiled::TiledReport flatsReport;
    dem::tiled::flatMaskTiled(filled, rows, mask,
                              flats == 1 ? dem::FlatGradient::Combined : dem::FlatGradient::TowardsOutlet,
                              scratch.path(), options, control, &flatsReport);
    times.merge(flatsReport.times);
    passes += flatsReport.passes;

    steps.setCurrentStep(3);
    feedback->setProgressText(QObject::tr("Raising the flats tile by tile"));
    const int64_t fillGraphBytes = report.graphBytes, fillTileBytes = report.tileBytes;
    report = dem::tiled::TiledReport();
    const dem::tiled::RaisedCounts raised =
      dem::tiled::raiseFlatsTiled(filled, mask, rows, work, sink, options, control, &report, &source, observe);
    passes += report.passes - 1;  // logTiledRun adds the last report's passes
    report.graphBytes = std::max({report.graphBytes, flatsReport.graphBytes, fillGraphBytes});
    report.tileBytes = std::max({report.tileBytes, flatsReport.tileBytes, fillTileBytes});
    logRaisedFlats(raised.raised, raised.raisedInTurn, feedback);
    feedback->pushInfo(QObject::tr("Scratch: %1 MiB in %2, removed now.")
                         .arg(double(scratch.bytes()) / 1048576.0, 0, 'f', 0)
                         .arg(QString::fromStdString(scratch.path())));
  }
  times.merge(report.times);
  FinishedRasters finished;
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(writer), finished);
  }
  tally.log(counts.valid, feedback);
  logTiledRun(report, passes, feedback);
  logStageTimes(times, feedback);
  finished.keep();
  return {{QStringLiteral("OUTPUT"), outputPath}};
}

QVariantMap FillDepressionsAlgorithm::executeInMemory(const BackendChoice& device, const QVariantMap& parameters, QgsProcessingContext& context,
                                                      QgsProcessingFeedback* feedback, StageTimes& times)
{
  QgsProcessingMultiStepFeedback steps(3, feedback);
  const int band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  const QString outputPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);

  LoadedDem loaded = loadDem(mSource, band, times, &steps, feedback);
  const DemRaster& raster = loaded.raster;
  Elevations& dem = loaded.elevations;

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Filling depressions"));
  const RunControl control = runControl(feedback);
  const dem::Grid grid = raster.grid(dem.z.data());
  std::vector<float> filled;
  const int flats = parameterAsEnum(parameters, QStringLiteral("FLATS"), context);
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    if (flats == 0)
    {
      filled = dem::fillDepressions(backend, grid, cpuThreads(), control, &times);
      return;
    }
    dem::RaisedFlats raisedFlats =
      dem::fillAndRaiseFlats(backend, grid, flats == 1 ? dem::FlatGradient::Combined : dem::FlatGradient::TowardsOutlet,
                             cpuThreads(), control, &times);
    logRaisedFlats(raisedFlats.raised, raisedFlats.raisedInTurn, feedback);
    filled = std::move(raisedFlats.z);
  });

  FillTally tally;
  for (int64_t y = 0; y < raster.height; ++y)
    tally.addRow(dem.z.data() + y * raster.width, filled.data() + y * raster.width, raster.width,
                 raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)]);
  tally.log(dem.valid, feedback);
  std::vector<float>().swap(dem.z);

  const float noData = elevationOutputNoData(raster, dem, feedback);
  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the filled DEM"));
  FinishedRasters finished;
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      outputPath, raster, GDT_Float32, double(noData),
      [&](int64_t row0, int64_t rows, void* buffer) {
        float* out = static_cast<float*>(buffer);
        const float* in = filled.data() + row0 * raster.width;
        for (int64_t i = 0; i < rows * raster.width; ++i)
          out[i] = std::isnan(in[i]) ? noData : in[i];
      },
      finished, &steps);
  }
  logStageTimes(times, feedback);
  finished.keep();
  return {{QStringLiteral("OUTPUT"), outputPath}};
}

}  // namespace gpugeo
