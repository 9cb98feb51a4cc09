// Times the tiled DEM tools (dem/tiled: fill, D8 without flat resolution, accumulation) on a synthetic
// terrain generated window by window (never whole in memory), the outputs written to raw files in a
// scratch folder; with --compare, also the in-memory tools on the same DEM (it must fit), checking
// that the outputs are equal and printing the ratio of the times.
//
// usage: bench_dem_tiled --width W --height H [--tile T] [--threads N] [--scratch DIR] [--compare] [--flats]
//                        [--no-raise] [--isochrones] [--in-ram] [--gpu] [--gpu-tiles N] [--gpu-keep-mib M]
//                        [--input-in-ram] [--host-keep-mib M]
// --gpu-tiles N: tiles on the GPU at once (default: the threads).
// --gpu-keep-mib M: device memory the flat mask may keep tiles in between its rounds (default: 90 % of
// the free GPU memory less the working memory of the tiles on the GPU at once).
// --gpu: the tiles' work on the GPU where the tiled tools have a GPU path (fill, flat mask, directions,
// accumulation), and the in-memory comparison on the GPU too.
// --host-keep-mib M: host memory the raise may keep tiles in between its rounds (default 0).
// --input-in-ram: the DEM generated into host memory before the clock starts (its time printed apart).
// --in-ram: the rasters in host memory instead of raw files (the flats' state still in the scratch folder).
// --flats: also the flat mask (Combined), the directions with flats resolved and the raised flats
// (--no-raise: not the raised flats).
// --isochrones: also the travel times (slope model, the largest basin's outlet) and the bands traced
// (automatic interval), on the directions without flat resolution.
// The terrain is bench_dem's (waves and a slope on 30 m cells, noise for pits, elevations rounded to
// 0.5 m for flats), with its noise from a hash of the cell so that any window can be generated alone.
// Prints one JSON object: the stage times (ms), the tiles, passes, graph bytes, the scratch bytes, the
// peak resident memory of the process (ru_maxrss) and cells per second; on the GPU, per tool, the
// turns the tiles took on the GPU with the seconds threads waited for one and held one (summed).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/parallel.h"
#include "dem/dem.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/travel_math.h"
#include "dem/isochrone_chain.h"
#include "dem/regions.h"
#include "dem/travel_time.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "generated_terrain.h"

using namespace gpugeo;
using namespace gpugeo::dem::tiled;

