// Prototype for issue 22 (not part of the build; run_voronoi_grid.sh on the GPU machine): plane
// Voronoi labels and distances from a uniform bucket grid of the sites instead of the site tree and
// the tile quadtree, exact under the contract of native/voronoi/voronoi_raster.h (the per-element
// math is detail/nearest_site.h's). Times upload (pinned) + index + labelling with CUDA events and
// checks 4,096 sampled pixels (corners included) against a brute-force search of every site.
//
// Method. Index: each site's bucket (side a power of two, from the densest 64 x 64 block of pixels
// so that it holds about PERBUCKET sites a bucket, at least a quarter of the mean spacing, at most
// 2^24 buckets; sites outside the grid go to the nearest edge bucket: the projection onto the grid
// only brings a site nearer, so the bucket bounds stay valid), a CUB radix sort by bucket, bucket
// starts by a binary search per bucket. Labelling: a block of 8 warps per 64 x 64 root; the root's
// tile side from its site count (TARGET sites a tile, at most MAXTILE, at least 2); a warp per
// tile: a bound (the smallest farthest distance from a site of the tile's buckets, widened until
// one is found), the candidates (every site of the buckets within the bound that mayBeNearest
// keeps) in shared memory, then each pixel by nearestCandidate (certified float32 scan, float64 on
// a near tie). A tile whose list passes 256 splits into four; a single pixel that still does
// scans its buckets exactly. No host synchronisation between index and labels.
//
// H100, 2026-11-27, TARGET 8, PERBUCKET 4, MAXTILE 16 (ms; upload + index + labels; CuPy in the
// same call; 0 mismatches in every run, skewed = 90 % of the sites in 1 % of the area):
//   8192² uniform:  100 0.74 | 1k 0.72 | 10k 0.73 | 100k 0.84 | 1M 1.80 | 4M 3.48
//   CuPy EDT:           5.41 |    5.52 |     5.86 |      6.07 |    6.81 |    7.89   (7.3x ... 3.8x, 2.3x)
//   8192² skewed:   100 0.87 | 1k 0.80 | 10k 2.03 | 100k 1.05 | 1M 1.91 | 4M 4.57   (CuPy 5.47, 5.56, 5.72, 6.21)
//   16384² uniform: 100 2.86 | 1k 2.72 | 10k 2.64 | 100k 2.70 | 1M 3.80 | 4M 7.01   (CuPy 21.8-26.7)
//   16384² skewed:  100 3.28 | 1k 3.08 | 10k 5.22 | 100k 3.52 | 1M 4.00 | 4M 7.45
// The current labeller (README): 8192² 1M 9.67 ms, 100k skewed 5.05 ms, 500k skewed 8.60 ms.
// Short of 3x CuPy: 8192² at 4M (upload alone 1.19 ms of 64 MB at 55 GB/s; labels 1.88 ms, issue
// bound: 1.56·10⁹ warp instructions, 80 % issue slots busy, 64 registers, half occupancy) and
// skewed 10k (tiles at the cluster's edge overflow and split: 60 splits cost 1.3 ms). Tried and
// dropped: a counting sort (slower than the radix sort), candidates sorted by distance from the tile
// centre with an early stop, per-quadrant sublists filtered in float64 or float32 (all slower).
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "voronoi/detail/nearest_site.h"

using namespace gpugeo::voronoi::detail;
namespace exact = gpugeo::exact;

#define CK(x)                                                                       \
  do                                                                                \
  {                                                                                 \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess)                                                           \
    {                                                                               \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

constexpr int kRoot = 64;
constexpr int kWarps = 8;
constexpr int kCap = 256;  // candidates per warp in shared memory

struct GridView
{
  int width, height;   // pixels
  int bucket;          // bucket side in pixels (power of two)
  int shift;           // log2(bucket)
  int bx, by;          // buckets per row, column
  const int32_t* start;  // bx*by+1 offsets into sorted sites
  const Point* points;   // sorted by bucket
  const int32_t* index;  // input index per sorted site
  int sitesPerTile;      // target
  int maxTile;           // largest tile side
};

__global__ void keyKernel(const Point* p, int n, int shift, int bx, int by, uint32_t* key, int32_t* idx)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  double fx = floor(p[i].x / double(1 << shift));
  double fy = floor(p[i].y / double(1 << shift));
  int cx = int(fmin(fmax(fx, 0.0), double(bx - 1)));
  int cy = int(fmin(fmax(fy, 0.0), double(by - 1)));
  key[i] = uint32_t(cy) * uint32_t(bx) + uint32_t(cx);
  idx[i] = i;
}

