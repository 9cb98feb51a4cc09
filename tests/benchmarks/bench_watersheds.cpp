// Times the watersheds of many outlets (dem/watersheds.h) in memory on one backend (the CPU's on
// --threads: tiled_dem.h's watershedsOnThreads) and, with --tile,
// tile by tile (tiled_watersheds.cpp, rasters in memory), on bench_dem's synthetic terrain filled and
// drained with flats resolved (the preparation on the same backend, off the clock); the outlets are
// random valid cells. With --hand, the height above the nearest drainage (dem/hand.h: handOnThreads,
// handTiled) instead, the streams where at least --stream-cells cells drain through. With --streams,
// the stream network of that threshold (gpugeo:streamnetwork's work: the accumulation, then
// dem/streams.h's streamNetwork or streamNetworkTiled; with --orders in memory, only the rasters' fields:
// dem::StreamFields::Orders, what gpugeo:streamnetwork keeps without its lines). Prints one JSON object: the time (median of
// --reps), the cells per second and a checksum of the labels (of the heights' and distances' bits
// with --hand, of the segments and their values with --streams; the same on both backends). With
// --subbasins, the subbasins of that network (gpugeo:subbasins's work: segmentExits, then the
// watersheds of the exits; the network off the clock). With --breach, the breached DEM of the unfilled
// terrain (gpugeo:breachdepressions's work, dem/breach.h: on the GPU every step on the device, on the
// CPU the channels on its threads and then the fill and the flats; with --tile, breachDepressionsTiled
// through a scratch folder in /tmp), the counts of pits, channel cells and searches left to the host,
// --max-length cells at most a channel; its stages' times too.
//
// usage: bench_watersheds --width W --height H [--outlets N] [--hand | --streams | --subbasins | --breach]
//                         [--stream-cells C] [--max-length L] [--orders]
//                         [--backend cpu|gpu] [--tile T] [--threads N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/stage_times.h"
#include "dem/breach.h"
#include "dem/dem.h"
#include "dem/hand.h"
#include "dem/streams.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/watersheds.h"
#include "generated_terrain.h"

using namespace gpugeo;

