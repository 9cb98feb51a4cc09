// The CUDA backend of the DEM tools (dem_cuda.cu; dem_nocuda.cpp where there is no CUDA). Each call
// uploads its input and downloads its result.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "dem/dem.h"
#include "dem/travel_time.h"

namespace gpugeo::dem::detail {

std::vector<float> fillCuda(const Grid& grid, const RunControl& control);
std::vector<int32_t> flatMaskCuda(const Grid& grid, bool towardsOnly, const RunControl& control);
// With resolveFlats, the flat mask is made on the device too.
std::vector<uint8_t> directionsCuda(const Grid& grid, bool resolveFlats, const RunControl& control);
// Minutes and speeds (NaN outside the watershed); the counts are the caller's.
TravelTimes travelTimeCuda(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation,
                           int64_t outlet, const VelocityModel& model, const RunControl& control);
Accumulation accumulationCuda(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl& control);

}  // namespace gpugeo::dem::detail
