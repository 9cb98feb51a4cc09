// The GPU's breaching (breach_cuda.cu; dem_nocuda.cpp where there is no CUDA).
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/breach.h"
#include "dem/dem.h"

namespace gpugeo::dem::detail {

struct BreachOnDevice
{
  std::vector<float> z;  // breach.h's breached DEM
  BreachCounts counts;
};

// breach.h's breachDepressions on the device, every step; the searches that outgrow the device's
// windows on the host's `threads`. The caller checks the grid and the limits.
BreachOnDevice breachCuda(const Grid& grid, const BreachLimits& limits, int threads, const RunControl& control,
                          StageTimes& times);

}  // namespace gpugeo::dem::detail
