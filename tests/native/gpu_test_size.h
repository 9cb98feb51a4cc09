// The sizes of the GPU tests' large inputs. Under compute-sanitizer (tests/gpu_sanitizers.sh sets
// GPUGEO_GPU_TESTS_SMALL=1) every kernel still runs, on inputs small enough for tools that slow the
// kernels down a hundredfold and more: sides a third, counts a tenth.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace gpugeo::testing {

inline bool gpuTestsSmall()
{
  static const bool small = [] {
    const char* value = std::getenv("GPUGEO_GPU_TESTS_SMALL");
    return value && *value && *value != '0';
  }();
  return small;
}

// A side of a grid or mesh (at least 40 in the small mode, so that inputs still span several tiles).
inline int64_t gpuSide(int64_t side)
{
  return gpuTestsSmall() ? std::max<int64_t>(std::min<int64_t>(side, 40), side / 3) : side;
}

// A count of points or sites.
inline int64_t gpuCount(int64_t count)
{
  return gpuTestsSmall() ? std::max<int64_t>(std::min<int64_t>(count, 100), count / 10) : count;
}

}  // namespace gpugeo::testing
