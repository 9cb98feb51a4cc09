// Every CUDA call is checked: a failure becomes a C++ exception the processing layer reports,
// never a crash or a silent wrong result. Out-of-memory gets its own type so callers can split
// the work or fall back to the CPU.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "errors.h"

namespace gpugeo::cuda {

[[noreturn]] inline void throwError(cudaError_t status, const char* what, const char* file, int line)
{
  cudaGetLastError();  // clear a non-sticky error so that later calls do not report it again
  const std::string message = std::string(what) + " failed: " + cudaGetErrorString(status) + " (" + file + ":" +
                              std::to_string(line) + ")";
  if (status == cudaErrorMemoryAllocation)
    throw DeviceOutOfMemory(message);
  throw DeviceError(message);
}

}  // namespace gpugeo::cuda

#define GPUGEO_CUDA_CHECK(call)                                                      \
  do                                                                                 \
  {                                                                                  \
    const cudaError_t gpugeoStatus_ = (call);                                        \
    if (gpugeoStatus_ != cudaSuccess)                                                \
      ::gpugeo::cuda::throwError(gpugeoStatus_, #call, __FILE__, __LINE__);          \
  } while (0)

// After a kernel launch: catches bad launch configurations at once.
#define GPUGEO_CUDA_CHECK_LAUNCH() GPUGEO_CUDA_CHECK(cudaGetLastError())
