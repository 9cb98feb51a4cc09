// The CUDA backend of the mesh contours. Everything up to the polygons' holes runs on the device:
// - preparation: triangles made counter-clockwise, half-edges sorted by their vertex pair (CUB
//   radix sort) and paired into neighbours;
// - per field: one thread a triangle counts, then writes, its line segments for every level and
//   its bands' boundary segments (the source paper's two kernels, without the sparse slots: a
//   triangle's segments go straight to their place after a CUB scan of the counts);
// - line segments are linked by sorting their end nodes' keys (CUB); ring segments by the walk
//   around each node (detail/contour_math.h);
// - chains and rings are ranked by pointer jumping (Wyllie's list ranking, twice: once to find each
//   cycle's lowest segment, once more with the cycle cut there), ordered by (level or band, lowest
//   segment) with a CUB radix sort, and their points scattered into place.
// The CPU backend walks the same chains in the same order, so both give the same arrays bit for
// bit. The rings' splitting and hole assignment run on the host for both (core/polygon_rings.cpp).
#include <cub/cub.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <string>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/list_ranking.cuh"
#include "mesh/detail/contourer.h"

namespace gpugeo::mesh::detail {

namespace {

constexpr int kThreads = 256;

// Buffers from the device's stream-ordered pool: all of this backend's work runs on the calling thread's
// default stream, and a contour call takes and frees some forty buffers. The pool keeps up to
// kPoolKeep bytes between calls.
template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;

// The pool keeps up to this much between calls.
constexpr uint64_t kPoolKeep = uint64_t(1) << 30;

unsigned blocksFor(int64_t items, int threads = kThreads)
{
  return static_cast<unsigned>(std::max<int64_t>(1, (items + threads - 1) / threads));
}

using cuda::cutKernel;
using cuda::download;
using cuda::downloadTo;
using cuda::hostVector;
using cuda::exclusiveScan;
using cuda::orderHeads;
using cuda::rank;
using cuda::Ranking;
using cuda::readOne;
using cuda::slotKernel;
using cuda::sortPairs;
using cuda::upload;

void sync()
{
  GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
}


// ---- preparation ----

__global__ void prepareKernel(const double* x, const double* y, const double* z, int64_t nv, int32_t* triangles,
                              int64_t nt, uint8_t* usable, uint64_t* edgeKey, int32_t* halfEdge,
                              unsigned long long* bad)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nt)
    return;
  int32_t c[3] = {triangles[3 * t], triangles[3 * t + 1], triangles[3 * t + 2]};
  const int r = prepareTriangle(x, y, z, nv, c);
  usable[t] = r > 0;
  if (r < 0)
  {
    atomicAdd(bad, 1ull);
    c[0] = c[1] = c[2] = 0;  // keeps the edge keys in range; the run is refused below
  }
  for (int e = 0; e < 3; ++e)
  {
    triangles[3 * t + e] = c[e];
    const uint32_t a = uint32_t(c[e]), b = uint32_t(c[(e + 1) % 3]);
    edgeKey[3 * t + e] = (uint64_t(a < b ? a : b) << 32) | uint64_t(a < b ? b : a);
    halfEdge[3 * t + e] = int32_t(3 * t + e);
  }
}

// Half-edges sorted by vertex pair: a run of exactly two going opposite ways is an inner edge.
__global__ void twinKernel(const uint64_t* key, const int32_t* halfEdge, int64_t n, const int32_t* triangles,
                           int32_t* twin)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i + 1 >= n || key[i] != key[i + 1] || (i > 0 && key[i - 1] == key[i]) || (i + 2 < n && key[i + 2] == key[i]))
    return;
  const int32_t g = halfEdge[i], h = halfEdge[i + 1];
  auto from = [&](int32_t e) { return triangles[e]; };
  auto to = [&](int32_t e) { return triangles[3 * (e / 3) + (e % 3 + 1) % 3]; };
  if (from(g) == to(h) && from(h) == to(g))
  {
    twin[g] = h;
    twin[h] = g;
  }
}

// ---- per field ----

