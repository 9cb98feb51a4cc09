#include "flowdirection_algorithm.h"

#include "gdal/dem_conventions.h"
#include "mpi_launch.h"

#include <algorithm>
#include <array>
#include <vector>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "parameter_checks.h"

namespace gpugeo {

static_assert(int(FlowDirectionAlgorithm::Esri) == int(gdal::kEsri) && int(FlowDirectionAlgorithm::Clockwise) == int(gdal::kClockwise),
              "ENCODING's options are the GDAL layer's encodings");

uint8_t FlowDirectionAlgorithm::encode(uint8_t direction, int encoding)
{
  return gdal::encodeDirection(direction, encoding);
}

QgsProcessingParameterDefinition* FlowDirectionAlgorithm::encodingParameter(const QString& description)
{
  return new QgsProcessingParameterEnum(
    QStringLiteral("ENCODING"), description,
    QStringList{QObject::tr("ESRI (1 = E, 2 = SE, 4 = S, 8 = SW, 16 = W, 32 = NW, 64 = N, 128 = NE)"),
                QObject::tr("0 to 7 clockwise from east (0 = E, 1 = SE ... 7 = NE)")},
    false, Esri);
}

QString FlowDirectionAlgorithm::encodingHelp()
{
  return QObject::tr(
    "<p><b>Encoding</b> (ENCODING) of the directions, in a Byte raster: <i>ESRI</i> (0, the default): 1 = east, "
    "2 = south-east, 4 = south, 8 = south-west, 16 = west, 32 = north-west, 64 = north, 128 = north-east, as "
    "ArcGIS and WhiteboxTools (<i>--esri_pntr</i>) write them; a cell with no direction "
    "(a pit) is 0. <i>0 to 7</i> (1): 0 = east, 1 = south-east, 2 = south ... 7 = north-east, clockwise; a cell "
    "with no direction is 8. Nodata is 255 in both. North is up: row 0 is the raster's top row.</p>");
}

QString FlowDirectionAlgorithm::name() const
{
  return QStringLiteral("flowdirection");
}

QString FlowDirectionAlgorithm::displayName() const
{
  return QObject::tr("Flow direction (D8)");
}

QStringList FlowDirectionAlgorithm::tags() const
{
  return QObject::tr("dem,d8,flow,direction,drainage,steepest descent,flats,hydrology,terrain,gpu,cuda").split(',');
}

QString FlowDirectionAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString FlowDirectionAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString FlowDirectionAlgorithm::iconFile() const
{
  return QStringLiteral("flowdirection.svg");
}

QString FlowDirectionAlgorithm::shortDescription() const
{
  return QObject::tr("D8 flow directions of a DEM (steepest descent by true distances), with flats drained towards "
                     "their outlets, on the GPU or all processor cores.");
}

QString FlowDirectionAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>The D8 flow direction of every cell of a DEM: the one of its eight neighbours that water flows to "
           "(O'Callaghan &amp; Mark 1984).</p>"
           "<p><b>Input DEM</b>: normally a depression-filled DEM (gpugeo:filldepressions); a raster file GDAL "
           "reads, north-up. <b>Band number</b>: the band holding the elevations. Cells holding the band's "
           "nodata value, NaN or an infinite value are nodata.</p>"
           "<p><b>The rule</b>: a valid cell drains to the neighbour of steepest positive drop (z &minus; "
           "z<sub>n</sub>) / distance, the distances being the cell's width (east, west), its height (north, "
           "south) and its true diagonal &radic;(width<sup>2</sup> + height<sup>2</sup>), from the cell sizes "
           "below (non-square pixels and, in a geographic CRS, each row's own sizes). Equal drops go to the first "
           "in the order E, SE, S, SW, W, NW, N, NE. Nodata neighbours are outlets, never receivers. A cell with "
           "no lower neighbour: on a flat (with <b>Resolve flats</b>) it drains by the flat's mask, below; an "
           "<i>edge cell</i> (on the raster's border or next to nodata) drains out of the grid, to its first "
           "neighbour off the grid or on nodata in the same order; any other cell (a pit) has no direction.</p>"
           "<p><b>Resolve flats</b> (RESOLVE_FLATS, default yes): a flat cell is a valid cell, not an edge cell, "
           "with no lower neighbour. Each flat that touches a cell of its elevation that can drain (a low edge) "
           "gets a mask after Barnes, Lehman &amp; Mulla (2014): 2 &times; (steps from the low edges through the "
           "flat) + (the flat's highest count of steps from higher ground &minus; the cell's own count), so flow "
           "runs towards the outlet and away from higher ground. A flat cell drains to the neighbour of its "
           "elevation with the steepest fall of the mask (same distances and order). The elevations are not "
           "changed. Flats without an outlet (pits of a DEM not filled) get no mask. Without flat resolution "
           "every flat cell is a pit.</p>") +
         encodingHelp() +
         QObject::tr("<p><b>Output</b>: Byte GeoTIFF with the input's size, geotransform and CRS, nodata 255. The "
                     "log counts the cells that drain out of the grid and the pits.</p>") +
         cellSizeHelp() +
         QObject::tr(
           "<p><b>References</b>: J. F. O'Callaghan, D. M. Mark (1984), The extraction of drainage networks from "
           "digital elevation data, Computer Vision, Graphics, and Image Processing 28, 323&ndash;344. R. Barnes, "
           "C. Lehman, D. Mulla (2014), An efficient assignment of drainage direction over flat surfaces in "
           "raster digital elevation models, Computers &amp; Geosciences 62, 128&ndash;135.</p>") +
         rangesHelp(*this) + deviceHelp() + tilingHelp();
}