namespace {

// A raster of the run: in a raw file of the scratch folder, or (--in-ram) in host memory.
template <typename T>
class Store : public RasterSource<T>, public RasterSink<T>
{
public:
  Store(bool inRam, const std::string& path, int64_t w, int64_t h)
  {
    if (inRam)
      mMemory = std::make_unique<MemoryRaster<T>>(w, h);
    else
      mFile = std::make_unique<RawFileRaster<T>>(path, w, h);
  }
  int64_t width() const override { return mMemory ? mMemory->width() : mFile->width(); }
  int64_t height() const override { return mMemory ? mMemory->height() : mFile->height(); }
  void read(const Window& window, T* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, T* out, int64_t stride) const override
  {
    if (mMemory)
      mMemory->readStrided(window, out, stride);
    else
      mFile->readStrided(window, out, stride);
  }
  void write(const Window& window, const T* in) override
  {
    if (mMemory)
      mMemory->write(window, in);
    else
      mFile->write(window, in);
  }

private:
  std::unique_ptr<MemoryRaster<T>> mMemory;
  std::unique_ptr<RawFileRaster<T>> mFile;
};

double peakResidentMiB()
{
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

// Prints ,\n "name": {"stage": ms, ...} for the reports' stages, in order.
void printStages(const char* name, std::initializer_list<const TiledReport*> reports)
{
  std::printf(",\n \"%s\": {", name);
  const char* between = "";
  for (const TiledReport* r : reports)
    for (const auto& [stage, ms] : r->times.entries())
    {
      std::printf("%s\"%s\": %.1f", between, stage.c_str(), ms);
      between = ", ";
    }
  std::printf("}");
}

// The GPU turns (tile_cuda.h) taken between its making and stop(), printed by print() as
// ,"gpu_turns_name": [turns, seconds waited, seconds held].
class TurnCount
{
public:
  explicit TurnCount(const char* name) : mName(name), mStart(dem::tiled::detail::gpuTurnTotals()) {}
  void stop()
  {
    const dem::tiled::detail::GpuTurnTotals now = dem::tiled::detail::gpuTurnTotals();
    mSpent = {now.turns - mStart.turns, now.waitNs - mStart.waitNs, now.heldNs - mStart.heldNs};
  }
  void print() const
  {
    std::printf(",\n \"gpu_turns_%s\": [%lld, %.2f, %.2f]", mName, (long long)mSpent.turns,
                double(mSpent.waitNs) * 1e-9, double(mSpent.heldNs) * 1e-9);
  }

private:
  const char* mName;
  dem::tiled::detail::GpuTurnTotals mStart, mSpent;
};

double msSince(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv)
{
  int64_t w = 4000, h = 4000, tile = 1024;
  int threads = 0;
  std::string scratchParent = "/tmp";
  bool compare = false, flats = false, isochrones = false, inRam = false, raise = true;
  Backend backend = Backend::Cpu;
  bool inputInRam = false;
  int gpuTiles = 0;
  int64_t gpuKeepMiB = -1;
  int64_t hostKeepMiB = 0;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    auto next = [&] { return std::string(argv[++i]); };
    if (a == "--width") w = std::stoll(next());
    else if (a == "--height") h = std::stoll(next());
    else if (a == "--tile") tile = std::stoll(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--scratch") scratchParent = next();
    else if (a == "--compare") compare = true;
    else if (a == "--flats") flats = true;
    else if (a == "--no-raise") raise = false;
    else if (a == "--isochrones") isochrones = true;
    else if (a == "--in-ram") inRam = true;
    else if (a == "--gpu") backend = Backend::Gpu;
    else if (a == "--input-in-ram") inputInRam = true;
    else if (a == "--gpu-tiles") gpuTiles = std::stoi(next());
    else if (a == "--gpu-keep-mib") gpuKeepMiB = std::stoll(next());
    else if (a == "--host-keep-mib") hostKeepMiB = std::stoll(next());
  }
  const GeneratedTerrain generated(w, h);
  // --input-in-ram: the DEM generated into host memory first (timed apart), so that the run reads
  // staged tiles instead of making each one as it reads it.
  std::unique_ptr<MemoryRaster<float>> staged;
  double generateMs = 0;
  if (inputInRam)
  {
    const auto t0 = std::chrono::steady_clock::now();
    staged = std::make_unique<MemoryRaster<float>>(w, h);
    const int64_t band = 256;
    parallelFor((h + band - 1) / band, 1, threads, [&](int64_t b, int64_t e) {
      std::vector<float> rowsOfBand;
      for (int64_t i = b; i < e; ++i)
      {
        const Window rowsWindow{0, i * band, w, std::min(band, h - i * band)};
        rowsOfBand.resize(std::size_t(rowsWindow.cells()));
        generated.read(rowsWindow, rowsOfBand.data());
        staged->write(rowsWindow, rowsOfBand.data());
      }
    });
    generateMs = msSince(t0);
  }
  const RasterSource<float>& terrain = staged ? static_cast<const RasterSource<float>&>(*staged) : generated;
  const RowSizes rows{std::vector<double>(std::size_t(h), 30.0), std::vector<double>(std::size_t(h), 30.0)};
  TiledOptions options;
  options.tileWidth = options.tileHeight = tile;
  options.threads = threads;
  options.hostKeepBytes = hostKeepMiB << 20;
  options.backend = backend;
  options.gpuTiles = gpuTiles > 0 ? gpuTiles : std::max(1, threads);
  if (backend == Backend::Gpu)
  {
    const int64_t working = int64_t(options.gpuTiles) * (tile + 4) * (tile + 4) * dem::tiled::kGpuBytesPerTileCell;
    options.gpuKeepBytes = gpuKeepMiB >= 0 ? gpuKeepMiB << 20
                                           : std::max<int64_t>(0, dem::tiled::freeGpuMemory() / 10 * 9 - working);
  }
  RunControl control;

  ScratchFolder scratch(scratchParent);
  Store<float> filled(inRam, scratch.path() + "/filled.f32", w, h);
  Store<uint8_t> directions(inRam, scratch.path() + "/directions.u8", w, h);
  Store<int64_t> cells(inRam, scratch.path() + "/cells.i64", w, h), area(inRam, scratch.path() + "/area.i64", w, h);
  TiledReport fillReport, directionsReport, accumulationReport;
  const auto start = std::chrono::steady_clock::now();
  TurnCount fillTurns("fill");
  fillTiled(terrain, rows, filled, options, control, &fillReport);
  fillTurns.stop();
  const double fillMs = msSince(start);
  TurnCount directionsTurns("directions");
  directionsTiled(filled, rows, directions, options, control, &directionsReport);
  directionsTurns.stop();
  const double directionsMs = msSince(start) - fillMs;
  TurnCount accumulationTurns("accumulation");
  accumulationTiled(directions, rows, cells, area, options, control, &accumulationReport);
  accumulationTurns.stop();
  const double totalMs = msSince(start);
  const double accumulationMs = totalMs - fillMs - directionsMs;
  const double tiledPeak = peakResidentMiB();

  std::printf("{\"width\": %lld, \"height\": %lld, \"tile\": %lld, \"tiles\": %lld, \"threads\": %d, \"backend\": \"%s\","
              " \"gpu_tiles\": %d,\n",
              (long long)w, (long long)h, (long long)fillReport.tileWidth, (long long)fillReport.tiles, threads,
              backend == Backend::Gpu ? "gpu" : "cpu", options.gpuTiles);
  std::printf(" \"fill_ms\": %.1f, \"directions_ms\": %.1f, \"accumulation_ms\": %.1f, \"tiled_ms\": %.1f,\n", fillMs,
              directionsMs, accumulationMs, totalMs);
  std::printf(" \"cells_per_s\": %.4g, \"passes\": [%d, %d, %d], \"input_generated_ahead_ms\": %.1f",
              double(w * h) / (totalMs / 1000.0), fillReport.passes, directionsReport.passes,
              accumulationReport.passes, generateMs);
  printStages("stages_ms", {&fillReport, &directionsReport, &accumulationReport});
  std::printf(",\n \"gpu_keep_mib\": %lld", (long long)(options.gpuKeepBytes >> 20));
  for (const TurnCount* turns : {&fillTurns, &directionsTurns, &accumulationTurns})
    turns->print();
  std::printf(",\n \"graph_bytes\": [%lld, %lld], \"scratch_bytes\": %lld, \"tiled_peak_rss_mib\": %.1f",
              (long long)fillReport.graphBytes, (long long)accumulationReport.graphBytes, (long long)scratch.bytes(),
              tiledPeak);
  if (compare)
  {
    // The in-memory tools on the same DEM, and the outputs compared.
    std::vector<float> z(std::size_t(w * h));
    terrain.read(Window{0, 0, w, h}, z.data());
    const dem::Grid grid{z.data(), w, h, rows.cellWidth.data(), rows.cellHeight.data()};
    const auto memStart = std::chrono::steady_clock::now();
    const std::vector<float> memFilled = dem::fillDepressions(backend, grid, threads, control);
    const dem::Grid filledGrid{memFilled.data(), w, h, rows.cellWidth.data(), rows.cellHeight.data()};
    const std::vector<uint8_t> memDirections = dem::flowDirections(backend, filledGrid, false, threads, control);
    const dem::Accumulation memAcc = dem::flowAccumulation(backend, filledGrid, memDirections, threads, control);
    const double memMs = msSince(memStart);
    std::vector<float> gotFilled(z.size());
    filled.read(Window{0, 0, w, h}, gotFilled.data());
    std::vector<uint8_t> gotDirections(z.size());
    directions.read(Window{0, 0, w, h}, gotDirections.data());
    std::vector<int64_t> gotArea(z.size());
    area.read(Window{0, 0, w, h}, gotArea.data());
    const bool same = std::memcmp(gotFilled.data(), memFilled.data(), z.size() * sizeof(float)) == 0 &&
                      gotDirections == memDirections && gotArea == memAcc.area;
    std::printf(",\n \"in_memory_ms\": %.1f, \"tiled_over_in_memory\": %.2f, \"identical\": %s", memMs,
                totalMs / memMs, same ? "true" : "false");
  }
  if (isochrones)
  {
    // The directions with flats resolved (as the isochrone chain has them) and their accumulation,
    // then the travel times to the largest basin's outlet, then the bands and their polygons.
    Store<int32_t> flatMask(inRam, scratch.path() + "/iso_mask.i32", w, h);
    Store<uint8_t> drained(inRam, scratch.path() + "/iso_dir.u8", w, h);
    Store<int64_t> isoCells(inRam, scratch.path() + "/iso_cells.i64", w, h), isoArea(inRam, scratch.path() + "/iso_area.i64", w, h);
    TiledReport isoMaskReport;
    // Tile visits of the flats' passes (each round visits only the tiles beside changed perimeters).
    std::atomic<int64_t> maskVisits{0};
    TiledOptions counting = options;
    counting.onTile = [&](int, int64_t, int64_t) { ++maskVisits; };
    auto t0 = std::chrono::steady_clock::now();
    TurnCount maskTurns("flat_mask");
    flatMaskTiled(filled, rows, flatMask, dem::FlatGradient::Combined, scratch.path(), counting, control, &isoMaskReport);
    maskTurns.stop();
    const double isoMaskMs = msSince(t0);
    TurnCount resolvedTurns("resolved_directions_accumulation");
    directionsTiled(filled, rows, drained, options, control, nullptr, &flatMask);
    const AccumulationSummary drainedSummary = accumulationTiled(drained, rows, isoCells, isoArea, options, control);
    resolvedTurns.stop();
    const double resolvedMs = msSince(t0);
    Store<double> minutes(inRam, scratch.path() + "/minutes.f64", w, h);
    dem::VelocityModel model;  // the slope model's defaults
    TiledReport travelReport, bandsReport;
    t0 = std::chrono::steady_clock::now();
    TurnCount travelTurns("travel");
    const TravelSummary travel = travelTimeTiled(filled, drained, isoArea, nullptr, rows, drainedSummary.largestCell,
                                                 model, minutes, options, control, &travelReport);
    travelTurns.stop();
    const double travelMs = msSince(t0);
    dem::ChainOptions bandOptions;
    double interval = 0;
    const int32_t bands = dem::detail::chainBandCount(travel.maxTime, bandOptions, interval);
    t0 = std::chrono::steady_clock::now();
    const TiledBands traced = bandsTiled(minutes, rows, interval, bands, nullptr, options, control, &bandsReport,
                                         nullptr, &travel.tilesWithTimes);
    const double bandsMs = msSince(t0);
    std::printf(",\n \"flat_mask_ms\": %.1f, \"flat_mask_passes\": %d, \"flat_mask_tile_visits\": %lld", isoMaskMs,
                isoMaskReport.passes, (long long)maskVisits.load());
    printStages("flat_mask_stages_ms", {&isoMaskReport});
    std::printf(",\n \"tiles_with_times\": %lld", (long long)std::count(travel.tilesWithTimes.begin(),
                                                                       travel.tilesWithTimes.end(), uint8_t(1)));
    std::printf(",\n \"flats_directions_accumulation_ms\": %.1f, \"travel_ms\": %.1f, \"bands_ms\": %.1f, \"watershed_cells\": %lld, \"bands\": %d,"
                " \"band_vertices\": %lld, \"isochrones_peak_rss_mib\": %.1f",
                resolvedMs, travelMs, bandsMs, (long long)travel.watershedCells, int(bands), (long long)traced.bands.x.size(),
                peakResidentMiB());
    printStages("isochrones_stages_ms", {&travelReport, &bandsReport});
    for (const TurnCount* turns : {&maskTurns, &resolvedTurns, &travelTurns})
      turns->print();
    if (compare)
    {
      // The in-memory travel times and polygons on the same arrays.
      std::vector<float> z(std::size_t(w * h));
      filled.read(Window{0, 0, w, h}, z.data());
      std::vector<uint8_t> dir(z.size());
      drained.read(Window{0, 0, w, h}, dir.data());
      dem::Accumulation acc;
      acc.area.resize(z.size());
      isoArea.read(Window{0, 0, w, h}, acc.area.data());
      const dem::Grid grid{z.data(), w, h, rows.cellWidth.data(), rows.cellHeight.data()};
      t0 = std::chrono::steady_clock::now();
      const dem::TravelTimes memTravel =
        dem::travelTime(grid, dir, acc, drainedSummary.largestCell, model, threads, control, false);
      std::vector<int32_t> labels(z.size());
      for (std::size_t i = 0; i < z.size(); ++i)
        labels[i] = std::isnan(memTravel.minutes[i]) ? -1 : dem::detail::bandOfTime(memTravel.minutes[i], interval);
      const BandPolygons memBands = dem::traceRegions(Backend::Cpu, labels.data(), w, h, bands, threads, control);
      const double memMs = msSince(t0);
      std::vector<double> got(z.size());
      minutes.read(Window{0, 0, w, h}, got.data());
      int64_t off = 0;
      for (std::size_t i = 0; i < z.size(); ++i)
        off += std::isnan(got[i]) != std::isnan(memTravel.minutes[i]) ||
               std::fabs(got[i] - memTravel.minutes[i]) > 1e-12 * std::fabs(memTravel.minutes[i]);
      const bool samePolygons = traced.bands.x == memBands.x && traced.bands.y == memBands.y &&
                                traced.bands.ringPoint == memBands.ringPoint &&
                                traced.bands.polygonRing == memBands.polygonRing;
      std::printf(",\n \"in_memory_isochrones_ms\": %.1f, \"times_off\": %lld, \"polygons_identical\": %s", memMs,
                  (long long)off, samePolygons ? "true" : "false");
    }
  }
  if (flats)
  {
    // The flats of the filled DEM: the mask, D8 with it, and the raised DEM, each timed.
    Store<int32_t> mask(inRam, scratch.path() + "/mask.i32", w, h);
    Store<uint8_t> resolved(inRam, scratch.path() + "/resolved.u8", w, h);
    RawFileRaster<float> work(scratch.path() + "/work.f32", w, h);
    Store<float> raised(inRam, scratch.path() + "/raised.f32", w, h);
    TiledReport maskReport, raiseReport;
    auto t0 = std::chrono::steady_clock::now();
    flatMaskTiled(filled, rows, mask, dem::FlatGradient::Combined, scratch.path(), options, control, &maskReport);
    const double maskMs = msSince(t0);
    t0 = std::chrono::steady_clock::now();
    directionsTiled(filled, rows, resolved, options, control, nullptr, &mask);
    const double resolvedMs = msSince(t0);
    t0 = std::chrono::steady_clock::now();
    const RaisedCounts counts =
      raise ? raiseFlatsTiled(filled, mask, rows, work, raised, options, control, &raiseReport) : RaisedCounts{};
    const double raiseMs = msSince(t0);
    std::printf(",\n \"flat_mask_ms\": %.1f, \"flat_mask_passes\": %d, \"resolved_directions_ms\": %.1f,\n"
                " \"raise_ms\": %.1f, \"raise_passes\": %d, \"raised\": %lld, \"raised_in_turn\": %lld",
                maskMs, maskReport.passes, resolvedMs, raiseMs, raiseReport.passes, (long long)counts.raised,
                (long long)counts.raisedInTurn);
    printStages("flats_stages_ms", {&maskReport, &raiseReport});
    if (raise)
    {
      // The raised DEM's bits (FNV-1a over rows), to compare runs and versions.
      uint64_t hash = 1469598103934665603ull;
      std::vector<float> row(static_cast<std::size_t>(w));
      for (int64_t y = 0; y < h; ++y)
      {
        raised.read(Window{0, y, w, 1}, row.data());
        const auto* bytes = reinterpret_cast<const unsigned char*>(row.data());
        for (std::size_t k = 0; k < row.size() * sizeof(float); ++k)
          hash = (hash ^ bytes[k]) * 1099511628211ull;
      }
      std::printf(",\n \"raised_checksum\": \"%016llx\"", (unsigned long long)hash);
    }
    if (compare)
    {
      std::vector<float> z(std::size_t(w * h));
      filled.read(Window{0, 0, w, h}, z.data());
      const dem::Grid grid{z.data(), w, h, rows.cellWidth.data(), rows.cellHeight.data()};
      t0 = std::chrono::steady_clock::now();
      const std::vector<int32_t> memMask = dem::flatMask(Backend::Cpu, grid, threads, control);
      const double memMaskMs = msSince(t0);
      std::vector<int32_t> gotMask(z.size());
      mask.read(Window{0, 0, w, h}, gotMask.data());
      std::printf(",\n \"in_memory_flat_mask_ms\": %.1f, \"flat_mask_identical\": %s", memMaskMs,
                  gotMask == memMask ? "true" : "false");
    }
  }
  std::printf("}\n");
  return 0;
}