__global__ void validKernel(const int32_t* triangles, int64_t nt, const uint8_t* usable, const uint8_t* active,
                            const double* value, uint8_t* valid)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < nt)
    valid[t] = takesPart(usable[t], active, t, value, triangles + 3 * t);
}

__global__ void lineCountKernel(MeshArrays m, FieldArrays f, int64_t* count)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t > m.triangleCount)
    return;
  int64_t c = 0;
  if (t < m.triangleCount && f.valid[t])
  {
    double v[3];
    cornerValues(m, f, t, v);
    int32_t first, last;
    lineLevelRange(v, f.levels, f.levelCount, first, last);
    uint8_t nodes[2];
    bool weak;
    for (int32_t k = first; k < last; ++k)
      c += lineSegment(m, f, t, v, k, nodes, weak) == 2;
  }
  count[t] = c;
}

__global__ void lineWriteKernel(MeshArrays m, FieldArrays f, const int64_t* offset, int64_t segments, int64_t* endKey,
                                int32_t* endId, int32_t* level, int32_t* rankOf, double* point)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= m.triangleCount || !f.valid[t])
    return;
  double v[3];
  cornerValues(m, f, t, v);
  int32_t first, last;
  lineLevelRange(v, f.levels, f.levelCount, first, last);
  int64_t s = offset[t];
  uint8_t nodes[2];
  bool weak;
  for (int32_t k = first; k < last; ++k)
  {
    if (lineSegment(m, f, t, v, k, nodes, weak) != 2)
      continue;
    rankOf[s] = int32_t(weak ? segments + s : s);
    endKey[2 * s] = nodeKey(m, t, nodes[0], k, f.levelCount);
    endKey[2 * s + 1] = nodeKey(m, t, nodes[1], k, f.levelCount);
    endId[2 * s] = int32_t(2 * s);
    endId[2 * s + 1] = int32_t(2 * s + 1);
    level[s] = k;
    nodePoint(m, f, t, nodes[0], k, point + 6 * s);
    nodePoint(m, f, t, nodes[1], k, point + 6 * s + 3);
    ++s;
  }
}

// Ends sorted by node: a node with exactly two ends joins them.
__global__ void partnerKernel(const int64_t* key, const int32_t* endId, int64_t n, int32_t* partner)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i + 1 >= n || key[i] != key[i + 1] || (i > 0 && key[i - 1] == key[i]) || (i + 2 < n && key[i + 2] == key[i]))
    return;
  partner[endId[i]] = endId[i + 1];
  partner[endId[i + 1]] = endId[i];
}

// A chain state d enters segment d / 2 through its end d and leaves through d ^ 1.
__global__ void chainSuccessorKernel(const int32_t* partner, int64_t states, int32_t* next)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d < states)
    next[d] = partner[d ^ 1];
}



// Per chain state: the chain's first state when the state is on the kept copy of its chain (the one
// that enters its lowest-ranked segment through that segment's start), else -1; and the chain's
// sort key (level, rank) at its head.
__global__ void chainHeadKernel(int64_t states, const int32_t* jump1, const int32_t* low1, const int32_t* jump2,
                                const int32_t* low2, const int32_t* tail2, const int32_t* level, int64_t segments,
                                int32_t* head, uint8_t* isHead, int64_t* chainKey)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= states)
    return;
  int32_t h = -1, best = -1;
  if (jump1[d] < 0)
  {
    // A path: its head is the reverse of the reverse copy's tail.
    const int32_t candidate = tail2[tail2[d] ^ 1] ^ 1;
    best = low2[candidate];
    if (tail2[2 * (best % segments)] == tail2[d])
      h = candidate;
  }
  else if (jump2[d] < 0)
  {
    best = low1[d];
    if (tail2[2 * (best % segments)] == tail2[d])
      h = int32_t(2 * (best % segments));
  }
  head[d] = h;
  isHead[d] = h >= 0 && h == d;
  chainKey[d] = h >= 0 && h == d ? int64_t(level[best % segments]) * 2 * segments + best : 0;
}