FlowDirectionAlgorithm* FlowDirectionAlgorithm::createInstance() const
{
  return new FlowDirectionAlgorithm();
}

void FlowDirectionAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Input DEM (filled)")));
  // Optional so that qgis_process takes the default (a mandatory band must always be given there).
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(new QgsProcessingParameterBoolean(QStringLiteral("RESOLVE_FLATS"), QObject::tr("Resolve flats"), true));
  addParameter(encodingParameter(QObject::tr("Encoding")));
  addDeviceParameter();
  addTilingParameters();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Flow direction")));
}

bool FlowDirectionAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                           QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  return true;
}

namespace {

// What the in-memory run holds per cell: the DEM and the directions; with flats resolved, the flat
// mask and the flats' scratch arrays too.
constexpr int64_t kInMemoryBytesPerCell = 6;
constexpr int64_t kInMemoryBytesPerCellWithFlats = 22;

}  // namespace

QVariantMap FlowDirectionAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                            QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const int band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  const bool resolveFlats = parameterAsBool(parameters, QStringLiteral("RESOLVE_FLATS"), context);
  const DemRaster raster = openDemRaster(mSource, band);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan =
    planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
               parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
               resolveFlats ? kInMemoryBytesPerCellWithFlats : kInMemoryBytesPerCell,
               resolveFlats ? dem::tiled::kFlatsBytesPerTileCell : dem::tiled::kDirectionsBytesPerTileCell,
               cpuThreads(), device.backend, dem::kGpuDirectionBytesPerCell);
  logTilingPlan(plan, feedback);
  if (const std::optional<MpiJob> job = mpiJobOf(parameters, context, feedback))
  {
    const int encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
    mOutputPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
    runDemProgram(*job, QStringLiteral("flowdirection"),
                  programArguments(parameters, context, mSource, band, plan)
                    << QStringLiteral("--dem") << mSource.gdalName << QStringLiteral("--resolve-flats")
                    << (resolveFlats ? QStringLiteral("yes") : QStringLiteral("no")) << QStringLiteral("--encoding")
                    << (encoding == Esri ? QStringLiteral("esri") : QStringLiteral("clockwise"))
                    << QStringLiteral("--output") << mOutputPath,
                  {mOutputPath}, feedback);
    // Every code in the style's legend: the job's counts stay in its log.
    mCodes.clear();
    for (int d = 0; d <= 8; ++d)
      mCodes << encode(d < 8 ? uint8_t(d) : dem::kNoFlow, encoding);
    std::sort(mCodes.begin(), mCodes.end());
    return {{QStringLiteral("OUTPUT"), mOutputPath}};
  }
  if (!plan.tiled)
    return executeInMemory(device, parameters, context, feedback, times);
  QVariantMap outputs;
  runTiled(device, plan, feedback, [&](const TilingPlan& on) {
    outputs = executeTiled(raster, on, resolveFlats, parameterAsEnum(parameters, QStringLiteral("ENCODING"), context),
                           parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context), feedback, times);
  });
  return outputs;
}

