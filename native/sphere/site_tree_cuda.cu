// The spherical site tree on the device: Morton keys, a stable radix sort by (key, x, y, z bits)
// in four passes from the least significant, exact duplicates dropped, then the boxes level by level.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <memory>

#include "core/cuda_check.h"
#include "core/errors.h"
#include "core/backend.h"
#include "core/staged_copy.h"
#include "sphere/detail/site_tree_cuda.h"

namespace gpugeo::sphere::detail {

namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n)
{
  return unsigned((n + kThreads - 1) / kThreads);
}

__global__ void identityKernel(int32_t* order, int32_t n)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i < n)
    order[i] = i;
}

// key[i] = the sort key `part` (0: Morton, 1..3: x, y, z bits) of site order[i].
__global__ void keyKernel(const Vec3* vectors, const int32_t* order, int32_t n, int part, uint64_t* key)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i >= n)
    return;
  const Vec3 v = vectors[order[i]];
  key[i] = part == 0 ? mortonKey(v) : coordinateBits(part == 1 ? v.x : part == 2 ? v.y : v.z);
}

// keep[i]: the first of a run of equal sites in the sorted order.
__global__ void firstOfRunKernel(const Vec3* vectors, const int32_t* order, const uint64_t* morton, int32_t n,
                                 uint8_t* keep)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i >= n)
    return;
  bool first = i == 0 || morton[i] != morton[i - 1];
  if (!first)
  {
    const Vec3 a = vectors[order[i]], b = vectors[order[i - 1]];
    first = coordinateBits(a.x) != coordinateBits(b.x) || coordinateBits(a.y) != coordinateBits(b.y) ||
            coordinateBits(a.z) != coordinateBits(b.z);
  }
  keep[i] = first ? 1 : 0;
}

__global__ void gatherSitesKernel(const Vec3* vectors, const int32_t* original, int32_t n, Vec3* sites)
{
  const int32_t i = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (i < n)
    sites[i] = vectors[original[i]];
}

__global__ void leafBoxesKernel(const Vec3* sites, int32_t count, int32_t leaves, Box* boxes)
{
  const int32_t leaf = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (leaf >= leaves)
    return;
  Box box = emptyBox();
  const int32_t end = min(count, (leaf + 1) * kLeafSites);
  for (int32_t i = leaf * kLeafSites; i < end; ++i)
    growBox(box, sites[i]);
  boxes[leaf] = box;
}

__global__ void parentBoxesKernel(Box* boxes, int32_t below, int32_t belowSize, int32_t at, int32_t parents)
{
  const int32_t p = int32_t(blockIdx.x) * kThreads + int32_t(threadIdx.x);
  if (p >= parents)
    return;
  Box box = emptyBox();
  const int32_t end = min(belowSize, (p + 1) * kFanout);
  for (int32_t c = p * kFanout; c < end; ++c)
    growBox(box, boxes[below + c]);
  boxes[at + p] = box;
}

}  // namespace

