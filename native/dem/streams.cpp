#include "dem/streams.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/down_paths.h"
#include "dem/detail/stream_orders.h"
#include "dem/detail/streams_cuda.h"

namespace gpugeo::dem {

namespace {

// The cell the direction of c points to, -1 for none (a pit, nodata, off the grid).
int64_t successor(const std::vector<uint8_t>& directions, int64_t w, int64_t h, int64_t c)
{
  const uint8_t d = directions[std::size_t(c)];
  if (d >= 8)
    return -1;
  const int64_t x = c % w + kDx[d], y = c / w + kDy[d];
  return x < 0 || y < 0 || x >= w || y >= h ? -1 : y * w + x;
}

void checkInput(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation)
{
  validateGrid(grid);
  const int64_t n = grid.width * grid.height;
  if (int64_t(directions.size()) != n || int64_t(accumulation.cells.size()) != n ||
      int64_t(accumulation.area.size()) != n)
    throw InvalidInput("stream network: the directions or the accumulation do not fill the grid");
}

// What both backends finish alike from each segment's first and last cells, downstream segment and
// length in units: its length in metres, its drop (to the downstream segment's first cell, else to its
// own last) and the upstream cells and area at its last cell; then the orders. For StreamFields::Orders
// the orders alone (Strahler), and the fields Orders does not keep emptied.
void finishSegments(const Grid& grid, const Accumulation& accumulation, double unit, const std::vector<int64_t>& units,
                    int threads, StreamFields fields, StreamNetwork& out, const RunControl& control);

}  // namespace

namespace detail {

void addStreamOrders(StreamNetwork& out, int threads, const RunControl& control, bool shreve)
{
  // Each segment is ordered by the thread that brings it its last upstream segment, a source by the
  // thread whose share of the segments holds it. An upstream segment folds its Strahler order into
  // one word of the segment below it (the highest order flowing in, how many bring it, up to two, and
  // how many are still to come: at most 8, the neighbours of a first cell) and its Shreve order into
  // a sum, then goes on down only when it was the last to come. The word is 0 only for a source: a
  // segment with inflow holds its count or the order brought. The result does not depend on who comes
  // first: the fold is a maximum, a count and a sum.
  const int64_t count = int64_t(out.first.size());
  out.strahler.clear();
  out.shreve.clear();
  if (shreve)
    resizeOnThreads(std::size_t(count), threads, out.strahler, out.shreve);
  else
    resizeOnThreads(std::size_t(count), threads, out.strahler);
  constexpr uint32_t kToCome = 0xf, kAtTopShift = 4, kTopShift = 8;
  const std::unique_ptr<std::atomic<uint32_t>[]> word(new std::atomic<uint32_t>[std::size_t(count)]);
  const std::unique_ptr<std::atomic<int64_t>[]> magnitude(shreve ? new std::atomic<int64_t>[std::size_t(count)]
                                                                 : nullptr);
  constexpr int64_t grain = 4096;
  parallelFor(
    count, grain, threads,
    [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
      {
        word[k].store(0, std::memory_order_relaxed);
        if (shreve)
          magnitude[k].store(0, std::memory_order_relaxed);
      }
    },
    &control);
  parallelFor(
    count, grain, threads,
    [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
        if (out.down[std::size_t(k)] > 0)
          word[out.down[std::size_t(k)] - 1].fetch_add(1, std::memory_order_relaxed);
    },
    &control);
  parallelFor(
    count, grain, threads,
    [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
      {
        if (word[k].load(std::memory_order_relaxed) != 0)
          continue;  // not a source: ordered by its last upstream segment
        uint32_t brought = 0;
        for (int64_t j = k;;)
        {
          const uint32_t top = brought >> kTopShift, atTop = (brought >> kAtTopShift) & 3;
          const uint32_t strahler = top == 0 ? 1 : top + (atTop >= 2 ? 1 : 0);
          out.strahler[std::size_t(j)] = int32_t(strahler);
          const int32_t d = out.down[std::size_t(j)];
          const int64_t i = d - 1;
          if (shreve)
          {
            const int64_t sum = magnitude[j].load(std::memory_order_relaxed);
            out.shreve[std::size_t(j)] = sum == 0 ? 1 : sum;
            if (d > 0)
              magnitude[i].fetch_add(out.shreve[std::size_t(j)], std::memory_order_relaxed);
          }
          if (d <= 0)
            break;
          uint32_t seen = word[i].load(std::memory_order_relaxed), next = 0;
          do
          {
            const uint32_t seenTop = seen >> kTopShift, seenAt = (seen >> kAtTopShift) & 3;
            const uint32_t newTop = std::max(seenTop, strahler);
            const uint32_t newAt = strahler > seenTop    ? 1
                                   : strahler == seenTop ? std::min<uint32_t>(seenAt + 1, 2)
                                                         : seenAt;
            next = (newTop << kTopShift) | (newAt << kAtTopShift) | ((seen & kToCome) - 1);
          } while (!word[i].compare_exchange_weak(seen, next, std::memory_order_acq_rel, std::memory_order_relaxed));
          if ((next & kToCome) != 0)
            break;  // another segment flows in later, and orders i
          brought = next;
          j = i;
        }
      }
    },
    &control);
}

}  // namespace detail

namespace {

void finishSegments(const Grid& grid, const Accumulation& accumulation, double unit, const std::vector<int64_t>& units,
                    int threads, StreamFields fields, StreamNetwork& out, const RunControl& control)
{
  if (fields == StreamFields::Orders)
  {
    std::vector<int64_t>().swap(out.last);
    std::vector<int64_t>().swap(out.cells);
    detail::addStreamOrders(out, threads, control, false);
    return;
  }
  const std::size_t count = out.first.size();
  resizeOnThreads(count, threads, out.length, out.drop, out.area, out.upstreamCells);
  parallelFor(
    int64_t(count), 4096, threads,
    [&](int64_t k0, int64_t k1) {
      for (std::size_t k = std::size_t(k0); k < std::size_t(k1); ++k)
      {
        // The line's last cell: the downstream segment's first cell, else the segment's own last.
        const int64_t c = out.last[k];
        const int64_t end = out.down[k] > 0 ? out.first[std::size_t(out.down[k] - 1)] : c;
        out.length[k] = double(units[k]) * unit;
        out.drop[k] = double(grid.z[out.first[k]]) - double(grid.z[end]);
        out.area[k] = accumulation.area[std::size_t(c)];
        out.upstreamCells[k] = accumulation.cells[std::size_t(c)];
      }
    },
    &control);
  detail::addStreamOrders(out, threads, control);
}

}  // namespace

namespace {

// Rows a chunk of the threads' passes over the grid.
constexpr int64_t kRowGrain = 4;

// How many stream cells flow into the stream cell (x, y): 0, 1, or 2 for two or more. A neighbour
// flows in when its direction is the one back to (x, y) (d + 4 from its side); its direction is
// looked at first, its stream flag only then.
uint8_t streamInflow(const uint8_t* directions, const uint8_t* stream, int64_t w, int64_t h, int64_t x, int64_t y)
{
  const int64_t c = y * w + x;
  uint8_t count = 0;
  if (x > 0 && y > 0 && x + 1 < w && y + 1 < h)
  {
    const int64_t offset[8] = {1, w + 1, w, w - 1, -1, -w - 1, -w, -w + 1};
    for (int d = 0; d < 8; ++d)
    {
      const int64_t n = c + offset[d];
      count += directions[n] == ((d + 4) & 7) && stream[n];
    }
    return count < 2 ? count : 2;
  }
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = x + kDx[d], ny = y + kDy[d];
    if (nx < 0 || ny < 0 || nx >= w || ny >= h)
      continue;
    const int64_t n = ny * w + nx;
    count += directions[n] == ((d + 4) & 7) && stream[n];
  }
  return count < 2 ? count : 2;
}

}  // namespace

