// The CUDA backend of the neighbour index. The index is built on the device: the local frame (CUB
// reductions), Morton codes, a CUB radix sort of (code, index), every sorted position's quadtree leaf
// from its window of codes (detail/neighbour_math.h, the same rule the CPU applies greedily), the
// region boxes and the region tree. Queries run one thread block per region, after the source
// patent: the block stages each candidate region's (at most 64) points in shared memory and every
// thread tests its own point against them. k-nearest queries and the nearest point at any distance
// search the region tree per point. Summation orders are the CPU backend's, so the results are
// bitwise the same.
#include <cub/cub.cuh>
#include <cuda/functional>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/staged_copy.h"
#include "core/union_find.cuh"
#include "neighbours/neighbour_index.h"

// DeviceSegmentedSort with 64-bit item counts: CCCL 3 (CUDA 13).
static_assert(CUB_VERSION >= 300000, "the neighbour index needs CUB 3 (CUDA 13) or newer");

namespace gpugeo::neighbours::detail {

namespace {

using cuda::DeviceBuffer;

constexpr int kBlock = kRegionCapacity;  // one thread a point of the region
constexpr int64_t kBatch = int64_t(1) << 20;  // points a k-nearest launch handles (scratch: kBatch * k hits)

unsigned blocksFor(int64_t items, int threads)
{
  return static_cast<unsigned>((items + threads - 1) / threads);
}

template <int D>
__global__ void localKernel(const double* x, const double* y, const double* z, int64_t n, const double* origin,
                            Point<D>* out)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const double* axis[3] = {x, y, z};
  Point<D> p;
  for (int a = 0; a < D; ++a)
    p.c[a] = exact::sub(axis[a][i], origin[a]);
  out[i] = p;
}

// The origin and the quantiser from the per-axis minima and maxima.
template <int D>
__global__ void frameKernel(const double* lo, const double* hi, double* origin, Quantiser<D>* q)
{
  frameFromBounds<D>(lo, hi, origin, *q);
}

template <int D>
__global__ void mortonKernel(const Point<D>* points, int64_t n, const Quantiser<D>* q, uint64_t* codes, int32_t* index)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  codes[i] = mortonCode(*q, points[i]);
  index[i] = int32_t(i);
}

template <int D>
__global__ void gatherKernel(const Point<D>* points, const int32_t* order, int64_t n, Point<D>* out)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = points[order[i]];
}

// runStart seeds: i where the code differs from the one before (0 elsewhere), for a max-scan.
__global__ void runSeedKernel(const uint64_t* codes, int64_t n, int64_t* seed)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    seed[i] = i == 0 || codes[i] != codes[i - 1] ? i : 0;
}

template <int D>
__global__ void regionFlagKernel(const uint64_t* codes, int64_t n, const int64_t* runStart, uint8_t* flag)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int level = leafLevel<D, kRegionCapacity>(codes, n, i);
  if (level > MortonTraits<D>::kLevels)
    flag[i] = (i - runStart[i]) % kRegionCapacity == 0;
  else
    flag[i] = delta<D>(codes, n, i) < level;
}

template <int D>
__global__ void regionBoxKernel(const Point<D>* points, const int64_t* start, int64_t regions, Box<D>* boxes)
{
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < regions)
    boxes[r] = boxOf(points, start[r], start[r + 1]);
}

template <int D>
__global__ void parentBoxKernel(Box<D>* boxes, int64_t childOffset, int64_t childCount, int64_t parentOffset,
                                int64_t parents)
{
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < parents)
    boxes[parentOffset + p] = parentBox(boxes + childOffset, childCount, p);
}

template <int D>
__global__ void candidateCountKernel(TreeView<D> tree, int64_t regions, double r2, int64_t* count)
{
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= regions)
    return;
  int64_t c = 0;
  forEachCandidateRegion(tree, tree.boxes[r], r2, [&](int64_t) { ++c; });
  count[r] = c;
}

template <int D>
__global__ void candidateFillKernel(TreeView<D> tree, int64_t regions, double r2, const int64_t* offset,
                                    int64_t* candidates)
{
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= regions)
    return;
  int64_t at = offset[r];
  forEachCandidateRegion(tree, tree.boxes[r], r2, [&](int64_t q) { candidates[at++] = q; });
}

// The block-per-region scan: calls visit(j, d2) for every position j of the candidate regions in
// their order (regions increasing, positions increasing), the block staging each region's points.
template <int D, typename Visit>
__device__ void scanCandidates(const RegionView<D>& v, const int64_t* candidateOffset, const int64_t* candidates,
                               int64_t region, int64_t i, bool active, Visit visit)
{
  __shared__ Point<D> tile[kBlock];
  const Point<D> p = v.points[active ? i : v.start[region]];
  for (int64_t c = candidateOffset[region]; c < candidateOffset[region + 1]; ++c)
  {
    const int64_t q = candidates[c];
    const int64_t first = v.start[q];
    const int count = int(v.start[q + 1] - first);
    __syncthreads();
    if (threadIdx.x < count)
      tile[threadIdx.x] = v.points[first + threadIdx.x];
    __syncthreads();
    if (active)
      for (int t = 0; t < count; ++t)
        visit(first + t, distance2(p, tile[t]));
  }
}

