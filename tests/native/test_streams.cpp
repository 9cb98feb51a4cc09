// The stream network (dem/streams.h) against a serial recursion over the cells: each stream cell's
// Strahler and Shreve order computed cell by cell from the stream cells flowing into it (a cell with
// one inflow keeps its order), its segment found by climbing the single-inflow chain to the segment's
// first cell, the segments numbered by their first cells in row order; the downstream segments, cell
// counts, lengths (a float64 sum along each line), drops and upstream areas. Random filled DEMs with
// thresholds from one cell (every cell a stream) up, by cells and by area; a fork by hand; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "dem/dem.h"
#include "dem/streams.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;

namespace {

RunControl noCancel;

int64_t next(const std::vector<uint8_t>& dirs, int64_t w, int64_t h, int64_t c)
{
  const uint8_t d = dirs[std::size_t(c)];
  if (d >= 8)
    return -1;
  const int64_t x = c % w + kDx[d], y = c / w + kDy[d];
  return x < 0 || y < 0 || x >= w || y >= h ? -1 : y * w + x;
}

struct Reference
{
  std::vector<int32_t> strahler;  // per cell, 0 off the streams
  std::vector<int64_t> shreve;
  std::vector<int32_t> segment;
};

Reference reference(const TestDem& dem, const std::vector<uint8_t>& dirs, const Accumulation& acc,
                    const StreamThreshold& t)
{
  const int64_t w = dem.width, h = dem.height, n = w * h;
  std::vector<char> stream(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
    stream[std::size_t(c)] = dirs[std::size_t(c)] != kNoData && acc.cells[std::size_t(c)] >= std::max<int64_t>(1, t.minCells) &&
                             acc.area[std::size_t(c)] >= t.minArea;
  std::vector<std::vector<int64_t>> up(static_cast<std::size_t>(n));
  for (int64_t c = 0; c < n; ++c)
  {
    const int64_t d = stream[std::size_t(c)] ? next(dirs, w, h, c) : -1;
    if (d >= 0 && stream[std::size_t(d)])
      up[std::size_t(d)].push_back(c);
  }
  Reference r;
  r.strahler.assign(std::size_t(n), 0);
  r.shreve.assign(std::size_t(n), 0);
  std::function<void(int64_t)> order = [&](int64_t c) {
    if (r.strahler[std::size_t(c)] > 0)
      return;
    int32_t highest = 0, atHighest = 0;
    int64_t sum = 0;
    for (const int64_t u : up[std::size_t(c)])
    {
      order(u);
      const int32_t s = r.strahler[std::size_t(u)];
      atHighest = s > highest ? 1 : atHighest + (s == highest);
      highest = std::max(highest, s);
      sum += r.shreve[std::size_t(u)];
    }
    const std::size_t ups = up[std::size_t(c)].size();
    r.strahler[std::size_t(c)] = ups == 0 ? 1 : (ups == 1 ? highest : highest + (atHighest >= 2));
    r.shreve[std::size_t(c)] = ups == 0 ? 1 : sum;
  };
  std::vector<int32_t> startId(std::size_t(n), 0);
  int32_t ids = 0;
  for (int64_t c = 0; c < n; ++c)
    if (stream[std::size_t(c)])
    {
      order(c);
      if (up[std::size_t(c)].size() != 1)
        startId[std::size_t(c)] = ++ids;
    }
  r.segment.assign(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
  {
    if (!stream[std::size_t(c)])
      continue;
    int64_t s = c;
    while (up[std::size_t(s)].size() == 1)
      s = up[std::size_t(s)][0];
    r.segment[std::size_t(c)] = startId[std::size_t(s)];
  }
  return r;
}

// Checks the network against the reference; returns its highest Strahler order.
int32_t expectReference(const TestDem& dem, const std::vector<uint8_t>& dirs, const Accumulation& acc,
                        const StreamThreshold& t, const std::string& what)
{
  const int64_t w = dem.width, h = dem.height, n = w * h;
  const StreamNetwork net = streamNetwork(dem.grid(), dirs, acc, t, 3, noCancel);
  const Reference r = reference(dem, dirs, acc, t);
  EXPECT_EQ(net.segment, r.segment) << what;
  if (net.segment != r.segment)
    return 0;
  int64_t wrong = 0;
  std::vector<int64_t> cells(net.first.size(), 0);
  for (int64_t c = 0; c < n; ++c)
  {
    const int32_t s = net.segment[std::size_t(c)];
    if (s == 0)
      continue;
    ++cells[std::size_t(s - 1)];
    wrong += net.strahler[std::size_t(s - 1)] != r.strahler[std::size_t(c)];
    wrong += net.shreve[std::size_t(s - 1)] != r.shreve[std::size_t(c)];
    const int64_t d = next(dirs, w, h, c);
    const int32_t below = d >= 0 ? net.segment[std::size_t(d)] : 0;
    if (below != s)  // the segment's last cell: what it flows into
    {
      wrong += c != net.last[std::size_t(s - 1)];
      wrong += net.down[std::size_t(s - 1)] != below;
    }
  }
  EXPECT_EQ(wrong, 0) << what;
  EXPECT_EQ(cells, net.cells) << what;
  for (std::size_t k = 0; k < net.first.size(); ++k)
  {
    const std::vector<int64_t> line = segmentLine(net, dirs, w, h, int32_t(k + 1));
    double length = 0;
    for (std::size_t i = 0; i + 1 < line.size(); ++i)
    {
      const int64_t c = line[i];
      const uint8_t d = dirs[std::size_t(c)];
      const double cw = dem.cellWidth[std::size_t(c / w)], ch = dem.cellHeight[std::size_t(c / w)];
      length += (d & 1) ? std::sqrt(cw * cw + ch * ch) : ((d & 2) ? ch : cw);
    }
    EXPECT_NEAR(net.length[k], length, 1e-9 * std::max(1.0, length)) << what << " segment " << k + 1;
    EXPECT_EQ(net.drop[k], double(dem.z[std::size_t(line.front())]) - double(dem.z[std::size_t(line.back())]));
    EXPECT_EQ(net.area[k], acc.area[std::size_t(net.last[k])]);
    EXPECT_EQ(net.upstreamCells[k], acc.cells[std::size_t(net.last[k])]);
  }
  return net.strahler.empty() ? 0 : *std::max_element(net.strahler.begin(), net.strahler.end());
}

}  // namespace

TEST(StreamNetwork, OrdersAndSegmentsAreTheSerialRecursions)
{
  for (uint64_t seed = 1; seed <= 6; ++seed)
  {
    TestDem dem = randomDem(seed, 40 + int64_t(seed) * 7, 33 + int64_t(seed) * 5, seed % 2 ? 1.0 : 0.0,
                            2 + int(seed % 3), 30, 30, true);
    dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
    for (const int64_t cells : {int64_t(1), int64_t(3), int64_t(20), int64_t(200)})
    {
      const int32_t highest = expectReference(dem, dirs, acc, StreamThreshold{cells, 0},
                                              "seed " + std::to_string(seed) + ", cells " + std::to_string(cells));
      if (cells == 1)
        EXPECT_GE(highest, 4) << "seed " << seed;  // every cell a stream: a deep tree, ties at junctions
    }
    // By area: about 15 cells' worth (the rows' cells differ in size).
    expectReference(dem, dirs, acc, StreamThreshold{1, int64_t(15 * 30.0 * 30.0 * 0.9 * 1e6)},
                    "seed " + std::to_string(seed) + ", area");
  }
}

TEST(StreamNetwork, AForkByHand)
{
  // Two sources (columns 0 and 4 of row 0) run down to a junction at (2, 2), which runs down and
  // out at the bottom; a third source (4, 3) joins below it. 10 m cells.
  const int64_t w = 5, h = 5;
  std::vector<uint8_t> dirs(std::size_t(w * h), kNoFlow);
  const auto at = [&](int64_t x, int64_t y) -> uint8_t& { return dirs[std::size_t(y * w + x)]; };
  at(0, 0) = 1;  // SE
  at(1, 1) = 1;  // SE -> (2, 2)
  at(4, 0) = 3;  // SW
  at(3, 1) = 3;  // SW -> (2, 2)
  at(2, 2) = 2;  // S
  at(2, 3) = 2;  // S -> (2, 4)
  at(4, 3) = 3;  // SW -> (3, 4)
  at(3, 4) = 4;  // W -> (2, 4)
  at(2, 4) = 2;  // S, off the grid
  TestDem dem;
  dem.width = w;
  dem.height = h;
  dem.z.assign(std::size_t(w * h), 0.f);
  for (int64_t c = 0; c < w * h; ++c)
    dem.z[std::size_t(c)] = float(10 - c / w);
  dem.cellWidth.assign(std::size_t(h), 10.0);
  dem.cellHeight.assign(std::size_t(h), 10.0);
  Accumulation acc;
  acc.cells.assign(std::size_t(w * h), 0);
  acc.area.assign(std::size_t(w * h), 0);
  for (int64_t c = 0; c < w * h; ++c)
    if (dirs[std::size_t(c)] < 8 || c == 2 * w + 2 || c == 4 * w + 2)
      for (int64_t p = c; p >= 0; p = next(dirs, w, h, p))
      {
        ++acc.cells[std::size_t(p)];
        acc.area[std::size_t(p)] += 100000000;
      }
  const StreamNetwork net = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{1, 0}, 1, noCancel);
  // Segments by first cell in row order: (0,0) 1, (4,0) 2, (2,2) 3, (4,3) 4, (2,4) 5.
  ASSERT_EQ(net.first, (std::vector<int64_t>{0, 4, 12, 19, 22}));
  EXPECT_EQ(net.down, (std::vector<int32_t>{3, 3, 5, 5, 0}));
  EXPECT_EQ(net.strahler, (std::vector<int32_t>{1, 1, 2, 1, 2}));
  EXPECT_EQ(net.shreve, (std::vector<int64_t>{1, 1, 2, 1, 3}));
  EXPECT_EQ(net.cells, (std::vector<int64_t>{2, 2, 2, 2, 1}));
  const double diag = std::sqrt(200.0);
  EXPECT_NEAR(net.length[0], 2 * diag, 1e-9);
  EXPECT_NEAR(net.length[2], 20.0, 1e-9);
  EXPECT_NEAR(net.length[3], diag + 10.0, 1e-9);
  EXPECT_EQ(net.length[4], 0.0);
  EXPECT_EQ(net.drop[0], 2.0);  // z 10 at row 0, 8 at the junction
  EXPECT_EQ(net.upstreamCells[2], 6);
  EXPECT_EQ(segmentLine(net, dirs, w, h, 4), (std::vector<int64_t>{19, 23, 22}));
}

// Directions with a loop (the accumulation would refuse them; given by hand here): a segment whose
// walk comes back to its own first cell flows into itself and, never having all its inflow, keeps
// orders 0; the segments flowing into it are ordered. On any thread count.
//   row 0:  E  S  W      the loop (0,0) -> (1,0) -> (1,1) -> (0,1) -> (0,0); (2,0) flows into it
//   row 1:  N  W  E      (2,1) flows off the grid
TEST(StreamNetwork, ASegmentOnALoopKeepsOrderZero)
{
  TestDem dem = randomDem(5, 3, 2, 0.0, 0);
  const std::vector<uint8_t> dirs = {0, 2, 4, 6, 4, 0};
  Accumulation acc;
  acc.cells.assign(6, 10);
  acc.area.assign(6, 10);
  for (const int threads : {1, 4})
  {
    const StreamNetwork net = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{1, 0}, threads, noCancel);
    EXPECT_EQ(net.segment, (std::vector<int32_t>{1, 1, 2, 1, 1, 3})) << threads;
    EXPECT_EQ(net.first, (std::vector<int64_t>{1, 2, 5})) << threads;
    EXPECT_EQ(net.down, (std::vector<int32_t>{1, 1, 0})) << threads;
    EXPECT_EQ(net.cells, (std::vector<int64_t>{4, 1, 1})) << threads;
    EXPECT_EQ(net.strahler, (std::vector<int32_t>{0, 1, 1})) << threads;
    EXPECT_EQ(net.shreve, (std::vector<int64_t>{0, 1, 1})) << threads;
  }
}

