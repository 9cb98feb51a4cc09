// The tiled DEM tools run by several ranks (distribution.h), the ranks as threads of this process
// (ThreadTransports): every output equal to the single-process tiled run's, bit for bit, for 1 to 4
// ranks and tiles from tiny and odd to one; errors on a worker and on the coordinator end every
// rank with the error; the messages' archive; watersheds of many outlets.
#include <tuple>

#include "distributed_ranks.h"
#include "hand_cases.h"
#include "watershed_cases.h"

using namespace gpugeo::dem::tiled::testing_ranks;

TEST(DemDistributed, ArchivesLoadWhatTheySaved)
{
  Archive save;
  int32_t a = -7;
  double b = 2.5;
  std::vector<int64_t> c{1, 2, 3};
  std::vector<float> empty;
  std::string s = "tile 3";
  save.value(a);
  save.value(b);
  save.vector(c);
  save.vector(empty);
  save.string(s);
  Archive load(save.bytes().data(), save.bytes().size());
  int32_t a2 = 0;
  double b2 = 0;
  std::vector<int64_t> c2{9};
  std::vector<float> empty2{1.f};
  std::string s2;
  load.value(a2);
  load.value(b2);
  load.vector(c2);
  load.vector(empty2);
  load.string(s2);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(c2, c);
  EXPECT_TRUE(empty2.empty());
  EXPECT_EQ(s2, s);
  EXPECT_EQ(load.remaining(), 0u);
  EXPECT_THROW(load.value(a2), Error);  // past the end: an error, not a read beyond the bytes
}

TEST(DemDistributed, AnyNumberOfRanksGivesTheSingleProcessRun)
{
  const std::vector<TestDem> dems{randomDem(11, 67, 53, 2.0, 6), spiralValley(41),
                                  randomDem(12, 40, 31, 0.0, 4, 30, 30, true)};
  for (std::size_t k = 0; k < dems.size(); ++k)
  {
    const TestDem& d = dems[k];
    for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{7, 5}, {1, d.height}, {16, 16}, {d.width, d.height}})
    {
      const Outputs expected = runChain(d, tiles(tw, th), 0);
      for (const int ranks : {1, 2, 3, 4})
      {
        SCOPED_TRACE("DEM " + std::to_string(k) + ", tiles " + std::to_string(tw) + " x " + std::to_string(th) +
                     ", " + std::to_string(ranks) + " ranks");
        const Outputs got = runChain(d, tiles(tw, th), ranks);
        expectSame(got, expected);
        EXPECT_EQ(got.fillReport.tiles, expected.fillReport.tiles);
        EXPECT_EQ(got.fillReport.passes, expected.fillReport.passes);
      }
    }
  }
}

TEST(DemDistributed, EveryWorkerIsTheWorkersWordOnEveryRank)
{
  // Rank r's word: bit r of `words` (rank 0's is not asked); a pass before and after, so that the
  // word's step sits between passes as it does in the flats.
  const TestDem d = randomDem(14, 23, 19, 1.0, 2);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> dem(d.width, d.height, d.z);
  const std::vector<float> expected = [&] {
    MemoryRaster<float> alone(d.width, d.height);
    fillTiled(dem, rows, alone, tiles(5, 4), noCancel);
    return alone.cells();
  }();
  for (const auto& [ranks, words, all] : {std::tuple<int, unsigned, bool>{1, 0b0u, false}, {1, 0b1u, true},
                                          {3, 0b110u, true}, {3, 0b011u, false}, {4, 0b1011u, false},
                                          {4, 0b1110u, true}})
  {
    SCOPED_TRACE(std::to_string(ranks) + " ranks, words " + std::to_string(words));
    std::vector<int> answers(std::size_t(ranks), -1);
    MemoryRaster<float> filled(d.width, d.height);
    runRanks(ranks, tiles(5, 4), [&](TiledOptions options, int rank, Cluster& cluster) {
      const auto sink = sinkFor(rank, &cluster, filled, 1);
      fillTiled(dem, rows, rank == 0 ? filled : *sink, options, noCancel);
      answers[std::size_t(rank)] = cluster.everyWorker((words >> rank) & 1u, noCancel);
      fillTiled(dem, rows, rank == 0 ? filled : *sink, options, noCancel);
    });
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(answers[std::size_t(r)], int(all)) << "rank " << r;
    ASSERT_EQ(filled.cells().size(), expected.size());
    EXPECT_EQ(std::memcmp(filled.cells().data(), expected.data(), expected.size() * sizeof(float)), 0);
  }
}

