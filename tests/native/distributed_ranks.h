// The distributed tiled runs' test harness (distribution.h): ranks as threads of this process
// (ThreadTransports), each with its own options and sinks (rank 0's real, the workers' remote), and
// the chains whose outputs the tests compare with a single process's (test_dem_tiled_distributed.cpp,
// test_dem_tiled_distributed_gpu.cpp).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "dem/dem.h"
#include "dem/isochrone_chain.h"
#include "dem/tiled/distribution.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem_cases.h"

namespace gpugeo::dem::tiled::testing_ranks {

using namespace gpugeo;
using namespace gpugeo::dem;
using namespace gpugeo::dem::tiled;

inline RunControl noCancel;

// Runs tool(options, rank, cluster) on `ranks` threads, the ranks of one run, each with `base` and
// its Cluster (2 threads a worker); rank 0 ends the run (finish, or abort with its error), the
// workers wait for that word (a worker's own error is told to rank 0 first). Rethrows rank 0's error;
// `workerErrors` gets the workers' messages.
// `perRank` changes a rank's options (its backend, say).
using PerRank = std::function<void(TiledOptions&, int rank)>;
template <typename Tool>
void runRanks(int ranks, const TiledOptions& base, Tool tool, std::vector<std::string>* workerErrors = nullptr,
              const PerRank& perRank = nullptr)
{
  ThreadTransports net(ranks);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::string> texts(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Cluster cluster(net.endpoint(r), 2);
      TiledOptions options = base;
      options.cluster = &cluster;
      if (perRank)
        perRank(options, r);
      try
      {
        tool(options, r, cluster);
        if (r == 0)
          cluster.finish();
        else
          cluster.awaitEnd();
      }
      catch (const std::exception& e)
      {
        errors[std::size_t(r)] = std::current_exception();
        texts[std::size_t(r)] = e.what();
        if (r == 0)
          cluster.abort(e.what());
        else if (!dynamic_cast<const RunStopped*>(&e))
        {
          cluster.fail(e);
          try
          {
            cluster.awaitEnd();
          }
          catch (const RunStopped&)
          {
          }
        }
      }
    });
  for (std::thread& t : threads)
    t.join();
  if (workerErrors)
    workerErrors->assign(texts.begin() + 1, texts.end());
  if (errors[0])
    std::rethrow_exception(errors[0]);
}

struct Outputs
{
  std::vector<float> filled;
  std::vector<uint8_t> directions;
  std::vector<int64_t> cells, area;
  DirectionCounts counts;
  AccumulationSummary summary;
  TiledReport fillReport;
  std::vector<int32_t> combined, towards;  // the flat masks
  std::vector<uint8_t> resolved;           // directions with the flats drained (Combined)
  std::vector<float> raised;               // the filled DEM with its flats raised (Combined)
  RaisedCounts raisedCounts;
};

// A sink on rank 0, a remote one (id) on the workers.
template <typename T>
std::unique_ptr<RasterSink<T>> sinkFor(int rank, Cluster* cluster, MemoryRaster<T>& target, int id)
{
  if (rank == 0)
  {
    if (cluster)
      cluster->addSink(id, target);
    return nullptr;
  }
  return cluster->remoteSink<T>(id, target.width(), target.height());
}

struct Isochrones
{
  std::vector<double> minutes, copied;
  TravelSummary travel;
  TiledBands bands;
  std::vector<int64_t> streamedCells;  // the cells of each band as BandObserver saw them
};

// Travel times (slope model, or Manning with a raster) and bands, tiled, from the in-memory chain's
// rasters, by `ranks` ranks (0: this process alone).
inline Isochrones runIsochrones(const TestDem& d, const ChainResult& chain, const VelocityModel& model,
                                const std::vector<float>* manning, const TiledOptions& options, int ranks,
                                const PerRank& perRank = nullptr)
{
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> filled(d.width, d.height, chain.filled);
  const MemoryRaster<uint8_t> directions(d.width, d.height, chain.directions);
  const MemoryRaster<int64_t> area(d.width, d.height, chain.accumulation.area);
  std::unique_ptr<MemoryRaster<float>> n;
  if (manning)
    n = std::make_unique<MemoryRaster<float>>(d.width, d.height, *manning);
  MemoryRaster<double> minutes(d.width, d.height), copied(d.width, d.height);
  Isochrones out;
  const auto run = [&](const TiledOptions& o, int rank, Cluster* cluster) {
    const auto minutesSink = sinkFor(rank, cluster, minutes, 1);
    const auto copySink = sinkFor(rank, cluster, copied, 2);
    const TravelSummary travel = travelTimeTiled(filled, directions, area, n.get(), rows, chain.outlet, model,
                                                 rank == 0 ? minutes : *minutesSink, o, noCancel);
    std::vector<int64_t> streamed;
    TiledBands bands = bandsTiled(minutes, rows, chain.interval, chain.bands, rank == 0 ? &copied : copySink.get(),
                                  o, noCancel, nullptr,
                                  [&](int32_t, int64_t cells, double, BandPolygons&) { streamed.push_back(cells); },
                                  &travel.tilesWithTimes);
    if (rank == 0)
    {
      out.travel = travel;
      out.bands = std::move(bands);
      out.streamedCells = streamed;
    }
  };
  if (ranks == 0)
    run(options, 0, nullptr);
  else
    runRanks(ranks, options, [&](const TiledOptions& o, int rank, Cluster& cluster) { run(o, rank, &cluster); },
             nullptr, perRank);
  out.minutes = minutes.cells();
  out.copied = copied.cells();
  return out;
}