TEST(StreamNetwork, BadInput)
{
  TestDem dem = randomDem(3, 8, 6, 0.0, 0);
  const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 1, noCancel);
  Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 1, noCancel);
  acc.area.pop_back();
  EXPECT_THROW(streamNetwork(dem.grid(), dirs, acc, StreamThreshold{}, 2, noCancel), InvalidInput);
  const StreamNetwork none = streamNetwork(dem.grid(), dirs, flowAccumulation(Backend::Cpu, dem.grid(), dirs, 1, noCancel),
                                           StreamThreshold{1000, 0}, 2, noCancel);
  EXPECT_TRUE(none.first.empty());
  EXPECT_TRUE(std::all_of(none.segment.begin(), none.segment.end(), [](int32_t s) { return s == 0; }));
  EXPECT_THROW(segmentLine(none, dirs, 8, 6, 1), InvalidInput);
}

// The threads' network is one thread's, field for field, on DEMs large enough for many chunks of rows
// and of segments (every cell a stream, and a threshold leaving long segments).
TEST(StreamNetwork, ThreadsGiveTheOneThreadNetwork)
{
  for (uint64_t seed = 1; seed <= 3; ++seed)
  {
    TestDem dem = randomDem(seed + 70, 331, 257, seed == 2 ? 1.0 : 0.0, 3, 30, 30, true);
    dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
    for (const int64_t minCells : {int64_t(1), int64_t(25)})
    {
      const StreamNetwork one = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{minCells, 0}, 1, noCancel);
      EXPECT_GT(one.first.size(), minCells == 1 ? 20000u : 500u);
      for (const int threads : {2, 5, 16})
      {
        const StreamNetwork got = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{minCells, 0}, threads, noCancel);
        const std::string what =
          "seed " + std::to_string(seed) + ", cells " + std::to_string(minCells) + ", threads " + std::to_string(threads);
        EXPECT_EQ(got.segment, one.segment) << what;
        EXPECT_EQ(got.first, one.first) << what;
        EXPECT_EQ(got.last, one.last) << what;
        EXPECT_EQ(got.down, one.down) << what;
        EXPECT_EQ(got.strahler, one.strahler) << what;
        EXPECT_EQ(got.shreve, one.shreve) << what;
        EXPECT_EQ(got.cells, one.cells) << what;
        EXPECT_EQ(got.length, one.length) << what;
        EXPECT_EQ(got.drop, one.drop) << what;
        EXPECT_EQ(got.area, one.area) << what;
        EXPECT_EQ(got.upstreamCells, one.upstreamCells) << what;
      }
    }
  }
}

