// gpugeo_dem isochrones: gpugeo:isochrones's chain tile by tile (the QGIS algorithm's tiled path):
// the filled DEM, the flat mask, the directions, the accumulation and the travel times in raw files of
// a scratch folder, each stage reading the one before window by window; the optional rasters written
// as their stage makes them, TRAVEL_TIME as the bands are traced, the bands written one at a time.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cleanup_guard.h"
#include "cli/dem_commands.h"
#include "cli/isochrone_results.h"
#include "cli/run_support.h"
#include "cli/vector_outputs.h"
#include "core/errors.h"
#include "dem/detail/dem_cuda.h"
#include "dem/hydrograph.h"
#include "dem/isochrone_chain.h"
#include "gdal/dem_conventions.h"

namespace gpugeo::cli {

namespace {

namespace tiled = dem::tiled;

constexpr double kTimeNoData = -1.0;  // TRAVEL_TIME's nodata
constexpr int32_t kMaxBands = 10000;
constexpr int64_t kInMemoryBytesPerCell = 64;


struct Request
{
  std::string dem, manning, timePath, filledPath, directionPath, accumulationPath;
  std::string watershedPath, isochronesPath, tablePath, hydrographPath, resultsPath;
  // The hydrograph's rainfall excess: a series (mm/h per interval) or, when empty, a constant intensity
  // (mm/h) for a duration (minutes).
  std::vector<double> excessSeries;
  double excessIntensity = 10, excessDuration = 60;
  int band = 1;
  double interval = 0, snapDistance = 100;
  dem::VelocityModel model;
  std::optional<std::pair<double, double>> outletPoint;  // in the DEM's CRS
};

std::pair<double, double> pointOf(const std::string& text, const char* option)
{
  std::istringstream in(text);
  double x = 0, y = 0;
  char comma = 0;
  if (!(in >> x >> comma >> y) || comma != ',' || !in.eof() || !std::isfinite(x) || !std::isfinite(y))
    throw UsageError{std::string("--") + option + " takes X,Y, not '" + text + "'"};
  return {x, y};
}

Request readRequest(const Arguments& args)
{
  Request r;
  r.dem = args.required("dem");
  r.band = int(args.integer("band", 1));
  r.timePath = args.required("travel-time");
  r.filledPath = args.text("filled");
  r.directionPath = args.text("flowdir");
  r.accumulationPath = args.text("accumulation");
  r.watershedPath = args.text("watershed");
  r.isochronesPath = args.text("isochrones");
  r.tablePath = args.text("time-area");
  r.hydrographPath = args.text("hydrograph");
  if (args.has("excess-series"))
  {
    std::istringstream in(args.text("excess-series"));
    std::string item;
    while (std::getline(in, item, ','))
    {
      char* end = nullptr;
      const double v = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v))
        throw UsageError{"--excess-series takes mm/h values of at least 0 separated by commas, not '" + item + "'"};
      r.excessSeries.push_back(v);
    }
    if (r.excessSeries.empty())
      throw UsageError{"--excess-series takes at least one value"};
  }
  r.excessIntensity = args.number("excess-intensity", r.excessIntensity);
  r.excessDuration = args.number("excess-duration", r.excessDuration);
  r.resultsPath = args.text("results");
  r.manning = args.text("manning");
  r.interval = args.number("interval", 0.0);
  r.snapDistance = args.number("snap-distance", 100.0);
  if (args.has("outlet"))
    r.outletPoint = pointOf(args.text("outlet"), "outlet");
  dem::VelocityModel& m = r.model;
  const int kind = args.choice("velocity-model", {"constant", "slope", "manning"}, 1);
  m.kind = kind == 0 ? dem::VelocityModel::Kind::Constant
         : kind == 2 ? dem::VelocityModel::Kind::Manning
                     : dem::VelocityModel::Kind::Slope;
  m.speed = args.number("speed", m.speed);
  m.kOverland = args.number("k-overland", m.kOverland);
  m.kChannel = args.number("k-channel", m.kChannel);
  m.channelArea = args.number("channel-threshold", m.channelArea / 1e6) * 1e6;
  m.n = args.number("n-factor", m.n);
  m.b = args.number("b-factor", m.b);
  m.minSlope = args.number("min-slope", m.minSlope);
  m.minSpeed = args.number("min-speed", m.minSpeed);
  m.rainfall = args.number("rainfall", m.rainfall);
  m.curveNumber = args.number("curve-number", m.curveNumber);
  m.overlandN = args.number("manning-overland", m.overlandN);
  m.mixedArea = args.number("mixed-threshold", m.mixedArea / 1e4) * 1e4;
  m.channelAreaManning = args.number("channel-threshold-manning", m.channelAreaManning / 1e4) * 1e4;
  m.mixedN = args.number("manning-mixed", m.mixedN);
  m.channelN = args.number("manning-channel", m.channelN);
  m.sideSlope = args.number("side-slope", m.sideSlope);
  m.maxIterations = int(args.integer("max-iterations", m.maxIterations));
  if (r.interval < 0 || r.snapDistance < 0)
    throw UsageError{"--interval and --snap-distance take numbers of at least 0"};
  if (!r.excessSeries.empty() && !(r.interval > 0))
    throw UsageError{"--excess-series gives one value per time step: set --interval to its step in minutes"};
  if (!r.hydrographPath.empty() && r.excessSeries.empty())
  {
    if (!(r.excessIntensity >= 0) || !(r.excessDuration > 0))
      throw UsageError{"--excess-intensity takes mm/h of at least 0 and --excess-duration minutes above 0"};
    if (r.interval > 0)
      dem::constantExcess(r.excessIntensity, r.excessDuration, r.interval);  // throws for too many steps
  }
  return r;
}

