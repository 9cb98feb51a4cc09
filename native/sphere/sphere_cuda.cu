// CUDA backend of the spherical labelling: the paper's four brute-force kernels and the indexed
// path (a block search kernel, then one thread per point over its block's list).
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstring>

#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/staged_copy.h"
#include "sphere/detail/labeller_base.h"
#include "sphere/detail/site_tree_cuda.h"

namespace gpugeo::sphere::detail {

namespace {

constexpr int kThreads = 128;
// Constant memory holds 2,048 sites (48 KiB) a launch, as in the paper's constant-memory kernels.
constexpr int kConstantSites = 2048;
__constant__ double cSites[3 * kConstantSites];
constexpr int kSharedTile = kThreads;
constexpr int kRegisterPoints = 4;

// ---- Indexed path ----

template <class Queries>
__global__ void __launch_bounds__(kThreads) blockSearchKernel(Queries q, SiteTreeView tree, int32_t* candidates,
                                                              int32_t* counts, unsigned long long* totals)
{
  const int64_t b = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  int32_t found = 0;
  if (b < q.blocks())
  {
    Vec3 sum{0, 0, 0};
    Vec3 p;
    int64_t out;
    for (int j = 0; j < kBlockPoints; ++j)
      if (q.point(b, j, p, out))
      {
        sum.x = exact::add(sum.x, p.x);
        sum.y = exact::add(sum.y, p.y);
        sum.z = exact::add(sum.z, p.z);
      }
    const Vec3 c = normalised(sum.x, sum.y, sum.z);
    double rho2 = 0.0;
    for (int j = 0; j < kBlockPoints; ++j)
      if (q.point(b, j, p, out))
      {
        const double d2 = chord2(c, p);
        rho2 = d2 > rho2 ? d2 : rho2;
      }
    const Nearest centre = treeNearest(tree, c);
    found = treeGather(tree, c, gatherRadius2(rho2, centre.d2), candidates + b * kBlockCandidates, kBlockCandidates);
    counts[b] = found;
  }
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const unsigned long long blockFound = Reduce(storage).Sum((unsigned long long)found);
  __syncthreads();
  const unsigned long long blockOverflow = Reduce(storage).Sum(found > kBlockCandidates ? 1ull : 0ull);
  if (threadIdx.x == 0)
  {
    atomicAdd(&totals[0], blockFound);
    atomicAdd(&totals[1], blockOverflow);
  }
}

template <class Queries>
__global__ void __launch_bounds__(kThreads) blockLabelKernel(Queries q, SiteTreeView tree, const int32_t* candidates,
                                                             const int32_t* counts, int32_t* site, float* distanceKm)
{
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t b = t / kBlockPoints;
  Vec3 p;
  int64_t out;
  if (b >= q.blocks() || !q.point(b, int(t % kBlockPoints), p, out))
    return;
  const int32_t found = counts[b];
  Nearest best{1e300, 0x7fffffff};
  if (found > kBlockCandidates)
    best = treeNearest(tree, p);
  else
  {
    const int32_t* list = candidates + b * kBlockCandidates;
    for (int32_t k = 0; k < found; ++k)
    {
      const int32_t i = list[k];
      const double d2 = chord2(p, tree.sites[i]);
      if (better(d2, tree.original[i], best))
        best = {d2, tree.original[i]};
    }
  }
  site[out] = best.site;
  if (distanceKm)
    distanceKm[out] = chordToKm(best.d2, kEarthRadiusKm);
}

// ---- The paper's kernels: every point against every site, in input order (strict "smaller" keeps
// the lowest index on ties) ----

template <class Queries>
__device__ bool pointOf(const Queries& q, int64_t t, Vec3& p, int64_t& out)
{
  const int64_t b = t / kBlockPoints;
  return b < q.blocks() && q.point(b, int(t % kBlockPoints), p, out);
}

__device__ inline void store(int64_t out, double d2, int32_t best, int32_t* site, float* distanceKm)
{
  site[out] = best;
  if (distanceKm)
    distanceKm[out] = chordToKm(d2, kEarthRadiusKm);
}

// Kernel 1 of the paper: sites read from global memory.
template <class Queries>
__global__ void __launch_bounds__(kThreads) bruteGlobalKernel(Queries q, const Vec3* sites, int32_t count,
                                                              int32_t* site, float* distanceKm)
{
  Vec3 p;
  int64_t out;
  if (!pointOf(q, int64_t(blockIdx.x) * kThreads + threadIdx.x, p, out))
    return;
  double best = 1e300;
  int32_t bestSite = 0;
  for (int32_t i = 0; i < count; ++i)
  {
    const double d2 = chord2(p, sites[i]);
    if (d2 < best)
    {
      best = d2;
      bestSite = i;
    }
  }
  store(out, best, bestSite, site, distanceKm);
}

// Kernel 2: sites staged through shared memory, one tile of blockDim sites at a time.
template <class Queries>
__global__ void __launch_bounds__(kThreads) bruteSharedKernel(Queries q, const Vec3* sites, int32_t count,
                                                              int32_t* site, float* distanceKm)
{
  __shared__ Vec3 tile[kSharedTile];
  Vec3 p;
  int64_t out;
  const bool active = pointOf(q, int64_t(blockIdx.x) * kThreads + threadIdx.x, p, out);
  double best = 1e300;
  int32_t bestSite = 0;
  for (int32_t base = 0; base < count; base += kSharedTile)
  {
    if (base + int32_t(threadIdx.x) < count)
      tile[threadIdx.x] = sites[base + threadIdx.x];
    __syncthreads();
    const int32_t n = count - base < kSharedTile ? count - base : kSharedTile;
    if (active)
      for (int32_t k = 0; k < n; ++k)
      {
        const double d2 = chord2(p, tile[k]);
        if (d2 < best)
        {
          best = d2;
          bestSite = base + k;
        }
      }
    __syncthreads();
  }
  if (active)
    store(out, best, bestSite, site, distanceKm);
}

// Constant memory: one launch per chunk of 2,048 sites; the running best lives in global memory.
template <class Queries>
__global__ void __launch_bounds__(kThreads) bruteConstantKernel(Queries q, int32_t base, int32_t n, double* bestD2,
                                                                int32_t* bestSite, bool last, int32_t* site,
                                                                float* distanceKm)
{
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  Vec3 p;
  int64_t out;
  if (!pointOf(q, t, p, out))
    return;
  double best = base == 0 ? 1e300 : bestD2[t];
  int32_t bestIndex = base == 0 ? 0 : bestSite[t];
  for (int32_t k = 0; k < n; ++k)
  {
    const Vec3 s{cSites[3 * k], cSites[3 * k + 1], cSites[3 * k + 2]};
    const double d2 = chord2(p, s);
    if (d2 < best)
    {
      best = d2;
      bestIndex = base + k;
    }
  }
  if (last)
    store(out, best, bestIndex, site, distanceKm);
  else
  {
    bestD2[t] = best;
    bestSite[t] = bestIndex;
  }
}

// Kernel 3: constant memory, and four points a thread kept in registers so each site read serves four.
template <class Queries>
__global__ void __launch_bounds__(kThreads) bruteRegisterKernel(Queries q, int32_t base, int32_t n, double* bestD2,
                                                                int32_t* bestSite, bool last, int32_t* site,
                                                                float* distanceKm)
{
  const int64_t t0 = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kRegisterPoints;
  Vec3 p[kRegisterPoints];
  int64_t out[kRegisterPoints];
  bool active[kRegisterPoints];
  double best[kRegisterPoints];
  int32_t bestIndex[kRegisterPoints];
#pragma unroll
  for (int r = 0; r < kRegisterPoints; ++r)
  {
    active[r] = pointOf(q, t0 + r, p[r], out[r]);
    if (!active[r])
      p[r] = {2.0, 2.0, 2.0};
    best[r] = base == 0 || !active[r] ? 1e300 : bestD2[t0 + r];
    bestIndex[r] = base == 0 || !active[r] ? 0 : bestSite[t0 + r];
  }
  for (int32_t k = 0; k < n; ++k)
  {
    const Vec3 s{cSites[3 * k], cSites[3 * k + 1], cSites[3 * k + 2]};
#pragma unroll
    for (int r = 0; r < kRegisterPoints; ++r)
    {
      const double d2 = chord2(p[r], s);
      if (d2 < best[r])
      {
        best[r] = d2;
        bestIndex[r] = base + k;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRegisterPoints; ++r)
    if (active[r])
    {
      if (last)
        store(out[r], best[r], bestIndex[r], site, distanceKm);
      else
      {
        bestD2[t0 + r] = best[r];
        bestSite[t0 + r] = bestIndex[r];
      }
    }
}

unsigned blocksFor(int64_t threads)
{
  return unsigned((threads + kThreads - 1) / kThreads);
}

class CudaSphereLabeller final : public LabellerBase
{
public:
  CudaSphereLabeller(const SiteSet& sites, const SphereOptions& options, const RunControl& control)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDevice = gpu.device;
    mDeviceName = gpu.name;
    mMethod = resolveMethod(options.method, true, sites.count);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    buildDeviceSiteTree(sites, options.threads, control, mSites, mTree, mTimes);
    mStats.uniqueSites = mSites.treeCount;
  }

  void labelQtm(int level, uint64_t first, int64_t count, int32_t* site, float* distanceKm,
                const RunControl& control) override
  {
    checkQtmRange(level, first, count);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    const std::vector<double> sines = qtmSineTable(level);
    cuda::DeviceBuffer<double> table;
    copyUp(table, sines);
    for (int64_t done = 0; done < count; done += kChunkPoints)
    {
      if (control.isCanceled())
        throw Canceled();
      QtmQueries q;
      q.trig = {table.data(), int32_t(1) << level};
      q.level = level;
      q.first = first + uint64_t(done);
      q.count = std::min<int64_t>(kChunkPoints, count - done);
      runChunk(q, q.count, site + done, distanceKm ? distanceKm + done : nullptr);
    }
  }

  void labelGridRows(const LonLatGrid& grid, int64_t row0, int64_t rows, int32_t* site, float* distanceKm,
                     const RunControl& control) override
  {
    checkGridBand(grid, row0, rows);
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    const int64_t chunkRows = std::max<int64_t>(8, kChunkPoints / grid.width / 8 * 8);
    cuda::DeviceBuffer<double> colSin, colCos, rowSin, rowCos;
    for (int64_t done = 0; done < rows; done += chunkRows)
    {
      if (control.isCanceled())
        throw Canceled();
      const int64_t part = std::min(chunkRows, rows - done);
      const GridTables t = gridTables(grid, row0 + done, part);
      copyUp(colSin, t.colSin);
      copyUp(colCos, t.colCos);
      copyUp(rowSin, t.rowSin);
      copyUp(rowCos, t.rowCos);
      GridQueries q;
      q.colSin = colSin.data();
      q.colCos = colCos.data();
      q.rowSin = rowSin.data();
      q.rowCos = rowCos.data();
      q.width = grid.width;
      q.rows = part;
      runChunk(q, part * grid.width, site + done * grid.width, distanceKm ? distanceKm + done * grid.width : nullptr);
    }
  }

  Backend backend() const override { return Backend::Gpu; }
  std::string deviceName() const override { return mDeviceName; }

private:
  static constexpr int64_t kChunkPoints = int64_t(1) << 26;

  template <typename T>
  static void copyUp(cuda::DeviceBuffer<T>& buffer, const std::vector<T>& host)
  {
    buffer.resize(std::max<std::size_t>(1, host.size()));
    GPUGEO_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }

  template <class Queries>
  void runChunk(const Queries& q, int64_t points, int32_t* site, float* distanceKm)
  {
    const int64_t blocks = q.blocks();
    const int64_t slots = blocks * kBlockPoints;
    mSiteOut.resize(std::size_t(points));
    if (distanceKm)
      mDistanceOut.resize(std::size_t(points));
    float* dist = distanceKm ? mDistanceOut.data() : nullptr;
    cuda::EventTimer compute;
    compute.start(nullptr);
    const int32_t siteCount = int32_t(mTree.vectors.size());
    switch (mMethod)
    {
      case NearestMethod::BruteGlobal:
        bruteGlobalKernel<<<blocksFor(slots), kThreads>>>(q, mTree.vectors.data(), siteCount, mSiteOut.data(), dist);
        GPUGEO_CUDA_CHECK_LAUNCH();
        break;
      case NearestMethod::BruteShared:
        bruteSharedKernel<<<blocksFor(slots), kThreads>>>(q, mTree.vectors.data(), siteCount, mSiteOut.data(), dist);
        GPUGEO_CUDA_CHECK_LAUNCH();
        break;
      case NearestMethod::BruteConstant:
      case NearestMethod::BruteRegister:
      {
        mBestD2.resize(std::size_t(slots));
        mBestSite.resize(std::size_t(slots));
        for (int32_t base = 0; base < siteCount; base += kConstantSites)
        {
          const int32_t n = std::min(kConstantSites, siteCount - base);
          GPUGEO_CUDA_CHECK(cudaMemcpyToSymbolAsync(cSites, mTree.vectors.data() + base, std::size_t(n) * sizeof(Vec3), 0,
                                                    cudaMemcpyDeviceToDevice, nullptr));
          const bool last = base + n >= siteCount;
          if (mMethod == NearestMethod::BruteConstant)
            bruteConstantKernel<<<blocksFor(slots), kThreads>>>(q, base, n, mBestD2.data(), mBestSite.data(), last,
                                                                mSiteOut.data(), dist);
          else
            bruteRegisterKernel<<<blocksFor((slots + kRegisterPoints - 1) / kRegisterPoints), kThreads>>>(
              q, base, n, mBestD2.data(), mBestSite.data(), last, mSiteOut.data(), dist);
          GPUGEO_CUDA_CHECK_LAUNCH();
        }
        break;
      }
      default:
      {
        const SiteTreeView tree = mSites.view(mTree.sites.data(), mTree.original.data(), mTree.boxes.data());
        mCandidates.resize(std::size_t(blocks) * kBlockCandidates);
        mCounts.resize(std::size_t(blocks));
        mTotals.resize(2);
        GPUGEO_CUDA_CHECK(cudaMemsetAsync(mTotals.data(), 0, 2 * sizeof(unsigned long long), nullptr));
        blockSearchKernel<<<blocksFor(blocks), kThreads>>>(q, tree, mCandidates.data(), mCounts.data(), mTotals.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
        blockLabelKernel<<<blocksFor(slots), kThreads>>>(q, tree, mCandidates.data(), mCounts.data(), mSiteOut.data(), dist);
        GPUGEO_CUDA_CHECK_LAUNCH();
        unsigned long long totals[2];
        GPUGEO_CUDA_CHECK(cudaMemcpy(totals, mTotals.data(), sizeof(totals), cudaMemcpyDeviceToHost));
        mStats.blocks += blocks;
        mStats.candidates += int64_t(totals[0]);
        mStats.overflowBlocks += int64_t(totals[1]);
      }
    }
    compute.stop(nullptr);
    mTimes.add("compute", compute.milliseconds());
    cuda::EventTimer download;
    download.start(nullptr);
    cuda::copyToHost(site, mSiteOut.data(), std::size_t(points) * sizeof(int32_t));
    if (distanceKm)
      cuda::copyToHost(distanceKm, dist, std::size_t(points) * sizeof(float));
    download.stop(nullptr);
    mTimes.add("download", download.milliseconds());
  }

  int mDevice = 0;
  std::string mDeviceName;
  DeviceSiteTree mTree;
  cuda::DeviceBuffer<int32_t> mCandidates, mCounts, mSiteOut, mBestSite;
  cuda::DeviceBuffer<float> mDistanceOut;
  cuda::DeviceBuffer<double> mBestD2;
  cuda::DeviceBuffer<unsigned long long> mTotals;
};

}  // namespace

std::unique_ptr<SphereLabeller> makeCudaSphereLabeller(const SiteSet& sites, const SphereOptions& options,
                                                       const RunControl& control)
{
  return std::make_unique<CudaSphereLabeller>(sites, options, control);
}

}  // namespace gpugeo::sphere::detail
