#include "backend.h"

#include <fstream>
#include <string>

#include "errors.h"
#include "parallel.h"

namespace gpugeo {

std::string cpuDescription(int threads)
{
  std::string model;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
  {
    if (line.rfind("model name", 0) == 0)
    {
      const auto colon = line.find(':');
      if (colon != std::string::npos)
        model = line.substr(colon + 2);
      break;
    }
  }
  if (model.empty())
    model = "CPU";
  if (threads <= 0)
    threads = defaultThreadCount();
  return model + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

BackendChoice resolveBackend(Backend requested, int cpuThreads)
{
  BackendChoice choice;
  choice.requested = requested;
  if (requested != Backend::Cpu)
  {
    const GpuInfo& gpu = probeGpu();
    if (gpu.usable)
    {
      choice.backend = Backend::Gpu;
      choice.deviceName = gpu.name;
      return choice;
    }
    if (requested == Backend::Gpu)
      throw DeviceUnavailable("The GPU backend was requested (DEVICE=GPU) but no GPU can be used: " + gpu.reason +
                              ". Choose DEVICE=Auto or CPU to run on the processor.");
    choice.note = "no usable GPU (" + gpu.reason + "), running on the CPU";
  }
  choice.backend = Backend::Cpu;
  choice.deviceName = cpuDescription(cpuThreads);
  return choice;
}

}  // namespace gpugeo
