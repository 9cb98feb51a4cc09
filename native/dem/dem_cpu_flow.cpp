// The CPU backend's flats, directions and accumulation.
#include <algorithm>
#include <deque>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

std::vector<int32_t> flatMaskCpu(const Grid& grid, bool towardsOnly, int threads, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const float* z = grid.z;
  auto inside = [&](int64_t x, int64_t y) { return x >= 0 && y >= 0 && x < w && y < h; };
  // Flat cells: valid, not edge cells, no lower neighbour (rows on all threads).
  std::vector<uint8_t> flat(static_cast<std::size_t>(n), 0);
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = std::max<int64_t>(b, 1); y < std::min(e, h - 1); ++y)
      for (int64_t x = 1; x < w - 1; ++x)
      {
        const int64_t c = y * w + x;
        if (isNoData(z[c]) || isEdgeCell(z, w, h, x, y))
          continue;
        bool lower = false;
        for (int d = 0; d < 8 && !lower; ++d)
          lower = z[(y + kDy[d]) * w + x + kDx[d]] < z[c];
        flat[std::size_t(c)] = !lower;
      }
  }, &control);
  // The flat cells, and the low edges (cells that drain, beside a flat cell of their elevation) and
  // high edges (flat cells beside higher ground), in cell order.
  std::vector<std::vector<int64_t>> flatsOf(static_cast<std::size_t>(h)), lowOf(flatsOf.size()), highOf(flatsOf.size());
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
      for (int64_t x = 0; x < w; ++x)
      {
        const int64_t c = y * w + x;
        if (isNoData(z[c]))
          continue;
        const bool isFlat = flat[std::size_t(c)];
        bool low = false, high = false;
        for (int d = 0; d < 8; ++d)
        {
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (!inside(nx, ny))
            continue;
          const int64_t m = ny * w + nx;
          if (isNoData(z[m]))
            continue;
          low = low || (!isFlat && flat[std::size_t(m)] && z[m] == z[c]);
          high = high || (isFlat && z[m] > z[c]);
        }
        if (isFlat)
          flatsOf[std::size_t(y)].push_back(c);
        if (low)
          lowOf[std::size_t(y)].push_back(c);
        if (high)
          highOf[std::size_t(y)].push_back(c);
      }
  }, &control);
  std::vector<int64_t> flatCells, lowEdges, highEdges;
  for (int64_t y = 0; y < h; ++y)
  {
    flatCells.insert(flatCells.end(), flatsOf[std::size_t(y)].begin(), flatsOf[std::size_t(y)].end());
    lowEdges.insert(lowEdges.end(), lowOf[std::size_t(y)].begin(), lowOf[std::size_t(y)].end());
    highEdges.insert(highEdges.end(), highOf[std::size_t(y)].begin(), highOf[std::size_t(y)].end());
  }
  std::vector<int32_t> mask(static_cast<std::size_t>(n), 0);
  if (flatCells.empty())
    return mask;
  // Each low edge's flat: the cells of its elevation reached from it (8-connected).
  std::vector<int32_t> flatId(static_cast<std::size_t>(n), -1);
  int32_t flats = 0;
  std::deque<int64_t> queue;
  for (const int64_t start : lowEdges)
  {
    if (flatId[std::size_t(start)] >= 0)
      continue;
    flatId[std::size_t(start)] = flats;
    queue.push_back(start);
    while (!queue.empty())
    {
      const int64_t c = queue.front();
      queue.pop_front();
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
        if (!inside(nx, ny))
          continue;
        const int64_t m = ny * w + nx;
        if (flatId[std::size_t(m)] < 0 && z[m] == z[c])
        {
          flatId[std::size_t(m)] = flats;
          queue.push_back(m);
        }
      }
    }
    ++flats;
  }
  if (control.isCanceled())
    throw Canceled();
  // Breadth-first rings through a flat's cells from the given sources (ring `first` at the sources);
  // 0 where no ring reaches.
  std::vector<int32_t> ring(static_cast<std::size_t>(n), -1);
  auto rings = [&](const std::vector<int64_t>& sources, int32_t first, std::vector<int32_t>& out) {
    for (const int64_t c : flatCells)
      ring[std::size_t(c)] = -1;
    std::deque<int64_t> q;
    for (const int64_t s : sources)
      if (flatId[std::size_t(s)] >= 0 && ring[std::size_t(s)] < 0)
      {
        ring[std::size_t(s)] = first;
        q.push_back(s);
      }
    while (!q.empty())
    {
      const int64_t c = q.front();
      q.pop_front();
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
        if (!inside(nx, ny))
          continue;
        const int64_t m = ny * w + nx;
        if (ring[std::size_t(m)] < 0 && flat[std::size_t(m)] && flatId[std::size_t(m)] == flatId[std::size_t(c)])
        {
          ring[std::size_t(m)] = ring[std::size_t(c)] + 1;
          q.push_back(m);
        }
      }
    }
    out.resize(flatCells.size());
    for (std::size_t i = 0; i < flatCells.size(); ++i)
      out[i] = std::max(ring[std::size_t(flatCells[i])], 0);
    for (const int64_t s : sources)
      ring[std::size_t(s)] = -1;
  };
  std::vector<int32_t> away, towards;
  rings(highEdges, 1, away);
  rings(lowEdges, 0, towards);
  std::vector<int32_t> flatHeight(static_cast<std::size_t>(flats), 0);
  for (std::size_t i = 0; i < flatCells.size(); ++i)
  {
    const int32_t id = flatId[std::size_t(flatCells[i])];
    if (id >= 0)
      flatHeight[std::size_t(id)] = std::max(flatHeight[std::size_t(id)], away[i]);
  }
  for (std::size_t i = 0; i < flatCells.size(); ++i)
  {
    const int32_t id = flatId[std::size_t(flatCells[i])];
    if (id >= 0)
      mask[std::size_t(flatCells[i])] =
          towardsOnly ? towards[i] : 2 * towards[i] + (away[i] > 0 ? flatHeight[std::size_t(id)] - away[i] : 0);
  }
  return mask;
}

