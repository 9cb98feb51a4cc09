#include "flowaccumulation_algorithm.h"

#include "mpi_launch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsrasterlayer.h>

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/tiled/tiled_dem.h"
#include "flow_direction_input.h"
#include "flowdirection_algorithm.h"
#include "gdal/dem_conventions.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

using gdal::kAreaNoData;
using gdal::kCellsNoData;

// About the 99th percentile of the values at the cells where `valid`, from a sample of at most a
// million cells.
template <class T, class Valid>
double upperPercentile(const std::vector<T>& values, int64_t validCount, Valid valid)
{
  const int64_t stride = std::max<int64_t>(1, validCount / 1000000);
  std::vector<T> sample;
  int64_t seen = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (valid(i) && seen++ % stride == 0)
      sample.push_back(values[i]);
  if (sample.empty())
    return 1.0;
  const size_t k = std::min(sample.size() - 1, size_t(double(sample.size()) * 0.99));
  std::nth_element(sample.begin(), sample.begin() + std::ptrdiff_t(k), sample.end());
  return double(sample[k]);
}


// What the in-memory run holds per cell: the directions, the grid's elevations, the counts and areas
// (int64 each), the receivers and inflows.
constexpr int64_t kInMemoryBytesPerCell = 26;

// Every valid cell ends at one terminal (an outlet or a pit): the terminals' counts add up to the
// valid cells; then the log line of the outlets, the pits and the largest catchment.
void reportCatchments(int64_t valid, int64_t reached, int64_t outlets, int64_t pits, int64_t largestCell,
                      int64_t largestCells, int64_t largestArea, int64_t width, bool squareKilometres, int encoding,
                      QgsProcessingFeedback* feedback)
{
  if (reached != valid)
    throw QgsProcessingException(QObject::tr("The flow directions run in loops: %1 of %2 cells drain into a loop and "
                                             "never reach an outlet. %3")
                                   .arg(valid - reached)
                                   .arg(valid)
                                   .arg(loopHint(encoding)));
  const double areaScale = squareKilometres ? 1e-12 : 1e-6;
  feedback->pushInfo(QObject::tr("%1 outlets (cells draining out of the grid or into nodata) and %2 pits. The largest "
                                 "catchment drains out at column %3, row %4: %5 cells, %6 %7.")
                       .arg(outlets)
                       .arg(pits)
                       .arg(largestCell % width)
                       .arg(largestCell / width)
                       .arg(largestCells)
                       .arg(double(largestArea) * areaScale, 0, 'g', 12)
                       .arg(squareKilometres ? QStringLiteral("km²") : QStringLiteral("m²")));
}

// A sample of at most about a million of the values written (every stride-th), for the styles' 99th
// percentile; filled from the tiles' threads.
class Sample
{
public:
  explicit Sample(int64_t valid) : mStride(std::max<int64_t>(1, valid / 1000000)) {}
  void add(const int64_t* values, int64_t count)
  {
    std::lock_guard<std::mutex> lock(mMutex);
    for (int64_t i = 0; i < count; ++i)
      if (values[i] > 0 && mSeen++ % mStride == 0)
        mValues.push_back(values[i]);
  }
  double percentile99() const
  {
    return upperPercentile(mValues, int64_t(mValues.size()), [](size_t) { return true; });
  }

private:
  int64_t mStride, mSeen = 0;
  std::vector<int64_t> mValues;
  std::mutex mMutex;
};

}  // namespace

QString FlowAccumulationAlgorithm::name() const
{
  return QStringLiteral("flowaccumulation");
}

QString FlowAccumulationAlgorithm::displayName() const
{
  return QObject::tr("Flow accumulation (D8)");
}

QStringList FlowAccumulationAlgorithm::tags() const
{
  return QObject::tr("dem,d8,flow,accumulation,upstream,contributing,catchment,drainage area,streams,hydrology,gpu,cuda")
    .split(',');
}

QString FlowAccumulationAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString FlowAccumulationAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString FlowAccumulationAlgorithm::iconFile() const
{
  return QStringLiteral("flowaccumulation.svg");
}

QString FlowAccumulationAlgorithm::shortDescription() const
{
  return QObject::tr("Upstream cell count and upstream area of every cell along D8 flow directions, on the GPU or "
                     "all processor cores.");
}