// Radius summary by Morton position: the count and, unless kCountOnly, the sum of the distances (in
// the CPU's order) and the nearest within the radius.
template <int D, bool kCountOnly>
__global__ void radiusSummaryKernel(RegionView<D> v, const int64_t* candidateOffset, const int64_t* candidates,
                                    double r2, int32_t* count, double* sum, Hit* nearest)
{
  const int64_t region = blockIdx.x;
  const int64_t i = v.start[region] + threadIdx.x;
  const bool active = i < v.start[region + 1];
  int32_t c = 0;
  double s = 0.0;
  Hit best{__builtin_huge_val(), INT32_MAX};
  scanCandidates(v, candidateOffset, candidates, region, i, active, [&](int64_t j, double d2) {
    if (d2 <= r2 && j != i)
    {
      ++c;
      if (!kCountOnly)
      {
        s = exact::add(s, exact::sqrt(d2));
        const Hit h{d2, v.original[j]};
        if (closer(h, best))
          best = h;
      }
    }
  });
  if (active)
  {
    count[i] = c;
    if (!kCountOnly)
    {
      sum[i] = s;
      nearest[i] = best;
    }
  }
}

// The summary by Morton position into the requested arrays, by input index (sum, nearest: null
// when not computed).
__global__ void summaryByInputKernel(const int32_t* original, int64_t n, const int32_t* count, const double* sum,
                                     const Hit* nearest, SummaryOutput out)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    writeSummary(out, original[i], count[i], sum ? sum[i] : 0.0, nearest ? nearest[i] : Hit{0.0, -1});
}

template <int D>
__global__ void nearestOtherKernel(RegionView<D> v, int64_t n, const int32_t* count, Hit* nearest)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && count[i] == 0)
    nearest[i] = nearestOther(v, i);
}

template <int D>
__global__ void kNearestKernel(RegionView<D> v, int64_t first, int64_t count, int k, double bound2, Hit* scratch,
                               int32_t* found, double* sum, Hit* nearest)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count)
    return;
  const int64_t i = first + t;
  KHeap heap(scratch + t * k, k);
  const int f = kNearest(v, i, bound2, heap);
  double s = 0.0;
  for (int h = 0; h < f; ++h)
    s = exact::add(s, exact::sqrt(heap[h].d2));
  found[i] = f;
  sum[i] = s;
  nearest[i] = f > 0 ? heap[0] : nearestOther(v, i);
}

template <int D>
__global__ void kNearestEdgeKernel(RegionView<D> v, int64_t first, int64_t count, int k, double bound2, Hit* scratch,
                                   uint64_t* edges)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count)
    return;
  const int64_t i = first + t;
  KHeap heap(scratch + t * k, k);
  const int f = kNearest(v, i, bound2, heap);
  const uint32_t self = uint32_t(v.original[i]);
  for (int h = 0; h < k; ++h)
  {
    uint64_t key = ~uint64_t(0);
    if (h < f)
    {
      const uint32_t other = uint32_t(heap[h].index);
      key = self < other ? (uint64_t(self) << 32) | other : (uint64_t(other) << 32) | self;
    }
    edges[i * k + h] = key;
  }
}

// Pairs (a < b by input index) within r2: counted per a, or written at a's offset (the b of one a in
// scan order; a segmented sort orders them).
template <int D>
__global__ void radiusPairKernel(RegionView<D> v, const int64_t* candidateOffset, const int64_t* candidates,
                                 double r2, int64_t* countByInput, const int64_t* offsetByInput, int32_t* a, int32_t* b,
                                 double* distance)
{
  const int64_t region = blockIdx.x;
  const int64_t i = v.start[region] + threadIdx.x;
  const bool active = i < v.start[region + 1];
  const int32_t self = active ? v.original[i] : 0;
  int64_t c = 0;
  int64_t at = offsetByInput && active ? offsetByInput[self] : 0;
  scanCandidates(v, candidateOffset, candidates, region, i, active, [&](int64_t j, double d2) {
    const int32_t other = v.original[j];
    if (other > self && d2 <= r2)
    {
      if (offsetByInput)
      {
        a[at] = self;
        b[at] = other;
        if (distance)
          distance[at] = exact::sqrt(d2);
        ++at;
      }
      else
        ++c;
    }
  });
  if (active && !offsetByInput)
    countByInput[self] = c;
}

