#include "dem/dem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "core/errors.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem {


void validateCellSizes(const double* cellWidth, const double* cellHeight, int64_t rows)
{
  for (int64_t y = 0; y < rows; ++y)
  {
    const double width = cellWidth[y], height = cellHeight[y];
    if (!(width >= kMinCellSize && width <= kMaxCellSize && height >= kMinCellSize && height <= kMaxCellSize))
    {
      char text[200];
      std::snprintf(text, sizeof text,
                    "the cells of row %lld are %.6g x %.6g m: cell sizes must lie between 1 mm and 1,000 km",
                    static_cast<long long>(y), width, height);
      throw InvalidInput(text);
    }
  }
}

void validateGrid(const Grid& grid)
{
  if (grid.width < 1 || grid.height < 1)
    throw InvalidInput("the DEM has no cells");
  if (grid.width * grid.height > kMaxCells)
    throw InvalidInput("the DEM has " + std::to_string(grid.width * grid.height) + " cells, more than " +
                       std::to_string(kMaxCells));
  if (!grid.z || !grid.cellWidth || !grid.cellHeight)
    throw InvalidInput("the DEM arrays must not be null");
  validateCellSizes(grid.cellWidth, grid.cellHeight, grid.height);
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
  return detail::floatStepsUp(x, steps);
}

namespace {

// Whether the valid cell (x, y), not an edge cell, has no neighbour strictly lower than itself in z.
bool hasNoLowerNeighbour(const float* z, int64_t w, int64_t x, int64_t y)
{
  const float v = z[y * w + x];
  for (int d = 0; d < 8; ++d)
    if (z[(y + kDy[d]) * w + x + kDx[d]] < v)
      return false;
  return true;
}

// Raises, in z, every inner cell that drained in the grid (a lower neighbour, or a flat mask) and
// has no lower neighbour left to one float32 step above its lowest neighbour, and again whoever that
// leaves without one, lowest first. Any order reaches the same DEM (the lowest in which those cells
// have a lower neighbour: the set of such DEMs is closed under the cell-wise minimum, and each raise
// stays at or below it), so the heap only saves repeated raises. Pits of a DEM not filled stay as
// they are. `seeds` marks the cells whose neighbourhood changed. Returns how many cells were raised.
int64_t drainOvertakenCells(const Grid& grid, const std::vector<int32_t>& mask, float* z,
                            const std::vector<uint8_t>& seeds)
{
  const int64_t w = grid.width, h = grid.height;
  const auto undrained = [&](int64_t c) {
    const int64_t x = c % w, y = c / w;
    return !detail::isNoData(z[c]) && !detail::isEdgeCell(grid.z, w, h, x, y) && hasNoLowerNeighbour(z, w, x, y) &&
           (mask[std::size_t(c)] > 0 || !hasNoLowerNeighbour(grid.z, w, x, y));
  };
  using Entry = std::pair<float, int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> open;
  for (int64_t c = 0; c < w * h; ++c)
    if (seeds[std::size_t(c)] && undrained(c))
      open.emplace(z[c], c);
  std::vector<int64_t> raisedCells;
  while (!open.empty())
  {
    const auto [level, c] = open.top();
    open.pop();
    if (level != z[c] || !undrained(c))
      continue;
    const int64_t x = c % w, y = c / w;
    float lowest = std::numeric_limits<float>::infinity();
    for (int d = 0; d < 8; ++d)
      lowest = std::min(lowest, z[(y + kDy[d]) * w + x + kDx[d]]);
    const float raisedTo = raiseBySteps(lowest, 1);
    if (!(raisedTo > z[c]))
      continue;  // at the largest finite float: nothing above to raise it to
    z[c] = raisedTo;
    raisedCells.push_back(c);
    for (int d = 0; d < 8; ++d)
    {
      const int64_t n = (y + kDy[d]) * w + x + kDx[d];
      if (z[n] <= raisedTo && undrained(n))
        open.emplace(z[n], n);
    }
  }
  std::sort(raisedCells.begin(), raisedCells.end());
  return int64_t(std::unique(raisedCells.begin(), raisedCells.end()) - raisedCells.begin());
}

}  // namespace

RaisedFlats raiseFlats(const Grid& grid, const std::vector<int32_t>& mask)
{
  validateGrid(grid);
  const int64_t w = grid.width, h = grid.height;
  if (int64_t(mask.size()) != w * h)
    throw InvalidInput("the flat mask does not match the DEM's size");
  RaisedFlats out;
  out.z.assign(grid.z, grid.z + w * h);
  std::vector<uint8_t> changedAround(std::size_t(w * h), 0);
  for (int64_t c = 0; c < w * h; ++c)
    if (mask[std::size_t(c)] > 0 && !detail::isNoData(grid.z[c]))
    {
      out.z[std::size_t(c)] = raiseBySteps(grid.z[c], mask[std::size_t(c)]);
      ++out.raised;
      const int64_t x = c % w, y = c / w;
      for (int64_t ny = std::max<int64_t>(0, y - 1); ny <= std::min(h - 1, y + 1); ++ny)
        for (int64_t nx = std::max<int64_t>(0, x - 1); nx <= std::min(w - 1, x + 1); ++nx)
          changedAround[std::size_t(ny * w + nx)] = 1;
    }
  out.raisedInTurn = drainOvertakenCells(grid, mask, out.z.data(), changedAround);
  return out;
}

RaisedFlats fillAndRaiseFlats(Backend backend, const Grid& grid, FlatGradient gradient, int threads,
                              const RunControl& control, StageTimes* times)
{
  validateGrid(grid);
  StageTimes local;
  StageTimes& timed = times ? *times : local;
  if (backend == Backend::Gpu)
  {
    ScopedStage stage(timed, "fill, flats and raise");
    return detail::fillAndRaiseCuda(grid, gradient == FlatGradient::TowardsOutlet, control);
  }
  const std::vector<float> filled = fillDepressions(backend, grid, threads, control, &timed);
  const Grid filledGrid{filled.data(), grid.width, grid.height, grid.cellWidth, grid.cellHeight};
  const std::vector<int32_t> mask = flatMask(backend, filledGrid, threads, control, &timed, gradient);
  ScopedStage stage(timed, "raise flats");
  return raiseFlats(filledGrid, mask);
}

}  // namespace gpugeo::dem