// The outlet point's cell (column, row), refused off the DEM.
std::pair<int64_t, int64_t> outletCell(const gdal::GdalRaster& raster, std::pair<double, double> point)
{
  const double* gt = raster.geoTransform;
  const double column = (point.first - gt[0]) / gt[1], row = (point.second - gt[3]) / gt[5];
  if (!(column >= 0 && column < double(raster.width) && row >= 0 && row < double(raster.height)))
    throw InvalidInput("the outlet point (" + gdal::numberText(point.first) + ", " + gdal::numberText(point.second) +
                       ") lies outside the DEM");
  return {int64_t(column), int64_t(row)};
}

// The chain's stages through the scratch folder (the QGIS algorithm's TiledChain, on the ranks).
class Chain
{
public:
  Chain(RunContext& ctx, const gdal::GdalRaster& raster, const Setup& setup, const std::string& firstOutput)
    : mCtx(ctx), mRaster(raster), mRows{raster.cellWidth, raster.cellHeight}, mOptions(setup.options),
      mScratch(ctx, firstOutput)
  {
  }

  int64_t fill(const tiled::RasterSource<float>& dem, const std::string& path, float noData)
  {
    mCtx.report.step("Filling depressions tile by tile", 1, kSteps);
    mFilled = mScratch.raster<float>("filled.f32", mRaster.width, mRaster.height);
    const auto output = optional<float>(1, path, GDT_Float32, double(noData), gdal::nanAsNoData(noData));
    tiled::TeeSink<float> sink(*mFilled, output ? &output->sink() : nullptr);
    mOptions.onTile = mCtx.report.tileProgress(2);
    tiled::TiledReport report;
    const int64_t raised = tiled::fillTiled(dem, mRows, sink, mOptions, mCtx.control, &report);
    finish(report, output.get());
    return raised;
  }

  void directions(const std::string& path)
  {
    mCtx.report.step("Resolving flats and computing flow directions tile by tile", 2, kSteps);
    mDirections = mScratch.raster<uint8_t>("directions.u8", mRaster.width, mRaster.height);
    auto mask = mScratch.raster<int32_t>("flat_mask.i32", mRaster.width, mRaster.height);
    mOptions.onTile = mCtx.report.roundsProgress();
    tiled::TiledReport flats;
    tiled::flatMaskTiled(*mFilled, mRows, *mask, dem::FlatGradient::Combined, mScratch.path(), mOptions, mCtx.control,
                         &flats);
    add(flats);
    const auto output = optional<uint8_t>(2, path, GDT_Byte, 255.0, [](const uint8_t* in, int64_t count, void* buffer) {
      uint8_t* out = static_cast<uint8_t*>(buffer);
      for (int64_t i = 0; i < count; ++i)
        out[i] = gdal::encodeDirection(in[i], gdal::kEsri);
    });
    tiled::TeeSink<uint8_t> sink(*mDirections, output ? &output->sink() : nullptr);
    mOptions.onTile = mCtx.report.tileProgress(1);
    tiled::TiledReport report;
    tiled::directionsTiled(*mFilled, mRows, sink, mOptions, mCtx.control, &report, mask.get());
    finish(report, output.get());
  }