QVariantMap FlowDirectionAlgorithm::executeTiled(const DemRaster& raster, const TilingPlan& plan, bool resolveFlats,
                                                 int encoding, const QString& outputPath,
                                                 QgsProcessingFeedback* feedback, StageTimes& times)
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  QgsProcessingMultiStepFeedback steps(resolveFlats ? 3 : 2, feedback);
  feedback->setProgressText(QObject::tr("Reading the DEM (counting its cells)"));
  DemTileSource source(raster);
  {
    ScopedStage stage(times, "read (counts)");
    reportElevations(raster, source.scan(plan.options.tileWidth, &steps), feedback);
  }
  const dem::tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  const RunControl control = runControl(feedback);
  dem::tiled::TiledOptions options = plan.options;
  int extraPasses = 1;  // the count

  // With flats resolved: their mask, tile by tile, into a raw file in the scratch folder (removed
  // however the run ends).
  std::unique_ptr<dem::tiled::ScratchFolder> scratch;
  std::unique_ptr<dem::tiled::RawFileRaster<int32_t>> mask;
  int64_t graphBytes = 0, tileBytes = 0;  // the flats', the larger
  if (resolveFlats)
  {
    steps.setCurrentStep(1);
    feedback->setProgressText(QObject::tr("Resolving flats tile by tile"));
    scratch = std::make_unique<dem::tiled::ScratchFolder>(scratchParent());
    mask = std::make_unique<dem::tiled::RawFileRaster<int32_t>>(scratch->path() + "/flat_mask.i32", raster.width,
                                                                raster.height);
    options.onTile = roundsProgress(&steps);
    dem::tiled::TiledReport flatsReport;
    dem::tiled::flatMaskTiled(source, rows, *mask, dem::FlatGradient::Combined, scratch->path(), options, control,
                              &flatsReport);
    times.merge(flatsReport.times);
    extraPasses += flatsReport.passes;
    feedback->pushInfo(QObject::tr("Flats resolved in %1 passes over the DEM (the distances through flats that cross "
                                   "tiles settle in rounds); %2 MiB of scratch space in %3.")
                         .arg(flatsReport.passes)
                         .arg(double(scratch->bytes()) / 1048576.0, 0, 'f', 0)
                         .arg(QString::fromStdString(scratch->path())));
    graphBytes = flatsReport.graphBytes;
    tileBytes = flatsReport.tileBytes;
  }

  steps.setCurrentStep(resolveFlats ? 2 : 1);
  feedback->setProgressText(QObject::tr("Computing flow directions tile by tile"));
  std::unique_ptr<GeoTiffWriter> writer = demRasterWriter(outputPath, raster, GDT_Byte, 255.0);
  TiffTileSink<uint8_t> sink(*writer, [encoding](const uint8_t* in, int64_t count, void* buffer) {
    uint8_t* out = static_cast<uint8_t*>(buffer);
    for (int64_t i = 0; i < count; ++i)
      out[i] = encode(in[i], encoding);
  });
  options.onTile = tileProgress(&steps, 1);
  dem::tiled::TiledReport report;
  const dem::tiled::DirectionCounts counts =
    dem::tiled::directionsTiled(source, rows, sink, options, control, &report, mask.get());
  times.merge(report.times);
  FinishedRasters finished;
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(writer), finished);
  }
  reportDirections(counts.perDirection, counts.drainingOut, resolveFlats, encoding, feedback);
  report.graphBytes = std::max(report.graphBytes, graphBytes);
  report.tileBytes = std::max(report.tileBytes, tileBytes);
  logTiledRun(report, extraPasses, feedback);
  logStageTimes(times, feedback);
  finished.keep();
  mOutputPath = outputPath;
  return {{QStringLiteral("OUTPUT"), outputPath}};
}

