// The CPU backend's flats, directions and accumulation.
#include <deque>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

std::vector<int32_t> flatMaskCpu(const Grid& grid, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const float* z = grid.z;
  auto inside = [&](int64_t x, int64_t y) { return x >= 0 && y >= 0 && x < w && y < h; };
  // Flat cells: valid, not edge cells, no lower neighbour.
  std::vector<uint8_t> flat(static_cast<std::size_t>(n), 0);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const int64_t c = y * w + x;
      if (isNoData(z[c]) || isEdgeCell(z, w, h, x, y))
        continue;
      bool lower = false;
      for (int d = 0; d < 8 && !lower; ++d)
        lower = z[(y + kDy[d]) * w + x + kDx[d]] < z[c];
      flat[std::size_t(c)] = !lower;
    }
  if (control.isCanceled())
    throw Canceled();
  // Low edges (cells that drain, beside a flat cell of their elevation) start a flat's label.
  std::vector<int32_t> flatId(static_cast<std::size_t>(n), -1);
  std::vector<int64_t> lowEdges, highEdges;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const int64_t c = y * w + x;
      if (isNoData(z[c]))
        continue;
      bool low = false, high = false;
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = x + kDx[d], ny = y + kDy[d];
        if (!inside(nx, ny))
          continue;
        const int64_t m = ny * w + nx;
        if (isNoData(z[m]))
          continue;
        low = low || (!flat[std::size_t(c)] && flat[std::size_t(m)] && z[m] == z[c]);
        high = high || (flat[std::size_t(c)] && z[m] > z[c]);
      }
      if (low)
        lowEdges.push_back(c);
      if (high)
        highEdges.push_back(c);
    }
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
  // Breadth-first rings through a flat's cells from the given sources (ring 1 at the sources when
  // `first` is 1, ring 0 when 0).
  auto rings = [&](const std::vector<int64_t>& sources, int32_t first, std::vector<int32_t>& ring) {
    ring.assign(static_cast<std::size_t>(n), 0);
    std::deque<int64_t> q;
    std::vector<uint8_t> seen(static_cast<std::size_t>(n), 0);
    for (const int64_t s : sources)
      if (flatId[std::size_t(s)] >= 0 && !seen[std::size_t(s)])
      {
        seen[std::size_t(s)] = 1;
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
        if (!seen[std::size_t(m)] && flat[std::size_t(m)] && flatId[std::size_t(m)] == flatId[std::size_t(c)])
        {
          seen[std::size_t(m)] = 1;
          ring[std::size_t(m)] = ring[std::size_t(c)] + 1;
          q.push_back(m);
        }
      }
    }
  };
  std::vector<int32_t> away, towards;
  rings(highEdges, 1, away);
  rings(lowEdges, 0, towards);
  std::vector<int32_t> flatHeight(static_cast<std::size_t>(flats), 0);
  for (int64_t c = 0; c < n; ++c)
    if (flat[std::size_t(c)] && flatId[std::size_t(c)] >= 0)
      flatHeight[std::size_t(flatId[std::size_t(c)])] =
          std::max(flatHeight[std::size_t(flatId[std::size_t(c)])], away[std::size_t(c)]);
  std::vector<int32_t> mask(static_cast<std::size_t>(n), 0);
  for (int64_t c = 0; c < n; ++c)
    if (flat[std::size_t(c)] && flatId[std::size_t(c)] >= 0)
    {
      const int32_t a = away[std::size_t(c)];
      mask[std::size_t(c)] = 2 * towards[std::size_t(c)] + (a > 0 ? flatHeight[std::size_t(flatId[std::size_t(c)])] - a : 0);
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
  auto downstream = [&](int64_t c) -> int64_t {
    const uint8_t d = directions[std::size_t(c)];
    if (d >= 8)
      return -1;
    const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
    if (nx < 0 || ny < 0 || nx >= w || ny >= h || directions[std::size_t(ny * w + nx)] == kNoData)
      return -1;
    return ny * w + nx;
  };
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
  return out;
}

}  // namespace gpugeo::dem::detail
