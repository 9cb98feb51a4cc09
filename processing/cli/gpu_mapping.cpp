#include "cli/gpu_mapping.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

namespace gpugeo::cli {

std::string hostGpus()
{
  if (const char* listed = std::getenv("CUDA_VISIBLE_DEVICES"))
    return listed;
  std::error_code error;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", error))
  {
    (void)entry;
    ++count;
  }
  std::string list;
  for (int g = 0; g < count; ++g)
    list += (g ? "," : "") + std::to_string(g);
  return list;
}

void mapGpu(int rank, int localRank, bool hostHoldsRankZero)
{
  std::vector<std::string> gpus;
  std::istringstream listed(hostGpus());
  for (std::string g; std::getline(listed, g, ',');)
    if (!g.empty())
      gpus.push_back(g);
  const int worker = localRank - (hostHoldsRankZero ? 1 : 0);
  const bool takes = rank != 0 && worker >= 0 && worker < int(gpus.size());
  setenv("CUDA_VISIBLE_DEVICES", takes ? gpus[std::size_t(worker)].c_str() : "", 1);
}

}  // namespace gpugeo::cli