// A network of Orders keeps Full's segment raster, first cells, downstream segments, Strahler orders
// and stream cells, on one thread and on several, and nothing else.
TEST(StreamNetwork, OrdersKeepsFullsValues)
{
  for (uint64_t seed = 1; seed <= 3; ++seed)
  {
    TestDem dem = randomDem(seed + 80, 197, 163, seed == 2 ? 1.0 : 0.0, 3, 30, 30, true);
    if (seed != 3)
      dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), seed != 3, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
    for (const int64_t minCells : {int64_t(1), int64_t(25)})
    {
      const StreamNetwork full = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{minCells, 0}, 1, noCancel);
      int64_t streamCells = 0;
      for (const int64_t cells : full.cells)
        streamCells += cells;
      EXPECT_EQ(full.streamCells, streamCells);
      EXPECT_EQ(streamCells, int64_t(std::count_if(full.segment.begin(), full.segment.end(),
                                                   [](int32_t k) { return k > 0; })));
      for (const int threads : {1, 4})
      {
        const StreamNetwork got = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{minCells, 0}, threads, noCancel,
                                                StreamFields::Orders);
        const std::string what =
          "seed " + std::to_string(seed) + ", cells " + std::to_string(minCells) + ", threads " + std::to_string(threads);
        EXPECT_EQ(got.segment, full.segment) << what;
        EXPECT_EQ(got.first, full.first) << what;
        EXPECT_EQ(got.down, full.down) << what;
        EXPECT_EQ(got.strahler, full.strahler) << what;
        EXPECT_EQ(got.streamCells, full.streamCells) << what;
        EXPECT_TRUE(got.last.empty() && got.shreve.empty() && got.cells.empty() && got.length.empty() &&
                    got.drop.empty() && got.area.empty() && got.upstreamCells.empty())
          << what;
        ASSERT_FALSE(got.first.empty()) << what;
        EXPECT_THROW(segmentLine(got, dirs, dem.width, dem.height, 1), InvalidInput) << what;
      }
    }
  }
}