  tiled::AccumulationSummary accumulation(bool keepCells, const std::string& path)
  {
    mCtx.report.step("Accumulating flow tile by tile", 3, kSteps);
    if (keepCells)
      mCells = mScratch.raster<int64_t>("cells.i64", mRaster.width, mRaster.height);
    mArea = mScratch.raster<int64_t>("area.i64", mRaster.width, mRaster.height);
    const bool wide = mRaster.width * mRaster.height > int64_t(std::numeric_limits<int32_t>::max());
    const auto output = optional<int64_t>(3, path, wide ? GDT_Float64 : GDT_Int32, double(gdal::kCellsNoData),
                                          [wide](const int64_t* in, int64_t count, void* buffer) {
                                            for (int64_t i = 0; i < count; ++i)
                                              if (wide)
                                                static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : -1.0;
                                              else
                                                static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : -1;
                                          });
    tiled::DiscardSink<int64_t> noCells;
    tiled::TeeSink<int64_t> sink(mCells ? static_cast<tiled::RasterSink<int64_t>&>(*mCells) : noCells,
                          output ? &output->sink() : nullptr);
    mOptions.onTile = mCtx.report.tileProgress(2);
    tiled::TiledReport report;
    const tiled::AccumulationSummary summary =
      tiled::accumulationTiled(*mDirections, mRows, sink, *mArea, mOptions, mCtx.control, &report);
    finish(report, output.get());
    return summary;
  }

  // Rank 0: the cell of highest count within `radius` of (x, y), and its count.
  std::pair<int64_t, int64_t> snapOutlet(int64_t x, int64_t y, double radius)
  {
    const int64_t outlet = tiled::snapOutletTiled(*mFilled, mCells.get(), mRows, x, y, radius, mOptions.tileWidth);
    int64_t count = 0;
    if (outlet >= 0)
      mCells->read(tiled::Window{outlet % mRaster.width, outlet / mRaster.width, 1, 1}, &count);
    return {outlet, count};
  }

  tiled::TravelSummary travelTimes(const tiled::RasterSource<float>* manning, int64_t outlet,
                                   const dem::VelocityModel& model)
  {
    mCtx.report.step("Computing travel times tile by tile", 4, kSteps);
    mMinutes = mScratch.raster<double>("minutes.f64", mRaster.width, mRaster.height);
    mOptions.onTile = mCtx.report.tileProgress(2);
    tiled::TiledReport report;
    const tiled::TravelSummary travel = tiled::travelTimeTiled(*mFilled, *mDirections, *mArea, manning, mRows, outlet,
                                                               model, *mMinutes, mOptions, mCtx.control, &report);
    add(report);
    return travel;
  }

  tiled::TiledBands bands(double interval, int32_t count, const std::string& timePath,
                          const tiled::BandObserver& onBand, const std::vector<uint8_t>& tilesWithTimes)
  {
    mCtx.report.step("Tracing the watershed and the isochrones tile by tile", 5, kSteps);
    OutputRaster<double> times(mCtx, 4, timePath, mRaster, GDT_Float64, kTimeNoData, gdal::nanAsNoData(kTimeNoData));
    mOptions.onTile = mCtx.report.tileProgress(1);
    tiled::TiledReport report;
    tiled::TiledBands traced = tiled::bandsTiled(*mMinutes, mRows, interval, count, &times.sink(), mOptions,
                                                 mCtx.control, &report, onBand, &tilesWithTimes);
    add(report);
    times.finish(mFinished);
    return traced;
  }

