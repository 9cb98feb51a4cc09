#include "dem/dem_reference.h"

#include <cmath>
#include <functional>
#include <queue>
#include <tuple>

#include "dem/detail/dem_math.h"

namespace gpugeo::dem::reference {

std::vector<float> priorityFlood(const Grid& grid)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<float> out(grid.z, grid.z + w * h);
  std::vector<uint8_t> closed(static_cast<std::size_t>(w * h), 0);
  using Item = std::pair<float, int64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> open;
  for (int64_t i = 0; i < w * h; ++i)
    if (!std::isnan(out[std::size_t(i)]) && detail::isEdgeCell(grid.z, w, h, i % w, i / w))
    {
      open.emplace(out[std::size_t(i)], i);
      closed[std::size_t(i)] = 1;
    }
  while (!open.empty())
  {
    const auto [zc, c] = open.top();
    open.pop();
    const int64_t x = c % w, y = c / w;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = x + kDx[d], ny = y + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h)
        continue;
      const int64_t n = ny * w + nx;
      if (closed[std::size_t(n)] || std::isnan(out[std::size_t(n)]))
        continue;
      closed[std::size_t(n)] = 1;
      out[std::size_t(n)] = std::max(out[std::size_t(n)], zc);
      open.emplace(out[std::size_t(n)], n);
    }
  }
  for (float& v : out)
    if (!std::isnan(v))
      v += 0.0f;  // -0 as +0
  return out;
}

std::vector<uint8_t> directions(const Grid& grid, const std::vector<int32_t>& mask)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<uint8_t> out(static_cast<std::size_t>(w * h));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const int64_t c = y * w + x;
      const float zc = grid.z[c];
      if (std::isnan(zc))
      {
        out[std::size_t(c)] = kNoData;
        continue;
      }
      const double dist[8] = {grid.cellWidth[y],
                              std::sqrt(grid.cellWidth[y] * grid.cellWidth[y] + grid.cellHeight[y] * grid.cellHeight[y]),
                              grid.cellHeight[y], 0, grid.cellWidth[y], 0, grid.cellHeight[y], 0};
      auto distance = [&](int d) { return (d % 2) ? dist[1] : dist[d]; };
      int best = -1;
      double bestDrop = 0;
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = x + kDx[d], ny = y + kDy[d];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h || std::isnan(grid.z[ny * w + nx]))
          continue;
        const double drop = (double(zc) - double(grid.z[ny * w + nx])) / distance(d);
        if (drop > bestDrop)
        {
          bestDrop = drop;
          best = d;
        }
      }
      if (best < 0 && !mask.empty() && mask[std::size_t(c)] > 0)
      {
        double bestFall = 0;
        for (int d = 0; d < 8; ++d)
        {
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (nx < 0 || ny < 0 || nx >= w || ny >= h || grid.z[ny * w + nx] != zc)
            continue;
          const int64_t n = ny * w + nx;
          // A neighbour that drains (mask 0 at this elevation: a low edge) counts as mask 0.
          const double fall = double(mask[std::size_t(c)] - mask[std::size_t(n)]) / distance(d);
          if (fall > bestFall)
          {
            bestFall = fall;
            best = d;
          }
        }
      }
      if (best < 0 && detail::isEdgeCell(grid.z, w, h, x, y))
        for (int d = 0; d < 8 && best < 0; ++d)
        {
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (nx < 0 || ny < 0 || nx >= w || ny >= h || std::isnan(grid.z[ny * w + nx]))
            best = d;
        }
      out[std::size_t(c)] = best < 0 ? kNoFlow : uint8_t(best);
    }
  return out;
}

Accumulation accumulation(const Grid& grid, const std::vector<uint8_t>& directions)
{
  const int64_t w = grid.width, h = grid.height;
  Accumulation out;
  out.cells.assign(static_cast<std::size_t>(w * h), 0);
  out.area.assign(static_cast<std::size_t>(w * h), 0);
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (directions[std::size_t(c)] == kNoData)
      continue;
    const int64_t area = detail::cellArea(grid, c / w);
    int64_t at = c;
    for (int64_t steps = 0; steps <= w * h; ++steps)
    {
      out.cells[std::size_t(at)] += 1;
      out.area[std::size_t(at)] += area;
      const uint8_t d = directions[std::size_t(at)];
      if (d >= 8)
        break;
      const int64_t nx = at % w + kDx[d], ny = at / w + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h || directions[std::size_t(ny * w + nx)] == kNoData)
        break;
      at = ny * w + nx;
    }
  }
  return out;
}

}  // namespace gpugeo::dem::reference
