// The CUDA backend of region tracing (regions.h). One thread a cell finds its boundary sides; after
// a CUB scan of their counts every boundary edge has its place, and its successor comes from the
// edge rule alone (detail/region_math.h), so no search or sort links the rings. The rings are then
// ranked by pointer jumping (core/list_ranking.cuh): once to find each ring's lowest turning edge,
// once more, cut there, for the turning edges' places; ordered by (set, lowest edge) with a CUB sort,
// their corners are scattered into place. The CPU walks the same rings in the same order.
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/list_ranking.cuh"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/region_math.h"

namespace gpugeo::dem::detail {

namespace {

template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;
constexpr uint64_t kPoolKeep = uint64_t(1) << 30;
constexpr int kThreads = 256;

unsigned blocksFor(int64_t n)
{
  return unsigned(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

__global__ void sidesKernel(const int32_t* labels, int64_t w, int64_t h, int32_t count, uint8_t* sides, int64_t* edges)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c > w * h)
    return;
  if (c == w * h)
  {
    edges[c] = 0;
    return;
  }
  const unsigned s = boundarySides(labels, w, h, c % w, c / w, count);
  sides[c] = uint8_t(s);
  edges[c] = __popc(s);
}

__device__ int32_t edgeIndex(const uint8_t* sides, const int64_t* offset, int64_t c, int side)
{
  return int32_t(offset[c] + __popc(sides[c] & ((1u << side) - 1)));
}

__global__ void edgeKernel(const int32_t* labels, int64_t w, int64_t h, const uint8_t* sides, const int64_t* offset,
                           int32_t* next, uint8_t* turns, int32_t* set, int64_t* startKey)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !sides[c])
    return;
  const int64_t x = c % w, y = c / w;
  for (int s = 0; s < 4; ++s)
  {
    if (!(sides[c] & (1u << s)))
      continue;
    const int32_t i = edgeIndex(sides, offset, c, s);
    int64_t nx, ny;
    int ns;
    nextEdge(labels, w, h, x, y, s, nx, ny, ns);
    const int32_t j = edgeIndex(sides, offset, ny * w + nx, ns);
    next[i] = j;
    if (ns != s)
      turns[j] = 1;  // each edge has one predecessor: no other thread writes here
    set[i] = labels[c];
    startKey[i] = edgeStartRow(y, s) * (w + 1) + edgeStartColumn(x, s);
  }
}

__global__ void turnRankKernel(const uint8_t* turns, int64_t n, int32_t* rankOf)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    rankOf[i] = turns[i] ? int32_t(i) : INT_MAX;
}

__global__ void headKernel(int64_t n, const int32_t* jump1, const int32_t* low1, const int32_t* set, uint8_t* isHead,
                           int64_t* ringKey, int* broken)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n)
    return;
  if (jump1[d] < 0)
    *broken = 1;
  const bool head = low1[d] == d;
  isHead[d] = head;
  ringKey[d] = head ? int64_t(set[d]) * n + d : 0;
}

__global__ void cornerCountKernel(const int32_t* headOfSlot, int64_t rings, const int32_t* dist2, int64_t* corners)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rings)
    corners[i] = int64_t(dist2[headOfSlot[i]]) + 1;
  else if (i == rings)
    corners[i] = 0;
}

__global__ void cornerScatterKernel(int64_t n, const uint8_t* turns, const int32_t* low1, const int32_t* dist2,
                                    const int32_t* slotOfHead, const int64_t* cornerOffset, const int64_t* startKey,
                                    int64_t* keyOut)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n || !turns[d])
    return;
  const int32_t head = low1[d];
  keyOut[cornerOffset[slotOfHead[head]] + (dist2[head] - dist2[d])] = startKey[d];
}

}  // namespace

RawRings regionRingsCuda(const int32_t* labels, int64_t w, int64_t h, int32_t count, const RunControl& control)
{
  const GpuInfo& gpu = probeGpu();
  if (!gpu.usable)
    throw DeviceUnavailable(gpu.reason);
  GPUGEO_CUDA_CHECK(cudaSetDevice(gpu.device));
  cuda::keepPooledMemory(gpu.device, kPoolKeep);
  // Labels, sides, edge counts and offsets per cell (21 bytes); the boundary edges' arrays come on top.
  const std::string what = "tracing regions on a grid of " + std::to_string(w) + " x " + std::to_string(h) + " cells";
  return cuda::withinDeviceMemory(what, std::size_t(w * h) * 21, [&] {
    DeviceBuffer<int32_t> label;
    cuda::upload(label, labels, std::size_t(w * h));
    return regionRingsOnDevice(label.data(), w, h, count, control);
  });
}

