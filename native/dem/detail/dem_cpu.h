// The CPU backend of the DEM tools (dem_cpu.cpp, dem_cpu_flow.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "dem/dem.h"

namespace gpugeo::dem::detail {

std::vector<float> fillCpu(const Grid& grid, int threads, const RunControl& control);
std::vector<int32_t> flatMaskCpu(const Grid& grid, bool towardsOnly, int threads, const RunControl& control);
std::vector<uint8_t> directionsCpu(const Grid& grid, const std::vector<int32_t>* mask, int threads,
                                   const RunControl& control);
// Sums on one thread; `threads` for the per-cell set-up.
Accumulation accumulationCpu(const Grid& grid, const std::vector<uint8_t>& directions, int threads,
                             const RunControl& control);

}  // namespace gpugeo::dem::detail