__global__ void gatherKernel(const Point* p, const int32_t* order, int n, Point* sorted)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    sorted[i] = p[order[i]];
}

// start[b] = the first sorted position whose key is >= b, for b in [0, buckets] (a binary search per
// bucket: no thread loops over a long run of empty buckets).
__global__ void startKernel(const uint32_t* key, int n, int buckets, int32_t* start)
{
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > buckets)
    return;
  int lo = 0, hi = n;
  while (lo < hi)
  {
    const int mid = (lo + hi) / 2;
    if (key[mid] < uint32_t(b))
      lo = mid + 1;
    else
      hi = mid;
  }
  start[b] = lo;
}

constexpr unsigned kFull = 0xffffffffu;

struct WarpList
{
  LocalPoint local[kCap];
  int32_t slot[kCap];
};

struct GridCandidates
{
  const LocalPoint* localPoints;
  const int32_t* slots;
  const Point* points;
  const int32_t* index;
  int count;
  __device__ LocalPoint local(int k) const { return localPoints[k]; }
  __device__ const Point& point(int k) const { return points[slots[k]]; }
  __device__ int32_t site(int k) const { return index[slots[k]]; }
};

// Calls f(slot) (slot -1 for idle lanes, the same number of calls in every lane) for every site of
// the buckets [x0,x1] x [y0,y1], 32 sites at a time over all rows.
template <class F>
__device__ void forRect(const GridView& g, int x0, int y0, int x1, int y1, int lane, F&& f)
{
  for (int rowBase = y0; rowBase <= y1; rowBase += 32)
  {
    const int y = rowBase + lane;
    int s0 = 0, len = 0;
    if (y <= y1)
    {
      s0 = g.start[y * g.bx + x0];
      len = g.start[y * g.bx + x1 + 1] - s0;
    }
    int incl = len;
    for (int o = 1; o < 32; o <<= 1)
    {
      const int v = __shfl_up_sync(kFull, incl, o);
      if (lane >= o)
        incl += v;
    }
    const int total = __shfl_sync(kFull, incl, 31);
    const int excl = incl - len;
    for (int base = 0; base < total; base += 32)
    {
      const int k = base + lane;
      int lo = 0;
      for (int step = 16; step > 0; step >>= 1)
      {
        const int v = __shfl_sync(kFull, excl, lo + step);
        if (v <= k)
          lo += step;
      }
      // lo: the last row whose first flattened index is <= k (rows of length 0 skipped by <=)
      const int rs = __shfl_sync(kFull, s0, lo);
      const int re = __shfl_sync(kFull, excl, lo);
      f(k < total ? rs + (k - re) : -1);
    }
  }
}

__device__ void bucketRect(const GridView& g, double x0, double y0, double x1, double y1, int& bx0, int& by0,
                           int& bx1, int& by1)
{
  const double inv = 1.0 / double(g.bucket);
  bx0 = int(fmax(0.0, floor(x0 * inv)));
  by0 = int(fmax(0.0, floor(y0 * inv)));
  bx1 = int(fmin(double(g.bx - 1), floor(x1 * inv)));
  by1 = int(fmin(double(g.by - 1), floor(y1 * inv)));
}

struct TileJob
{
  int c0, r0, side;
};

