#include "dem/dem.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_cuda.h"

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
                              StageTimes* times)
{
  validateGrid(grid);
  StageTimes local;
  ScopedStage stage(times ? *times : local, "flats");
  if (backend == Backend::Gpu)
    return detail::flatMaskCuda(grid, control);
  return detail::flatMaskCpu(grid, threads, control);
}

std::vector<uint8_t> flowDirections(Backend backend, const Grid& grid, bool resolveFlats, int threads,
                                    const RunControl& control, StageTimes* times)
{
  validateGrid(grid);
  std::vector<int32_t> mask;
  if (resolveFlats)
    mask = flatMask(backend, grid, threads, control, times);
  StageTimes local;
  ScopedStage stage(times ? *times : local, "directions");
  if (backend == Backend::Gpu)
    return detail::directionsCuda(grid, resolveFlats ? &mask : nullptr, control);
  return detail::directionsCpu(grid, resolveFlats ? &mask : nullptr, threads, control);
}

Accumulation flowAccumulation(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions, int,
                              const RunControl& control, StageTimes* times)
{
  validateGrid(grid);
  if (int64_t(directions.size()) != grid.width * grid.height)
    throw InvalidInput("the flow directions do not match the DEM's size");
  StageTimes local;
  ScopedStage stage(times ? *times : local, "accumulation");
  if (backend == Backend::Gpu)
    return detail::accumulationCuda(grid, directions, control);
  return detail::accumulationCpu(grid, directions, control);
}

}  // namespace gpugeo::dem