QString FlowAccumulationAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Flow accumulation along D8 flow directions (Jenson &amp; Domingue 1988): for every cell, how many "
           "cells drain through it and the area they cover.</p>"
           "<p><b>Flow direction raster</b> (INPUT): D8 directions as gpugeo:flowdirection writes them (or "
           "another D8 tool, in one of the two encodings); a raster file GDAL reads, north-up. <b>Band number</b>: "
           "the band holding the directions. 255, NaN and the band's nodata value are nodata. A direction that "
           "points off the grid or onto nodata is an outlet. A value that is not a code of the encoding is "
           "refused, as are directions that run in a loop.</p>") +
         FlowDirectionAlgorithm::encodingHelp() +
         QObject::tr(
           "<p><b>Upstream cells</b> (OUTPUT_CELLS): every valid cell counts itself and every cell that drains "
           "through it (a cell on a ridge is 1; ArcGIS counts from 0); Int32, nodata &minus;1. The outlets' "
           "counts add up to the number of valid cells when every cell drains out.</p>"
           "<p><b>Upstream area</b> (OUTPUT_AREA, optional): the sum of the areas (width &times; height, from the "
           "cell sizes below) of those cells, in the <b>Area units</b> (UNITS: 0 = m², 1 = km²); Float64, nodata "
           "&minus;1. Each cell's area is rounded to 10<sup>-6</sup> m² and the sums are exact (fixed point): "
           "their order does not matter, and both backends give the same bits. They hold up to 9.2 million km² "
           "(2<sup>63</sup> units): a DEM where a catchment could be larger is refused with the reason.</p>"
           "<p>The log names the largest catchment (its outlet cell, cells and area) and the number of outlets "
           "and pits.</p>") +
         cellSizeHelp() +
         QObject::tr("<p><b>Reference</b>: S. K. Jenson, J. O. Domingue (1988), Extracting topographic structure from "
                     "digital elevation data for geographic information system analysis, Photogrammetric "
                     "Engineering and Remote Sensing 54(11), 1593&ndash;1600.</p>") +
         rangesHelp(*this) + deviceHelp() + tilingHelp();
}

FlowAccumulationAlgorithm* FlowAccumulationAlgorithm::createInstance() const
{
  return new FlowAccumulationAlgorithm();
}

void FlowAccumulationAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Flow direction raster")));
  // Optional so that qgis_process takes the default (a mandatory band must always be given there).
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(FlowDirectionAlgorithm::encodingParameter(QObject::tr("Encoding of the flow directions")));
  addParameter(new QgsProcessingParameterEnum(QStringLiteral("UNITS"), QObject::tr("Area units"),
                                              QStringList{QObject::tr("Square metres"), QObject::tr("Square kilometres")},
                                              false, 0));
  addDeviceParameter();
  addTilingParameters();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_CELLS"),
                                                           QObject::tr("Upstream cells")));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_AREA"), QObject::tr("Upstream area"),
                                                           QVariant(), true, true));
}

bool FlowAccumulationAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                              QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  return true;
}

QVariantMap FlowAccumulationAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                               QgsProcessingFeedback* feedback)
{
  StageTimes times;
  Request request;
  request.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  request.encoding = parameterAsEnum(parameters, QStringLiteral("ENCODING"), context);
  request.squareKilometres = parameterAsEnum(parameters, QStringLiteral("UNITS"), context) == 1;
  request.cellsPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_CELLS"), context);
  if (outputRequested(parameters, QStringLiteral("OUTPUT_AREA")))
    request.areaPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_AREA"), context);
  const DemRaster raster = openDemRaster(mSource, request.band);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
                                     kInMemoryBytesPerCell, dem::tiled::kAccumulationBytesPerTileCell, cpuThreads(),
                                     device.backend, dem::kGpuAccumulationBytesPerCell);
  logTilingPlan(plan, feedback);
  if (const std::optional<MpiJob> job = mpiJobOf(parameters, context, feedback))
    return executeUnderMpi(*job, request, raster, plan, parameters, context, feedback);
  if (!plan.tiled)
    return executeInMemory(device, request, feedback, times);
  QVariantMap outputs;
  runTiled(device, plan, feedback, [&](const TilingPlan& on) { outputs = executeTiled(request, raster, on, feedback, times); });
  return outputs;
}