  void log(const StageTimes& times)
  {
    mCtx.report.info("Scratch space: " + gdal::mebibytes(std::max(mScratchPeak, mScratch.bytes())) + " MiB at most, in " +
                     mScratch.path() + " (removed when the run ends).");
    logTiledRun(mCtx, mTotals, mPasses, times);
  }
  StageTimes& times() { return mTimes; }
  void keepOutputs() { mFinished.keep(); }
  static constexpr int kSteps = 7;

private:
  template <typename T>
  std::unique_ptr<OutputRaster<T>> optional(int id, const std::string& path, GDALDataType type, double noData,
                                            std::function<void(const T*, int64_t, void*)> convert)
  {
    // Every rank knows which outputs were asked for (the same arguments): ids agree.
    if (path.empty())
      return nullptr;
    return std::make_unique<OutputRaster<T>>(mCtx, id, path, mRaster, type, noData, std::move(convert));
  }
  void add(const tiled::TiledReport& report)
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
  void finish(const tiled::TiledReport& report, OutputRaster<T>* output)
  {
    add(report);
    if (output)
      output->finish(mFinished);
  }

  RunContext& mCtx;
  const gdal::GdalRaster& mRaster;
  const tiled::RowSizes mRows;
  tiled::TiledOptions mOptions;
  Scratch mScratch;
  FinishedFiles mFinished;
  StageTimes mTimes;
  std::unique_ptr<tiled::RawFileRaster<float>> mFilled;
  std::unique_ptr<tiled::RawFileRaster<uint8_t>> mDirections;
  std::unique_ptr<tiled::RawFileRaster<int64_t>> mCells, mArea;
  std::unique_ptr<tiled::RawFileRaster<double>> mMinutes;
  tiled::TiledReport mTotals;
  int mPasses = 1;  // the count
  int64_t mScratchPeak = 0;
};

// Rank 0's vector outputs and results file, written as the bands are traced and at the end.
class Results
{
public:
  Results(const Request& r, const gdal::GdalRaster& raster)
    : mAxes{raster.geoTransform[0], raster.geoTransform[1], raster.geoTransform[3], -raster.geoTransform[5]}
  {
    for (const std::string* path : {&r.isochronesPath, &r.watershedPath, &r.tablePath, &r.hydrographPath,
                                    &r.resultsPath})
      if (!path->empty())
      {
        guardPath(*path);
        mPaths.push_back(*path);
      }
    if (!r.isochronesPath.empty())
      mBands = std::make_unique<VectorOutput>(r.isochronesPath, VectorOutput::Kind::Bands, raster.crsWkt);
    if (!r.watershedPath.empty())
      mWatershed = std::make_unique<VectorOutput>(r.watershedPath, VectorOutput::Kind::Watershed, raster.crsWkt);
    if (!r.tablePath.empty())
      mTable = std::make_unique<VectorOutput>(r.tablePath, VectorOutput::Kind::Table, raster.crsWkt);
    if (!r.hydrographPath.empty())
    {
      mHydrograph = std::make_unique<VectorOutput>(r.hydrographPath, VectorOutput::Kind::Hydrograph, raster.crsWkt);
      mExcessSeries = r.excessSeries;
      mExcessIntensity = r.excessIntensity;
      mExcessDuration = r.excessDuration;
    }
    if (!r.resultsPath.empty())
      mFile = std::make_unique<IsochroneResultsWriter>(r.resultsPath);
  }
  bool wantsBands() const { return mBands || mFile; }
  void band(int32_t k, double interval, int64_t cells, double area, BandPolygons& polygons)
  {
    if (mBands)
      mBands->addBand(k, interval, cells, area * 1e-6, &polygons, 0, mAxes);
    if (mFile)
      mFile->addBand(polygons);
    polygons = BandPolygons();
  }
  // The hydrograph (time–area method) from the bands' areas, written when asked for.
  std::optional<dem::Hydrograph> finish(IsochroneResults& r)
  {
    std::optional<dem::Hydrograph> hydrograph;
    if (mHydrograph)
    {
      const std::vector<double> excess =
        mExcessSeries.empty() ? dem::constantExcess(mExcessIntensity, mExcessDuration, r.interval) : mExcessSeries;
      hydrograph = dem::timeAreaHydrograph(r.bandArea, excess, r.interval);
      for (std::size_t n = 0; n < hydrograph->discharge.size(); ++n)
        mHydrograph->addHydrographStep(int(n), r.interval, hydrograph->excess[n], hydrograph->discharge[n],
                                       hydrograph->unit[n]);
      mHydrograph->finish();
    }
    if (mWatershed)
    {
      mWatershed->addWatershed(r.watershed, mAxes, r.watershedArea * 1e-6, r.watershedCells, r.maxTime);
      mWatershed->finish();
    }
    if (mTable)
    {
      // The shares against the bands' own total, summed in the same order: the last is exactly 1.
      double total = 0.0, cumulative = 0.0;
      for (const double a : r.bandArea)
        total += a;
      for (int32_t k = 0; k < r.bands; ++k)
      {
        cumulative += r.bandArea[std::size_t(k)];
        mTable->addBand(k, r.interval, r.bandCells[std::size_t(k)], r.bandArea[std::size_t(k)] * 1e-6, nullptr, 0,
                        mAxes, cumulative / total);
      }
      mTable->finish();
    }
    if (mBands)
      mBands->finish();
    if (mFile)
      mFile->finish(r);
    for (const std::string& path : mPaths)
      releasePath(path);
    return hydrograph;
  }

private:
  MapAxes mAxes;
  std::unique_ptr<VectorOutput> mBands, mWatershed, mTable, mHydrograph;
  std::vector<double> mExcessSeries;
  double mExcessIntensity = 0, mExcessDuration = 0;
  std::unique_ptr<IsochroneResultsWriter> mFile;
  std::vector<std::string> mPaths;  // guarded until finished
};

}  // namespace

