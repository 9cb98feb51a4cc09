// The source paper's two kernels, for the benchmark table only: kernel 1 gives one thread to each
// (triangle, level) pair and writes that pair's segment into a fixed slot, compacted afterwards with
// a per-triangle start index and count; kernel 2 gives one thread to each triangle and cuts it,
// band after band, into band polygons (triangle, quadrilateral or pentagon), compacted the same way.
// Neither joins anything. Times are device times (CUDA events) with the mesh and field already on
// the device.
#pragma once

#include <cstdint>
#include <vector>

#include "mesh_field.h"

namespace gpugeo::bench {

struct PaperTimes
{
  double kernel1Ms = 0, kernel2Ms = 0;
  int64_t segments = 0, pieces = 0;
};

PaperTimes runPaperKernels(const GridMesh& mesh, const std::vector<double>& levels, int reps);

}  // namespace gpugeo::bench