QVariantMap FlowAccumulationAlgorithm::executeUnderMpi(const MpiJob& job, const Request& request,
                                                       const DemRaster& raster, const TilingPlan& plan,
                                                       const QVariantMap& parameters,
                                                       QgsProcessingContext& context, QgsProcessingFeedback* feedback)
{
  QStringList arguments = programArguments(parameters, context, mSource, request.band, plan);
  arguments << QStringLiteral("--directions") << mSource.gdalName << QStringLiteral("--encoding")
            << (request.encoding == FlowDirectionAlgorithm::Esri ? QStringLiteral("esri") : QStringLiteral("clockwise"))
            << QStringLiteral("--units") << (request.squareKilometres ? QStringLiteral("km2") : QStringLiteral("m2"))
            << QStringLiteral("--cells") << request.cellsPath;
  if (!request.areaPath.isEmpty())
    arguments << QStringLiteral("--area") << request.areaPath;
  runDemProgram(job, QStringLiteral("flowaccumulation"), arguments, {request.cellsPath, request.areaPath}, feedback);
  // The styles' ranges: the largest count, and the area from one cell's to the largest.
  QVariantMap outputs{{QStringLiteral("OUTPUT_CELLS"), request.cellsPath}};
  mCellsPath = request.cellsPath;
  mCellsTop = std::max(2.0, rasterMaximum(request.cellsPath));
  mAreaPath = request.areaPath;
  if (!mAreaPath.isEmpty())
  {
    const double areaScale = request.squareKilometres ? 1e-12 : 1e-6;
    double smallest = std::numeric_limits<double>::infinity();
    for (int64_t y = 0; y < raster.height; ++y)
      smallest = std::min(smallest, raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)] * areaScale * 1e6);
    mAreaBottom = smallest;
    mAreaTop = std::max(2.0 * smallest, rasterMaximum(mAreaPath));
    outputs.insert(QStringLiteral("OUTPUT_AREA"), mAreaPath);
  }
  return outputs;
}

