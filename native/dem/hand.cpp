#include "dem/hand.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.h"
#include "dem/detail/down_paths.h"

namespace gpugeo::dem {

namespace detail {

double pathUnit(const double* cellWidth, const double* cellHeight, int64_t rows, int64_t cells)
{
  double longest = 0;
  for (int64_t y = 0; y < rows; ++y)
    longest = std::max(longest, std::sqrt(cellWidth[y] * cellWidth[y] + cellHeight[y] * cellHeight[y]));
  // The unit u = 2^e with cells · (longest / u + 1) < 2⁶²: e from the bound, rounded up.
  const double most = std::ldexp(1.0, 62) / double(std::max<int64_t>(1, cells)) - 1.0;
  int e = int(std::ceil(std::log2(longest / most)));
  while (double(cells) * (std::ldexp(longest, -e) + 1.0) >= std::ldexp(1.0, 62))
    ++e;
  return std::ldexp(1.0, e);
}

std::vector<int64_t> rowSteps(const double* cellWidth, const double* cellHeight, int64_t rows, double unit)
{
  std::vector<int64_t> steps(std::size_t(rows * 3));
  for (int64_t y = 0; y < rows; ++y)
  {
    const double w = cellWidth[y], h = cellHeight[y];
    steps[std::size_t(3 * y)] = std::llround(w / unit);
    steps[std::size_t(3 * y + 1)] = std::llround(h / unit);
    steps[std::size_t(3 * y + 2)] = std::llround(std::sqrt(w * w + h * h) / unit);
  }
  return steps;
}

void resolvePathsCpu(const uint8_t* directions, int64_t width, int64_t height, const int64_t* steps, int64_t* end,
                     int64_t* length, const RunControl& control)
{
  constexpr int64_t kOnPath = -3;
  const int64_t n = width * height;
  std::vector<int64_t> path;
  for (int64_t start = 0; start < n; ++start)
  {
    if (end[start] != kPathUnknown)
      continue;
    if ((start & 0xfffff) == 0 && control.isCanceled())
      throw Canceled();
    // Down the path to a cell whose end is known (or a terminal); the cells passed are marked as on
    // the path, so that a loop ends where it meets itself.
    int64_t found = kPathNone, total = 0;
    for (int64_t c = start;;)
    {
      const int64_t known = end[c];
      if (known >= 0)
      {
        found = known;
        total = length[c];
        break;
      }
      if (known != kPathUnknown)  // none, or a loop
        break;
      const uint8_t d = directions[c];
      if (d >= 8)
        break;
      end[c] = kOnPath;
      path.push_back(c);
      const int64_t x = c % width + kDx[d], y = c / width + kDy[d];
      if (x < 0 || y < 0 || x >= width || y >= height)
        break;
      c = y * width + x;
    }
    if (directions[start] >= 8 && end[start] == kPathUnknown)
      end[start] = kPathNone;
    // Up the path from its end: each cell's length is its step plus its successor's.
    for (auto p = path.rbegin(); p != path.rend(); ++p)
    {
      const int64_t c = *p;
      end[c] = found;
      if (found >= 0)
      {
        total += stepUnits(steps + 3 * (c / width), directions[c]);
        length[c] = total;
      }
    }
    path.clear();
  }
}

}  // namespace detail

DrainageHeights heightAboveDrainage(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions,
                                    const std::vector<uint8_t>& streams, const RunControl& control)
{
  validateGrid(grid);
  const int64_t w = grid.width, h = grid.height, n = w * h;
  if (int64_t(directions.size()) != n || int64_t(streams.size()) != n)
    throw InvalidInput("height above drainage: the directions or the streams do not fill the grid");
  const double unit = detail::pathUnit(grid.cellWidth, grid.cellHeight, h, n);
  const std::vector<int64_t> steps = detail::rowSteps(grid.cellWidth, grid.cellHeight, h, unit);

  DrainageHeights out;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (backend == Backend::Gpu)
  {
    out.height.assign(std::size_t(n), nan);
    out.distance.assign(std::size_t(n), nan);
    const detail::DrainageCounts counts = detail::drainageHeightsCuda(
      grid.z, directions.data(), streams.data(), w, h, steps.data(), unit, out.height.data(), out.distance.data(),
      control);
    out.streamCells = counts.streamCells;
    out.drained = counts.drained;
    out.undrained = counts.undrained;
    return out;
  }

  // Stream cells end their own paths; invalid cells reach nothing (the walks stop at them before
  // reading their directions).
  const auto valid = [&](int64_t c) { return std::isfinite(grid.z[c]) && directions[std::size_t(c)] != kNoData; };
  std::vector<int64_t> end(std::size_t(n), detail::kPathUnknown), length(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
  {
    if (!valid(c))
      end[std::size_t(c)] = detail::kPathNone;
    else if (streams[std::size_t(c)] != 0)
    {
      end[std::size_t(c)] = c;
      ++out.streamCells;
    }
  }
  detail::resolvePathsCpu(directions.data(), w, h, steps.data(), end.data(), length.data(), control);

  out.height.assign(std::size_t(n), nan);
  out.distance.assign(std::size_t(n), nan);
  for (int64_t c = 0; c < n; ++c)
  {
    const int64_t e = end[std::size_t(c)];
    if (e >= 0)
    {
      out.height[std::size_t(c)] = float(double(grid.z[c]) - double(grid.z[e]));
      out.distance[std::size_t(c)] = float(double(length[std::size_t(c)]) * unit);
      ++out.drained;
    }
    else if (valid(c))
      ++out.undrained;
  }
  return out;
}

}  // namespace gpugeo::dem
