// The GPU probe of a CUDA build. The CUDA runtime is linked statically, so this library loads on
// machines without the NVIDIA driver; the probe then reports why the GPU cannot be used.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "backend.h"

namespace gpugeo {

namespace {

// The oldest architecture the fat binary holds machine code for (CMAKE_CUDA_ARCHITECTURES).
constexpr int kMinimumComputeCapability = 75;

std::string versionText(int version)
{
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

GpuInfo probe()
{
  GpuInfo info;
  cudaRuntimeGetVersion(&info.runtimeVersion);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorInsufficientDriver)
  {
    cudaDriverGetVersion(&info.driverVersion);
    info.reason = info.driverVersion == 0
                    ? "no NVIDIA driver is installed"
                    : "the NVIDIA driver supports CUDA " + versionText(info.driverVersion) +
                        " but this build needs CUDA " + versionText(info.runtimeVersion) + "; update the driver";
    cudaGetLastError();
    return info;
  }
  if (status == cudaErrorNoDevice || (status == cudaSuccess && count == 0))
  {
    info.reason = "no CUDA-capable GPU was found";
    cudaGetLastError();
    return info;
  }
  if (status != cudaSuccess)
  {
    info.reason = std::string("the CUDA runtime could not start: ") + cudaGetErrorString(status);
    cudaGetLastError();
    return info;
  }
  cudaDriverGetVersion(&info.driverVersion);

  int device = 0;
  if (const char* env = std::getenv("GPUGEO_CUDA_DEVICE"))
    device = std::atoi(env);
  if (device < 0 || device >= count)
  {
    info.reason = "GPUGEO_CUDA_DEVICE=" + std::to_string(device) + " but only " + std::to_string(count) +
                  " CUDA device(s) exist";
    return info;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
  {
    info.reason = "the properties of CUDA device " + std::to_string(device) + " could not be read";
    cudaGetLastError();
    return info;
  }
  info.device = device;
  info.name = prop.name;
  info.computeMajor = prop.major;
  info.computeMinor = prop.minor;
  info.totalMemory = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  if (prop.major * 10 + prop.minor < kMinimumComputeCapability)
  {
    info.reason = info.name + " has compute capability " + std::to_string(prop.major) + "." +
                  std::to_string(prop.minor) + "; GPU Geoprocessing needs 7.5 (Turing) or newer";
    return info;
  }
  // Create the context now, so that a broken driver shows here rather than in the first kernel.
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess)
  {
    info.reason = std::string("CUDA device ") + std::to_string(device) +
                  " could not be initialised: " + cudaGetErrorString(cudaGetLastError());
    return info;
  }
  info.usable = true;
  return info;
}

}  // namespace

bool builtWithCuda()
{
  return true;
}

const GpuInfo& probeGpu()
{
  static const GpuInfo info = probe();
  return info;
}

}  // namespace gpugeo