QVariantMap FlowAccumulationAlgorithm::executeTiled(const Request& request, const DemRaster& raster,
                                                    const TilingPlan& plan, QgsProcessingFeedback* feedback,
                                                    StageTimes& times)
{
  const GdalCacheLimit cache(plan.gdalCacheBytes);
  const int encoding = request.encoding;
  const bool squareKilometres = request.squareKilometres;
  const QString& cellsPath = request.cellsPath;
  const QString& areaPath = request.areaPath;
  const bool wantArea = !areaPath.isEmpty();
  QgsProcessingMultiStepFeedback steps(2, feedback);

  // --- Read the directions once, checking their codes.
  feedback->setProgressText(QObject::tr("Reading the flow directions (checking their codes)"));
  const CodeTileSource source = directionSource(raster, encoding);
  CodeTileSource::Counts counts;
  {
    ScopedStage stage(times, "read (check)");
    counts = source.scan(&steps);
  }
  reportDirections(raster, counts, encoding, feedback);

  // --- Accumulate tile by tile, writing both rasters as the tiles finish.
  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Accumulating flow tile by tile"));
  const double areaScale = squareKilometres ? 1e-12 : 1e-6;  // from 1e-6 m^2
  // Counts past Int32 (DEMs of more than 2^31 cells) are written as Float64, exact to 2^53.
  const bool wideCounts = raster.width * raster.height > int64_t(std::numeric_limits<int32_t>::max());
  const GDALDataType cellsType = wideCounts ? GDT_Float64 : GDT_Int32;
  std::unique_ptr<GeoTiffWriter> cellsWriter = demRasterWriter(cellsPath, raster, cellsType, double(kCellsNoData));
  Sample cellsSample(counts.valid), areaSample(counts.valid);
  TiffTileSink<int64_t> cellsSink(*cellsWriter, [&](const int64_t* in, int64_t count, void* buffer) {
    cellsSample.add(in, count);
    for (int64_t i = 0; i < count; ++i)
      if (wideCounts)
        static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : double(kCellsNoData);
      else
        static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : kCellsNoData;
  });
  std::unique_ptr<GeoTiffWriter> areaWriter =
    wantArea ? demRasterWriter(areaPath, raster, GDT_Float64, kAreaNoData) : nullptr;
  std::unique_ptr<dem::tiled::RasterSink<int64_t>> areaSink;
  if (areaWriter)
    areaSink = std::make_unique<TiffTileSink<int64_t>>(
      *areaWriter, [&](const int64_t* in, int64_t count, void* buffer) {
        areaSample.add(in, count);
        double* out = static_cast<double*>(buffer);
        for (int64_t i = 0; i < count; ++i)
          out[i] = in[i] > 0 ? double(in[i]) * areaScale : kAreaNoData;
      });
  else
    areaSink = std::make_unique<dem::tiled::DiscardSink<int64_t>>();  // OUTPUT_AREA not asked for
  if (wideCounts)
    feedback->pushInfo(QObject::tr("The upstream cells are written as Float64 (exact to 2^53): the DEM has more "
                                   "cells than Int32 holds."));
  dem::tiled::TiledOptions options = plan.options;
  options.onTile = tileProgress(&steps, 2);
  dem::tiled::TiledReport report;
  dem::tiled::AccumulationSummary summary;
  try
  {
    summary = dem::tiled::accumulationTiled(source, dem::tiled::RowSizes{raster.cellWidth, raster.cellHeight},
                                            cellsSink, *areaSink, options, runControl(feedback), &report);
  }
  catch (const dem::LoopedDirections& e)
  {
    throw QgsProcessingException(QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(encoding)));
  }
  times.merge(report.times);
  reportCatchments(counts.valid, summary.reached, summary.outlets, summary.pits, summary.largestCell,
                   summary.largestCells, summary.largestArea, raster.width, squareKilometres, encoding, feedback);

  // --- Finish the files; the styles' ranges.
  FinishedRasters finished;
  QVariantMap outputs{{QStringLiteral("OUTPUT_CELLS"), cellsPath}};
  {
    ScopedStage stage(times, "write (finish)");
    finishDemRaster(std::move(cellsWriter), finished);
    if (areaWriter)
    {
      finishDemRaster(std::move(areaWriter), finished);
      outputs.insert(QStringLiteral("OUTPUT_AREA"), areaPath);
    }
  }
  mCellsPath = cellsPath;
  mCellsTop = std::max(2.0, cellsSample.percentile99());
  mAreaPath = wantArea ? areaPath : QString();
  if (wantArea)
  {
    double smallest = std::numeric_limits<double>::infinity();
    for (int64_t y = 0; y < raster.height; ++y)
      smallest = std::min(smallest, raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)] * areaScale * 1e6);
    mAreaBottom = smallest;
    mAreaTop = std::max(2.0 * smallest, areaSample.percentile99() * areaScale);
  }
  logTiledRun(report, 1, feedback);
  logStageTimes(times, feedback);
  finished.keep();
  return outputs;
}