TEST(StreamNetwork, TileByTileIsTheInMemoryRun)
{
  for (uint64_t seed = 1; seed <= 4; ++seed)
  {
    TestDem dem = randomDem(seed + 10, 53, 41, seed % 2 ? 1.0 : 0.0, 3, 30, 30, true);
    dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
    const tiled::RowSizes rows{dem.cellWidth, dem.cellHeight};
    const tiled::MemoryRaster<float> z(dem.width, dem.height, dem.z);
    const tiled::MemoryRaster<uint8_t> d(dem.width, dem.height, dirs);
    const tiled::MemoryRaster<int64_t> cells(dem.width, dem.height, acc.cells), area(dem.width, dem.height, acc.area);
    for (const int64_t minCells : {int64_t(1), int64_t(12)})
    {
      const StreamThreshold threshold{minCells, 0};
      const StreamNetwork want = streamNetwork(dem.grid(), dirs, acc, threshold, 4, noCancel);
      for (const auto& [tw, th] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 3}, {7, 5}, {16, 16}, {64, 64}})
      {
        tiled::MemoryRaster<int32_t> segments(dem.width, dem.height);
        tiled::StreamCellSink streamCells(d);
        tiled::TeeSink<int32_t> both(segments, &streamCells);
        tiled::TiledReport report;
        const StreamNetwork got = tiled::streamNetworkTiled(z, d, cells, area, rows, threshold, both,
                                                            tiles(tw, th), noCancel, &report);
        const std::string what = "seed " + std::to_string(seed) + ", cells " + std::to_string(minCells) +
                                 ", tiles " + std::to_string(tw) + "x" + std::to_string(th);
        EXPECT_EQ(segments.cells(), want.segment) << what;
        EXPECT_EQ(got.first, want.first) << what;
        EXPECT_EQ(got.last, want.last) << what;
        EXPECT_EQ(got.down, want.down) << what;
        EXPECT_EQ(got.strahler, want.strahler) << what;
        EXPECT_EQ(got.shreve, want.shreve) << what;
        EXPECT_EQ(got.cells, want.cells) << what;
        EXPECT_EQ(got.streamCells, want.streamCells) << what;
        EXPECT_EQ(got.length, want.length) << what;
        EXPECT_EQ(got.drop, want.drop) << what;
        EXPECT_EQ(got.area, want.area) << what;
        EXPECT_EQ(got.upstreamCells, want.upstreamCells) << what;
        EXPECT_EQ(report.passes, 2);
        // The lines from the stream cells kept as the segments were written: segmentLine()'s.
        int32_t lines = 0;
        streamCells.lines(
          got,
          [&](int32_t k, const std::vector<int64_t>& line) {
            EXPECT_EQ(k, ++lines) << what;
            EXPECT_EQ(line, segmentLine(want, dirs, dem.width, dem.height, k)) << what << ", segment " << k;
          },
          noCancel);
        EXPECT_EQ(size_t(lines), want.first.size()) << what;

        // Only the rasters' fields (StreamFields::Orders, what the tool keeps without lines): the same
        // segments, downstream segments, Strahler orders and stream cells, nothing else held.
        tiled::MemoryRaster<int32_t> orderSegments(dem.width, dem.height);
        const StreamNetwork orders = tiled::streamNetworkTiled(z, d, cells, area, rows, threshold, orderSegments,
                                                               tiles(tw, th), noCancel, nullptr, StreamFields::Orders);
        EXPECT_EQ(orderSegments.cells(), want.segment) << what;
        EXPECT_EQ(orders.first, want.first) << what;
        EXPECT_EQ(orders.down, want.down) << what;
        EXPECT_EQ(orders.strahler, want.strahler) << what;
        EXPECT_EQ(orders.streamCells, want.streamCells) << what;
        EXPECT_TRUE(orders.last.empty() && orders.shreve.empty() && orders.cells.empty() && orders.length.empty() &&
                    orders.drop.empty() && orders.area.empty() && orders.upstreamCells.empty())
          << what;
      }
    }
  }
}