const std::vector<OptionSpec>& isochronesOptions()
{
  static const std::vector<OptionSpec> options{
    {"dem", "PATH", "The DEM (INPUT)."},
    {"outlet", "X,Y", "The outlet point in the DEM's CRS (OUTLET); absent: the outlet of the largest basin."},
    {"snap-distance", "METRES", "The outlet moves to the cell of highest accumulation within this distance "
                                "(SNAP_DISTANCE; default 100)."},
    {"velocity-model", "constant|slope|manning", "VELOCITY_MODEL (default slope)."},
    {"interval", "MINUTES", "The isochrones' interval; 0 or absent: automatic (INTERVAL)."},
    {"speed", "M/S", "Constant model: speed (SPEED)."},
    {"k-overland", "M/S", "Slope model: overland coefficient k (K_OVERLAND)."},
    {"k-channel", "M/S", "Slope model: channel coefficient k (K_CHANNEL)."},
    {"channel-threshold", "KM2", "Slope model: channel threshold, km² upstream (CHANNEL_THRESHOLD)."},
    {"n-factor", "N", "Slope model: factor n of t = n l / (k v(s) b) (N_FACTOR)."},
    {"b-factor", "B", "Slope model: factor b (B_FACTOR)."},
    {"min-slope", "M/M", "Slope model: minimum slope (MIN_SLOPE)."},
    {"min-speed", "M/S", "Slope and Manning models: minimum speed (MIN_SPEED)."},
    {"manning", "PATH", "Manning model: a raster of Manning's n on the DEM's grid (MANNING)."},
    {"rainfall", "MM/H", "Manning model: rainfall intensity (RAINFALL)."},
    {"curve-number", "CN", "Manning model: SCS curve number (CURVE_NUMBER)."},
    {"manning-overland", "N", "Manning model: n, overland flow (MANNING_OVERLAND)."},
    {"mixed-threshold", "HA", "Manning model: mixed flow threshold (MIXED_THRESHOLD)."},
    {"channel-threshold-manning", "HA", "Manning model: channel threshold (CHANNEL_THRESHOLD_MANNING)."},
    {"manning-mixed", "N", "Manning model: n, mixed flow (MANNING_MIXED)."},
    {"manning-channel", "N", "Manning model: n, channel flow (MANNING_CHANNEL)."},
    {"side-slope", "M/M", "Manning model: channel side slope (SIDE_SLOPE)."},
    {"max-iterations", "N", "Manning model: maximum bisection steps (MAX_ITERATIONS)."},
    {"travel-time", "PATH", "Travel time to the outlet, minutes (TRAVEL_TIME)."},
    {"watershed", "PATH", "The watershed polygon: a vector file, GeoPackage unless its extension names another "
                          "format (WATERSHED)."},
    {"isochrones", "PATH", "The isochrone bands' polygons (ISOCHRONES)."},
    {"time-area", "PATH", "The time-area table, e.g. .csv or .gpkg (TIME_AREA)."},
    {"hydrograph", "PATH", "The outlet's hydrograph by the time-area method, a table (HYDROGRAPH)."},
    {"excess-series", "MM/H,...", "Hydrograph: the rainfall excess per time step of --interval minutes "
                                  "(EXCESS_TABLE)."},
    {"excess-intensity", "MM/H", "Hydrograph: a constant rainfall excess, without --excess-series "
                                 "(EXCESS_INTENSITY; default 10)."},
    {"excess-duration", "MINUTES", "Hydrograph: the constant excess's duration (EXCESS_DURATION; default 60)."},
    {"filled", "PATH", "The filled DEM (FILLED)."},
    {"flowdir", "PATH", "The flow directions, ESRI codes (FLOWDIR)."},
    {"accumulation", "PATH", "The flow accumulation, cells (ACCUMULATION)."},
    {"results", "PATH", "The outlet, bands and polygons in a binary file for the QGIS algorithm that ran this "
                        "program."},
  };
  return options;
}