void FlowDirectionAlgorithm::reportDirections(const int64_t perDirection[9], int64_t drainingOut, bool resolveFlats,
                                              int encoding, QgsProcessingFeedback* feedback)
{
  const int64_t pits = perDirection[8];
  feedback->pushInfo(QObject::tr("%1 cells drain out of the grid (at its border or into nodata); %2 cells have no "
                                 "direction.")
                       .arg(drainingOut)
                       .arg(pits));
  if (pits > 0)
    feedback->pushWarning(
      resolveFlats ? QObject::tr("%1 cells have no direction: pits and flats without an outlet. Fill the DEM first "
                                 "(gpugeo:filldepressions) for a grid where every cell drains out.")
                       .arg(pits)
                   : QObject::tr("%1 cells have no direction: pits and flat cells (Resolve flats is off).").arg(pits));
  mCodes.clear();
  for (int d = 0; d < 9; ++d)
    if (perDirection[d] > 0)
      mCodes << encode(d < 8 ? uint8_t(d) : dem::kNoFlow, encoding);
  std::sort(mCodes.begin(), mCodes.end());
}

QVariantMap FlowDirectionAlgorithm::executeInMemory(const BackendChoice& device, const QVariantMap& parameters, QgsProcessingContext& context,
                                                    QgsProcessingFeedback* feedback, StageTimes& times)
{
  QgsProcessingMultiStepFeedback steps(3, feedback);
  const int band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  const bool resolveFlats = parameterAsBool(parameters, QStringLiteral("RESOLVE_FLATS"), context);
  const int encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  const QString outputPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);

  LoadedDem loaded = loadDem(mSource, band, times, &steps, feedback);
  const DemRaster& raster = loaded.raster;
  Elevations& dem = loaded.elevations;

  steps.setCurrentStep(1);
  feedback->setProgressText(resolveFlats ? QObject::tr("Resolving flats and computing flow directions")
                                         : QObject::tr("Computing flow directions"));
  const RunControl control = runControl(feedback);
  const dem::Grid grid = raster.grid(dem.z.data());
  std::vector<uint8_t> directions;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    directions = dem::flowDirections(backend, grid, resolveFlats, cpuThreads(), control, &times);
  });
  std::vector<float>().swap(dem.z);

  // Cells per direction, those draining out of the grid (off it or into nodata), pits.
  std::array<int64_t, 9> perDirection{};
  int64_t drainingOut = 0;
  const int64_t w = raster.width, h = raster.height;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const uint8_t d = directions[size_t(y * w + x)];
      if (d == dem::kNoData)
        continue;
      ++perDirection[d < 8 ? d : 8];
      if (d < 8)
      {
        const int64_t nx = x + dem::kDx[d], ny = y + dem::kDy[d];
        drainingOut += nx < 0 || ny < 0 || nx >= w || ny >= h || directions[size_t(ny * w + nx)] == dem::kNoData;
      }
    }
  reportDirections(perDirection.data(), drainingOut, resolveFlats, encoding, feedback);

  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the flow directions"));
  FinishedRasters finished;
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      outputPath, raster, GDT_Byte, 255.0,
      [&](int64_t row0, int64_t rows, void* buffer) {
        uint8_t* out = static_cast<uint8_t*>(buffer);
        const uint8_t* in = directions.data() + row0 * w;
        for (int64_t i = 0; i < rows * w; ++i)
          out[i] = encode(in[i], encoding);
      },
      finished, &steps);
  }
  logStageTimes(times, feedback);
  finished.keep();
  mOutputPath = outputPath;
  return {{QStringLiteral("OUTPUT"), outputPath}};
}

QVariantMap FlowDirectionAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mOutputPath))
    context.layerToLoadOnCompletionDetails(mOutputPath).setPostProcessor(new LabelRasterStyle(mCodes));
  return QVariantMap();
}

}  // namespace gpugeo