__global__ void ringHeadKernel(int64_t n, const int32_t* jump1, const int32_t* low1, const int32_t* jump2,
                               const int32_t* band, uint8_t* isHead, int64_t* ringKey, int* broken)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n)
    return;
  if (jump1[d] < 0)
    *broken = 1;
  const bool h = jump2[d] < 0 && low1[d] == d;
  isHead[d] = h;
  ringKey[d] = h ? int64_t(band[d]) * n + d : 0;
}


__global__ void chainPointCountKernel(const int32_t* headOfSlot, int64_t count, const int32_t* dist2,
                                      int64_t* points)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    points[i] = int64_t(dist2[headOfSlot[i]]) + 2;  // segments + 1
  else if (i == count)
    points[i] = 0;
}

__global__ void chainScatterKernel(int64_t states, const int32_t* head, const int32_t* slotOfHead,
                                   const int64_t* pointOffset, const int32_t* dist2, const double* point, double* x,
                                   double* y, double* z)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= states || head[d] < 0)
    return;
  const int32_t h = head[d];
  const int64_t base = pointOffset[slotOfHead[h]];
  const int64_t at = base + 1 + (dist2[h] - dist2[d]);
  const double* exitPoint = point + 3 * (d ^ 1);
  x[at] = exitPoint[0];
  y[at] = exitPoint[1];
  z[at] = exitPoint[2];
  if (d == h)
  {
    const double* entryPoint = point + 3 * d;
    x[base] = entryPoint[0];
    y[base] = entryPoint[1];
    z[base] = entryPoint[2];
  }
}

__global__ void bandCountKernel(MeshArrays m, FieldArrays f, int64_t* count)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t > m.triangleCount)
    return;
  int64_t c = 0;
  if (t < m.triangleCount && f.valid[t])
  {
    double v[3];
    cornerValues(m, f, t, v);
    int32_t first, last;
    bandRange(v, f.levels, f.levelCount, first, last);
    for (int32_t k = first; k < last; ++k)
    {
      uint8_t nodes[kMaxPieceNodes + 1];
      const int n = pieceNodes(v, f.levels[k], f.levels[k + 1], nodes);
      if (n < 3)
        continue;
      for (int j = 0; j < n; ++j)
        c += onBoundary(m, f, t, v, nodes, n, j, k);
    }
  }
  count[t] = c;
}

__global__ void bandWriteKernel(MeshArrays m, FieldArrays f, const int64_t* offset, int64_t* key, int64_t* node,
                                int32_t* band, double* point)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= m.triangleCount || !f.valid[t])
    return;
  const int32_t nb = f.levelCount - 1;
  double v[3];
  cornerValues(m, f, t, v);
  int32_t first, last;
  bandRange(v, f.levels, f.levelCount, first, last);
  int64_t s = offset[t];
  for (int32_t k = first; k < last; ++k)
  {
    uint8_t nodes[kMaxPieceNodes + 1];
    const int n = pieceNodes(v, f.levels[k], f.levels[k + 1], nodes);
    if (n < 3)
      continue;
    for (int j = 0; j < n; ++j)
      if (onBoundary(m, f, t, v, nodes, n, j, k))
      {
        key[s] = boundaryKey(t, k, j, nb);
        node[s] = nodeKey(m, t, nodes[j], k, f.levelCount);
        band[s] = k;
        nodePoint(m, f, t, nodes[j], k, point + 3 * s);
        ++s;
      }
  }
}

__global__ void ringNextKernel(MeshArrays m, FieldArrays f, const int64_t* key, int64_t count, int32_t* next,
                               int* broken)
{
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= count)
    return;
  const int32_t nb = f.levelCount - 1;
  const int64_t k = key[s];
  const int j = int(k & 7);
  const int64_t tb = k >> 3;
  int64_t t2;
  int j2;
  next[s] = -1;
  if (!nextBoundarySegment(m, f, tb / nb, j, int32_t(tb % nb), t2, j2))
  {
    *broken = 1;
    return;
  }
  const int64_t want = boundaryKey(t2, int32_t(tb % nb), j2, nb);
  int64_t lo = 0, hi = count;
  while (lo < hi)
  {
    const int64_t mid = (lo + hi) >> 1;
    if (key[mid] < want)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < count && key[lo] == want)
    next[s] = int32_t(lo);
  else
    *broken = 1;
}