TEST(DemDistributed, ProgressIsToldOnTheCoordinatorPerTile)
{
  const TestDem d = randomDem(13, 30, 20, 1.0, 2);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> dem(d.width, d.height, d.z);
  MemoryRaster<float> filled(d.width, d.height);
  std::vector<std::pair<int, int64_t>> told;
  TiledOptions o = tiles(10, 10);
  runRanks(3, o, [&](TiledOptions options, int rank, Cluster& cluster) {
    if (rank == 0)
      options.onTile = [&](int pass, int64_t done, int64_t count) {
        EXPECT_EQ(count, 6);
        told.emplace_back(pass, done);
      };
    const auto sink = sinkFor(rank, &cluster, filled, 1);
    fillTiled(dem, rows, rank == 0 ? filled : *sink, options, noCancel);
  });
  ASSERT_EQ(told.size(), 12u);
  EXPECT_EQ(told.front(), std::make_pair(1, int64_t(1)));
  EXPECT_EQ(told[5], std::make_pair(1, int64_t(6)));
  EXPECT_EQ(told.back(), std::make_pair(2, int64_t(6)));
}

// A source whose reads fail on one tile, on the workers only (rank 0 never reads a tile).
class FailingSource : public RasterSource<uint8_t>
{
public:
  FailingSource(const MemoryRaster<uint8_t>& cells, Window bad) : mCells(cells), mBad(bad) {}
  int64_t width() const override { return mCells.width(); }
  int64_t height() const override { return mCells.height(); }
  void read(const Window& window, uint8_t* out) const override
  {
    if (window.contains(mBad.x0, mBad.y0))
      throw WriteFailed("cannot read the directions at cell (12, 3)");
    mCells.read(window, out);
  }

private:
  const MemoryRaster<uint8_t>& mCells;
  Window mBad;
};

TEST(DemDistributed, AnErrorOnAWorkerEndsEveryRankNamingTheRankAndTile)
{
  const TestDem d = randomDem(14, 40, 30, 1.0, 2);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<uint8_t> dirs(d.width, d.height,
                                   flowDirections(Backend::Cpu, d.grid(), false, 1, noCancel));
  const FailingSource failing(dirs, Window{12, 3, 1, 1});
  MemoryRaster<int64_t> cells(d.width, d.height), area(d.width, d.height);
  std::vector<std::string> workerErrors;
  try
  {
    runRanks(3, tiles(8, 8), [&](const TiledOptions& o, int rank, Cluster& cluster) {
      const auto c = sinkFor(rank, &cluster, cells, 1);
      const auto a = sinkFor(rank, &cluster, area, 2);
      accumulationTiled(failing, rows, rank == 0 ? cells : *c, rank == 0 ? area : *a, o, noCancel);
    }, &workerErrors);
    FAIL() << "no error";
  }
  catch (const WriteFailed& e)  // the worker's error, of its own type
  {
    const std::string text = e.what();
    EXPECT_NE(text.find("rank "), std::string::npos) << text;
    EXPECT_NE(text.find("tile 1 (columns 8-15, rows 0-7)"), std::string::npos) << text;
    EXPECT_NE(text.find("cannot read the directions"), std::string::npos) << text;
  }
  for (const std::string& w : workerErrors)
    EXPECT_NE(w.find("stopped by rank 0"), std::string::npos) << w;
}

TEST(DemDistributed, AnErrorOnTheCoordinatorStopsTheWorkers)
{
  // Directions that loop across two tiles: the coordinator's graph finds the loop.
  const int64_t w = 8, h = 4;
  std::vector<uint8_t> loop(std::size_t(w * h), 8);
  loop[std::size_t(1 * w + 3)] = 0;  // (3, 1) east into (4, 1), the next tile
  loop[std::size_t(1 * w + 4)] = 4;  // (4, 1) west, back
  const MemoryRaster<uint8_t> dirs(w, h, loop);
  const RowSizes rows{std::vector<double>(h, 10.0), std::vector<double>(h, 10.0)};
  MemoryRaster<int64_t> cells(w, h), area(w, h);
  std::vector<std::string> workerErrors;
  EXPECT_THROW(runRanks(4, tiles(4, 4), [&](const TiledOptions& o, int rank, Cluster& cluster) {
                 const auto c = sinkFor(rank, &cluster, cells, 1);
                 const auto a = sinkFor(rank, &cluster, area, 2);
                 accumulationTiled(dirs, rows, rank == 0 ? cells : *c, rank == 0 ? area : *a, o, noCancel);
               }, &workerErrors),
               LoopedDirections);
  ASSERT_EQ(workerErrors.size(), 3u);
  for (const std::string& e : workerErrors)
    EXPECT_NE(e.find("stopped by rank 0: the flow directions go round in a loop"), std::string::npos) << e;
}