// The per-segment fields of a tiled network are held for the whole raster: past the run's limit it stops
// after its first pass with InvalidInput (a clear error where the memory would otherwise run out).
TEST(StreamNetwork, TileByTileStopsPastItsHeldBytesLimit)
{
  TestDem dem = randomDem(21, 47, 39, 1.0, 3, 30, 30, true);
  dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
  const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 2, noCancel);
  const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
  const tiled::RowSizes rows{dem.cellWidth, dem.cellHeight};
  const tiled::MemoryRaster<float> z(dem.width, dem.height, dem.z);
  const tiled::MemoryRaster<uint8_t> d(dem.width, dem.height, dirs);
  const tiled::MemoryRaster<int64_t> cells(dem.width, dem.height, acc.cells), area(dem.width, dem.height, acc.area);
  const StreamThreshold threshold{1, 0};
  const int64_t segments = int64_t(streamNetwork(dem.grid(), dirs, acc, threshold, 2, noCancel).first.size());
  ASSERT_GT(segments, 100);
  for (const StreamFields fields : {StreamFields::Full, StreamFields::Orders})
  {
    const int64_t need = segments * tiled::kStreamsBytesPerSegment(fields);
    tiled::TiledOptions options = tiles(8, 8);
    tiled::MemoryRaster<int32_t> out(dem.width, dem.height);
    options.heldBytesLimit = need - 1;
    EXPECT_THROW(tiled::streamNetworkTiled(z, d, cells, area, rows, threshold, out, options, noCancel, nullptr, fields),
                 InvalidInput);
    options.heldBytesLimit = need;
    EXPECT_EQ(int64_t(tiled::streamNetworkTiled(z, d, cells, area, rows, threshold, out, options, noCancel, nullptr,
                                                fields)
                        .first.size()),
              segments);
  }
  EXPECT_LT(tiled::kStreamsBytesPerSegment(StreamFields::Orders), tiled::kStreamsBytesPerSegment(StreamFields::Full));
}