StreamNetwork streamNetwork(const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold, int threads,
                            const RunControl& control, StreamFields fields)
{
  checkInput(grid, directions, accumulation);
  const int64_t w = grid.width, h = grid.height, n = w * h;

  // Stream cells, then how many stream cells flow into each (0, 1, or 2 for two or more) and how many
  // segments start on each row (a stream cell into which not exactly one flows).
  StreamNetwork out;
  std::vector<uint8_t> stream(static_cast<std::size_t>(n));
  parallelFor(
    h, kRowGrain, threads,
    [&](int64_t y0, int64_t y1) {
      for (std::size_t c = std::size_t(y0 * w); c < std::size_t(y1 * w); ++c)
        stream[c] = isStreamCell(directions[c], accumulation.cells[c], accumulation.area[c], threshold);
    },
    &control);
  std::vector<uint8_t> inflow(static_cast<std::size_t>(n));
  std::vector<int64_t> rowStart(std::size_t(h) + 1, 0);
  parallelFor(
    h, kRowGrain, threads,
    [&](int64_t y0, int64_t y1) {
      for (int64_t y = y0; y < y1; ++y)
      {
        int64_t heads = 0;
        for (int64_t x = 0, c = y * w; x < w; ++x, ++c)
        {
          const uint8_t in = stream[std::size_t(c)] ? streamInflow(directions.data(), stream.data(), w, h, x, y) : 0;
          inflow[std::size_t(c)] = in;
          heads += stream[std::size_t(c)] && in != 1;
        }
        rowStart[std::size_t(y) + 1] = heads;
      }
    },
    &control);
  for (int64_t y = 0; y < h; ++y)
    rowStart[std::size_t(y) + 1] += rowStart[std::size_t(y)];
  const std::size_t count = std::size_t(rowStart[std::size_t(h)]);
  if (count > std::size_t(std::numeric_limits<int32_t>::max()))
    throw InvalidInput("stream network: more than 2147483647 segments");

  // The segments' first cells, numbered in row order (every cell of a row written: 0 off the heads).
  out.segment.resize(std::size_t(n));
  out.first.resize(count);
  parallelFor(
    h, kRowGrain, threads,
    [&](int64_t y0, int64_t y1) {
      for (int64_t y = y0; y < y1; ++y)
      {
        int64_t k = rowStart[std::size_t(y)];
        for (int64_t c = y * w; c < (y + 1) * w; ++c)
        {
          const bool head = stream[std::size_t(c)] && inflow[std::size_t(c)] != 1;
          if (head)
            out.first[std::size_t(k++)] = c;
          out.segment[std::size_t(c)] = head ? int32_t(k) : 0;
        }
      }
    },
    &control);

  // Each segment down from its first cell to the cell before the next segment or the path's end. A
  // cell below the first has one stream cell flowing in, so one walk alone writes it; the next
  // segment's first cell is only read. Orders keeps the downstream segments and the count of cells.
  const double unit = detail::pathUnit(grid.cellWidth, grid.cellHeight, h, n);
  const std::vector<int64_t> steps = detail::rowSteps(grid.cellWidth, grid.cellHeight, h, unit);
  const bool full = fields == StreamFields::Full;
  std::vector<int64_t> units;
  if (full)
    resizeOnThreads(count, threads, out.last, out.down, out.cells, units);
  else
    resizeOnThreads(count, threads, out.down);
  std::atomic<int64_t> streamCells{0};
  parallelFor(
    int64_t(count), 1024, threads,
    [&](int64_t k0, int64_t k1) {
      int64_t chunkCells = 0;
      for (int64_t k = k0; k < k1; ++k)
      {
        const int32_t id = int32_t(k + 1);
        int64_t c = out.first[std::size_t(k)], x = c % w, y = c / w, cells = 1, length = 0;
        int32_t down = 0;
        for (;;)
        {
          const uint8_t d = directions[std::size_t(c)];
          if (d >= 8)
            break;
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (nx < 0 || ny < 0 || nx >= w || ny >= h)
            break;
          const int64_t next = ny * w + nx;
          if (!stream[std::size_t(next)] || cells > n)  // (cells > n: a guard; a loop always meets a first cell)
            break;
          length += detail::stepUnits(steps.data() + 3 * y, d);
          if (inflow[std::size_t(next)] != 1)  // the next segment's first cell
          {
            down = out.segment[std::size_t(next)];
            break;
          }
          c = next, x = nx, y = ny;
          out.segment[std::size_t(c)] = id;
          ++cells;
        }
        out.down[std::size_t(k)] = down;
        chunkCells += cells;
        if (full)
        {
          out.last[std::size_t(k)] = c;
          out.cells[std::size_t(k)] = cells;
          units[std::size_t(k)] = length;
        }
      }
      streamCells.fetch_add(chunkCells, std::memory_order_relaxed);
    },
    &control);
  out.streamCells = streamCells.load();
  finishSegments(grid, accumulation, unit, units, threads, fields, out, control);
  return out;
}

