#include "cli/dem_commands.h"

#include <limits>

#include "cli/run_support.h"
#include "core/errors.h"
#include "core/stage_times.h"
#include "dem/dem.h"
#include "gdal/dem_conventions.h"

namespace gpugeo::cli {

void runIsochrones(const Arguments& args, RunContext& ctx);
const std::vector<OptionSpec>& isochronesOptions();

namespace {

namespace tiled = dem::tiled;

// The in-memory runs' bytes per cell (the QGIS algorithms' constants): for the budget's plan, which
// also says what the in-memory run would have needed.
constexpr int64_t kFillInMemoryBytesPerCell = 12, kFillWithFlatsInMemoryBytesPerCell = 28;
constexpr int64_t kDirectionsInMemoryBytesPerCell = 9, kAccumulationInMemoryBytesPerCell = 26;

const std::vector<std::string> kEncodings{"esri", "clockwise"};

OptionSpec encodingOption(const std::string& what)
{
  return {"encoding", "esri|clockwise",
          what + ": esri (1 = E, 2 = SE, 4 = S ... 128 = NE; no direction 0; the default) or clockwise (0 = E, 1 = SE "
                 "... 7 = NE; no direction 8); nodata 255 in both (ENCODING)."};
}

// --- filldepressions -------------------------------------------------------------------------------

void runFill(const Arguments& args, RunContext& ctx)
{
  const std::string input = args.required("dem"), output = args.required("output");
  const int band = int(args.integer("band", 1));
  const int flats = args.choice("flats", {"none", "resolve", "epsilon"}, 0);
  const gdal::GdalRaster raster = openInput(ctx, input, band);
  const Setup setup = setUp(ctx, raster, flats == 0 ? kFillInMemoryBytesPerCell : kFillWithFlatsInMemoryBytesPerCell,
                            flats == 0 ? tiled::kFillBytesPerTileCell : tiled::kFlatsBytesPerTileCell,
                            flats == 0 ? dem::kGpuFillBytesPerCell : dem::kGpuDirectionBytesPerCell);
  const gdal::GdalCacheLimit cache(setup.plan.gdalCacheBytes);
  const int steps = flats == 0 ? 2 : 4;
  StageTimes times;
  tiled::TiledOptions options = setup.options;
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  gdal::GdalElevationSource source(raster);

  // Read: rank 0 counts the cells and chooses the output's nodata value.
  float noData = std::numeric_limits<float>::quiet_NaN();
  if (ctx.coordinator())
  {
    ctx.report.step("Reading the DEM (counting its cells)", 0, steps);
    ScopedStage stage(times, "read (counts)");
    const gdal::ElevationCounts counts = scanElevations(ctx, source, setup);
    std::string why;
    noData = gdal::filledNoData(raster.noData, counts.roundedToNoData, &why);
    if (!why.empty())
      ctx.report.warning(why);
  }
  OutputRaster<float> filled(ctx, 1, output, raster, GDT_Float32, double(noData), gdal::nanAsNoData(noData));

  // Fill (and with flats: their mask and the raise), tile by tile.
  tiled::TiledReport report;
  int passes = ctx.coordinator() ? 1 : 0;
  ctx.report.step("Filling depressions tile by tile", 1, steps);
  options.onTile = ctx.report.tileProgress(2);
  if (flats == 0)
  {
    tiled::fillTiled(source, rows, filled.sink(), options, ctx.control, &report);
    passes += report.passes;
  }
  else
  {
    const Scratch scratch(ctx, output);
    const auto level = scratch.raster<float>("filled.f32", raster.width, raster.height);
    const auto mask = scratch.raster<int32_t>("flat_mask.i32", raster.width, raster.height);
    const auto work = scratch.raster<float>("raised.f32", raster.width, raster.height);
    tiled::fillTiled(source, rows, *level, options, ctx.control, &report);
    times.merge(report.times);
    passes += report.passes;
    ctx.report.step("Resolving flats tile by tile", 2, steps);
    options.onTile = ctx.report.roundsProgress();
    report = tiled::TiledReport();
    tiled::flatMaskTiled(*level, rows, *mask, flats == 1 ? dem::FlatGradient::Combined : dem::FlatGradient::TowardsOutlet,
                         scratch.path(), options, ctx.control, &report);
    times.merge(report.times);
    passes += report.passes;
    ctx.report.step("Raising the flats tile by tile", 3, steps);
    options.onTile = ctx.report.tileProgress(1);
    report = tiled::TiledReport();
    const tiled::RaisedCounts raised =
      tiled::raiseFlatsTiled(*level, *mask, rows, *work, filled.sink(), options, ctx.control, &report, &source);
    passes += report.passes;
    ctx.report.info(std::to_string(raised.raised) + " flat cells raised by their gradient, " +
                    std::to_string(raised.raisedInTurn) + " more raised in turn; scratch " +
                    gdal::mebibytes(scratch.bytes()) + " MiB in " + scratch.path() + ", removed now.");
  }
  times.merge(report.times);

  // Write: rank 0 finishes the file.
  FinishedFiles finished;
  {
    ScopedStage stage(times, "write (finish)");
    filled.finish(finished);
  }
  logTiledRun(ctx, report, passes, times);
  finished.keep();
}

// --- flowdirection ---------------------------------------------------------------------------------

void runDirections(const Arguments& args, RunContext& ctx)
{
  const std::string input = args.required("dem"), output = args.required("output");
  const int band = int(args.integer("band", 1));
  const bool resolveFlats = args.choice("resolve-flats", {"no", "yes"}, 1) == 1;
  const int encoding = args.choice("encoding", kEncodings, gdal::kEsri);
  const gdal::GdalRaster raster = openInput(ctx, input, band);
  const Setup setup = setUp(ctx, raster, kDirectionsInMemoryBytesPerCell,
                            resolveFlats ? tiled::kFlatsBytesPerTileCell : tiled::kDirectionsBytesPerTileCell,
                            dem::kGpuDirectionBytesPerCell);
  const gdal::GdalCacheLimit cache(setup.plan.gdalCacheBytes);
  const int steps = resolveFlats ? 3 : 2;
  StageTimes times;
  tiled::TiledOptions options = setup.options;
  const tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  gdal::GdalElevationSource source(raster);
  if (ctx.coordinator())
  {
    ctx.report.step("Reading the DEM (counting its cells)", 0, steps);
    ScopedStage stage(times, "read (counts)");
    scanElevations(ctx, source, setup);
  }
  int passes = ctx.coordinator() ? 1 : 0;

  // With flats resolved: their mask, tile by tile, into the scratch folder.
  std::unique_ptr<Scratch> scratch;
  std::unique_ptr<tiled::RawFileRaster<int32_t>> mask;
  if (resolveFlats)
  {
    ctx.report.step("Resolving flats tile by tile", 1, steps);
    scratch = std::make_unique<Scratch>(ctx, output);
    mask = scratch->raster<int32_t>("flat_mask.i32", raster.width, raster.height);
    options.onTile = ctx.report.roundsProgress();
    tiled::TiledReport flatsReport;
    tiled::flatMaskTiled(source, rows, *mask, dem::FlatGradient::Combined, scratch->path(), options, ctx.control,
                         &flatsReport);
    times.merge(flatsReport.times);
    passes += flatsReport.passes;
  }

  ctx.report.step("Computing flow directions tile by tile", steps - 1, steps);
  OutputRaster<uint8_t> directions(ctx, 1, output, raster, GDT_Byte, 255.0,
                                   [encoding](const uint8_t* in, int64_t count, void* buffer) {
                                     uint8_t* out = static_cast<uint8_t*>(buffer);
                                     for (int64_t i = 0; i < count; ++i)
                                       out[i] = gdal::encodeDirection(in[i], encoding);
                                   });
  options.onTile = ctx.report.tileProgress(1);
  tiled::TiledReport report;
  const tiled::DirectionCounts counts =
    tiled::directionsTiled(source, rows, directions.sink(), options, ctx.control, &report, mask.get());
  times.merge(report.times);
  passes += report.passes;
  FinishedFiles finished;
  {
    ScopedStage stage(times, "write (finish)");
    directions.finish(finished);
  }
  ctx.report.info(std::to_string(counts.drainingOut) + " cells drain out of the grid (at its border or into nodata); " +
                  std::to_string(counts.perDirection[8]) + " cells have no direction.");
  logTiledRun(ctx, report, passes, times);
  finished.keep();
}

// --- flowaccumulation ------------------------------------------------------------------------------

void runAccumulation(const Arguments& args, RunContext& ctx)
{
  const std::string input = args.required("directions"), cellsPath = args.required("cells");
  const std::string areaPath = args.text("area");
  const int band = int(args.integer("band", 1));
  const int encoding = args.choice("encoding", kEncodings, gdal::kEsri);
  const bool squareKilometres = args.choice("units", {"m2", "km2"}, 0) == 1;
  const gdal::GdalRaster raster = openInput(ctx, input, band);
  const Setup setup = setUp(ctx, raster, kAccumulationInMemoryBytesPerCell, tiled::kAccumulationBytesPerTileCell, 0);
  const gdal::GdalCacheLimit cache(setup.plan.gdalCacheBytes);
  StageTimes times;
  tiled::TiledOptions options = setup.options;
  const gdal::GdalCodeSource source(raster, gdal::decodingTable(encoding),
                                    gdal::decodingTable(encoding == gdal::kEsri ? gdal::kClockwise : gdal::kEsri));

  // Read: rank 0 checks every code once.
  if (ctx.coordinator())
  {
    ctx.report.step("Reading the flow directions (checking their codes)", 0, 2);
    ScopedStage stage(times, "read (check)");
    const gdal::GdalCodeSource::Counts counts =
      source.scan(nullptr, ctx.control, [&](double fraction) { ctx.report.progress(fraction); });
    if (counts.invalid > 0)
      throw InvalidInput(std::to_string(counts.invalid) + " cells hold values that the " + kEncodings[std::size_t(encoding)] +
                         " encoding lacks (the first: " + gdal::numberText(counts.firstInvalid) + " at column " +
                         std::to_string(counts.firstInvalidCell % raster.width) + ", row " +
                         std::to_string(counts.firstInvalidCell / raster.width) + ")" +
                         (counts.otherTableFits ? "; they all fit the other encoding: try --encoding " +
                                                    kEncodings[std::size_t(1 - encoding)]
                                                : std::string()));
    ctx.report.info(std::to_string(counts.valid) + " cells hold a direction.");
  }

  // Accumulate tile by tile, both rasters written as the tiles finish.
  ctx.report.step("Accumulating flow tile by tile", 1, 2);
  const double areaScale = squareKilometres ? 1e-12 : 1e-6;  // from 1e-6 m^2
  // Counts past Int32 (DEMs of more than 2^31 cells) are written as Float64, exact to 2^53.
  const bool wideCounts = raster.width * raster.height > int64_t(std::numeric_limits<int32_t>::max());
  OutputRaster<int64_t> cells(ctx, 1, cellsPath, raster, wideCounts ? GDT_Float64 : GDT_Int32,
                              double(gdal::kCellsNoData), [wideCounts](const int64_t* in, int64_t count, void* buffer) {
                                for (int64_t i = 0; i < count; ++i)
                                  if (wideCounts)
                                    static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : gdal::kCellsNoData;
                                  else
                                    static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : gdal::kCellsNoData;
                              });
  std::unique_ptr<OutputRaster<int64_t>> area;
  std::unique_ptr<tiled::RasterSink<int64_t>> noArea;
  if (!areaPath.empty())
    area = std::make_unique<OutputRaster<int64_t>>(ctx, 2, areaPath, raster, GDT_Float64, gdal::kAreaNoData,
                                                   [areaScale](const int64_t* in, int64_t count, void* buffer) {
                                                     double* out = static_cast<double*>(buffer);
                                                     for (int64_t i = 0; i < count; ++i)
                                                       out[i] = in[i] > 0 ? double(in[i]) * areaScale : gdal::kAreaNoData;
                                                   });
  else
    noArea = std::make_unique<tiled::DiscardSink<int64_t>>();
  options.onTile = ctx.report.tileProgress(2);
  tiled::TiledReport report;
  tiled::AccumulationSummary summary;
  try
  {
    summary = tiled::accumulationTiled(source, tiled::RowSizes{raster.cellWidth, raster.cellHeight}, cells.sink(),
                                       area ? area->sink() : *noArea, options, ctx.control, &report);
  }
  catch (const dem::LoopedDirections& e)
  {
    throw dem::LoopedDirections(std::string(e.what()) + " (are they in the " + kEncodings[std::size_t(encoding)] +
                                " encoding? --encoding)");
  }
  times.merge(report.times);
  FinishedFiles finished;
  {
    ScopedStage stage(times, "write (finish)");
    cells.finish(finished);
    if (area)
      area->finish(finished);
  }
  if (summary.largestCell >= 0)
    ctx.report.info(std::to_string(summary.outlets) + " outlets and " + std::to_string(summary.pits) +
                    " pits gather " + std::to_string(summary.reached) + " cells; the largest catchment drains to column " +
                    std::to_string(summary.largestCell % raster.width) + ", row " +
                    std::to_string(summary.largestCell / raster.width) + ": " + std::to_string(summary.largestCells) +
                    " cells.");
  logTiledRun(ctx, report, ctx.coordinator() ? 1 + report.passes : report.passes, times);
  finished.keep();
}

}  // namespace

const std::vector<OptionSpec>& commonOptions()
{
  static const std::vector<OptionSpec> options{
    {"band", "N", "The input's band, from 1 (BAND; default 1)."},
    {"device", "auto|cpu|gpu",
     "Where the tiles run (DEVICE): auto (the default) takes the GPU where one is usable; each rank of an MPI job "
     "takes the GPU its place on its host maps to (GPUs 0, 1, ... for the workers there), else its cores."},
    {"memory-budget", "MiB", "Memory each rank may use (MEMORY_BUDGET); 0 or absent: half the memory available."},
    {"tile", "CELLS", "Tiles of CELLS x CELLS cells instead of the largest the budget holds."},
    {"threads", "N", "Tiles each rank processes at once (default: its cores; GPUGEO_THREADS)."},
    {"cog", "", "Write the rasters as Cloud Optimized GeoTIFFs (COG)."},
    {"creation-options", "KEY=VALUE|...", "GDAL creation options over the defaults: the GeoTIFF driver's, or the COG "
                                          "driver's with --cog."},
    {"scratch", "DIR",
     "Where the scratch folder goes (removed however the run ends). Default: $TMPDIR or /tmp alone; in an MPI job "
     "the first output's folder, which every rank must see."},
    {"crs", "WKT", "The input's CRS (any definition GDAL takes) instead of its file's, as a QGIS layer's may be."},
    {"machine-readable", "", "Tagged lines for a program to read (@progress, @text, @info, @warning, @error)."},
    {"quiet", "", "Only warnings and errors."},
  };
  return options;
}

const std::vector<Command>& commands()
{
  static const std::vector<Command> list{
    {"filldepressions",
     "Fills the DEM's depressions (Priority-Flood, Barnes 2016 tile by tile), as gpugeo:filldepressions.",
     {{"dem", "PATH", "The DEM: any raster GDAL reads (INPUT)."},
      {"flats", "none|resolve|epsilon",
       "none: leave flat (the default); resolve: Barnes et al. (2014)'s gradient; epsilon: a gradient towards the "
       "outlet (FLATS)."},
      {"output", "PATH", "The filled DEM, a tiled GeoTIFF (.tif; OUTPUT)."}},
     runFill},
    {"flowdirection", "D8 flow directions of a filled DEM, as gpugeo:flowdirection.",
     {{"dem", "PATH", "The filled DEM (INPUT)."},
      {"resolve-flats", "yes|no", "Drain flats with Barnes et al. (2014)'s gradient (RESOLVE_FLATS; default yes)."},
      encodingOption("The directions' encoding"),
      {"output", "PATH", "The directions, a Byte GeoTIFF (OUTPUT)."}},
     runDirections},
    {"flowaccumulation",
     "Upstream cells and area along D8 directions (Barnes 2017 tile by tile), as gpugeo:flowaccumulation.",
     {{"directions", "PATH", "The D8 directions (INPUT)."},
      encodingOption("The directions' encoding"),
      {"units", "m2|km2", "The area's units (UNITS; default m2)."},
      {"cells", "PATH", "Upstream cells, with the cell itself (OUTPUT_CELLS)."},
      {"area", "PATH", "Upstream area (OUTPUT_AREA; optional)."}},
     runAccumulation},
    {"isochrones",
     "Travel time to an outlet, the watershed, isochrone bands and the time-area table, as gpugeo:isochrones.",
     isochronesOptions(), runIsochrones},
  };
  return list;
}

}  // namespace gpugeo::cli
