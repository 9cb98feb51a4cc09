// Times the tiled DEM chain (fill, D8 directions without flat resolution, accumulation) run by the
// ranks of an MPI job (dem/tiled/distribution.h over processing/cli's MpiTransport): rank 0 holds the
// graphs and takes the accumulation's two rasters, the workers process the tiles, each generating its
// tiles' terrain itself (generated_terrain.h: no input file) and writing the filled DEM and the
// directions straight into raw files of a folder every rank sees (default /dev/shm). For the scaling
// tables: strong (one DEM, more ranks) and weak (cells per worker fixed) scaling, CPU and GPU
// workers.
//
// usage: mpiexec -n N bench_dem_mpi --width W --height H [--tile T] [--threads N] [--gpu]
//                                   [--gpu-threads N] [--scratch DIR] [--workers-write]
//                                   [--flats] [--isochrones [--bands N]] [--band-columns N]
//                                   [--gpu-keep-mib N] [--mapped]
// --workers-write: the accumulation's rasters too go to raw files that the workers write (rank 0 then
// holds only the graphs), instead of through rank 0 (as gpugeo_dem's outputs go: GDAL files that rank
// 0 writes).
// --flats: the directions drain the filled DEM's flats (flatMaskTiled's mask, Combined, in the
// scratch folder; its rounds on the GPUs when every worker holds one, each keeping tiles between the
// rounds in what its GPU has free, or --gpu-keep-mib MiB; else on the CPU of every worker).
// --isochrones: the chain goes on to the isochrones' travel times to the outlet of the largest
// catchment (the accumulation's area in a raw file the workers write, the counts checksummed by the
// workers where they are computed, the times in a raw file); --bands N: and their N isochrone bands
// traced (the polygons dropped as they come).
// --mapped: the rasters of the scratch folder mapped into every rank's memory (raster_io.h's
// MappedRaster: host memory the ranks of one host share; their space reserved before the clock
// starts, the time printed as scratch_made_ms) instead of read and written by system calls.
// --band-columns N: each raster in the scratch folder in files of N columns each (raster_io.h; not with
// --mapped), so
// that tiles side by side write to different files (tmpfs takes one write to a file at a time).
// --threads N: tiles each CPU worker processes at once (default 1: a rank a core).
// --gpu: each worker takes the GPU its place on its host maps to (processing/cli/gpu_mapping.h: the
// host's first worker GPU 0 ...), the others their CPU; --gpu-threads N: tiles a GPU worker has at
// once (default 4).
// Prints one JSON object (rank 0): the ranks, workers on the GPU, the stage times (ms), the cells per
// second and checksums of the outputs (the same for any number of ranks); before it, on the standard
// error, rank 0's time in each pass and graph of the tools.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/gpu_mapping.h"
#include "cli/mpi_transport.h"
#include "core/backend.h"
#include "dem/tiled/distribution.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "generated_terrain.h"

using namespace gpugeo;
using namespace gpugeo::dem::tiled;

namespace {

// An order-free checksum of the cells written (each cell once): the sum of a hash of (cell, value).
template <typename T>
class ChecksumSink : public RasterSink<T>
{
public:
  explicit ChecksumSink(int64_t width) : mWidth(width) {}
  void write(const Window& window, const T* in) override
  {
    uint64_t sum = 0;
    for (int64_t y = 0; y < window.height; ++y)
      for (int64_t x = 0; x < window.width; ++x)
        sum += hash(uint64_t((window.y0 + y) * mWidth + window.x0 + x), in[y * window.width + x]);
    std::lock_guard<std::mutex> lock(mLock);
    mSum += sum;
  }
  uint64_t sum() const { return mSum; }
  void add(uint64_t sum) { mSum += sum; }
  void reset(uint64_t sum) { mSum = sum; }

