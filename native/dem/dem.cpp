#include "dem/dem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "core/errors.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem {


void validateGrid(const Grid& grid)
{
  if (grid.width < 1 || grid.height < 1)
    throw InvalidInput("the DEM has no cells");
  if (grid.width * grid.height > kMaxCells)
    throw InvalidInput("the DEM has " + std::to_string(grid.width * grid.height) + " cells, more than " +
                       std::to_string(kMaxCells));
  if (!grid.z || !grid.cellWidth || !grid.cellHeight)
    throw InvalidInput("the DEM arrays must not be null");
  for (int64_t y = 0; y < grid.height; ++y)
    if (!(grid.cellWidth[y] > 0) || !(grid.cellHeight[y] > 0) || !std::isfinite(grid.cellWidth[y]) ||
        !std::isfinite(grid.cellHeight[y]))
      throw InvalidInput("the cell size of row " + std::to_string(y) + " is not a positive number");
}

namespace detail {

namespace {
int64_t largestCellArea(const Grid& grid)
{
  int64_t most = 0;
  for (int64_t y = 0; y < grid.height; ++y)
    most = std::max(most, cellArea(grid, y));
  return most;
}
}  // namespace

bool upstreamAreaCanOverflow(const Grid& grid)
{
  const int64_t largest = largestCellArea(grid);
  return largest > 0 && grid.width * grid.height > std::numeric_limits<int64_t>::max() / largest;
}

void checkUpstreamArea(const Grid& grid, int64_t mostCells)
{
  const int64_t largest = largestCellArea(grid);
  if (largest > 0 && mostCells > std::numeric_limits<int64_t>::max() / largest)
  {
    char size[32];
    std::snprintf(size, sizeof size, "%.6g", double(largest) * 1e-6);
    throw InvalidInput("the largest catchment has " + std::to_string(mostCells) + " cells of up to " + size +
                       " m² each: its area could pass the 9.2 million km² that exact (fixed-point) upstream areas "
                       "hold; clip the DEM to the basins of interest");
  }
}

}  // namespace detail

std::vector<float> fillDepressions(Backend backend, const Grid& grid, int threads, const RunControl& control,
                                   StageTimes* times)
{
  validateGrid(grid);
  StageTimes local;
  ScopedStage stage(times ? *times : local, "fill");
  if (backend == Backend::Gpu)
    return detail::fillCuda(grid, control);
  return detail::fillCpu(grid, threads, control);
}

std::vector<int32_t> flatMask(Backend backend, const Grid& grid, int threads, const RunControl& control,
                              StageTimes* times, FlatGradient gradient)
{
  validateGrid(grid);
  StageTimes local;
  ScopedStage stage(times ? *times : local, "flats");
  if (backend == Backend::Gpu)
    return detail::flatMaskCuda(grid, gradient == FlatGradient::TowardsOutlet, control);
  return detail::flatMaskCpu(grid, gradient == FlatGradient::TowardsOutlet, threads, control);
}

std::vector<uint8_t> flowDirections(Backend backend, const Grid& grid, bool resolveFlats, int threads,
                                    const RunControl& control, StageTimes* times)
{
  validateGrid(grid);
  StageTimes local;
  if (backend == Backend::Gpu)
  {
    ScopedStage stage(times ? *times : local, "flats and directions");
    return detail::directionsCuda(grid, resolveFlats, control);
  }
  std::vector<int32_t> mask;
  if (resolveFlats)
    mask = flatMask(backend, grid, threads, control, times);
  ScopedStage stage(times ? *times : local, "directions");
  return detail::directionsCpu(grid, resolveFlats ? &mask : nullptr, threads, control);
}

Accumulation flowAccumulation(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions, int threads,
                              const RunControl& control, StageTimes* times)
{
  validateGrid(grid);
  if (int64_t(directions.size()) != grid.width * grid.height)
    throw InvalidInput("the flow directions do not match the DEM's size");
  StageTimes local;
  ScopedStage stage(times ? *times : local, "accumulation");
  Accumulation out = backend == Backend::Gpu ? detail::accumulationCuda(grid, directions, control)
                                             : detail::accumulationCpu(grid, directions, threads, control);
  if (detail::upstreamAreaCanOverflow(grid))
    detail::checkUpstreamArea(grid, out.cells.empty() ? 0 : *std::max_element(out.cells.begin(), out.cells.end()));
  return out;
}

float raiseBySteps(float x, int64_t steps)
{
  if (steps <= 0 || std::isnan(x))
    return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if (bits & 0x80000000u)  // negative (or -0): towards zero first
  {
    const int64_t magnitude = bits & 0x7fffffffu;
    if (steps < magnitude)
    {
      bits = 0x80000000u | uint32_t(magnitude - steps);
      std::memcpy(&x, &bits, sizeof x);
      return x;
    }
    steps -= magnitude;
    bits = 0;  // +0
  }
  const int64_t largest = 0x7f7fffff;  // the largest finite float
  bits = uint32_t(std::min<int64_t>(largest, int64_t(bits) + steps));
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

RaisedFlats raiseFlats(const Grid& grid, const std::vector<int32_t>& mask)
{
  validateGrid(grid);
  const int64_t w = grid.width, h = grid.height;
  if (int64_t(mask.size()) != w * h)
    throw InvalidInput("the flat mask does not match the DEM's size");
  RaisedFlats out;
  out.z.assign(grid.z, grid.z + w * h);
  for (int64_t c = 0; c < w * h; ++c)
    if (mask[std::size_t(c)] > 0)
    {
      out.z[std::size_t(c)] = raiseBySteps(grid.z[c], mask[std::size_t(c)]);
      ++out.raised;
    }
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (mask[std::size_t(c)] <= 0)
      continue;
    const int64_t x = c % w, y = c / w;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = x + kDx[d], ny = y + kDy[d];
      if (nx < 0 || ny < 0 || nx >= w || ny >= h)
        continue;
      const int64_t n = ny * w + nx;
      if (grid.z[n] > grid.z[c] && out.z[std::size_t(c)] >= out.z[std::size_t(n)])
      {
        ++out.passedNeighbour;
        break;
      }
    }
  }
  return out;
}

}  // namespace gpugeo::dem
