#include "dem/streams.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
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
// own last) and the upstream cells and area at its last cell; then the orders.
void finishSegments(const Grid& grid, const Accumulation& accumulation, double unit, const std::vector<int64_t>& units,
                    StreamNetwork& out, const RunControl& control);

}  // namespace

namespace detail {

void addStreamOrders(StreamNetwork& out)
{
  const std::size_t count = out.first.size();
  std::vector<int32_t> pending(count, 0), highest(count, 0), atHighest(count, 0);
  std::vector<int64_t> magnitude(count, 0);
  for (const int32_t d : out.down)
    if (d > 0)
      ++pending[std::size_t(d - 1)];
  std::vector<int32_t> ready;
  for (std::size_t k = 0; k < count; ++k)
    if (pending[k] == 0)
      ready.push_back(int32_t(k));
  out.strahler.assign(count, 0);
  out.shreve.assign(count, 0);
  while (!ready.empty())
  {
    const std::size_t k = std::size_t(ready.back());
    ready.pop_back();
    out.strahler[k] = highest[k] == 0 ? 1 : highest[k] + (atHighest[k] >= 2 ? 1 : 0);
    out.shreve[k] = magnitude[k] == 0 ? 1 : magnitude[k];
    const int32_t d = out.down[k];
    if (d <= 0)
      continue;
    const std::size_t j = std::size_t(d - 1);
    if (out.strahler[k] > highest[j])
    {
      highest[j] = out.strahler[k];
      atHighest[j] = 1;
    }
    else if (out.strahler[k] == highest[j])
      ++atHighest[j];
    magnitude[j] += out.shreve[k];
    if (--pending[j] == 0)
      ready.push_back(int32_t(j));
  }
}

}  // namespace detail

namespace {

void finishSegments(const Grid& grid, const Accumulation& accumulation, double unit, const std::vector<int64_t>& units,
                    StreamNetwork& out, const RunControl& control)
{
  const std::size_t count = out.first.size();
  out.length.assign(count, 0.0);
  out.drop.assign(count, 0.0);
  out.area.assign(count, 0);
  out.upstreamCells.assign(count, 0);
  for (std::size_t k = 0; k < count; ++k)
  {
    if ((k & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    // The line's last cell: the downstream segment's first cell, else the segment's own last.
    const int64_t c = out.last[k];
    const int64_t end = out.down[k] > 0 ? out.first[std::size_t(out.down[k] - 1)] : c;
    out.length[k] = double(units[k]) * unit;
    out.drop[k] = double(grid.z[out.first[k]]) - double(grid.z[end]);
    out.area[k] = accumulation.area[std::size_t(c)];
    out.upstreamCells[k] = accumulation.cells[std::size_t(c)];
  }
  detail::addStreamOrders(out);
}

}  // namespace

StreamNetwork streamNetwork(const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold,
                            const RunControl& control)
{
  checkInput(grid, directions, accumulation);
  const int64_t w = grid.width, h = grid.height, n = w * h;

  // Stream cells, and how many stream cells flow into each (0, 1, or 2 for two or more).
  StreamNetwork out;
  std::vector<uint8_t> inflow(std::size_t(n), 0);
  std::vector<uint8_t> stream(std::size_t(n), 0);
  for (std::size_t c = 0; c < stream.size(); ++c)
    stream[c] = isStreamCell(directions[c], accumulation.cells[c], accumulation.area[c], threshold);
  for (int64_t c = 0; c < n; ++c)
  {
    if (!stream[std::size_t(c)])
      continue;
    const int64_t d = successor(directions, w, h, c);
    if (d >= 0 && stream[std::size_t(d)] && inflow[std::size_t(d)] < 2)
      ++inflow[std::size_t(d)];
  }

  // The segments' first cells, numbered in row order.
  out.segment.assign(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
    if (stream[std::size_t(c)] && inflow[std::size_t(c)] != 1)
    {
      if (out.first.size() >= std::size_t(std::numeric_limits<int32_t>::max()))
        throw InvalidInput("stream network: more than 2147483647 segments");
      out.first.push_back(c);
      out.segment[std::size_t(c)] = int32_t(out.first.size());
    }

  // Each segment down from its first cell to the cell before the next segment or the path's end.
  const double unit = detail::pathUnit(grid.cellWidth, grid.cellHeight, h, n);
  const std::vector<int64_t> steps = detail::rowSteps(grid.cellWidth, grid.cellHeight, h, unit);
  const std::size_t count = out.first.size();
  out.last.assign(count, -1);
  out.down.assign(count, 0);
  out.cells.assign(count, 0);
  std::vector<int64_t> units(count, 0);
  for (std::size_t k = 0; k < count; ++k)
  {
    if ((k & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    const int32_t id = int32_t(k + 1);
    int64_t c = out.first[k], cells = 0;
    for (;;)
    {
      out.segment[std::size_t(c)] = id;
      ++cells;
      const int64_t d = successor(directions, w, h, c);
      if (d < 0 || !stream[std::size_t(d)] || cells > n)
        break;
      units[k] += detail::stepUnits(steps.data() + 3 * (c / w), directions[std::size_t(c)]);
      if (inflow[std::size_t(d)] != 1)  // the next segment's first cell
      {
        out.down[k] = out.segment[std::size_t(d)];
        break;
      }
      c = d;
    }
    out.last[k] = c;
    out.cells[k] = cells;
  }
  finishSegments(grid, accumulation, unit, units, out, control);
  return out;
}

StreamNetwork streamNetwork(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold,
                            const RunControl& control)
{
  if (backend != Backend::Gpu)
    return streamNetwork(grid, directions, accumulation, threshold, control);
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
  finishSegments(grid, accumulation, unit, units, out, control);
  return out;
}

std::vector<int64_t> segmentLine(const StreamNetwork& network, const std::vector<uint8_t>& directions, int64_t width,
                                 int64_t height, int32_t k)
{
  if (k < 1 || std::size_t(k) > network.first.size())
    throw InvalidInput("stream network: no segment " + std::to_string(k));
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