QVariantMap FlowAccumulationAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                       QgsProcessingFeedback* feedback, StageTimes& times)
{
  const int band = request.band;
  const int encoding = request.encoding;
  const bool squareKilometres = request.squareKilometres;
  const QString& cellsPath = request.cellsPath;
  const QString& areaPath = request.areaPath;
  const bool wantArea = !areaPath.isEmpty();
  QgsProcessingMultiStepFeedback steps(wantArea ? 4 : 3, feedback);

  // --- Read and decode the directions. The native grid takes elevations too: the accumulation
  // reads only which cells are nodata (NaN), so the valid cells get 0.
  feedback->setProgressText(QObject::tr("Reading the flow directions"));
  DemRaster raster;
  std::vector<uint8_t> directions;
  CodeTileSource::Counts counts;
  {
    ScopedStage stage(times, "read");
    raster = openDemRaster(mSource, band);
    directions.resize(size_t(raster.width * raster.height));
    counts = directionSource(raster, encoding).scan(&steps, directions.data());
  }
  reportDirections(raster, counts, encoding, feedback);
  const int64_t valid = counts.valid;
  std::vector<float> z = directionsAsElevations(directions);

  // --- Accumulate ---------------------------------------------------------------------------
  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Accumulating flow"));
  const RunControl control = runControl(feedback);
  const dem::Grid grid = raster.grid(z.data());
  dem::Accumulation accumulation;
  try
  {
    runWithCpuFallback(device, feedback, [&](Backend backend) {
      accumulation = dem::flowAccumulation(backend, grid, directions, cpuThreads(), control, &times);
    });
  }
  catch (const dem::LoopedDirections& e)
  {
    throw QgsProcessingException(QStringLiteral("%1. %2").arg(QString::fromStdString(e.what()), loopHint(encoding)));
  }
  std::vector<float>().swap(z);

  // Every valid cell ends at one terminal (an outlet or a pit): the terminals' counts add up to the
  // valid cells. (The native core refuses loops; this checks it did.)
  const int64_t w = raster.width, h = raster.height;
  int64_t reached = 0, outlets = 0, pits = 0, largestCell = -1;
  for (int64_t c = 0; c < w * h; ++c)
  {
    const uint8_t d = directions[size_t(c)];
    if (d == dem::kNoData)
      continue;
    bool terminal = d >= 8;
    if (!terminal)
    {
      const int64_t nx = c % w + dem::kDx[d], ny = c / w + dem::kDy[d];
      terminal = nx < 0 || ny < 0 || nx >= w || ny >= h || directions[size_t(ny * w + nx)] == dem::kNoData;
    }
    if (!terminal)
      continue;
    (d >= 8 ? pits : outlets) += 1;
    reached += accumulation.cells[size_t(c)];
    if (largestCell < 0 || accumulation.cells[size_t(c)] > accumulation.cells[size_t(largestCell)])
      largestCell = c;
  }
  reportCatchments(valid, reached, outlets, pits, largestCell, accumulation.cells[size_t(largestCell)],
                   accumulation.area[size_t(largestCell)], w, squareKilometres, encoding, feedback);
  const double areaScale = squareKilometres ? 1e-12 : 1e-6;  // from 1e-6 m^2

  // --- Write ---------------------------------------------------------------------------------
  const auto isValid = [&](size_t i) { return directions[i] != dem::kNoData; };
  FinishedRasters finished;
  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the upstream cells"));
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      cellsPath, raster, GDT_Int32, double(kCellsNoData),
      [&](int64_t row0, int64_t rows, void* buffer) {
        int32_t* out = static_cast<int32_t*>(buffer);
        for (int64_t i = 0; i < rows * w; ++i)
        {
          const size_t c = size_t(row0 * w + i);
          out[i] = isValid(c) ? int32_t(accumulation.cells[c]) : kCellsNoData;
        }
      },
      finished, &steps);
  }
  mCellsPath = cellsPath;
  mCellsTop = std::max(2.0, upperPercentile(accumulation.cells, valid, isValid));
  QVariantMap outputs{{QStringLiteral("OUTPUT_CELLS"), cellsPath}};
  if (wantArea)
  {
    steps.setCurrentStep(3);
    feedback->setProgressText(QObject::tr("Writing the upstream area"));
    ScopedStage stage(times, "write");
    writeDemRaster(
      areaPath, raster, GDT_Float64, kAreaNoData,
      [&](int64_t row0, int64_t rows, void* buffer) {
        double* out = static_cast<double*>(buffer);
        for (int64_t i = 0; i < rows * w; ++i)
        {
          const size_t c = size_t(row0 * w + i);
          out[i] = isValid(c) ? double(accumulation.area[c]) * areaScale : kAreaNoData;
        }
      },
      finished, &steps);
    outputs.insert(QStringLiteral("OUTPUT_AREA"), areaPath);
    double smallest = std::numeric_limits<double>::infinity();
    for (int64_t y = 0; y < h; ++y)
      smallest = std::min(smallest, raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)] * areaScale * 1e6);
    mAreaBottom = smallest;
    mAreaTop = std::max(2.0 * smallest, upperPercentile(accumulation.area, valid, isValid) * areaScale);
  }
  mAreaPath = wantArea ? areaPath : QString();
  logStageTimes(times, feedback);
  finished.keep();
  return outputs;
}

QVariantMap FlowAccumulationAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mCellsPath))
    context.layerToLoadOnCompletionDetails(mCellsPath).setPostProcessor(new ContinuousRasterStyle(1.0, mCellsTop));
  if (!mAreaPath.isEmpty() && context.willLoadLayerOnCompletion(mAreaPath))
    context.layerToLoadOnCompletionDetails(mAreaPath).setPostProcessor(
      new ContinuousRasterStyle(mAreaBottom, mAreaTop));
  return QVariantMap();
}

}  // namespace gpugeo