RawRings regionRingsOnDevice(const int32_t* label, int64_t w, int64_t h, int32_t count, const RunControl& control)
{
  const int64_t n = w * h;
  RawRings raw;
  raw.vertexCount = (w + 1) * (h + 1);
  raw.bandRing.assign(std::size_t(count) + 1, 0);
  raw.ringNode.assign(1, 0);
  DeviceBuffer<uint8_t> sides(static_cast<std::size_t>(n));
  DeviceBuffer<int64_t> edgeCount(static_cast<std::size_t>(n + 1)), offset;
  sidesKernel<<<blocksFor(n + 1), kThreads>>>(label, w, h, count, sides.data(), edgeCount.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  const int64_t edges = cuda::exclusiveScan(edgeCount, n, offset);
  if (edges >= int64_t(INT_MAX))
    throw InvalidInput("the regions have " + std::to_string(edges) + " boundary edges, more than the GPU's " +
                       std::to_string(INT_MAX - 1) + "; trace them on the CPU");
  if (edges == 0)
    return raw;
  DeviceBuffer<int32_t> next(static_cast<std::size_t>(edges)), set(static_cast<std::size_t>(edges)),
      rankOf(static_cast<std::size_t>(edges));
  DeviceBuffer<uint8_t> turns(static_cast<std::size_t>(edges));
  DeviceBuffer<int64_t> startKey(static_cast<std::size_t>(edges));
  GPUGEO_CUDA_CHECK(cudaMemset(turns.data(), 0, turns.bytes()));
  edgeKernel<<<blocksFor(n), kThreads>>>(label, w, h, sides.data(), offset.data(), next.data(), turns.data(),
                                         set.data(), startKey.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  sides.release();
  offset.release();
  edgeCount.release();
  turnRankKernel<<<blocksFor(edges), kThreads>>>(turns.data(), edges, rankOf.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  if (control.isCanceled())
    throw Canceled();
  cuda::Ranking first = cuda::rank<0>(next, rankOf.data(), edges);
  DeviceBuffer<int32_t> cut(static_cast<std::size_t>(edges));
  cuda::cutKernel<0><<<blocksFor(edges), kThreads>>>(next.data(), first.jump.data(), first.low.data(), edges, edges,
                                                     cut.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  cuda::Ranking second = cuda::rank<0>(cut, rankOf.data(), edges, turns.data());
  DeviceBuffer<uint8_t> isHead(static_cast<std::size_t>(edges));
  DeviceBuffer<int64_t> ringKey(static_cast<std::size_t>(edges));
  DeviceBuffer<int> broken(1);
  GPUGEO_CUDA_CHECK(cudaMemset(broken.data(), 0, sizeof(int)));
  headKernel<<<blocksFor(edges), kThreads>>>(edges, first.jump.data(), first.low.data(), set.data(), isHead.data(),
                                             ringKey.data(), broken.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  if (cuda::readOne(broken.data()))
    throw std::logic_error("region tracing: a boundary edge is not on a ring");
  DeviceBuffer<int32_t> headOfSlot;
  DeviceBuffer<int64_t> keyOfSlot;
  const int64_t rings = cuda::orderHeads(isHead, ringKey, edges, headOfSlot, keyOfSlot);
  DeviceBuffer<int32_t> slotOfHead(static_cast<std::size_t>(edges));
  cuda::slotKernel<<<blocksFor(rings), kThreads>>>(headOfSlot.data(), rings, slotOfHead.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  DeviceBuffer<int64_t> cornerCount(static_cast<std::size_t>(rings + 1)), cornerOffset;
  cornerCountKernel<<<blocksFor(rings + 1), kThreads>>>(headOfSlot.data(), rings, second.dist.data(),
                                                        cornerCount.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  const int64_t corners = cuda::exclusiveScan(cornerCount, rings, cornerOffset);
  DeviceBuffer<int64_t> keyOut(static_cast<std::size_t>(corners));
  cornerScatterKernel<<<blocksFor(edges), kThreads>>>(edges, turns.data(), first.low.data(), second.dist.data(),
                                                      slotOfHead.data(), cornerOffset.data(), startKey.data(),
                                                      keyOut.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  const std::vector<int64_t> keys = cuda::download(keyOfSlot, std::size_t(rings));
  raw.ringNode = cuda::download(cornerOffset, std::size_t(rings + 1));
  raw.key = cuda::download(keyOut, std::size_t(corners));
  for (int32_t k = 0; k <= count; ++k)
    raw.bandRing[std::size_t(k)] = std::lower_bound(keys.begin(), keys.end(), int64_t(k) * edges) - keys.begin();
  return raw;
}

}  // namespace gpugeo::dem::detail