// One tile: bound, candidates, pixels. Returns false when its list overflows (the caller splits it).
__device__ bool labelTile(const GridView& g, WarpList& L, int tc0, int tr0, int side, int lane, int32_t* outSite,
                          float* outDist, bool mustFinish)
{
  const int tc1 = min(g.width, tc0 + side), tr1 = min(g.height, tr0 + side);
  const Box region = pixelCentreBox(tc0, tc1, tr0, tr1);
  // Bound: the tile's buckets widened by 1, then by doubling widths until a site is found.
  double bound = 1.79769313486231570e308;
  for (int widen = 0; ; widen = widen ? widen * 2 : g.bucket)
  {
    int bx0, by0, bx1, by1;
    bucketRect(g, tc0 - double(widen), tr0 - double(widen), tc1 + double(widen), tr1 + double(widen), bx0, by0, bx1,
               by1);
    forRect(g, bx0, by0, bx1, by1, lane, [&](int s) {
      if (s >= 0)
        bound = minOf(bound, siteBound(g.points[s], region));
    });
    for (int o = 16; o > 0; o >>= 1)
      bound = minOf(bound, __shfl_xor_sync(kFull, bound, o));
    if (bound < 1.79769313486231570e308 || (bx0 == 0 && by0 == 0 && bx1 == g.bx - 1 && by1 == g.by - 1))
      break;
  }
  const double rad = exact::mul(exact::sqrt(bound), 1.0 + 0x1p-30) + 1e-6;
  int bx0, by0, bx1, by1;
  bucketRect(g, region.x0 - rad, region.y0 - rad, region.x1 + rad, region.y1 + rad, bx0, by0, bx1, by1);
  int kept = 0;
  forRect(g, bx0, by0, bx1, by1, lane, [&](int s) {
    const bool keep = s >= 0 && mayBeNearest(g.points[s], region, bound);
    const unsigned mask = __ballot_sync(kFull, keep);
    const int at = kept + __popc(mask & ((1u << lane) - 1u));
    if (keep && at < kCap)
    {
      L.local[at] = toLocal(g.points[s], tc0, tr0);
      L.slot[at] = s;
    }
    kept += __popc(mask);
  });
  __syncwarp();
  if (kept > kCap && !mustFinish)
    return false;
  const int w = tc1 - tc0, h = tr1 - tr0;
  if (kept > kCap)
  {
    // A single pixel with too many candidates (heavy duplication): an exact streaming scan.
    const double px = tc0 + 0.5, py = tr0 + 0.5;
    double best = 1.79769313486231570e308;
    int bestSite = 0x7fffffff;
    forRect(g, bx0, by0, bx1, by1, lane, [&](int s) {
      if (s < 0)
        return;
      const double e = squaredDistance(px, py, g.points[s]);
      if (e < best || (e == best && g.index[s] < bestSite))
      {
        best = e;
        bestSite = g.index[s];
      }
    });
    for (int o = 16; o > 0; o >>= 1)
    {
      const double ob = __shfl_xor_sync(kFull, best, o);
      const int os = __shfl_xor_sync(kFull, bestSite, o);
      if (ob < best || (ob == best && os < bestSite))
      {
        best = ob;
        bestSite = os;
      }
    }
    if (lane == 0)
    {
      outSite[int64_t(tr0) * g.width + tc0] = bestSite;
      outDist[int64_t(tr0) * g.width + tc0] = distanceValue(best, 1.0);
    }
    __syncwarp();
    return true;
  }
  for (int p = lane; p < w * h; p += 32)
  {
    const int c = tc0 + p % w, rr = tr0 + p / w;
    const PixelAnswer a = nearestCandidate(GridCandidates{L.local, L.slot, g.points, g.index, kept}, c, rr, tc0, tr0,
                                           float(side * side));
    const int64_t i = int64_t(rr) * g.width + c;
    outSite[i] = a.site;
    outDist[i] = distanceValue(a.squared, 1.0);
  }
  __syncwarp();
  return true;
}

__global__ void __launch_bounds__(kWarps * 32) labelKernel(GridView g, int32_t* outSite, float* outDist,
                                                           unsigned long long* overflow)
{
  extern __shared__ unsigned char smem[];
  WarpList* lists = reinterpret_cast<WarpList*>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpList& L = lists[warp];
  const int rootsX = (g.width + kRoot - 1) / kRoot;
  const int rx = blockIdx.x % rootsX, ry = blockIdx.x / rootsX;
  const int c0 = rx * kRoot, r0 = ry * kRoot;
  int bx0, by0, bx1, by1;
  bucketRect(g, c0, r0, c0 + kRoot - 1, r0 + kRoot - 1, bx0, by0, bx1, by1);
  double count = 0;
  {
    int n = 0;
    for (int y = by0 + lane; y <= by1; y += 32)
      n += g.start[y * g.bx + bx1 + 1] - g.start[y * g.bx + bx0];
    for (int o = 16; o > 0; o >>= 1)
      n += __shfl_xor_sync(kFull, n, o);
    count = double(n);
    const double covered = double(bx1 - bx0 + 1) * double(by1 - by0 + 1) * g.bucket * g.bucket;
    count = count * double(kRoot * kRoot) / covered;  // sites per root area
  }
  int T = g.maxTile;
  while (T > 2 && count * T * T / double(kRoot * kRoot) > g.sitesPerTile)
    T /= 2;
  const int perSide = kRoot / T;
  for (int t = warp; t < perSide * perSide; t += kWarps)
  {
    TileJob stack[24];
    int depth = 0;
    stack[depth++] = TileJob{c0 + (t % perSide) * T, r0 + (t / perSide) * T, T};
    while (depth > 0)
    {
      const TileJob job = stack[--depth];
      if (job.c0 >= g.width || job.r0 >= g.height)
        continue;
      if (!labelTile(g, L, job.c0, job.r0, job.side, lane, outSite, outDist, job.side == 1))
      {
        if (lane == 0)
          atomicAdd(overflow, 1ull);
        const int half = job.side / 2;
        for (int q = 3; q >= 0; --q)
          stack[depth++] = TileJob{job.c0 + (q & 1) * half, job.r0 + (q >> 1) * half, half};
      }
    }
  }
}