// Subbasins: each segment's exit from the segment raster, then the watersheds of the exits label every
// cell with the segment of the first stream cell down its path (a walk per cell), in memory and tile
// by tile.
TEST(Subbasins, ExitsAndWatershedsGiveEachCellItsFirstStreamCellsSegment)
{
  for (uint64_t seed = 1; seed <= 4; ++seed)
  {
    TestDem dem = randomDem(seed + 30, 47, 39, seed % 2 ? 1.0 : 0.0, 3, 30, 30, true);
    dem.z = fillDepressions(Backend::Cpu, dem.grid(), 2, noCancel);
    const std::vector<uint8_t> dirs = flowDirections(Backend::Cpu, dem.grid(), true, 2, noCancel);
    const Accumulation acc = flowAccumulation(Backend::Cpu, dem.grid(), dirs, 2, noCancel);
    const int64_t w = dem.width, h = dem.height;
    for (const int64_t minCells : {int64_t(1), int64_t(5), int64_t(40)})
    {
      const StreamNetwork network = streamNetwork(dem.grid(), dirs, acc, StreamThreshold{minCells, 0}, 2, noCancel);
      const std::string what = "seed " + std::to_string(seed) + ", cells " + std::to_string(minCells);
      const tiled::MemoryRaster<int32_t> segments(w, h, network.segment);
      const tiled::MemoryRaster<uint8_t> d(w, h, dirs);
      for (const int64_t side : {int64_t(1), int64_t(3), int64_t(16), int64_t(64)})
      {
        const tiled::SegmentExits exits = tiled::segmentExits(segments, d, side, side == 3 ? 1 : 3, noCancel);
        ASSERT_EQ(exits.id.size(), network.first.size()) << what;
        for (std::size_t k = 0; k < exits.id.size(); ++k)
        {
          EXPECT_EQ(exits.id[k], int32_t(k + 1)) << what;
          EXPECT_EQ(exits.cell[k], network.last[k]) << what;
          EXPECT_EQ(exits.down[k], network.down[k]) << what;
        }
      }
      // The reference: a walk from each cell to its first stream cell.
      std::vector<int32_t> want(std::size_t(w * h), 0);
      for (int64_t c = 0; c < w * h; ++c)
        for (int64_t at = dirs[std::size_t(c)] == kNoData ? -1 : c, steps = 0; at >= 0 && steps <= w * h; ++steps)
        {
          if (network.segment[std::size_t(at)] > 0)
          {
            want[std::size_t(c)] = network.segment[std::size_t(at)];
            break;
          }
          at = next(dirs, w, h, at);
          if (at >= 0 && dirs[std::size_t(at)] == kNoData)
            at = -1;
        }
      const tiled::SegmentExits exits = tiled::segmentExits(segments, d, 16, 2, noCancel);
      const Watersheds sheds = watersheds(Backend::Cpu, dirs, w, h, dem.cellWidth.data(), dem.cellHeight.data(),
                                          exits.cell, 1, noCancel);
      std::vector<int32_t> got(sheds.labels.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        got[i] = sheds.labels[i] > 0 ? exits.id[std::size_t(sheds.labels[i] - 1)] : 0;
      EXPECT_EQ(got, want) << what;
      for (std::size_t k = 0; k < exits.id.size(); ++k)
        EXPECT_EQ(sheds.downstream[k] + 1, exits.down[k]) << what << ", segment " << k + 1;
      tiled::MemoryRaster<int32_t> labels(w, h);
      tiled::watershedsTiled(d, tiled::RowSizes{dem.cellWidth, dem.cellHeight}, exits.cell, labels, tiles(7, 5),
                             noCancel);
      EXPECT_EQ(labels.cells(), sheds.labels) << what;
    }
  }
}

TEST(Subbasins, SegmentsThatAreNotChainsAreRefused)
{
  // Directions all east on a 4 x 2 grid (the last column drains off it).
  const std::vector<uint8_t> east(8, 0);
  const tiled::MemoryRaster<uint8_t> d(4, 2, east);
  // Segment 1 in both rows: two exits.
  const tiled::MemoryRaster<int32_t> twice(4, 2, std::vector<int32_t>{1, 1, 0, 0, 1, 1, 0, 0});
  EXPECT_THROW(tiled::segmentExits(twice, d, 2, 2, noCancel), InvalidInput);
  // A loop: two cells pointing at each other, both segment 3.
  const std::vector<uint8_t> loop{0, 4, 0, 0, 0, 0, 0, 0};
  const tiled::MemoryRaster<uint8_t> l(4, 2, loop);
  const tiled::MemoryRaster<int32_t> looped(4, 2, std::vector<int32_t>{3, 3, 0, 0, 0, 0, 0, 0});
  EXPECT_THROW(tiled::segmentExits(looped, l, 2, 2, noCancel), InvalidInput);
  // One chain per id: ids 7 and 2, exits at the east edge and into 7.
  const tiled::MemoryRaster<int32_t> chains(4, 2, std::vector<int32_t>{2, 2, 7, 7, 0, 0, 0, 0});
  const tiled::SegmentExits exits = tiled::segmentExits(chains, d, 3, 2, noCancel);
  EXPECT_EQ(exits.id, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(exits.cell, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(exits.down, (std::vector<int32_t>{7, 0}));
  // A cell without a direction is no stream: segment 4 leaves its cells before it.
  const std::vector<uint8_t> withNodata{0, 0, 0, kNoData, 0, 0, 0, 0};
  const tiled::MemoryRaster<uint8_t> n(4, 2, withNodata);
  const tiled::MemoryRaster<int32_t> intoNodata(4, 2, std::vector<int32_t>{4, 4, 4, 4, 0, 0, 0, 0});
  const tiled::SegmentExits before = tiled::segmentExits(intoNodata, n, 2, 2, noCancel);
  EXPECT_EQ(before.cell, (std::vector<int64_t>{2}));
  EXPECT_EQ(before.down, (std::vector<int32_t>{0}));
}