TEST(DemDistributed, ACancelOnTheCoordinatorStopsEveryRank)
{
  const TestDem d = randomDem(15, 60, 60, 1.0, 2);
  const RowSizes rows{d.cellWidth, d.cellHeight};
  const MemoryRaster<float> dem(d.width, d.height, d.z);
  MemoryRaster<float> filled(d.width, d.height);
  std::atomic<int> results{0};
  RunControl cancelAfterThree;
  cancelAfterThree.canceled = [&] { return results.load() >= 3; };
  std::vector<std::string> workerErrors;
  EXPECT_THROW(runRanks(3, tiles(5, 5), [&](TiledOptions options, int rank, Cluster& cluster) {
                 options.onTile = [&](int, int64_t, int64_t) { ++results; };
                 const auto sink = sinkFor(rank, &cluster, filled, 1);
                 fillTiled(dem, rows, rank == 0 ? filled : *sink, options, rank == 0 ? cancelAfterThree : noCancel);
               }, &workerErrors),
               Canceled);
  for (const std::string& e : workerErrors)
    EXPECT_NE(e.find("stopped by rank 0: canceled"), std::string::npos) << e;
}

TEST(DemDistributed, IsochronesOfAnyNumberOfRanksAreTheSingleProcessRuns)
{
  const std::vector<TestDem> dems{randomDem(21, 61, 47, 1.0, 5, 30, 30, true), spiralValley(37)};
  for (std::size_t k = 0; k < dems.size(); ++k)
  {
    const TestDem& d = dems[k];
    const std::vector<float> manning = manningOf(d);
    for (const VelocityModel::Kind kind : {VelocityModel::Kind::Slope, VelocityModel::Kind::Manning})
    {
      ChainOptions o;
      o.model.kind = kind;
      o.model.channelArea = 0.05;
      o.model.mixedArea = 2e4;
      o.model.channelAreaManning = 8e4;
      o.model.rainfall = 30;
      o.model.manning = kind == VelocityModel::Kind::Manning ? manning.data() : nullptr;
      o.interval = 0.5;
      o.maxBands = 100000;
      o.keepFilled = o.keepDirections = o.keepAccumulation = true;
      const ChainResult chain = isochroneChain(Backend::Cpu, d.grid(), o, 2, noCancel);
      const std::vector<float>* n = kind == VelocityModel::Kind::Manning ? &manning : nullptr;
      for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{7, 5}, {1, d.height}, {16, 16}})
      {
        const Isochrones expected = runIsochrones(d, chain, o.model, n, tiles(tw, th), 0);
        ASSERT_GT(expected.travel.watershedCells, 1);
        for (const int ranks : {2, 3, 4})
        {
          SCOPED_TRACE("DEM " + std::to_string(k) + ", model " + std::to_string(int(kind)) + ", tiles " +
                       std::to_string(tw) + " x " + std::to_string(th) + ", " + std::to_string(ranks) + " ranks");
          const Isochrones got = runIsochrones(d, chain, o.model, n, tiles(tw, th), ranks);
          EXPECT_TRUE(sameDoubles(got.minutes, expected.minutes));
          EXPECT_TRUE(sameDoubles(got.copied, expected.copied));
          EXPECT_EQ(got.travel.watershedCells, expected.travel.watershedCells);
          EXPECT_EQ(got.travel.watershedArea, expected.travel.watershedArea);
          EXPECT_EQ(got.travel.minSpeed, expected.travel.minSpeed);
          EXPECT_EQ(got.travel.maxSpeed, expected.travel.maxSpeed);
          EXPECT_EQ(got.travel.minTime, expected.travel.minTime);
          EXPECT_EQ(got.travel.maxTime, expected.travel.maxTime);
          EXPECT_EQ(got.travel.tilesWithTimes, expected.travel.tilesWithTimes);
          EXPECT_EQ(got.bands.bandCells, expected.bands.bandCells);
          EXPECT_EQ(got.bands.bandArea, expected.bands.bandArea);
          EXPECT_EQ(got.streamedCells, expected.streamedCells);
          EXPECT_EQ(got.bands.watershed.bandPolygon, expected.bands.watershed.bandPolygon);
          EXPECT_EQ(got.bands.watershed.polygonRing, expected.bands.watershed.polygonRing);
          EXPECT_EQ(got.bands.watershed.ringPoint, expected.bands.watershed.ringPoint);
          EXPECT_EQ(got.bands.watershed.x, expected.bands.watershed.x);
          EXPECT_EQ(got.bands.watershed.y, expected.bands.watershed.y);
        }
      }
    }
  }
}