namespace {

double msSince(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Tiles of tile² on `threads`, two at a time on the GPU.
dem::tiled::TiledOptions tiles(int64_t tile, int threads, Backend backend)
{
  dem::tiled::TiledOptions options;
  options.tileWidth = options.tileHeight = tile;
  options.threads = threads;
  options.backend = backend;
  options.gpuTiles = 2;
  return options;
}

// The height above the nearest drainage, timed as main() times the watersheds.
int benchHand(Backend backend, const dem::Grid& grid, const std::vector<uint8_t>& directions, int64_t streamCells,
              int64_t tile, int threads, int reps)
{
  RunControl control;
  const int64_t w = grid.width, h = grid.height;
  const dem::Accumulation accumulation = dem::flowAccumulation(backend, grid, directions, threads, control);
  std::vector<uint8_t> streams(std::size_t(w * h));
  int64_t marked = 0;
  for (std::size_t i = 0; i < streams.size(); ++i)
    marked += streams[i] = accumulation.cells[i] >= streamCells;
  const std::vector<double> cellWidth(grid.cellWidth, grid.cellWidth + h), cellHeight(grid.cellHeight, grid.cellHeight + h);
  std::vector<double> ms;
  std::vector<float> heights, distances;
  int64_t drained = 0;
  for (int r = 0; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    if (tile > 0)
    {
      const dem::tiled::TiledOptions options = tiles(tile, threads, backend);
      const dem::tiled::MemoryRaster<float> z(w, h, std::vector<float>(grid.z, grid.z + w * h));
      const dem::tiled::MemoryRaster<uint8_t> dirs(w, h, directions), marks(w, h, streams);
      dem::tiled::MemoryRaster<float> heightSink(w, h), distanceSink(w, h);
      drained = dem::tiled::handTiled(z, dirs, marks, dem::tiled::RowSizes{cellWidth, cellHeight}, heightSink,
                                      &distanceSink, options, control)
                  .drained;
      ms.push_back(msSince(start));
      heights = heightSink.cells();
      distances = distanceSink.cells();
      continue;
    }
    const dem::DrainageHeights out = backend == Backend::Cpu && threads > 1
                                       ? dem::tiled::handOnThreads(grid, directions, streams, threads, control)
                                       : dem::heightAboveDrainage(backend, grid, directions, streams, control);
    ms.push_back(msSince(start));
    heights = out.height;
    distances = out.distance;
    drained = out.drained;
  }
  std::sort(ms.begin(), ms.end());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < heights.size(); ++i)
  {
    uint32_t a = 0, b = 0;
    std::memcpy(&a, &heights[i], 4);
    std::memcpy(&b, &distances[i], 4);
    sum += (uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(a) << 32 | b) * 0xBF58476D1CE4E5B9ull;
  }
  const double median = ms[ms.size() / 2];
  std::printf("{\"hand\": true, \"width\": %lld, \"height\": %lld, \"stream_cells\": %lld, \"drained\": %lld, "
              "\"backend\": \"%s\", \"tile\": %lld, \"threads\": %d, \"ms\": %.2f, \"cells_per_s\": %.4g, "
              "\"checksum\": \"%016llx\"}\n",
              (long long)w, (long long)h, (long long)marked, (long long)drained,
              backend == Backend::Gpu ? "gpu" : "cpu", (long long)tile, threads, median,
              double(w) * double(h) / (median / 1000.0), (unsigned long long)sum);
  return 0;
}

// The stream network with the accumulation it needs, timed as main() times the watersheds.
int benchStreams(Backend backend, const dem::Grid& grid, const std::vector<uint8_t>& directions, int64_t streamCells,
                 int64_t tile, int threads, int reps, dem::StreamFields fields)
{
  RunControl control;
  const int64_t w = grid.width, h = grid.height;
  const std::vector<double> cellWidth(grid.cellWidth, grid.cellWidth + h), cellHeight(grid.cellHeight, grid.cellHeight + h);
  const dem::StreamThreshold threshold{streamCells, 0};
  std::vector<double> ms;
  dem::StreamNetwork network;
  std::vector<int32_t> segments;
  for (int r = 0; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    if (tile > 0)
    {
      const dem::tiled::TiledOptions options = tiles(tile, threads, backend);
      const dem::tiled::RowSizes rows{cellWidth, cellHeight};
      const dem::tiled::MemoryRaster<float> z(w, h, std::vector<float>(grid.z, grid.z + w * h));
      const dem::tiled::MemoryRaster<uint8_t> dirs(w, h, directions);
      dem::tiled::MemoryRaster<int64_t> cells(w, h), area(w, h);
      dem::tiled::accumulationTiled(dirs, rows, cells, area, options, control);
      dem::tiled::MemoryRaster<int32_t> sink(w, h);
      network = dem::tiled::streamNetworkTiled(z, dirs, cells, area, rows, threshold, sink, options, control);
      ms.push_back(msSince(start));
      segments = sink.cells();
      continue;
    }
    const dem::Accumulation accumulation = dem::flowAccumulation(backend, grid, directions, threads, control);
    const auto cut = std::chrono::steady_clock::now();
    network = dem::streamNetwork(backend, grid, directions, accumulation, threshold, threads, control, fields);
    const double all = msSince(start), networkMs = msSince(cut);
    ms.push_back(all);
    std::fprintf(stderr, "accumulation %.1f ms, network %.1f ms\n", all - networkMs, networkMs);
    segments = network.segment;
  }
  std::sort(ms.begin(), ms.end());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < segments.size(); ++i)
    sum += (uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ uint64_t(uint32_t(segments[i])) * 0xBF58476D1CE4E5B9ull;
  for (std::size_t k = 0; k < network.first.size() && fields == dem::StreamFields::Orders; ++k)
    sum += (uint64_t(k) * 0x94D049BB133111EBull) ^
           (uint64_t(network.first[k]) * 31 + uint64_t(network.down[k]) * 17 + uint64_t(network.strahler[k]) * 13) *
             0xBF58476D1CE4E5B9ull;
  for (std::size_t k = 0; k < network.first.size() && fields == dem::StreamFields::Full; ++k)
  {
    uint64_t length = 0, drop = 0;
    std::memcpy(&length, &network.length[k], 8);
    std::memcpy(&drop, &network.drop[k], 8);
    sum += (uint64_t(k) * 0x94D049BB133111EBull) ^
           (uint64_t(network.last[k]) * 31 + uint64_t(network.down[k]) * 17 + uint64_t(network.strahler[k]) * 13 +
            uint64_t(network.shreve[k]) * 7 + uint64_t(network.area[k]) * 5 + length * 3 + drop) *
             0xBF58476D1CE4E5B9ull;
  }
  const double median = ms[ms.size() / 2];
  std::printf("{\"streams\": true, \"width\": %lld, \"height\": %lld, \"stream_cells_threshold\": %lld, "
              "\"segments\": %lld, \"fields\": \"%s\", \"backend\": \"%s\", \"tile\": %lld, \"threads\": %d, "
              "\"ms\": %.2f, \"cells_per_s\": %.4g, \"checksum\": \"%016llx\"}\n",
              (long long)w, (long long)h, (long long)streamCells, (long long)network.first.size(),
              fields == dem::StreamFields::Orders ? "orders" : "full", backend == Backend::Gpu ? "gpu" : "cpu",
              (long long)tile, threads, median,
              double(w) * double(h) / (median / 1000.0), (unsigned long long)sum);
  return 0;
}

// The subbasins of the stream network of that threshold (gpugeo:subbasins's work: the segments' exits,
// then the watersheds of the exits), the network made off the clock; timed as main() times the
// watersheds.
int benchSubbasins(Backend backend, const dem::Grid& grid, const std::vector<uint8_t>& directions,
                   int64_t streamCells, int64_t tile, int threads, int reps)
{
  RunControl control;
  const int64_t w = grid.width, h = grid.height;
  const std::vector<double> cellWidth(grid.cellWidth, grid.cellWidth + h), cellHeight(grid.cellHeight, grid.cellHeight + h);
  const dem::tiled::RowSizes rows{cellWidth, cellHeight};
  const dem::Accumulation accumulation = dem::flowAccumulation(backend, grid, directions, threads, control);
  const dem::StreamNetwork network =
    dem::streamNetwork(backend, grid, directions, accumulation, dem::StreamThreshold{streamCells, 0}, threads,
                      control);
  const dem::tiled::MemoryRaster<int32_t> segments(w, h, network.segment);
  const dem::tiled::MemoryRaster<uint8_t> dirs(w, h, directions);
  std::vector<double> ms;
  std::vector<int32_t> labels;
  std::size_t count = 0;
  for (int r = 0; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    const dem::tiled::SegmentExits exits = dem::tiled::segmentExits(segments, dirs, 1024, threads, control);
    count = exits.id.size();
    std::fprintf(stderr, "exits %.1f ms\n", msSince(start));
    if (tile > 0)
    {
      dem::tiled::MemoryRaster<int32_t> sink(w, h);
      dem::tiled::watershedsTiled(dirs, rows, exits.cell, sink, tiles(tile, threads, backend), control);
      ms.push_back(msSince(start));
      labels = sink.cells();
    }
    else
    {
      labels = backend == Backend::Cpu && threads > 1
                 ? dem::tiled::watershedsOnThreads(directions, rows, exits.cell, threads, control).labels
                 : dem::watersheds(backend, directions, w, h, cellWidth.data(), cellHeight.data(), exits.cell,
                                   threads, control)
                     .labels;
      ms.push_back(msSince(start));
    }
  }
  std::sort(ms.begin(), ms.end());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < labels.size(); ++i)
    sum += (uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ uint64_t(uint32_t(labels[i])) * 0xBF58476D1CE4E5B9ull;
  const double median = ms[ms.size() / 2];
  std::printf("{\"subbasins\": true, \"width\": %lld, \"height\": %lld, \"stream_cells_threshold\": %lld, "
              "\"subbasins_count\": %lld, \"backend\": \"%s\", \"tile\": %lld, \"threads\": %d, \"ms\": %.2f, "
              "\"cells_per_s\": %.4g, \"checksum\": \"%016llx\"}\n",
              (long long)w, (long long)h, (long long)streamCells, (long long)count,
              backend == Backend::Gpu ? "gpu" : "cpu", (long long)tile, threads, median,
              double(w) * double(h) / (median / 1000.0), (unsigned long long)sum);
  return 0;
}

}  // namespace