std::vector<uint8_t> directionsCpu(const Grid& grid, const std::vector<int32_t>* mask, int threads,
                                   const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<uint8_t> out(static_cast<std::size_t>(w * h));
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
      for (int64_t x = 0; x < w; ++x)
        out[std::size_t(y * w + x)] = d8Direction(grid.z, mask ? mask->data() : nullptr, w, h, x, y,
                                                  grid.cellWidth[y], grid.cellHeight[y]);
  }, &control);
  return out;
}

Accumulation accumulationCpu(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height, n = w * h;
  Accumulation out;
  out.cells.assign(static_cast<std::size_t>(n), 0);
  out.area.assign(static_cast<std::size_t>(n), 0);
  auto downstream = [&](int64_t c) { return receiverOf(directions.data(), w, h, c); };
  std::vector<uint8_t> inflow(static_cast<std::size_t>(n), 0);
  for (int64_t c = 0; c < n; ++c)
  {
    if (directions[std::size_t(c)] == kNoData)
      continue;
    out.cells[std::size_t(c)] = 1;
    out.area[std::size_t(c)] = cellArea(grid, c / w);
    const int64_t d = downstream(c);
    if (d >= 0)
      ++inflow[std::size_t(d)];
  }
  std::vector<int64_t> ready;
  for (int64_t c = 0; c < n; ++c)
    if (directions[std::size_t(c)] != kNoData && inflow[std::size_t(c)] == 0)
      ready.push_back(c);
  int64_t done = 0;
  while (!ready.empty())
  {
    const int64_t c = ready.back();
    ready.pop_back();
    if ((++done & 0xfffff) == 0 && control.isCanceled())
      throw Canceled();
    const int64_t d = downstream(c);
    if (d < 0)
      continue;
    out.cells[std::size_t(d)] += out.cells[std::size_t(c)];
    out.area[std::size_t(d)] += out.area[std::size_t(c)];
    if (--inflow[std::size_t(d)] == 0)
      ready.push_back(d);
  }
  int64_t valid = 0;
  for (int64_t c = 0; c < n; ++c)
    valid += directions[std::size_t(c)] != kNoData;
  if (done != valid)
    throw InvalidInput("the flow directions go round in a loop; they cannot be accumulated");
  return out;
}

}  // namespace gpugeo::dem::detail