void runIsochrones(const Arguments& args, RunContext& ctx)
{
  const Request request = readRequest(args);
  const gdal::GdalRaster raster = openInput(ctx, request.dem, request.band);
  const int64_t tileBytes = std::max({tiled::kFillBytesPerTileCell, tiled::kFlatsBytesPerTileCell,
                                      tiled::kDirectionsBytesPerTileCell, tiled::kAccumulationBytesPerTileCell,
                                      tiled::kTravelBytesPerTileCell, tiled::kBandsBytesPerTileCell});
  const Setup setup = setUp(ctx, raster, kInMemoryBytesPerCell, tileBytes,
                            dem::kGpuChainBytesPerCell + (request.manning.empty() ? 0 : 4));
  const gdal::GdalCacheLimit cache(setup.plan.gdalCacheBytes);
  dem::validateModel(request.model);
  gdal::GdalElevationSource source(raster);
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  IsochroneResults out;

  // --- Read (rank 0): the DEM's counts; the outlet point's cell checked against the data ------------
  std::optional<std::pair<int64_t, int64_t>> cell;
  if (request.outletPoint)
    cell = outletCell(raster, *request.outletPoint);
  float noData = std::numeric_limits<float>::quiet_NaN();
  StageTimes readTimes;
  if (ctx.coordinator())
  {
    ctx.report.step("Reading the DEM (counting its cells)", 0, Chain::kSteps);
    ScopedStage stage(readTimes, "read (counts)");
    const gdal::ElevationCounts counts = scanElevations(ctx, source, setup);
    out.validCells = counts.valid;
    noData = gdal::filledNoData(raster.noData, counts.roundedToNoData, nullptr);
    if (cell && tiled::snapOutletTiled(source, nullptr, rows, cell->first, cell->second, request.snapDistance,
                                       setup.options.tileWidth) < 0)
      throw InvalidInput("the outlet point lies on nodata with no valid cell within " +
                         gdal::numberText(request.snapDistance) + " m (--snap-distance)");
  }
  std::unique_ptr<gdal::GdalElevationSource> manning;
  if (!request.manning.empty())
  {
    const gdal::GdalRaster n = gdal::openGdalRaster(request.manning, 1);
    if (n.width != raster.width || n.height != raster.height)
      throw InvalidInput("the Manning raster has " + std::to_string(n.width) + " x " + std::to_string(n.height) +
                         " cells, the DEM " + std::to_string(raster.width) + " x " + std::to_string(raster.height) +
                         ": they must share one grid");
    manning = std::make_unique<gdal::GdalElevationSource>(n);
  }

  // --- The chain, stage by stage through the scratch folder ------------------------------------------
  Chain chain(ctx, raster, setup, request.timePath);
  chain.times().merge(readTimes);
  out.raisedCells = chain.fill(source, request.filledPath, noData);
  chain.directions(request.directionPath);
  const tiled::AccumulationSummary summary = chain.accumulation(cell.has_value(), request.accumulationPath);
  if (ctx.coordinator())
  {
    if (cell)
      std::tie(out.outlet, out.outletCells) = chain.snapOutlet(cell->first, cell->second, request.snapDistance);
    else
      std::tie(out.outlet, out.outletCells) = std::make_pair(summary.largestCell, summary.largestCells);
    if (out.outlet < 0)
      throw InvalidInput("the DEM has no valid cell to be an outlet");
  }
  if (ctx.cluster)
    ctx.cluster->share([&](tiled::Archive& a) { a.value(out.outlet); });
  const tiled::TravelSummary travel = chain.travelTimes(manning.get(), out.outlet, request.model);
  out.watershedCells = travel.watershedCells;
  out.watershedArea = travel.watershedArea;
  out.minSpeed = travel.minSpeed;
  out.maxSpeed = travel.maxSpeed;
  out.minTime = travel.minTime;
  out.maxTime = travel.maxTime;

  // --- The bands (their interval and count from rank 0's longest time), written as traced -----------
  if (ctx.coordinator())
  {
    dem::ChainOptions bandOptions;
    bandOptions.interval = request.interval;
    bandOptions.maxBands = kMaxBands;
    out.bands = dem::detail::chainBandCount(out.maxTime, bandOptions, out.interval);
  }
  if (ctx.cluster)
    ctx.cluster->share([&](tiled::Archive& a) {
      a.value(out.interval);
      a.value(out.bands);
    });
  std::unique_ptr<Results> results;
  tiled::BandObserver onBand;
  if (ctx.coordinator())
  {
    results = std::make_unique<Results>(request, raster);
    if (results->wantsBands())
      onBand = [&](int32_t band, int64_t cells, double area, BandPolygons& polygons) {
        results->band(band, out.interval, cells, area, polygons);
      };
  }
  tiled::TiledBands traced = chain.bands(out.interval, out.bands, request.timePath, onBand, travel.tilesWithTimes);

  // --- Write (rank 0) ---------------------------------------------------------------------------------
  if (ctx.coordinator())
  {
    out.bandCells = std::move(traced.bandCells);
    out.bandArea = std::move(traced.bandArea);
    out.watershed = std::move(traced.watershed);
    ScopedStage stage(chain.times(), "write (vectors)");
    const std::optional<dem::Hydrograph> hydrograph = results->finish(out);
    const int64_t w = raster.width;
    if (hydrograph)
    {
      const int64_t peak = hydrograph->peakStep;
      ctx.report.info("Hydrograph (time-area method, steps of " + gdal::numberText(out.interval) + " min, " +
                      std::to_string(hydrograph->discharge.size()) + " steps): peak " +
                      gdal::numberText(peak >= 0 ? hydrograph->discharge[std::size_t(peak)] : 0.0) +
                      " m³/s in the step ending at " + gdal::numberText(double(peak + 1) * out.interval) +
                      " min; " + gdal::numberText(hydrograph->volume) + " m³ of rainfall excess delivered.");
    }
    ctx.report.info("Outlet: column " + std::to_string(out.outlet % w) + ", row " + std::to_string(out.outlet / w) +
                    ", where " + std::to_string(out.outletCells) + " cells drain. Watershed: " +
                    std::to_string(out.watershedCells) + " cells, " + gdal::numberText(out.watershedArea * 1e-6) +
                    " km²; travel times from " + gdal::numberText(out.minTime) + " to " +
                    gdal::numberText(out.maxTime) + " minutes: " + std::to_string(out.bands) + " bands of " +
                    gdal::numberText(out.interval) + " minutes.");
  }
  chain.log(chain.times());
  chain.keepOutputs();
}

}  // namespace gpugeo::cli
