// Which GPU each rank of an MPI job takes: the workers on a host take its GPUs in turn (the host's
// first worker GPU 0, the next GPU 1, ...), so that a host with 8 GPUs runs 8 workers; rank 0 (which
// processes no tile) and the workers beyond the GPUs take none and run on their cores. Done through
// CUDA_VISIBLE_DEVICES before CUDA starts; a list already there (a batch system's) is taken as the
// host's GPUs.
#pragma once

#include <string>

namespace gpugeo::cli {

// `localRank`: the rank's place among the job's ranks on its host; `hostHoldsRankZero`: whether rank 0
// is one of them.
void mapGpu(int rank, int localRank, bool hostHoldsRankZero);

// The host's GPUs as CUDA_VISIBLE_DEVICES would list them: its value where set, else 0 to n - 1 for
// the n GPUs the NVIDIA driver lists (/proc/driver/nvidia/gpus), none without the driver.
std::string hostGpus();

}  // namespace gpugeo::cli
