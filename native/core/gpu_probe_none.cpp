// The GPU probe of a build without CUDA.
#include "backend.h"

namespace gpugeo {

bool builtWithCuda()
{
  return false;
}

const GpuInfo& probeGpu()
{
  static const GpuInfo info = [] {
    GpuInfo none;
    none.reason = "this build of GPU Geoprocessing has no CUDA backend (it was compiled without nvcc)";
    return none;
  }();
  return info;
}

}  // namespace gpugeo