  static uint64_t hash(uint64_t cell, T value)
  {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    uint64_t k = cell * 0x9E3779B97F4A7C15ull ^ (bits + 0x632BE59BD9B4E019ull);
    k ^= k >> 31;
    k *= 0xBF58476D1CE4E5B9ull;
    return k ^ (k >> 29);
  }

private:
  int64_t mWidth;
  std::mutex mLock;
  uint64_t mSum = 0;
};

// A raster of the scratch folder that every rank reads and writes: a raw file (in bands of columns, or
// one) read and written by system calls, or (--mapped) a file mapped into each rank's memory.
template <typename T>
class ScratchRaster : public RasterSource<T>, public RasterSink<T>
{
public:
  ScratchRaster(const std::string& path, int64_t w, int64_t h, RawFile::Mode mode, bool mapped, int64_t bandColumns)
  {
    if (mapped)
    {
      auto raster = std::make_unique<MappedRaster<T>>(path, w, h, mode);
      mSource = raster.get();
      mSink = raster.get();
      mHeld = std::move(raster);
    }
    else
    {
      auto raster = std::make_unique<RawFileRaster<T>>(path, w, h, mode, bandColumns);
      mSource = raster.get();
      mSink = raster.get();
      mHeld = std::move(raster);
    }
  }
  int64_t width() const override { return mSource->width(); }
  int64_t height() const override { return mSource->height(); }
  void read(const Window& window, T* out) const override { mSource->read(window, out); }
  void readStrided(const Window& window, T* out, int64_t stride) const override
  {
    mSource->readStrided(window, out, stride);
  }
  void write(const Window& window, const T* in) override { mSink->write(window, in); }

private:
  std::shared_ptr<void> mHeld;
  const RasterSource<T>* mSource = nullptr;
  RasterSink<T>* mSink = nullptr;
};

// The checksum of a raster in the scratch folder (rank 0, after the run, off the clock; rows on every
// core).
template <typename T>
uint64_t checksumOf(const RasterSource<T>& raster)
{
  ChecksumSink<T> sink(raster.width());
  const int64_t n = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      std::vector<T> rows(std::size_t(raster.width()) * 16);
      for (int64_t y = t * 16; y < raster.height(); y += n * 16)
      {
        const Window w{0, y, raster.width(), std::min<int64_t>(16, raster.height() - y)};
        raster.read(w, rows.data());
        sink.write(w, rows.data());
      }
    });
  for (std::thread& thread : threads)
    thread.join();
  return sink.sum();
}

// The sum over the ranks of their checksums (rank 0's result).
uint64_t summed(uint64_t mine)
{
  uint64_t all = 0;
  MPI_Reduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  return all;
}