__global__ void bruteKernel(const Point* pts, int n, const int64_t* pix, int m, int width, int32_t* site, float* dist)
{
  int k = blockIdx.x;
  if (k >= m)
    return;
  const int64_t i = pix[k];
  const double px = double(i % width) + 0.5, py = double(i / width) + 0.5;
  double best = 1.79769313486231570e308;
  int bs = 0x7fffffff;
  for (int s = threadIdx.x; s < n; s += blockDim.x)
  {
    const double e = squaredDistance(px, py, pts[s]);
    if (e < best || (e == best && s < bs))
    {
      best = e;
      bs = s;
    }
  }
  __shared__ double sb[256];
  __shared__ int ss[256];
  sb[threadIdx.x] = best;
  ss[threadIdx.x] = bs;
  __syncthreads();
  if (threadIdx.x == 0)
  {
    for (int t = 1; t < blockDim.x; ++t)
      if (sb[t] < best || (sb[t] == best && ss[t] < bs))
      {
        best = sb[t];
        bs = ss[t];
      }
    site[k] = bs;
    dist[k] = distanceValue(best, 1.0);
  }
}

int main(int argc, char** argv)
{
  const int size = std::atoi(argv[1]);
  const int n = std::atoi(argv[2]);
  const bool skewed = argc > 3 && argv[3][0] == 's';
  const int target = argc > 4 ? std::atoi(argv[4]) : 4;
  const double bucketFactor = argc > 5 ? std::atof(argv[5]) : 2.0;
  const int reps = 7;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  Point* host;
  CK(cudaMallocHost(&host, sizeof(Point) * n));
  for (int i = 0; i < n; ++i)
  {
    if (skewed && i % 10 != 0)
      host[i] = Point{size * (0.25 + 0.1 * U(rng)), size * (0.55 + 0.1 * U(rng))};
    else
      host[i] = Point{size * U(rng), size * U(rng)};
    if (i % 97 == 5 && i > 0)
      host[i] = host[i - 1];  // duplicates
  }
  // bucket side: from the densest 64 x 64 root, so that it holds about `perBucket` sites a bucket
  const double perBucket = bucketFactor;
  int maxRoot = 0;
  {
    const int rootsX = (size + 63) / 64;
    std::vector<int> roots(size_t(rootsX) * rootsX, 0);
    for (int i = 0; i < n; ++i)
    {
      const int rx = std::min(rootsX - 1, std::max(0, int(host[i].x / 64))), ry = std::min(rootsX - 1, std::max(0, int(host[i].y / 64)));
      maxRoot = std::max(maxRoot, ++roots[size_t(ry) * rootsX + rx]);
    }
  }
  // ... and at most 2^24 buckets
  const double side = std::max({64.0 * std::sqrt(perBucket / maxRoot), std::sqrt(double(size) * size / n) / 4.0,
                                double(size) / 4096.0});
  int shift = 1;
  while ((1 << (shift + 1)) <= side && shift < 10)
    ++shift;
  GridView g{};
  g.width = g.height = size;
  g.bucket = 1 << shift;
  g.shift = shift;
  g.bx = (size + g.bucket - 1) / g.bucket;
  g.by = g.bx;
  g.sitesPerTile = target;
  g.maxTile = argc > 6 ? std::atoi(argv[6]) : 16;
  const int buckets = g.bx * g.by;
  int bits = 1;
  while ((1ll << bits) < buckets)
    ++bits;

  Point *dIn, *dSorted;
  uint32_t *dKey, *dKeySorted;
  int32_t *dIdx, *dIdxSorted, *dStart, *dSite;
  float* dDist;
  unsigned long long* dOverflow;
  CK(cudaMalloc(&dIn, sizeof(Point) * n));
  CK(cudaMalloc(&dSorted, sizeof(Point) * n));
  CK(cudaMalloc(&dKey, 4ll * n));
  CK(cudaMalloc(&dKeySorted, 4ll * n));
  CK(cudaMalloc(&dIdx, 4ll * n));
  CK(cudaMalloc(&dIdxSorted, 4ll * n));
  CK(cudaMalloc(&dStart, 4ll * (buckets + 1)));
  CK(cudaMalloc(&dSite, 4ll * size * size));
  CK(cudaMalloc(&dDist, 4ll * size * size));
  CK(cudaMalloc(&dOverflow, 8));
  size_t tempBytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, dKey, dKeySorted, dIdx, dIdxSorted, n, 0, bits);
  void* dTemp;
  CK(cudaMalloc(&dTemp, tempBytes));

  cudaEvent_t e0, e1, e2, e3;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventCreate(&e2);
  cudaEventCreate(&e3);
  const int rootsX = (size + kRoot - 1) / kRoot;
  const size_t smem = sizeof(WarpList) * kWarps;
  CK(cudaFuncSetAttribute(labelKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  std::vector<float> up, idx, lab, all;
  for (int rep = 0; rep <= reps; ++rep)
  {
    CK(cudaMemset(dOverflow, 0, 8));
    cudaEventRecord(e0);
    CK(cudaMemcpyAsync(dIn, host, sizeof(Point) * n, cudaMemcpyHostToDevice));
    cudaEventRecord(e1);
    keyKernel<<<(n + 255) / 256, 256>>>(dIn, n, shift, g.bx, g.by, dKey, dIdx);
    cub::DeviceRadixSort::SortPairs(dTemp, tempBytes, dKey, dKeySorted, dIdx, dIdxSorted, n, 0, bits);
    gatherKernel<<<(n + 255) / 256, 256>>>(dIn, dIdxSorted, n, dSorted);
    startKernel<<<(buckets + 1 + 255) / 256, 256>>>(dKeySorted, n, buckets, dStart);
    cudaEventRecord(e2);
    g.start = dStart;
    g.points = dSorted;
    g.index = dIdxSorted;
    labelKernel<<<rootsX * rootsX, kWarps * 32, smem>>>(g, dSite, dDist, dOverflow);
    cudaEventRecord(e3);
    CK(cudaEventSynchronize(e3));
    CK(cudaGetLastError());
    float a, b, c;
    cudaEventElapsedTime(&a, e0, e1);
    cudaEventElapsedTime(&b, e1, e2);
    cudaEventElapsedTime(&c, e2, e3);
    if (rep)
    {
      up.push_back(a);
      idx.push_back(b);
      lab.push_back(c);
      all.push_back(a + b + c);
    }
  }
  auto med = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  unsigned long long overflow = 0;
  CK(cudaMemcpy(&overflow, dOverflow, 8, cudaMemcpyDeviceToHost));
  // check sampled pixels
  const int m = 4096;
  std::vector<int64_t> pix(m);
  std::uniform_int_distribution<int64_t> P(0, int64_t(size) * size - 1);
  for (auto& p : pix)
    p = P(rng);
  // include pixels around the cluster and corners
  pix[0] = 0;
  pix[1] = int64_t(size) * size - 1;
  int64_t* dPix;
  int32_t* dBs;
  float* dBd;
  CK(cudaMalloc(&dPix, 8 * m));
  CK(cudaMalloc(&dBs, 4 * m));
  CK(cudaMalloc(&dBd, 4 * m));
  CK(cudaMemcpy(dPix, pix.data(), 8 * m, cudaMemcpyHostToDevice));
  bruteKernel<<<m, 256>>>(dIn, n, dPix, m, size, dBs, dBd);
  CK(cudaDeviceSynchronize());
  std::vector<int32_t> bs(m), gs(size_t(size) * size);
  std::vector<float> bd(m), gd(size_t(size) * size);
  CK(cudaMemcpy(bs.data(), dBs, 4 * m, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(bd.data(), dBd, 4 * m, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gs.data(), dSite, 4ll * size * size, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gd.data(), dDist, 4ll * size * size, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int k = 0; k < m; ++k)
    if (gs[pix[k]] != bs[k] || gd[pix[k]] != bd[k])
    {
      if (bad < 3)
        std::printf("  mismatch at (%lld, %lld): ours %d %.9g, brute %d %.9g\n", (long long)(pix[k] % size),
                    (long long)(pix[k] / size), gs[pix[k]], gd[pix[k]], bs[k], bd[k]);
      ++bad;
    }
  std::printf("size %d sites %d %s target %d bucket %d | upload %.3f index %.3f label %.3f all %.3f ms | overflow tiles %llu | sampled mismatches %d of %d\n",
              size, n, skewed ? "skewed" : "uniform", target, g.bucket, med(up), med(idx), med(lab), med(all), overflow,
              bad, m);
  return bad ? 1 : 0;
}