__global__ void splitPairsKernel(const uint64_t* keys, int64_t count, int32_t* a, int32_t* b)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= count)
    return;
  a[k] = int32_t(keys[k] >> 32);
  b[k] = int32_t(keys[k] & 0xffffffffull);
}

template <int D>
__global__ void pairDistanceKernel(const Point<D>* byInput, const int32_t* a, const int32_t* b, int64_t count,
                                   double* distance)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count)
    distance[k] = exact::sqrt(distance2(byInput[a[k]], byInput[b[k]]));
}

template <int D>
__global__ void scatterByInputKernel(const Point<D>* sorted, const int32_t* original, int64_t n, Point<D>* byInput)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    byInput[original[i]] = sorted[i];
}

// DBSCAN, by Morton position: core flags.
template <int D>
__global__ void coreKernel(RegionView<D> v, const int64_t* candidateOffset, const int64_t* candidates, double r2,
                           int64_t minPoints, uint8_t* core)
{
  const int64_t region = blockIdx.x;
  const int64_t i = v.start[region] + threadIdx.x;
  const bool active = i < v.start[region + 1];
  int64_t c = 0;
  scanCandidates(v, candidateOffset, candidates, region, i, active, [&](int64_t, double d2) { c += d2 <= r2; });
  if (active)
    core[i] = c >= minPoints;
}

// Unions of core points within eps (by input index) and each border point's lowest core neighbour.
template <int D>
__global__ void linkKernel(RegionView<D> v, const int64_t* candidateOffset, const int64_t* candidates, double r2,
                           const uint8_t* core, int32_t* parent, int32_t* borderOf)
{
  const int64_t region = blockIdx.x;
  const int64_t i = v.start[region] + threadIdx.x;
  const bool active = i < v.start[region + 1];
  const int32_t self = active ? v.original[i] : 0;
  const bool selfCore = active && core[i];
  int32_t border = INT32_MAX;
  scanCandidates(v, candidateOffset, candidates, region, i, active, [&](int64_t j, double d2) {
    if (!core[j] || j == i || d2 > r2)
      return;
    const int32_t other = v.original[j];
    if (selfCore)
    {
      if (other < self)
        cuda::joinSets(parent, self, other);
    }
    else
      border = other < border ? other : border;
  });
  if (active && !selfCore)
    borderOf[self] = border;
}

// parent[i] = i (every point its own set); borderOf = none.
__global__ void initKernel(int64_t n, int32_t* parent, int32_t* borderOf)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
  {
    parent[i] = int32_t(i);
    borderOf[i] = INT32_MAX;
  }
}

__global__ void rootKernel(int32_t* parent, int64_t n, int32_t* root)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    root[i] = cuda::rootOf(parent, int32_t(i));
}

// DBSCAN's finish, by input index (assignClusters' rule on the host, here on the device so that only
// the answer comes down): the core flags put back in input order.
__global__ void coreByInputKernel(const uint8_t* coreSorted, const int32_t* original, int64_t n, uint8_t* coreByInput)
{
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s < n)
    coreByInput[original[s]] = coreSorted[s];
}

// 1 where point i starts a cluster: a core point that is its set's root, i.e. the cluster's lowest
// core index (joinSets links only to lower indices, and only core points are joined).
__global__ void clusterStartKernel(const uint8_t* core, const int32_t* root, int64_t n, int32_t* start)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    start[i] = core[i] && root[i] == int32_t(i);
}