__global__ void ringPointCountKernel(const int32_t* headOfSlot, int64_t count, const int32_t* dist2, int64_t* nodes)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    nodes[i] = int64_t(dist2[headOfSlot[i]]) + 1;
  else if (i == count)
    nodes[i] = 0;
}

__global__ void ringScatterKernel(int64_t n, const int32_t* low1, const int32_t* jump2, const int32_t* slotOfHead,
                                  const int64_t* nodeOffset, const int32_t* dist2, const int64_t* node,
                                  const double* point, int64_t* keyOut, double* x, double* y, double* z)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n || jump2[d] >= 0)
    return;
  const int32_t h = low1[d];
  const int64_t at = nodeOffset[slotOfHead[h]] + (dist2[h] - dist2[d]);
  keyOut[at] = node[d];
  x[at] = point[3 * d];
  y[at] = point[3 * d + 1];
  z[at] = point[3 * d + 2];
}


class CudaContourer final : public MeshContourer
{
public:
  CudaContourer(const Mesh& mesh, const RunControl& control)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDevice = gpu.device;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    cuda::keepPooledMemory(mDevice, kPoolKeep);
    mVertices = mesh.vertexCount;
    mTriangles = mesh.triangleCount;
    mHasZ = mesh.z != nullptr;
    {
      ScopedStage stage(mPrepareTimes, "upload mesh");
      upload(mX, mesh.x, std::size_t(mVertices));
      upload(mY, mesh.y, std::size_t(mVertices));
      if (mHasZ)
        upload(mZ, mesh.z, std::size_t(mVertices));
      upload(mTri, mesh.triangles, std::size_t(3 * mTriangles));
      sync();
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage stage(mPrepareTimes, "prepare mesh");
    const int64_t halfEdges = 3 * mTriangles;
    mUsable.resize(std::size_t(mTriangles));
    DeviceBuffer<uint64_t> key(static_cast<std::size_t>(halfEdges));
    DeviceBuffer<int32_t> half(static_cast<std::size_t>(halfEdges));
    DeviceBuffer<unsigned long long> bad(1);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(bad.data(), 0, sizeof(unsigned long long), 0));
    prepareKernel<<<blocksFor(mTriangles), kThreads>>>(mX.data(), mY.data(), mHasZ ? mZ.data() : nullptr, mVertices,
                                                       mTri.data(), mTriangles, mUsable.data(), key.data(),
                                                       half.data(), bad.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    checkCorners(int64_t(readOne(bad.data())), mVertices);
    int bits = 1;
    while ((int64_t(1) << bits) < mVertices)
      ++bits;
    sortPairs(key, half, halfEdges, 32 + bits);
    mTwin.resize(std::size_t(halfEdges));
    GPUGEO_CUDA_CHECK(cudaMemset(mTwin.data(), 0xff, mTwin.bytes()));
    twinKernel<<<blocksFor(halfEdges), kThreads>>>(key.data(), half.data(), halfEdges, mTri.data(), mTwin.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    sync();
  }

  Backend backend() const override { return Backend::Gpu; }
  const StageTimes& times() const override { return mTimes; }

  Contours contour(const Field& field, const std::vector<double>& levels, const ContourOptions& options,
                   const RunControl& control) override
  {
    validateLevels(levels);
    if (!field.values)
      throw InvalidInput("the field's values must not be null");
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    mTimes = mPrepareTimes;
    const int32_t nl = int32_t(levels.size());
    Contours out;
    DeviceBuffer<double> value, levelBuffer;
    DeviceBuffer<uint8_t> active, valid(static_cast<std::size_t>(mTriangles));
    {
      ScopedStage stage(mTimes, "upload field");
      upload(value, field.values, std::size_t(mVertices));
      upload(levelBuffer, levels.data(), levels.size());
      if (field.active)
        upload(active, field.active, std::size_t(mTriangles));
      sync();
    }
    {
      ScopedStage stage(mTimes, "classify");
      validKernel<<<blocksFor(mTriangles), kThreads>>>(mTri.data(), mTriangles, mUsable.data(),
                                                       field.active ? active.data() : nullptr, value.data(),
                                                       valid.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      std::size_t need = 0;
      DeviceBuffer<int64_t> used(1);
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, need, valid.data(), used.data(), mTriangles,
                                                  ::cuda::std::plus<int64_t>{}, int64_t(0)));
      DeviceBuffer<unsigned char> temp(need);
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Reduce(temp.data(), need, valid.data(), used.data(), mTriangles,
                                                  ::cuda::std::plus<int64_t>{}, int64_t(0)));
      out.trianglesUsed = readOne(used.data());
    }
    MeshArrays m;
    m.x = mX.data();
    m.y = mY.data();
    m.z = mHasZ ? mZ.data() : nullptr;
    m.vertexCount = mVertices;
    m.triangles = mTri.data();
    m.twin = mTwin.data();
    m.triangleCount = mTriangles;
    FieldArrays f;
    f.value = value.data();
    f.valid = valid.data();
    f.levels = levelBuffer.data();
    f.levelCount = nl;