// Watersheds of many outlets under 1 to 4 ranks: the single process's labels and sums.
TEST(DemDistributed, WatershedsOfAnyNumberOfRanksAreTheSingleProcessRuns)
{
  const WatershedCase c = watershedCase(21, 50, 37, true, 4, 30);
  const RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
  const MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
  MemoryRaster<int32_t> single(c.dem.width, c.dem.height);
  const Watersheds want = watershedsTiled(dirs, rows, c.outlets, single, tiles(8, 6), noCancel);
  for (const int ranks : {2, 3, 4})
  {
    MemoryRaster<int32_t> labels(c.dem.width, c.dem.height);
    Watersheds got;
    runRanks(ranks, tiles(8, 6), [&](const TiledOptions& o, int rank, Cluster& cluster) {
      const auto sink = sinkFor(rank, &cluster, labels, 1);
      Watersheds w = watershedsTiled(dirs, rows, c.outlets, rank == 0 ? labels : *sink, o, noCancel);
      if (rank == 0)
        got = std::move(w);
    });
    const std::string what = std::to_string(ranks) + " ranks";
    EXPECT_EQ(labels.cells(), single.cells()) << what;
    EXPECT_EQ(got.ownCells, want.ownCells) << what;
    EXPECT_EQ(got.ownArea, want.ownArea) << what;
    EXPECT_EQ(got.downstream, want.downstream) << what;
    EXPECT_EQ(got.totalArea, want.totalArea) << what;
  }
}

// Height above the nearest drainage under 1 to 4 ranks: the single process's heights, distances and
// counts.
TEST(DemDistributed, HeightAboveDrainageOfAnyNumberOfRanksIsTheSingleProcessRun)
{
  const HandCase c = handCase(23, 47, 39, true, 4, 12);
  const RowSizes rows{c.dem.cellWidth, c.dem.cellHeight};
  const MemoryRaster<float> z(c.dem.width, c.dem.height, c.dem.z);
  const MemoryRaster<uint8_t> dirs(c.dem.width, c.dem.height, c.directions);
  const MemoryRaster<uint8_t> marks(c.dem.width, c.dem.height, c.streams);
  MemoryRaster<float> singleHeight(c.dem.width, c.dem.height), singleDistance(c.dem.width, c.dem.height);
  const HandSummary want = handTiled(z, dirs, marks, rows, singleHeight, &singleDistance, tiles(8, 6), noCancel);
  for (const int ranks : {2, 3, 4})
  {
    MemoryRaster<float> heights(c.dem.width, c.dem.height), distances(c.dem.width, c.dem.height);
    HandSummary got;
    runRanks(ranks, tiles(8, 6), [&](const TiledOptions& o, int rank, Cluster& cluster) {
      const auto hs = sinkFor(rank, &cluster, heights, 1);
      const auto ds = sinkFor(rank, &cluster, distances, 2);
      const HandSummary s =
        handTiled(z, dirs, marks, rows, rank == 0 ? heights : *hs, rank == 0 ? &distances : ds.get(), o, noCancel);
      if (rank == 0)
        got = s;
    });
    const std::string what = std::to_string(ranks) + " ranks";
    EXPECT_TRUE(sameBits(heights.cells(), singleHeight.cells())) << what;
    EXPECT_TRUE(sameBits(distances.cells(), singleDistance.cells())) << what;
    EXPECT_EQ(got.drained, want.drained) << what;
    EXPECT_EQ(got.undrained, want.undrained) << what;
    EXPECT_EQ(got.streamCells, want.streamCells) << what;
  }
}
