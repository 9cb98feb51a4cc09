// Backend choice, shared by every algorithm: the DEVICE parameter's Auto / CPU / GPU, what the
// machine offers, and the reason when the GPU cannot be used.
#pragma once

#include <cstddef>
#include <string>

namespace gpugeo {

// The order is the DEVICE parameter's option order: DEVICE=1 means CPU on the command line.
enum class Backend
{
  Auto = 0,
  Cpu = 1,
  Gpu = 2,
};

struct GpuInfo
{
  bool usable = false;
  std::string reason;  // why not usable, in words a user can act on
  int device = -1;
  std::string name;
  int computeMajor = 0;
  int computeMinor = 0;
  std::size_t totalMemory = 0;
  int multiprocessors = 0;
  int runtimeVersion = 0;
  int driverVersion = 0;
};

// True when this build holds the CUDA backend.
bool builtWithCuda();

// Looks for a usable CUDA device (the first one, or GPUGEO_CUDA_DEVICE). Never throws; the answer
// is worked out once per process.
const GpuInfo& probeGpu();

// A short description of the CPU backend: the processor model and the thread count.
std::string cpuDescription(int threads);

struct BackendChoice
{
  Backend requested = Backend::Auto;
  Backend backend = Backend::Cpu;  // Cpu or Gpu, never Auto
  std::string deviceName;
  std::string note;  // for the log: why Auto chose the CPU, if it did
};

// Auto: the GPU when usable, else the CPU with the reason in `note`. Gpu: throws DeviceUnavailable
// with the reason when there is none. Cpu: the CPU.
BackendChoice resolveBackend(Backend requested, int cpuThreads);

}  // namespace gpugeo
