// Times the watersheds of many outlets (dem/watersheds.h) in memory on one backend (the CPU's on
// --threads: tiled_dem.h's watershedsOnThreads) and, with --tile,
// tile by tile (tiled_watersheds.cpp, rasters in memory), on bench_dem's synthetic terrain filled and
// drained with flats resolved (the preparation on the same backend, off the clock); the outlets are
// random valid cells. Prints one JSON object: the time (median of --reps), the cells per second and a
// checksum of the labels (the same on both backends).
//
// usage: bench_watersheds --width W --height H [--outlets N] [--backend cpu|gpu] [--tile T]
//                         [--threads N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "dem/dem.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/watersheds.h"
#include "generated_terrain.h"

using namespace gpugeo;

int main(int argc, char** argv)
{
  int64_t w = 2511, h = 2550, outletCount = 1000, tile = 0;
  int threads = 2, reps = 3;
  Backend backend = Backend::Cpu;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--width")
      w = std::atoll(next());
    else if (a == "--height")
      h = std::atoll(next());
    else if (a == "--outlets")
      outletCount = std::atoll(next());
    else if (a == "--backend")
      backend = std::string(next()) == "gpu" ? Backend::Gpu : Backend::Cpu;
    else if (a == "--tile")
      tile = std::atoll(next());
    else if (a == "--threads")
      threads = std::atoi(next());
    else if (a == "--reps")
      reps = std::atoi(next());
  }
  RunControl control;
  std::vector<float> z(std::size_t(w * h));
  dem::tiled::GeneratedTerrain(w, h).read(dem::tiled::Window{0, 0, w, h}, z.data());
  const std::vector<double> cellWidth(std::size_t(h), 30.0), cellHeight(std::size_t(h), 30.0);
  const dem::Grid grid{z.data(), w, h, cellWidth.data(), cellHeight.data()};
  const std::vector<float> filled = dem::fillDepressions(backend, grid, threads, control);
  const dem::Grid filledGrid{filled.data(), w, h, cellWidth.data(), cellHeight.data()};
  const std::vector<uint8_t> directions = dem::flowDirections(backend, filledGrid, true, threads, control);
  std::mt19937_64 random(7);
  std::vector<int64_t> outlets;
  while (int64_t(outlets.size()) < outletCount)
  {
    const int64_t c = int64_t(random() % uint64_t(w * h));
    if (directions[std::size_t(c)] != dem::kNoData)
      outlets.push_back(c);
  }

  std::vector<double> ms;
  std::vector<int32_t> labels;
  for (int r = 0; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    if (tile > 0)
    {
      dem::tiled::TiledOptions options;
      options.tileWidth = options.tileHeight = tile;
      options.threads = threads;
      options.backend = backend;
      options.gpuTiles = 2;
      const dem::tiled::MemoryRaster<uint8_t> source(w, h, directions);
      dem::tiled::MemoryRaster<int32_t> sink(w, h);
      dem::tiled::watershedsTiled(source, dem::tiled::RowSizes{cellWidth, cellHeight}, outlets, sink, options,
                                  control);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      labels = sink.cells();
    }
    else if (backend == Backend::Cpu && threads > 1)
    {
      labels = dem::tiled::watershedsOnThreads(directions, dem::tiled::RowSizes{cellWidth, cellHeight}, outlets,
                                               threads, control)
                 .labels;
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    else
    {
      labels = dem::watersheds(backend, directions, w, h, cellWidth.data(), cellHeight.data(), outlets, control).labels;
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < labels.size(); ++i)
    sum += (uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ uint64_t(uint32_t(labels[i])) * 0xBF58476D1CE4E5B9ull;
  const double median = ms[ms.size() / 2];
  std::printf("{\"width\": %lld, \"height\": %lld, \"outlets\": %lld, \"backend\": \"%s\", \"tile\": %lld, "
              "\"threads\": %d, \"ms\": %.2f, \"cells_per_s\": %.4g, \"checksum\": \"%016llx\"}\n",
              (long long)w, (long long)h, (long long)outletCount, backend == Backend::Gpu ? "gpu" : "cpu",
              (long long)tile, threads, median, double(w) * double(h) / (median / 1000.0), (unsigned long long)sum);
  return 0;
}