StreamNetwork streamNetwork(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold, int threads,
                            const RunControl& control, StreamFields fields)
{
  if (backend != Backend::Gpu)
    return streamNetwork(grid, directions, accumulation, threshold, threads, control, fields);
  checkInput(grid, directions, accumulation);
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const double unit = detail::pathUnit(grid.cellWidth, grid.cellHeight, h, n);
  const std::vector<int64_t> steps = detail::rowSteps(grid.cellWidth, grid.cellHeight, h, unit);

  // The device's segments (every cell labelled, each segment's first and last cells, the segment it
  // flows into, its cells and its length in units; fewer segments than cells, so never past 2³¹ − 1),
  // finished here as the CPU's walk finishes them: the same expressions on the same values.
  StreamNetwork out;
  std::vector<int64_t> units;
  detail::streamSegmentsCuda(directions.data(), accumulation.cells.data(), accumulation.area.data(), w, h,
                             steps.data(), threshold, out, units, control);
  for (const int64_t cells : out.cells)
    out.streamCells += cells;
  if (fields == StreamFields::Orders)
    std::vector<int64_t>().swap(units);
  finishSegments(grid, accumulation, unit, units, threads, fields, out, control);
  return out;
}

std::vector<int64_t> segmentLine(const StreamNetwork& network, const std::vector<uint8_t>& directions, int64_t width,
                                 int64_t height, int32_t k)
{
  if (k < 1 || std::size_t(k) > network.first.size())
    throw InvalidInput("stream network: no segment " + std::to_string(k));
  if (network.last.size() != network.first.size())
    throw InvalidInput("stream network: the segments' lines need a network of every field (StreamFields::Full)");
  std::vector<int64_t> line;
  for (int64_t c = network.first[std::size_t(k - 1)];; c = successor(directions, width, height, c))
  {
    line.push_back(c);
    if (c == network.last[std::size_t(k - 1)])
      break;
  }
  if (network.down[std::size_t(k - 1)] > 0)
    line.push_back(network.first[std::size_t(network.down[std::size_t(k - 1)] - 1)]);
  return line;
}

}  // namespace gpugeo::dem