// The breached DEM of the unfilled terrain, timed as main() times the watersheds, with its stages.
int benchBreach(Backend backend, const dem::Grid& grid, int64_t maxLength, int64_t tile, int threads, int reps)
{
  RunControl control;
  const int64_t w = grid.width, h = grid.height;
  const dem::BreachLimits limits{maxLength, std::numeric_limits<double>::infinity()};
  std::vector<double> ms;
  std::vector<float> out;
  dem::BreachCounts counts;
  StageTimes times;
  for (int r = 0; r < reps; ++r)
  {
    times = StageTimes();
    const auto start = std::chrono::steady_clock::now();
    if (tile > 0)
    {
      const dem::tiled::TiledOptions options = tiles(tile, threads, backend);
      const dem::tiled::RowSizes rows{std::vector<double>(grid.cellWidth, grid.cellWidth + h),
                                      std::vector<double>(grid.cellHeight, grid.cellHeight + h)};
      const dem::tiled::MemoryRaster<float> z(w, h, std::vector<float>(grid.z, grid.z + w * h));
      dem::tiled::MemoryRaster<float> sink(w, h);
      const dem::tiled::ScratchFolder scratch("/tmp");
      dem::tiled::TiledReport report;
      counts = dem::tiled::breachDepressionsTiled(z, rows, sink, limits, scratch.path(), options, control, &report);
      ms.push_back(msSince(start));
      times = report.times;
      out = sink.cells();
      continue;
    }
    if (backend == Backend::Gpu)  // every step on the device
    {
      dem::BreachedDem breached = dem::breachDepressions(backend, grid, limits, threads, control, &times);
      counts = breached.counts;
      out = std::move(breached.z);
      ms.push_back(msSince(start));
      continue;
    }
    std::vector<float> cut;
    {
      ScopedStage stage(times, "channels");
      cut = dem::tiled::cutChannelsOnThreads(grid, limits, threads, control, &counts);
    }
    out = dem::finishBreach(backend, grid, cut, counts, threads, control, &times).z;
    ms.push_back(msSince(start));
  }
  std::sort(ms.begin(), ms.end());
  uint64_t sum = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
  {
    uint32_t bits = 0;
    std::memcpy(&bits, &out[i], 4);
    sum += (uint64_t(i) * 0x9E3779B97F4A7C15ull) ^ uint64_t(bits) * 0xBF58476D1CE4E5B9ull;
  }
  std::string stages;
  for (const auto& [stage, stageMs] : times.entries())
    stages += (stages.empty() ? "" : ", ") + std::string("\"") + stage + "\": " + std::to_string(stageMs);
  const double median = ms[ms.size() / 2];
  std::printf("{\"breach\": true, \"width\": %lld, \"height\": %lld, \"max_length\": %lld, \"bottoms\": %lld, "
              "\"breached\": %lld, \"pits\": %lld, \"channel_cells\": %lld, \"host_searches\": %lld, "
              "\"backend\": \"%s\", \"tile\": %lld, \"threads\": %d, \"ms\": %.2f, "
              "\"cells_per_s\": %.4g, \"checksum\": \"%016llx\", \"stages_ms\": {%s}}\n",
              (long long)w, (long long)h, (long long)maxLength, (long long)counts.bottoms, (long long)counts.breached,
              (long long)counts.pitsRaised, (long long)counts.channelCells, (long long)counts.hostSearches,
              backend == Backend::Gpu ? "gpu" : "cpu", (long long)tile, threads, median,
              double(w) * double(h) / (median / 1000.0), (unsigned long long)sum, stages.c_str());
  return 0;
}