// Each point's cluster id, 1 + the clusters that start before its root (`startsBefore`: the exclusive
// sum of clusterStartKernel's flags), 0 for noise; a border point takes its lowest core neighbour's.
// The sizes are counted with one atomic per run of equal ids in a warp.
__global__ void clusterIdKernel(const uint8_t* core, const int32_t* root, const int32_t* borderOf,
                                const int32_t* startsBefore, int64_t n, bool borderPointsAreNoise, int64_t* cluster,
                                unsigned long long* size)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t id = 0;
  if (i < n)
  {
    int32_t r = -1;
    if (core[i])
      r = root[i];
    else if (!borderPointsAreNoise && borderOf[i] != INT32_MAX)
      r = root[borderOf[i]];
    id = r < 0 ? 0 : int64_t(startsBefore[r]) + 1;
    cluster[i] = id;
  }
  const unsigned same = __match_any_sync(0xffffffffu, static_cast<unsigned long long>(id));
  if (id > 0 && int(threadIdx.x % 32) == __ffs(same) - 1)
    atomicAdd(size + (id - 1), static_cast<unsigned long long>(__popc(same)));
}

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& buffer, int64_t count)
{
  std::vector<T> host(static_cast<std::size_t>(count));
  if (count > 0)
    GPUGEO_CUDA_CHECK(cudaMemcpy(host.data(), buffer.data(), static_cast<std::size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// A whole buffer's download (nothing when `host` is null), for cuda::copyToHost's list.
template <typename T>
cuda::Copy toHost(T* host, const DeviceBuffer<T>& buffer)
{
  return {host, buffer.data(), buffer.bytes()};
}

template <int D>
class CudaIndex final : public NeighbourIndex
{
public:
  CudaIndex(const Points& points, const RunControl& control) : mN(points.count)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDevice = gpu.device;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    build(points, control);
  }

  Backend backend() const override { return Backend::Gpu; }
  const StageTimes& times() const override { return mTimes; }

  Layout layout() const override
  {
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    Layout l;
    l.order = originalHost();
    l.start = download(mStart, mRegions + 1);
    l.dimensions = D;
    return l;
  }

  int64_t pointCount() const override { return mN; }

  void summarizeInto(const Query& query, const SummaryOutput& out, const RunControl& control) override
  {
    validateQuery(query);
    if (!out.count && !out.nearest && !out.nearestDistance && !out.meanDistance)
      return;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    const bool countOnly = query.k == 0 && out.meanDistance == nullptr && out.nearest == nullptr &&
                           out.nearestDistance == nullptr;
    const std::size_t n = static_cast<std::size_t>(mN);
    DeviceBuffer<int32_t> count(n);
    DeviceBuffer<double> sum(countOnly ? 0 : n);
    DeviceBuffer<Hit> nearest(countOnly ? 0 : n);
    // The requested arrays by input index, on the device.
    DeviceBuffer<int32_t> countOut(out.count ? n : 0);
    DeviceBuffer<int64_t> nearestOut(out.nearest ? n : 0);
    DeviceBuffer<double> nearestDistanceOut(out.nearestDistance ? n : 0), meanOut(out.meanDistance ? n : 0);
    {
      ScopedStage stage(mTimes, "compute");
      const double r2 = query.radius * query.radius;
      if (query.k == 0)
      {
        candidates(r2);
        if (countOnly)
          radiusSummaryKernel<D, true><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(),
                                                                       r2, count.data(), nullptr, nullptr);
        else
          radiusSummaryKernel<D, false><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(),
                                                                        r2, count.data(), sum.data(), nearest.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        if (out.nearest || out.nearestDistance)
        {
          nearestOtherKernel<D><<<blocksFor(mN, 128), 128>>>(mView, mN, count.data(), nearest.data());
          GPUGEO_CUDA_CHECK_LAUNCH();
        }
      }
      else
      {
        const double bound = query.radius > 0.0 ? r2 : __builtin_huge_val();
        DeviceBuffer<Hit> scratch(static_cast<std::size_t>(std::min(mN, kBatch) * query.k));
        for (int64_t first = 0; first < mN; first += kBatch)
        {
          const int64_t part = std::min(kBatch, mN - first);
          kNearestKernel<D><<<blocksFor(part, 128), 128>>>(mView, first, part, query.k, bound, scratch.data(),
                                                           count.data(), sum.data(), nearest.data());
          GPUGEO_CUDA_CHECK_LAUNCH();
          GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
          if (control.isCanceled())
            throw Canceled();
        }
      }
      const SummaryOutput byInput{countOut.data(), nearestOut.data(), nearestDistanceOut.data(), meanOut.data()};
      summaryByInputKernel<<<blocksFor(mN, 256), 256>>>(mView.original, mN, count.data(), countOnly ? nullptr : sum.data(),
                                                        countOnly ? nullptr : nearest.data(), byInput);
      GPUGEO_CUDA_CHECK_LAUNCH();
      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage stage(mTimes, "download");
    cuda::copyToHost({toHost(out.count, countOut), toHost(out.nearest, nearestOut),
                      toHost(out.nearestDistance, nearestDistanceOut), toHost(out.meanDistance, meanOut)});
  }

  int64_t countPairs(const Query& query, const RunControl& control) override
  {
    validateQuery(query);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    countPairsOnce(query, control);
    return mPairCount.total;
  }

  int64_t pairsInto(const Query& query, const PairsOutput& out, int64_t capacity, const RunControl& control) override
  {
    validateQuery(query);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    countPairsOnce(query, control);
    const int64_t total = mPairCount.total;
    requirePairsFit(total, capacity, out);
    // What the count kept is used once: it goes when the pairs are written.
    const PairCount count = std::move(mPairCount);
    mPairCount = PairCount{};
    if (total == 0)
      return 0;
    const std::size_t size = static_cast<std::size_t>(total);
    const bool radius = query.k == 0;
    ScopedStage stage(mTimes, "allocate");
    // The radius path sorts each point's run in place between two buffers (CUB's double buffer).
    DeviceBuffer<int32_t> a(size), b(size), bOther(radius ? size : 0);
    DeviceBuffer<double> distance(out.distance ? size : 0), distanceOther(radius && out.distance ? size : 0);
    stage.stop();
    const int32_t* bResult = b.data();
    const double* distanceResult = distance.data();
    {
      ScopedStage device(mTimes, "pairs");
      if (radius)
      {
        // Written at each a's offset, then each a's run sorted by b.
        const double r2 = query.radius * query.radius;
        candidates(r2);
        radiusPairKernel<D><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(), r2,
                                                            nullptr, count.offsets.data(), a.data(), b.data(),
                                                            distance.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        const int64_t* offsets = count.offsets.data();
        cub::DoubleBuffer<int32_t> keys(b.data(), bOther.data());
        cub::DoubleBuffer<double> values(distance.data(), distanceOther.data());
        size_t need = 0;
        if (out.distance)
        {
          GPUGEO_CUDA_CHECK(cub::DeviceSegmentedSort::SortPairs(nullptr, need, keys, values, total, mN, offsets,
                                                                offsets + 1));
          DeviceBuffer<unsigned char> temp(std::max<size_t>(need, 1));
          GPUGEO_CUDA_CHECK(cub::DeviceSegmentedSort::SortPairs(temp.data(), need, keys, values, total, mN, offsets,
                                                                offsets + 1));
        }
        else
        {
          GPUGEO_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, need, keys, total, mN, offsets, offsets + 1));
          DeviceBuffer<unsigned char> temp(std::max<size_t>(need, 1));
          GPUGEO_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(temp.data(), need, keys, total, mN, offsets,
                                                               offsets + 1));
        }
        bResult = keys.Current();
        distanceResult = values.Current();
      }
      else
      {
        splitPairsKernel<<<blocksFor(total, 256), 256>>>(count.keys.data(), total, a.data(), b.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        if (out.distance)
        {
          DeviceBuffer<Point<D>> byInput(static_cast<std::size_t>(mN));
          scatterByInputKernel<D><<<blocksFor(mN, 256), 256>>>(mView.points, mView.original, mN, byInput.data());
          GPUGEO_CUDA_CHECK_LAUNCH();
          pairDistanceKernel<D><<<blocksFor(total, 256), 256>>>(byInput.data(), a.data(), b.data(), total,
                                                                distance.data());
          GPUGEO_CUDA_CHECK_LAUNCH();
        }
      }
      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage copy(mTimes, "download");
    cuda::copyToHost({{out.a, a.data(), a.bytes()}, {out.b, bResult, b.bytes()},
                      {out.distance, distanceResult, out.distance ? distance.bytes() : 0}});
    return total;
  }

  Clusters dbscan(const DbscanOptions& options, const RunControl& control) override
  {
    validateDbscan(options);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    const double r2 = options.eps * options.eps;
    DeviceBuffer<uint8_t> core(static_cast<std::size_t>(mN));
    DeviceBuffer<int32_t> parent(static_cast<std::size_t>(mN)), borderOf(static_cast<std::size_t>(mN)), root(static_cast<std::size_t>(mN));
    DeviceBuffer<uint8_t> coreByInput(static_cast<std::size_t>(mN));
    DeviceBuffer<int64_t> cluster(static_cast<std::size_t>(mN));
    DeviceBuffer<unsigned long long> size;
    int64_t clusters = 0;
    Clusters c;
    {
      ScopedStage stage(mTimes, "compute");
      candidates(r2);
      coreKernel<D><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(), r2,
                                                    options.minPoints, core.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      initKernel<<<blocksFor(mN, 256), 256>>>(mN, parent.data(), borderOf.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      linkKernel<D><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(), r2,
                                                    core.data(), parent.data(), borderOf.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      rootKernel<<<blocksFor(mN, 256), 256>>>(parent.data(), mN, root.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      // the host's arrays made (and their pages touched) while the device links
      c.cluster.resize(static_cast<std::size_t>(mN));
      c.core.resize(static_cast<std::size_t>(mN));
      clusters = finishClusters(core, root, borderOf, options.borderPointsAreNoise, coreByInput, cluster, size);
    }
    if (control.isCanceled())
      throw Canceled();
    ScopedStage stage(mTimes, "download");
    c.size.resize(static_cast<std::size_t>(clusters));
    cuda::copyToHost({toHost(c.cluster.data(), cluster), toHost(c.core.data(), coreByInput),
                      {c.size.data(), size.data(), static_cast<std::size_t>(clusters) * sizeof(int64_t)}});
    return c;
  }

private:
  // DBSCAN's clusters from the core flags (by Morton position), the sets' roots and each border
  // point's lowest core neighbour (both by input index), on the device: the core flags in input order,
  // each point's cluster id and the clusters' sizes (allocated here); returns the number of clusters.
  int64_t finishClusters(const DeviceBuffer<uint8_t>& core, const DeviceBuffer<int32_t>& root,
                         const DeviceBuffer<int32_t>& borderOf, bool borderPointsAreNoise,
                         DeviceBuffer<uint8_t>& coreByInput, DeviceBuffer<int64_t>& cluster,
                         DeviceBuffer<unsigned long long>& size)
  {
    const int64_t n = mN;
    coreByInputKernel<<<blocksFor(n, 256), 256>>>(core.data(), mOriginal.data(), n, coreByInput.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    DeviceBuffer<int32_t> start(static_cast<std::size_t>(n)), startsBefore(static_cast<std::size_t>(n));
    clusterStartKernel<<<blocksFor(n, 256), 256>>>(coreByInput.data(), root.data(), n, start.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t need = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, need, start.data(), startsBefore.data(), n));
    DeviceBuffer<unsigned char> temp(need);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), need, start.data(), startsBefore.data(), n));
    int32_t last[2] = {0, 0};
    GPUGEO_CUDA_CHECK(cudaMemcpy(&last[0], startsBefore.data() + n - 1, sizeof(int32_t), cudaMemcpyDeviceToHost));
    GPUGEO_CUDA_CHECK(cudaMemcpy(&last[1], start.data() + n - 1, sizeof(int32_t), cudaMemcpyDeviceToHost));
    const int64_t clusters = int64_t(last[0]) + last[1];
    size.resize(static_cast<std::size_t>(std::max<int64_t>(clusters, 1)));
    GPUGEO_CUDA_CHECK(cudaMemset(size.data(), 0, size.bytes()));
    clusterIdKernel<<<blocksFor(n, 256), 256>>>(coreByInput.data(), root.data(), borderOf.data(), startsBefore.data(), n,
                                                borderPointsAreNoise, cluster.data(), size.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    return clusters;
  }

  // The input index of each sorted position, on the host: copied once, when results are first put
  // back into input order (a download, outside the index's time).
  const std::vector<int32_t>& originalHost() const
  {
    if (mOriginalHost.empty())
      mOriginalHost = download(mOriginal, mN);
    return mOriginalHost;
  }

  void build(const Points& points, const RunControl& control)
  {
    const int64_t n = mN;
    DeviceBuffer<double> raw(static_cast<std::size_t>(n) * D);
    {
      ScopedStage stage(mTimes, "upload");
      const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(double);
      cuda::copyToDevice({{raw.data(), points.x, bytes}, {raw.data() + n, points.y, bytes},
                          {D == 3 ? raw.data() + 2 * n : nullptr, points.z, D == 3 ? bytes : 0}});
    }
    ScopedStage stage(mTimes, "index");
    // The local frame: per-axis minima and maxima, origin, quantiser.
    DeviceBuffer<double> lo(D), hi(D), origin(D);
    DeviceBuffer<Quantiser<D>> quantiser(1);
    size_t bytes = 0, need = 0;
    for (int a = 0; a < D; ++a)
    {
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Min(nullptr, need, raw.data() + a * n, lo.data() + a, n));
      bytes = std::max(bytes, need);
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, need, raw.data() + a * n, hi.data() + a, n));
      bytes = std::max(bytes, need);
    }
    DeviceBuffer<unsigned char> temp(bytes);
    for (int a = 0; a < D; ++a)
    {
      need = bytes;
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Min(temp.data(), need, raw.data() + a * n, lo.data() + a, n));
      need = bytes;
      GPUGEO_CUDA_CHECK(cub::DeviceReduce::Max(temp.data(), need, raw.data() + a * n, hi.data() + a, n));
    }
    frameKernel<D><<<1, 1>>>(lo.data(), hi.data(), origin.data(), quantiser.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    DeviceBuffer<Point<D>> local(static_cast<std::size_t>(n));
    localKernel<D><<<blocksFor(n, 256), 256>>>(raw.data(), raw.data() + n, D == 3 ? raw.data() + 2 * n : nullptr, n,
                                               origin.data(), local.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    raw.release();
    // Morton order.
    DeviceBuffer<uint64_t> codes(static_cast<std::size_t>(n)), sortedCodes(static_cast<std::size_t>(n));
    DeviceBuffer<int32_t> index(static_cast<std::size_t>(n));
    mOriginal.resize(static_cast<std::size_t>(n));
    mortonKernel<D><<<blocksFor(n, 256), 256>>>(local.data(), n, quantiser.data(), codes.data(), index.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, need, codes.data(), sortedCodes.data(), index.data(),
                                                      mOriginal.data(), n, 0, D * MortonTraits<D>::kLevels));
    temp.resize(need);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), need, codes.data(), sortedCodes.data(), index.data(),
                                                      mOriginal.data(), n, 0, D * MortonTraits<D>::kLevels));
    mPoints.resize(static_cast<std::size_t>(n));
    gatherKernel<D><<<blocksFor(n, 256), 256>>>(local.data(), mOriginal.data(), n, mPoints.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    local.release();
    codes.release();
    index.release();
    // The regions: the quadtree's leaves.
    DeviceBuffer<int64_t> seed(static_cast<std::size_t>(n)), runStart(static_cast<std::size_t>(n));
    runSeedKernel<<<blocksFor(n, 256), 256>>>(sortedCodes.data(), n, seed.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveScan(nullptr, need, seed.data(), runStart.data(), ::cuda::maximum<>{}, n));
    temp.resize(need);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveScan(temp.data(), need, seed.data(), runStart.data(), ::cuda::maximum<>{}, n));
    DeviceBuffer<uint8_t> flag(static_cast<std::size_t>(n));
    regionFlagKernel<D><<<blocksFor(n, 256), 256>>>(sortedCodes.data(), n, runStart.data(), flag.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    mStart.resize(static_cast<std::size_t>(n) + 1);
    DeviceBuffer<int64_t> selected(1);
    thrust::counting_iterator<int64_t> positions(0);
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, need, positions, flag.data(), mStart.data(), selected.data(), n));
    temp.resize(need);
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), need, positions, flag.data(), mStart.data(), selected.data(), n));
    GPUGEO_CUDA_CHECK(cudaMemcpy(&mRegions, selected.data(), sizeof(int64_t), cudaMemcpyDeviceToHost));
    GPUGEO_CUDA_CHECK(cudaMemcpy(mStart.data() + mRegions, &n, sizeof(int64_t), cudaMemcpyHostToDevice));
    // The region tree.
    int64_t levelSize[kMaxTreeLevels], levelOffset[kMaxTreeLevels];
    int levels = 0;
    int64_t total = 0;
    for (int64_t size = mRegions;; size = (size + kFanout - 1) / kFanout)
    {
      levelOffset[levels] = total;
      levelSize[levels] = size;
      total += size;
      ++levels;
      if (size <= 1)
        break;
    }
    mBoxes.resize(static_cast<std::size_t>(total));
    regionBoxKernel<D><<<blocksFor(mRegions, 128), 128>>>(mPoints.data(), mStart.data(), mRegions, mBoxes.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    for (int l = 1; l < levels; ++l)
    {
      parentBoxKernel<D><<<blocksFor(levelSize[l], 128), 128>>>(mBoxes.data(), levelOffset[l - 1], levelSize[l - 1],
                                                               levelOffset[l], levelSize[l]);
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
    if (control.isCanceled())
      throw Canceled();
    mView.points = mPoints.data();
    mView.original = mOriginal.data();
    mView.start = mStart.data();
    mView.regions = mRegions;
    mView.tree.boxes = mBoxes.data();
    mView.tree.levels = levels;
    for (int l = 0; l < levels; ++l)
    {
      mView.tree.levelOffset[l] = levelOffset[l];
      mView.tree.levelSize[l] = levelSize[l];
    }
  }

  // The candidate regions of every region within r2 (kept for the last r2 asked).
  void candidates(double r2)
  {
    if (mCandidatesFor == r2 && mCandidateOffset.size() > 0)
      return;
    mCandidatesFor = -1.0;  // until the lists are whole (an exception half-way leaves them invalid)
    mCandidateOffset.resize(static_cast<std::size_t>(mRegions) + 1);
    DeviceBuffer<int64_t> count(static_cast<std::size_t>(mRegions) + 1);
    GPUGEO_CUDA_CHECK(cudaMemset(count.data(), 0, (static_cast<std::size_t>(mRegions) + 1) * sizeof(int64_t)));
    candidateCountKernel<D><<<blocksFor(mRegions, 128), 128>>>(mView.tree, mRegions, r2, count.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t need = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, need, count.data(), mCandidateOffset.data(), mRegions + 1));
    DeviceBuffer<unsigned char> temp(need);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), need, count.data(), mCandidateOffset.data(), mRegions + 1));
    int64_t total = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpy(&total, mCandidateOffset.data() + mRegions, sizeof(int64_t), cudaMemcpyDeviceToHost));
    mCandidates.resize(static_cast<std::size_t>(std::max<int64_t>(total, 1)));
    candidateFillKernel<D><<<blocksFor(mRegions, 128), 128>>>(mView.tree, mRegions, r2, mCandidateOffset.data(),
                                                              mCandidates.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    mCandidatesFor = r2;
  }

  // What countPairs() found, kept for pairsInto() with the same query: the radius pairs' offsets by
  // input index (n + 1 of them), or the k-nearest pairs' keys (a << 32 | b, sorted).
  struct PairCount
  {
    Query query{-1.0, -1};
    int64_t total = 0;
    DeviceBuffer<int64_t> offsets;
    DeviceBuffer<uint64_t> keys;
  };

  void countPairsOnce(const Query& query, const RunControl& control)
  {
    if (mPairCount.query.radius == query.radius && mPairCount.query.k == query.k)
      return;
    mPairCount.query = Query{-1.0, -1};
    mPairCount.offsets.release();
    mPairCount.keys.release();
    if (query.k > 0)
    {
      mPairCount.keys = kNearestKeys(query, control);
      mPairCount.total = int64_t(mPairCount.keys.size());
    }
    else
    {
      ScopedStage stage(mTimes, "compute");
      const double r2 = query.radius * query.radius;
      candidates(r2);
      DeviceBuffer<int64_t> counts(static_cast<std::size_t>(mN));
      mPairCount.offsets.resize(static_cast<std::size_t>(mN) + 1);
      GPUGEO_CUDA_CHECK(cudaMemset(counts.data(), 0, static_cast<std::size_t>(mN) * sizeof(int64_t)));
      radiusPairKernel<D><<<unsigned(mRegions), kBlock>>>(mView, mCandidateOffset.data(), mCandidates.data(), r2,
                                                          counts.data(), nullptr, nullptr, nullptr, nullptr);
      GPUGEO_CUDA_CHECK_LAUNCH();
      // Inclusive sum into offsets + 1 after offsets[0] = 0: offsets[n] is the total.
      int64_t* offsets = mPairCount.offsets.data();
      GPUGEO_CUDA_CHECK(cudaMemset(offsets, 0, sizeof(int64_t)));
      size_t need = 0;
      GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, need, counts.data(), offsets + 1, mN));
      DeviceBuffer<unsigned char> temp(need);
      GPUGEO_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp.data(), need, counts.data(), offsets + 1, mN));
      GPUGEO_CUDA_CHECK(cudaMemcpy(&mPairCount.total, offsets + mN, sizeof(int64_t), cudaMemcpyDeviceToHost));
    }
    mPairCount.query = query;
  }

  DeviceBuffer<uint64_t> kNearestKeys(const Query& query, const RunControl& control)
  {
    ScopedStage stage(mTimes, "compute");
    const double bound = query.radius > 0.0 ? query.radius * query.radius : __builtin_huge_val();
    const int64_t slots = mN * query.k;
    DeviceBuffer<uint64_t> edges(static_cast<std::size_t>(slots)), sorted(static_cast<std::size_t>(slots));
    DeviceBuffer<Hit> scratch(static_cast<std::size_t>(std::min(mN, kBatch) * query.k));
    for (int64_t first = 0; first < mN; first += kBatch)
    {
      const int64_t part = std::min(kBatch, mN - first);
      kNearestEdgeKernel<D><<<blocksFor(part, 128), 128>>>(mView, first, part, query.k, bound, scratch.data(),
                                                           edges.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
      if (control.isCanceled())
        throw Canceled();
    }
    size_t need = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, need, edges.data(), sorted.data(), slots));
    DeviceBuffer<unsigned char> temp(need);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp.data(), need, edges.data(), sorted.data(), slots));
    DeviceBuffer<int64_t> selected(1);
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Unique(nullptr, need, sorted.data(), edges.data(), selected.data(), slots));
    temp.resize(need);
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Unique(temp.data(), need, sorted.data(), edges.data(), selected.data(), slots));
    int64_t unique = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpy(&unique, selected.data(), sizeof(int64_t), cudaMemcpyDeviceToHost));
    // The last unique key is the "no neighbour" sentinel when some point had fewer than k.
    uint64_t lastKey = 0;
    if (unique > 0)
      GPUGEO_CUDA_CHECK(cudaMemcpy(&lastKey, edges.data() + unique - 1, sizeof(uint64_t), cudaMemcpyDeviceToHost));
    if (unique > 0 && lastKey == ~uint64_t(0))
      --unique;
    DeviceBuffer<uint64_t> out(static_cast<std::size_t>(unique));
    if (unique > 0)
      GPUGEO_CUDA_CHECK(cudaMemcpy(out.data(), edges.data(), static_cast<std::size_t>(unique) * sizeof(uint64_t), cudaMemcpyDeviceToDevice));
    return out;
  }


  int64_t mN;
  int mDevice = 0;
  StageTimes mTimes;
  DeviceBuffer<Point<D>> mPoints;
  DeviceBuffer<int32_t> mOriginal;
  mutable std::vector<int32_t> mOriginalHost;  // originalHost()'s copy
  DeviceBuffer<int64_t> mStart;
  DeviceBuffer<Box<D>> mBoxes;
  int64_t mRegions = 0;
  RegionView<D> mView;
  DeviceBuffer<int64_t> mCandidateOffset, mCandidates;
  double mCandidatesFor = -1.0;
  PairCount mPairCount;
};

}  // namespace

std::unique_ptr<NeighbourIndex> makeCudaIndex(const Points& points, const RunControl& control)
{
  if (points.z)
    return std::make_unique<CudaIndex<3>>(points, control);
  return std::make_unique<CudaIndex<2>>(points, control);
}

}  // namespace gpugeo::neighbours::detail