double msSince(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv)
{
  cli::MpiSession session(argc, argv);
  if (!session.active())
  {
    std::fprintf(stderr, "run under mpiexec\n");
    return 2;
  }
  int64_t w = 4000, h = 4000, tile = 1024;
  int threads = 1, gpuThreads = 4;
  bool gpu = false, workersWrite = false, isochrones = false, flats = false;
  int32_t bandCount = 0;
  int64_t gpuKeepMiB = -1;  // -1: what the GPU has free
  int64_t bandColumns = 0;  // 0: each raster one file
  bool mapped = false;
  std::string scratchParent = "/dev/shm";
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--width")
      w = std::atoll(next());
    else if (a == "--height")
      h = std::atoll(next());
    else if (a == "--tile")
      tile = std::atoll(next());
    else if (a == "--threads")
      threads = std::atoi(next());
    else if (a == "--gpu-threads")
      gpuThreads = std::atoi(next());
    else if (a == "--gpu")
      gpu = true;
    else if (a == "--workers-write")
      workersWrite = true;
    else if (a == "--scratch")
      scratchParent = next();
    else if (a == "--flats")
      flats = true;
    else if (a == "--isochrones")
      isochrones = true;
    else if (a == "--mapped")
      mapped = true;
    else if (a == "--band-columns")
      bandColumns = std::atoll(next());
    else if (a == "--gpu-keep-mib")
      gpuKeepMiB = std::atoll(next());
    else if (a == "--bands")
      bandCount = std::atoi(next());
  }
  cli::MpiTransport transport;
  if (transport.size() > 1)
    cli::mapGpu(transport.rank(), transport.localRank(), transport.hostHoldsRankZero());
  const bool onGpu = gpu && transport.rank() != 0 && probeGpu().usable;
  Cluster cluster(transport, onGpu ? gpuThreads : threads);
  const bool coordinator = cluster.coordinator();

  TiledOptions options;
  options.tileWidth = options.tileHeight = tile;
  options.threads = onGpu ? gpuThreads : threads;
  options.backend = onGpu ? Backend::Gpu : Backend::Cpu;
  options.gpuTiles = onGpu ? 2 : 1;
  options.cluster = &cluster;
  // What the GPU keeps between the flats' rounds: its free memory less the tiles' working memory and a
  // reserve of 2 GiB (as the QGIS algorithms' plan gives it).
  if (onGpu)
    options.gpuKeepBytes = gpuKeepMiB >= 0 ? gpuKeepMiB << 20
                                           : std::max<int64_t>(0, freeGpuMemory() - (int64_t(2) << 30) -
                                                                    options.gpuTiles * kGpuBytesPerTileCell * (tile + 4) * (tile + 4));
  const RowSizes rows{std::vector<double>(std::size_t(h), 30.0), std::vector<double>(std::size_t(h), 30.0)};
  const GeneratedTerrain terrain(w, h);

  // The scratch folder: rank 0's, its path shared.
  std::unique_ptr<ScratchFolder> folder;
  std::string scratch;
  if (coordinator)
  {
    folder = std::make_unique<ScratchFolder>(scratchParent);
    scratch = folder->path();
  }
  cluster.share([&](Archive& a) { a.string(scratch); });
  const RawFile::Mode mode = coordinator ? RawFile::Mode::Create : RawFile::Mode::Update;
  const auto reserving = std::chrono::steady_clock::now();
  ScratchRaster<float> filled(scratch + "/filled.f32", w, h, mode, mapped, bandColumns);
  ScratchRaster<uint8_t> directions(scratch + "/directions.u8", w, h, mode, mapped, bandColumns);
  ChecksumSink<int64_t> cellsSum(w), areaSum(w);
  std::unique_ptr<RasterSink<int64_t>> cells, area;
  std::unique_ptr<ScratchRaster<int64_t>> cellsFile, areaFile;
  std::unique_ptr<ScratchRaster<double>> minutesFile;
  std::unique_ptr<ScratchRaster<int32_t>> mask;
  if (flats)
    mask = std::make_unique<ScratchRaster<int32_t>>(scratch + "/flat_mask.i32", w, h, mode, mapped, bandColumns);
  if (isochrones)
  {
    areaFile = std::make_unique<ScratchRaster<int64_t>>(scratch + "/area.i64", w, h, mode, mapped, bandColumns);
    minutesFile = std::make_unique<ScratchRaster<double>>(scratch + "/minutes.f64", w, h, mode, mapped, bandColumns);
  }
  else if (workersWrite)
  {
    cellsFile = std::make_unique<ScratchRaster<int64_t>>(scratch + "/cells.i64", w, h, mode, mapped, bandColumns);
    areaFile = std::make_unique<ScratchRaster<int64_t>>(scratch + "/area.i64", w, h, mode, mapped, bandColumns);
  }
  else if (coordinator)
  {
    cluster.addSink(1, cellsSum);
    cluster.addSink(2, areaSum);
  }
  else
  {
    cells = cluster.remoteSink<int64_t>(1, w, h);
    area = cluster.remoteSink<int64_t>(2, w, h);
  }
  RasterSink<int64_t>& cellsOut = isochrones     ? static_cast<RasterSink<int64_t>&>(cellsSum)
                                  : workersWrite ? *cellsFile
                                  : coordinator  ? static_cast<RasterSink<int64_t>&>(cellsSum)
                                                 : *cells;
  RasterSink<int64_t>& areaOut = isochrones || workersWrite ? *areaFile
                                 : coordinator              ? static_cast<RasterSink<int64_t>&>(areaSum)
                                                            : *area;
  // The scratch rasters made (and, mapped, their memory reserved) before the clock starts.
  const double reserveMs = msSince(reserving);
  // How many workers hold a GPU (each worker's word, gathered through rank 0 by MPI).
  int mine = onGpu ? 1 : 0, gpuWorkers = 0;
  MPI_Reduce(&mine, &gpuWorkers, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);

  RunControl control;
  TiledReport fill, flatRounds, dirs, acc, travel, traced;
  const auto start = std::chrono::steady_clock::now();
  fillTiled(terrain, rows, filled, options, control, &fill);
  const double fillMs = msSince(start);
  double flatsMs = 0;
  if (flats)
  {
    flatMaskTiled(filled, rows, *mask, dem::FlatGradient::Combined, scratch, options, control, &flatRounds);
    flatsMs = msSince(start) - fillMs;
  }
  directionsTiled(filled, rows, directions, options, control, &dirs, mask.get());
  const double dirMs = msSince(start) - fillMs - flatsMs;
  const AccumulationSummary accumulated = accumulationTiled(directions, rows, cellsOut, areaOut, options, control, &acc);
  const double accMs = msSince(start) - fillMs - flatsMs - dirMs;
  double travelMs = 0, bandsMs = 0;
  int64_t outlet = accumulated.largestCell, watershed = 0;
  if (isochrones)
  {
    // The outlet and the bands' interval are rank 0's word.
    MPI_Bcast(&outlet, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    const auto travelStart = std::chrono::steady_clock::now();
    const TravelSummary times =
      travelTimeTiled(filled, directions, *areaFile, nullptr, rows, outlet, dem::VelocityModel{}, *minutesFile, options,
                      control, &travel);
    travelMs = msSince(travelStart);
    watershed = times.watershedCells;
    if (bandCount > 0)
    {
      double interval = times.maxTime / bandCount * (1 + 1e-9);  // the slowest cell in the last band
      MPI_Bcast(&interval, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      const auto bandsStart = std::chrono::steady_clock::now();
      bandsTiled(*minutesFile, rows, interval, bandCount, nullptr, options, control, &traced,
                 [](int32_t, int64_t, double, BandPolygons& polygons) { polygons = BandPolygons{}; },
                 &times.tilesWithTimes);
      bandsMs = msSince(bandsStart);
    }
  }
  const double totalMs = msSince(start);
  cluster.finish();
  cluster.awaitEnd();
  uint64_t minutesSum = 0;
  if (isochrones)
  {
    const uint64_t c = summed(cellsSum.sum());  // every rank's share of the counts
    if (coordinator)
    {
      cellsSum.reset(c);
      areaSum.add(checksumOf(*areaFile));
      minutesSum = checksumOf(*minutesFile);
    }
  }
  else if (coordinator && workersWrite)
  {
    const uint64_t c = checksumOf(*cellsFile), a = checksumOf(*areaFile);
    cellsSum.add(c);
    areaSum.add(a);
  }
  // The coordinator's stages (its graphs between the passes are what does not shrink with more ranks).
  if (coordinator)
    for (const TiledReport* r : {&fill, &flatRounds, &dirs, &acc, &travel, &traced})
      for (const auto& [stage, ms] : r->times.entries())
        std::fprintf(stderr, "stage %-40s %9.1f ms\n", stage.c_str(), ms);
  if (coordinator)
    std::printf("{\"ranks\": %d, \"workers\": %d, \"gpu_workers\": %d, \"width\": %lld, \"height\": %lld, \"tile\": %lld, "
                "\"threads\": %d, \"workers_write\": %s, \"mapped\": %s, \"band_columns\": %lld, \"scratch_made_ms\": %.1f, \"fill_ms\": %.1f, \"flats_ms\": %.1f, \"flat_rounds\": %d, \"directions_ms\": %.1f, \"accumulation_ms\": %.1f, "
                "\"travel_ms\": %.1f, \"bands_ms\": %.1f, \"bands\": %d, \"outlet\": %lld, \"watershed_cells\": %lld, "
                "\"total_ms\": %.1f, \"cells_per_s\": %.4g, \"tiles\": %lld, \"checksums\": [\"%016llx\", "
                "\"%016llx\", \"%016llx\", \"%016llx\", \"%016llx\"]}\n",
                cluster.size(), cluster.size() - 1, gpuWorkers, (long long)w, (long long)h, (long long)tile, threads,
                workersWrite ? "true" : "false", mapped ? "true" : "false", (long long)(mapped ? 0 : bandColumns), reserveMs, fillMs, flatsMs, int(flatRounds.passes), dirMs, accMs, travelMs, bandsMs, bandCount,
                (long long)(isochrones ? outlet : -1), (long long)watershed, totalMs,
                double(w) * double(h) / (totalMs / 1000.0), (long long)fill.tiles,
                (unsigned long long)checksumOf(filled), (unsigned long long)checksumOf(directions),
                (unsigned long long)cellsSum.sum(), (unsigned long long)areaSum.sum(), (unsigned long long)minutesSum);
  return 0;
}