int main(int argc, char** argv)
{
  int64_t w = 2511, h = 2550, outletCount = 1000, tile = 0, streamCells = 1000;
  bool hand = false, streams = false, subbasins = false, breach = false, orders = false;
  int64_t maxLength = 50;
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
    else if (a == "--hand")
      hand = true;
    else if (a == "--streams")
      streams = true;
    else if (a == "--subbasins")
      subbasins = true;
    else if (a == "--breach")
      breach = true;
    else if (a == "--orders")
      orders = true;
    else if (a == "--max-length")
      maxLength = std::atoll(next());
    else if (a == "--stream-cells")
      streamCells = std::atoll(next());
  }
  RunControl control;
  std::vector<float> z(std::size_t(w * h));
  dem::tiled::GeneratedTerrain(w, h).read(dem::tiled::Window{0, 0, w, h}, z.data());
  const std::vector<double> cellWidth(std::size_t(h), 30.0), cellHeight(std::size_t(h), 30.0);
  const dem::Grid grid{z.data(), w, h, cellWidth.data(), cellHeight.data()};
  if (breach)
    return benchBreach(backend, grid, maxLength, tile, threads, reps);
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

  if (subbasins)
    return benchSubbasins(backend, filledGrid, directions, streamCells, tile, threads, reps);
  if (streams)
    return benchStreams(backend, filledGrid, directions, streamCells, tile, threads, reps,
                        orders && tile == 0 ? dem::StreamFields::Orders : dem::StreamFields::Full);
  if (hand)
    return benchHand(backend, filledGrid, directions, streamCells, tile, threads, reps);

  std::vector<double> ms;
  std::vector<int32_t> labels;
  for (int r = 0; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    if (tile > 0)
    {
      const dem::tiled::TiledOptions options = tiles(tile, threads, backend);
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
      labels = dem::watersheds(backend, directions, w, h, cellWidth.data(), cellHeight.data(), outlets, threads, control).labels;
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
