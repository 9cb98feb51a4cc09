// Voronoi cells of the unique sites clipped on the GPU: see detail/spherical_cells.h.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/exact_math.h"
#include "core/staged_copy.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/detail/spherical_cells.h"
#include "sphere/detail/spherical_cells_math.h"

namespace gpugeo::sphere::detail {
namespace {

using namespace cells;

constexpr int kThreads = 128;
// Site i's cell: degree[i] its edge count (or minus the failure bits) and its neighbours at
// neighbor[kCellEdges i ..].
__global__ void clipCellsKernel(const D3* site, const uint64_t* key, int32_t n, double radius0, int32_t* degree,
                                int32_t* neighbor)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i < n)
    degree[i] = clipCell(i, site, key, n, radius0, neighbor + int64_t(i) * kCellEdges);
}

__global__ void edgeCountKernel(const int32_t* degree, int32_t n, int64_t* count, int32_t* failures)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i > n)
    return;
  if (i == n)
  {
    count[i] = 0;
    return;
  }
  count[i] = degree[i] > 0 ? degree[i] : 0;
  if (degree[i] <= 0)
    atomicOr(failures, -degree[i] | (degree[i] == 0 ? kFailRounding : 0));
}

__global__ void compactKernel(const int32_t* degree, const int32_t* wide, const int64_t* start, int32_t n,
                              int32_t* neighbor)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i >= n)
    return;
  for (int k = 0; k < degree[i]; ++k)
    neighbor[start[i] + k] = wide[int64_t(i) * kCellEdges + k];
}

unsigned blocksFor(int64_t n)
{
  return unsigned((n + kThreads - 1) / kThreads);
}

}  // namespace

SphereCells deviceCells(const double* xyz, const uint64_t* key, int32_t n, const RunControl& control,
                        StageTimes& times)
{
  const GpuInfo& gpu = probeGpu();
  if (!gpu.usable)
    throw DeviceUnavailable(gpu.reason);
  GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
  const cudaStream_t stream = cudaStreamPerThread;
  const std::size_t size = std::size_t(n);
  cuda::DeviceBuffer<D3> sites(size);
  cuda::DeviceBuffer<uint64_t> keys(size);
  {
    ScopedStage stage(times, "cells upload");
    cuda::copyToDevice({cuda::Copy{sites.data(), xyz, size * sizeof(D3)},
                        cuda::Copy{keys.data(), key, size * sizeof(uint64_t)}});
  }
  if (control.isCanceled())
    throw Canceled();
  SphereCells cells;
  cuda::DeviceBuffer<int32_t> degree(size), wide(size * kCellEdges);
  cuda::DeviceBuffer<int64_t> start(size + 1), count(size + 1);
  cuda::DeviceBuffer<int32_t> failures(1);
  int32_t failed = 0;
  int64_t total = 0;
  {
    ScopedStage stage(times, "cells");
    const double radius0 = 2.0 * std::sqrt(24.0 / double(n));
    clipCellsKernel<<<blocksFor(n), kThreads, 0, stream>>>(sites.data(), keys.data(), n, radius0, degree.data(),
                                                           wide.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(failures.data(), 0, sizeof(int32_t), stream));
    edgeCountKernel<<<blocksFor(int64_t(n) + 1), kThreads, 0, stream>>>(degree.data(), n, count.data(),
                                                                         failures.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::size_t tempBytes = 0;
    GPUGEO_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, count.data(), start.data(), int64_t(n) + 1, stream));
    cuda::DeviceBuffer<unsigned char> temp(std::max<std::size_t>(tempBytes, 1));
    GPUGEO_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(temp.data(), tempBytes, count.data(), start.data(), int64_t(n) + 1, stream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&failed, failures.data(), sizeof(failed), cudaMemcpyDeviceToHost, stream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&total, start.data() + n, sizeof(total), cudaMemcpyDeviceToHost, stream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  if (failed)
  {
    cells.failure = cellFailureText(failed);
    return cells;
  }
  cuda::DeviceBuffer<int32_t> neighbor(std::size_t(std::max<int64_t>(total, 1)));
  compactKernel<<<blocksFor(n), kThreads, 0, stream>>>(degree.data(), wide.data(), start.data(), n, neighbor.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  cells.start.resize(size + 1);
  cells.neighbor.resize(std::size_t(total));
  {
    ScopedStage stage(times, "cells download");
    cuda::copyToHost({cuda::Copy{cells.start.data(), start.data(), (size + 1) * sizeof(int64_t)},
                      cuda::Copy{cells.neighbor.data(), neighbor.data(), std::size_t(total) * sizeof(int32_t)}});
  }
  cells.complete = true;
  return cells;
}

}  // namespace gpugeo::sphere::detail