inline bool sameDoubles(const std::vector<double>& a, const std::vector<double>& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Fill, directions and accumulation (along the filled DEM's directions), both flat masks, the
// directions with the flats drained and the raised flats, tiled, by `ranks` ranks (0: this process
// alone, no cluster).
inline Outputs runChain(const TestDem& d, const TiledOptions& options, int ranks, const PerRank& perRank = nullptr)
{
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> dem(d.width, d.height, d.z);
  MemoryRaster<float> filled(d.width, d.height), raised(d.width, d.height);
  MemoryRaster<uint8_t> directions(d.width, d.height), resolved(d.width, d.height);
  MemoryRaster<int64_t> cells(d.width, d.height), area(d.width, d.height);
  MemoryRaster<int32_t> combined(d.width, d.height), towards(d.width, d.height);
  const ScratchFolder scratch(testing::TempDir());
  RawFileRaster<float> work(scratch.path() + "/work.f32", d.width, d.height);
  Outputs out;
  const auto chain = [&](const TiledOptions& o, int rank, Cluster* cluster) {
    const auto filledSink = sinkFor(rank, cluster, filled, 1);
    const auto directionsSink = sinkFor(rank, cluster, directions, 2);
    const auto cellsSink = sinkFor(rank, cluster, cells, 3);
    const auto areaSink = sinkFor(rank, cluster, area, 4);
    const auto combinedSink = sinkFor(rank, cluster, combined, 5);
    const auto towardsSink = sinkFor(rank, cluster, towards, 6);
    const auto resolvedSink = sinkFor(rank, cluster, resolved, 7);
    const auto raisedSink = sinkFor(rank, cluster, raised, 8);
    TiledReport report;
    fillTiled(dem, rows, rank == 0 ? filled : *filledSink, o, noCancel, &report);
    const DirectionCounts counts =
      directionsTiled(filled, rows, rank == 0 ? directions : *directionsSink, o, noCancel);
    const AccumulationSummary summary = accumulationTiled(directions, rows, rank == 0 ? cells : *cellsSink,
                                                          rank == 0 ? area : *areaSink, o, noCancel);
    flatMaskTiled(filled, rows, rank == 0 ? combined : *combinedSink, FlatGradient::Combined, scratch.path(), o,
                  noCancel);
    flatMaskTiled(filled, rows, rank == 0 ? towards : *towardsSink, FlatGradient::TowardsOutlet, scratch.path(), o,
                  noCancel);
    directionsTiled(filled, rows, rank == 0 ? resolved : *resolvedSink, o, noCancel, nullptr, &combined);
    const RaisedCounts raisedCounts =
      raiseFlatsTiled(filled, combined, rows, work, rank == 0 ? raised : *raisedSink, o, noCancel);
    if (rank == 0)
    {
      out.raisedCounts = raisedCounts;
      out.counts = counts;
      out.summary = summary;
      out.fillReport = report;
    }
  };
  if (ranks == 0)
    chain(options, 0, nullptr);
  else
    runRanks(ranks, options, [&](const TiledOptions& o, int rank, Cluster& cluster) { chain(o, rank, &cluster); },
             nullptr, perRank);
  out.filled = filled.cells();
  out.directions = directions.cells();
  out.cells = cells.cells();
  out.area = area.cells();
  out.combined = combined.cells();
  out.towards = towards.cells();
  out.resolved = resolved.cells();
  out.raised = raised.cells();
  return out;
}

inline void expectSame(const Outputs& got, const Outputs& expected)
{
  EXPECT_TRUE(sameBits(got.filled, expected.filled));
  EXPECT_EQ(got.directions, expected.directions);
  EXPECT_EQ(got.cells, expected.cells);
  EXPECT_EQ(got.area, expected.area);
  for (int k = 0; k < 9; ++k)
    EXPECT_EQ(got.counts.perDirection[k], expected.counts.perDirection[k]) << k;
  EXPECT_EQ(got.counts.drainingOut, expected.counts.drainingOut);
  EXPECT_EQ(got.summary.outlets, expected.summary.outlets);
  EXPECT_EQ(got.summary.pits, expected.summary.pits);
  EXPECT_EQ(got.summary.reached, expected.summary.reached);
  EXPECT_EQ(got.summary.largestCell, expected.summary.largestCell);
  EXPECT_EQ(got.summary.largestCells, expected.summary.largestCells);
  EXPECT_EQ(got.summary.largestArea, expected.summary.largestArea);
  EXPECT_EQ(got.combined, expected.combined);
  EXPECT_EQ(got.towards, expected.towards);
  EXPECT_EQ(got.resolved, expected.resolved);
  EXPECT_TRUE(sameBits(got.raised, expected.raised));
  EXPECT_EQ(got.raisedCounts.raised, expected.raisedCounts.raised);
  EXPECT_EQ(got.raisedCounts.raisedInTurn, expected.raisedCounts.raisedInTurn);
}


}  // namespace gpugeo::dem::tiled::testing_ranks
