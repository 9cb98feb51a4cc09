// The CUDA backend of watersheds.h's labels: pointer jumping. Each cell starts with its successor (the
// cell its direction points to) or, at a terminal, itself with its label (an outlet's k + 1; 0 off the
// grid, on nodata, in a pit). Each round every unresolved cell takes its successor's label where the
// successor has one, else jumps to the successor's successor; the rounds read one copy and write the
// other. A path of length L resolves in about log₂ L rounds; a loop never resolves and is labelled 0
// after enough rounds for the longest possible path.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/detail/watershed_labels.h"
#include "dem/watersheds.h"

namespace gpugeo::dem::detail {

namespace {

template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;
constexpr int kThreads = 256;

unsigned blocksFor(int64_t n)
{
  return unsigned(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

// Successors and starting labels: -1 unresolved.
__global__ void startKernel(const uint8_t* directions, int64_t w, int64_t h, int32_t* label, int64_t* next)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  next[c] = c;
  if (label[c] >= 0)  // an outlet
    return;
  const uint8_t d = directions[c];
  if (d >= 8)
  {
    label[c] = 0;
    return;
  }
  const int64_t x = c % w + stepX(d), y = c / w + stepY(d);
  if (x < 0 || y < 0 || x >= w || y >= h)
  {
    label[c] = 0;
    return;
  }
  next[c] = y * w + x;
}

__global__ void jumpKernel(int64_t n, const int32_t* label, const int64_t* next, int32_t* labelOut, int64_t* nextOut,
                           unsigned long long* unresolved)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  int32_t l = label[c];
  int64_t s = next[c];
  if (l < 0)
  {
    const int32_t successor = label[s];
    if (successor >= 0)
      l = successor;
    else
    {
      s = next[s];
      atomicAdd(unresolved, 1ull);
    }
  }
  labelOut[c] = l;
  nextOut[c] = s;
}

__global__ void seedKernel(const int64_t* cells, const int32_t* labels, int64_t count, int32_t* label)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    label[cells[i]] = labels[i];
}

__global__ void loopsKernel(int64_t n, int32_t* label)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && label[c] < 0)
    label[c] = 0;
}

}  // namespace

namespace {

// The rounds from label[0] (outlets and seeds set, -1 elsewhere) into `labels` on the host.
void jumpAndDownload(const DeviceBuffer<uint8_t>& dirs, int64_t width, int64_t height, DeviceBuffer<int32_t> (&label)[2],
                     int32_t* labels, const RunControl& control)
{
  const int64_t n = width * height;
  DeviceBuffer<int64_t> next[2];
  label[1].resize(std::size_t(n));
  next[0].resize(std::size_t(n));
  next[1].resize(std::size_t(n));
  DeviceBuffer<unsigned long long> unresolved(1);
  startKernel<<<blocksFor(n), kThreads>>>(dirs.data(), width, height, label[0].data(), next[0].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  // A path has fewer than n cells: after ceil(log2 n) + 1 rounds only loops are left.
  int rounds = 2;
  while ((int64_t(1) << (rounds - 2)) < n)
    ++rounds;
  int from = 0;
  for (int round = 0; round < rounds; ++round)
  {
    if (control.isCanceled())
      throw Canceled();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(unresolved.data(), 0, sizeof(unsigned long long)));
    jumpKernel<<<blocksFor(n), kThreads>>>(n, label[from].data(), next[from].data(), label[1 - from].data(),
                                           next[1 - from].data(), unresolved.data());
    GPUGEO_CUDA_CHECK(cudaGetLastError());
    from = 1 - from;
    if (cuda::readOne(unresolved.data()) == 0)
      break;
  }
  loopsKernel<<<blocksFor(n), kThreads>>>(n, label[from].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  cuda::copyToHost(labels, label[from].data(), std::size_t(n) * sizeof(int32_t));
}

}  // namespace

void labelWatershedsCuda(const uint8_t* directions, int64_t width, int64_t height, int32_t* labels,
                         const RunControl& control)
{
  const int64_t n = width * height;
  DeviceBuffer<uint8_t> dirs;
  cuda::upload(dirs, directions, std::size_t(n));
  DeviceBuffer<int32_t> label[2];
  cuda::upload(label[0], labels, std::size_t(n));
  jumpAndDownload(dirs, width, height, label, labels, control);
}

void labelWatershedsCuda(const uint8_t* directions, int64_t width, int64_t height,
                         const std::vector<int64_t>& seedCells, const std::vector<int32_t>& seedLabels,
                         int32_t* labels, const RunControl& control)
{
  const int64_t n = width * height;
  if (seedCells.size() != seedLabels.size())
    throw InvalidInput("watersheds: as many seed labels as seed cells");
  DeviceBuffer<uint8_t> dirs;
  cuda::upload(dirs, directions, std::size_t(n));
  DeviceBuffer<int32_t> label[2];
  label[0].resize(std::size_t(n));
  GPUGEO_CUDA_CHECK(cudaMemsetAsync(label[0].data(), 0xff, std::size_t(n) * sizeof(int32_t)));  // -1
  if (!seedCells.empty())
  {
    DeviceBuffer<int64_t> cells;
    DeviceBuffer<int32_t> values;
    cuda::upload(cells, seedCells.data(), seedCells.size());
    cuda::upload(values, seedLabels.data(), seedLabels.size());
    seedKernel<<<blocksFor(int64_t(seedCells.size())), kThreads>>>(cells.data(), values.data(),
                                                                  int64_t(seedCells.size()), label[0].data());
    GPUGEO_CUDA_CHECK(cudaGetLastError());
  }
  jumpAndDownload(dirs, width, height, label, labels, control);
}

}  // namespace gpugeo::dem::detail