    int64_t lineSegments = 0;
    if (options.lines)
      out.lines = lines(m, f, nl, lineSegments, control);
    if (options.bands)
    {
      const RawRings raw = rings(m, f, nl, lineSegments, control);
      ScopedStage stage(mTimes, "assemble polygons");
      out.bands = assembleRings(raw, out.droppedRings, control, 0);  // the host's threads
    }
    return out;
  }

private:
  ContourLines lines(const MeshArrays& m, const FieldArrays& f, int32_t nl, int64_t& segments,
                     const RunControl& control)
  {
    ContourLines out;
    DeviceBuffer<int64_t> counts(static_cast<std::size_t>(mTriangles + 1)), offsets, endKey;
    DeviceBuffer<int32_t> endId, level, rankOf;
    DeviceBuffer<double> point;
    {
      ScopedStage stage(mTimes, "line segments");
      lineCountKernel<<<blocksFor(mTriangles + 1), kThreads>>>(m, f, counts.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      segments = exclusiveScan(counts, mTriangles, offsets);
      checkSegmentCount(segments);
      endKey.resize(std::size_t(2 * segments));
      endId.resize(std::size_t(2 * segments));
      level.resize(std::size_t(segments));
      rankOf.resize(std::size_t(segments));
      point.resize(std::size_t(6 * segments));
      lineWriteKernel<<<blocksFor(mTriangles), kThreads>>>(m, f, offsets.data(), segments, endKey.data(),
                                                           endId.data(), level.data(), rankOf.data(), point.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      sync();
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage stage(mTimes, "join lines");
    const int64_t states = 2 * segments;
    out.levelPart.assign(std::size_t(nl) + 1, 0);
    out.partPoint.assign(1, 0);
    if (segments == 0)
      return out;
    sortPairs(endKey, endId, states);
    DeviceBuffer<int32_t> partner(static_cast<std::size_t>(states)), next(static_cast<std::size_t>(states));
    GPUGEO_CUDA_CHECK(cudaMemset(partner.data(), 0xff, partner.bytes()));
    partnerKernel<<<blocksFor(states), kThreads>>>(endKey.data(), endId.data(), states, partner.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    chainSuccessorKernel<<<blocksFor(states), kThreads>>>(partner.data(), states, next.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    Ranking first = rank<1>(next, rankOf.data(), states);
    DeviceBuffer<int32_t> cut(static_cast<std::size_t>(states));
    cutKernel<1><<<blocksFor(states), kThreads>>>(next.data(), first.jump.data(), first.low.data(), states, segments,
                                                  cut.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    Ranking second = rank<1>(cut, rankOf.data(), states);
    DeviceBuffer<int32_t> head(static_cast<std::size_t>(states));
    DeviceBuffer<uint8_t> isHead(static_cast<std::size_t>(states));
    DeviceBuffer<int64_t> chainKey(static_cast<std::size_t>(states));
    chainHeadKernel<<<blocksFor(states), kThreads>>>(states, first.jump.data(), first.low.data(), second.jump.data(),
                                                     second.low.data(), second.tail.data(), level.data(), segments,
                                                     head.data(), isHead.data(), chainKey.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    DeviceBuffer<int32_t> headOfSlot;
    DeviceBuffer<int64_t> keyOfSlot;
    const int64_t chains = orderHeads(isHead, chainKey, states, headOfSlot, keyOfSlot);
    DeviceBuffer<int32_t> slotOfHead(static_cast<std::size_t>(states));
    slotKernel<<<blocksFor(chains), kThreads>>>(headOfSlot.data(), chains, slotOfHead.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    DeviceBuffer<int64_t> pointCount(static_cast<std::size_t>(chains + 1)), pointOffset;
    chainPointCountKernel<<<blocksFor(chains + 1), kThreads>>>(headOfSlot.data(), chains, second.dist.data(),
                                                               pointCount.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    const int64_t points = exclusiveScan(pointCount, chains, pointOffset);
    DeviceBuffer<double> x(static_cast<std::size_t>(points)), y(static_cast<std::size_t>(points)),
        z(static_cast<std::size_t>(points));
    chainScatterKernel<<<blocksFor(states), kThreads>>>(states, head.data(), slotOfHead.data(), pointOffset.data(),
                                                        second.dist.data(), point.data(), x.data(), y.data(),
                                                        z.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::vector<int64_t> keys = hostVector<int64_t>(std::size_t(chains));
    out.partPoint = hostVector<int64_t>(std::size_t(chains + 1));
    out.x = hostVector<double>(std::size_t(points));
    out.y = hostVector<double>(std::size_t(points));
    out.z = hostVector<double>(std::size_t(points));
    {
      ScopedStage copy(mTimes, "download");
      cuda::copyToHost({downloadTo(keys, keyOfSlot), downloadTo(out.partPoint, pointOffset), downloadTo(out.x, x),
                        downloadTo(out.y, y), downloadTo(out.z, z)});
    }
    for (int32_t k = 0; k <= nl; ++k)
      out.levelPart[std::size_t(k)] =
          std::lower_bound(keys.begin(), keys.end(), int64_t(k) * 2 * segments) - keys.begin();
    return out;
  }

  RawRings rings(const MeshArrays& m, const FieldArrays& f, int32_t nl, int64_t lineSegments,
                 const RunControl& control)
  {
    RawRings raw;
    raw.vertexCount = mVertices;
    const int32_t nb = nl >= 2 ? nl - 1 : 0;
    raw.bandRing.assign(std::size_t(nb) + 1, 0);
    raw.ringNode.assign(1, 0);
    if (nb == 0)
      return raw;
    DeviceBuffer<int64_t> counts(static_cast<std::size_t>(mTriangles + 1)), offsets, key, node;
    DeviceBuffer<int32_t> band;
    DeviceBuffer<double> point;
    int64_t count = 0;
    {
      ScopedStage stage(mTimes, "band boundaries");
      bandCountKernel<<<blocksFor(mTriangles + 1), kThreads>>>(m, f, counts.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      count = exclusiveScan(counts, mTriangles, offsets);
      checkSegmentCount(lineSegments + count);
      key.resize(std::size_t(count));
      node.resize(std::size_t(count));
      band.resize(std::size_t(count));
      point.resize(std::size_t(3 * count));
      bandWriteKernel<<<blocksFor(mTriangles), kThreads>>>(m, f, offsets.data(), key.data(), node.data(), band.data(),
                                                           point.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      sync();
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage stage(mTimes, "join rings");
    if (count == 0)
      return raw;
    DeviceBuffer<int32_t> next(static_cast<std::size_t>(count));
    DeviceBuffer<int> broken(1);
    GPUGEO_CUDA_CHECK(cudaMemset(broken.data(), 0, sizeof(int)));
    ringNextKernel<<<blocksFor(count), kThreads>>>(m, f, key.data(), count, next.data(), broken.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    if (readOne(broken.data()))
      throw InvalidInput("the mesh's triangles overlap or their edges do not match; the bands cannot be traced");
    Ranking first = rank<0>(next, nullptr, count);
    DeviceBuffer<int32_t> cut(static_cast<std::size_t>(count));
    cutKernel<0><<<blocksFor(count), kThreads>>>(next.data(), first.jump.data(), first.low.data(), count, count,
                                                 cut.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    Ranking second = rank<0>(cut, nullptr, count);
    DeviceBuffer<uint8_t> isHead(static_cast<std::size_t>(count));
    DeviceBuffer<int64_t> ringKey(static_cast<std::size_t>(count));
    ringHeadKernel<<<blocksFor(count), kThreads>>>(count, first.jump.data(), first.low.data(), second.jump.data(),
                                                   band.data(), isHead.data(), ringKey.data(), broken.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    if (readOne(broken.data()))
      throw InvalidInput("the mesh's triangles overlap or their edges do not match; the bands cannot be traced");
    DeviceBuffer<int32_t> headOfSlot;
    DeviceBuffer<int64_t> keyOfSlot;
    const int64_t ringCount = orderHeads(isHead, ringKey, count, headOfSlot, keyOfSlot);
    DeviceBuffer<int32_t> slotOfHead(static_cast<std::size_t>(count));
    slotKernel<<<blocksFor(ringCount), kThreads>>>(headOfSlot.data(), ringCount, slotOfHead.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    DeviceBuffer<int64_t> nodeCount(static_cast<std::size_t>(ringCount + 1)), nodeOffset;
    ringPointCountKernel<<<blocksFor(ringCount + 1), kThreads>>>(headOfSlot.data(), ringCount, second.dist.data(),
                                                                 nodeCount.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    const int64_t nodes = exclusiveScan(nodeCount, ringCount, nodeOffset);
    DeviceBuffer<int64_t> keyOut(static_cast<std::size_t>(nodes));
    DeviceBuffer<double> x(static_cast<std::size_t>(nodes)), y(static_cast<std::size_t>(nodes)),
        z(static_cast<std::size_t>(nodes));
    ringScatterKernel<<<blocksFor(count), kThreads>>>(count, first.low.data(), second.jump.data(), slotOfHead.data(),
                                                      nodeOffset.data(), second.dist.data(), node.data(), point.data(),
                                                      keyOut.data(), x.data(), y.data(), z.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::vector<int64_t> keys = hostVector<int64_t>(std::size_t(ringCount));
    raw.ringNode = hostVector<int64_t>(std::size_t(ringCount + 1));
    raw.key = hostVector<int64_t>(std::size_t(nodes));
    raw.x = hostVector<double>(std::size_t(nodes));
    raw.y = hostVector<double>(std::size_t(nodes));
    raw.z = hostVector<double>(std::size_t(nodes));
    {
      ScopedStage copy(mTimes, "download");
      cuda::copyToHost({downloadTo(keys, keyOfSlot), downloadTo(raw.ringNode, nodeOffset), downloadTo(raw.key, keyOut),
                        downloadTo(raw.x, x), downloadTo(raw.y, y), downloadTo(raw.z, z)});
    }
    for (int32_t k = 0; k <= nb; ++k)
      raw.bandRing[std::size_t(k)] = std::lower_bound(keys.begin(), keys.end(), int64_t(k) * count) - keys.begin();
    return raw;
  }

  int mDevice = 0;
  int64_t mVertices = 0, mTriangles = 0;
  bool mHasZ = false;
  DeviceBuffer<double> mX, mY, mZ;
  DeviceBuffer<int32_t> mTri, mTwin;
  DeviceBuffer<uint8_t> mUsable;
  StageTimes mPrepareTimes, mTimes;
};

}  // namespace

std::unique_ptr<MeshContourer> makeCudaContourer(const Mesh& mesh, const RunControl& control)
{
  return std::make_unique<CudaContourer>(mesh, control);
}

}  // namespace gpugeo::mesh::detail