void buildDeviceSiteTree(const SiteSet& sites, int threads, const RunControl& control, PreparedSites& prep,
                         DeviceSiteTree& tree, StageTimes& times)
{
  std::unique_ptr<Vec3[]> vectors;
  {
    ScopedStage stage(times, "prepare");
    if (sites.count >= 1 && sites.count <= kMaxSites)
      vectors.reset(new Vec3[std::size_t(sites.count)]);  // not cleared: the threads touch it first
    siteVectorsInto(sites, vectors.get(), threads, control);
  }
  const int32_t n = int32_t(sites.count);
  const cudaStream_t stream = cudaStreamPerThread;
  {
    ScopedStage stage(times, "upload");
    tree.vectors.resize(std::size_t(n));
    cuda::copyToDevice(tree.vectors.data(), vectors.get(), std::size_t(n) * sizeof(Vec3));
  }
  vectors.reset();
  if (control.isCanceled())
    throw Canceled();
  ScopedStage stage(times, "tree");
  // Least significant part first: each pass is stable, so the order ends by (Morton, x, y, z, index).
  const std::size_t size = static_cast<std::size_t>(n);
  cuda::DeviceBuffer<uint64_t> key(size), keyOut(size);
  cuda::DeviceBuffer<int32_t> order(size), orderOut(size);
  identityKernel<<<blocksFor(n), kThreads, 0, stream>>>(order.data(), n);
  GPUGEO_CUDA_CHECK_LAUNCH();
  std::size_t tempBytes = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, key.data(), keyOut.data(), order.data(),
                                                    orderOut.data(), n, 0, 64, stream));
  cuda::DeviceBuffer<unsigned char> temp(std::max<std::size_t>(tempBytes, 1));
  for (int part = 3; part >= 0; --part)
  {
    keyKernel<<<blocksFor(n), kThreads, 0, stream>>>(tree.vectors.data(), order.data(), n, part, key.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), tempBytes, key.data(), keyOut.data(), order.data(),
                                                      orderOut.data(), n, 0, part == 0 ? 63 : 64, stream));
    std::swap(order, orderOut);
  }
  // keyOut holds the sorted Morton keys, order the sorted sites.
  cuda::DeviceBuffer<uint8_t> keep(size);
  firstOfRunKernel<<<blocksFor(n), kThreads, 0, stream>>>(tree.vectors.data(), order.data(), keyOut.data(), n,
                                                          keep.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  tree.original.resize(size);
  cuda::DeviceBuffer<int32_t> selected(1);
  std::size_t selectBytes = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, selectBytes, order.data(), keep.data(), tree.original.data(),
                                               selected.data(), n, stream));
  temp.resize(std::max(tempBytes, selectBytes));
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), selectBytes, order.data(), keep.data(),
                                               tree.original.data(), selected.data(), n, stream));
  int32_t count = 0;
  GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&count, selected.data(), sizeof(count), cudaMemcpyDeviceToHost, stream));
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(stream));

  prep.shapeTree(count);
  tree.sites.resize(std::size_t(count));
  gatherSitesKernel<<<blocksFor(count), kThreads, 0, stream>>>(tree.vectors.data(), tree.original.data(), count,
                                                               tree.sites.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  tree.boxes.resize(std::size_t(prep.boxCount));
  leafBoxesKernel<<<blocksFor(prep.levelSize[0]), kThreads, 0, stream>>>(tree.sites.data(), count, prep.levelSize[0],
                                                                         tree.boxes.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  for (int l = 1; l < prep.levels; ++l)
  {
    parentBoxesKernel<<<blocksFor(prep.levelSize[l]), kThreads, 0, stream>>>(
      tree.boxes.data(), prep.levelOffset[l - 1], prep.levelSize[l - 1], prep.levelOffset[l], prep.levelSize[l]);
    GPUGEO_CUDA_CHECK_LAUNCH();
  }
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

PreparedSites prepareSitesOnDevice(const SiteSet& sites, int threads, const RunControl& control)
{
  const GpuInfo& gpu = probeGpu();
  if (!gpu.usable)
    throw DeviceUnavailable(gpu.reason);
  GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
  PreparedSites prep;
  DeviceSiteTree tree;
  StageTimes times;
  buildDeviceSiteTree(sites, threads, control, prep, tree, times);
  prep.vectors = siteVectors(sites, threads, control);
  prep.treeSites.resize(std::size_t(prep.treeCount));
  prep.treeOriginal.resize(std::size_t(prep.treeCount));
  prep.boxes.resize(std::size_t(prep.boxCount));
  cuda::copyToHost(prep.treeSites.data(), tree.sites.data(), prep.treeSites.size() * sizeof(Vec3));
  cuda::copyToHost(prep.treeOriginal.data(), tree.original.data(), prep.treeOriginal.size() * sizeof(int32_t));
  cuda::copyToHost(prep.boxes.data(), tree.boxes.data(), prep.boxes.size() * sizeof(Box));
  return prep;
}

}  // namespace gpugeo::sphere::detail
