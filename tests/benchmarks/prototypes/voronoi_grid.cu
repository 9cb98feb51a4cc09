// Prototype for issue 22 (not part of the build; run_voronoi_grid.sh on the GPU machine): plane
// Voronoi labels and distances from a uniform bucket grid of the sites, exact under the contract of
// native/voronoi/voronoi_raster.h (the per-element math is detail/nearest_site.h's).
// Times upload (pinned) + index + labelling with CUDA events (median of 7) and checks every run two
// ways: 4,096 sampled pixels (corners included) against a brute-force search of every site, and
// every pixel against the tile-only labeller (no direct roots, bounds as found) on the same index.
//
// Index. Bucket side a power of two, from the densest 64 x 64 block of pixels (about PERBUCKET
// sites a bucket there, at least a quarter of the mean spacing, at most 2^24 buckets; sites outside
// the grid go to the nearest edge bucket, which only brings them nearer). The sites are uploaded in
// 8 chunks on a copy stream; as each arrives a kernel gives each site its bucket and its rank in
// the bucket (atomicAdd), hidden behind the next chunk's copy. After the last chunk: an exclusive
// scan of the counts (the bucket starts), the 4-byte order scattered (start + rank), the points
// gathered by it. Order within a bucket is arrival order: no result depends on it, every tie being
// broken by input index.
// Labels, per 64 x 64 root (planned from the root's own buckets):
// - Direct roots (buckets of at least 4, filled with at least `fill` sites on average, the first
//   ring of an 8 x 4 block holding at most `direct` sites): directKernel, see above its definition.
//   The certificate: twice the distance from the pixel centre to each side of the scanned rectangle
//   with buckets beyond it is an odd integer t, so (t/2)^2 is exact, and certainlyWithin(best,
//   (t/2)^2) proves every outside site's e larger.
// - Other roots: tiles (side from the root's count: at most TARGET sites a tile, 32 only where a
//   tile holds half a site, at most 16 with buckets of 2); a warp per tile finds a bound (the tile's
//   buckets, widened by doubling until a site is found; a bound found by widening is then tightened
//   over every site within its radius, as is a list that overflows), gathers the candidates
//   (mayBeNearest) into shared memory and labels its pixels by nearestCandidate (float32 with a
//   certified margin, float64 on a near tie). A list of more than 256 overflows: the tile goes to a
//   global queue, and a launch per level labels the four children of every queued tile a warp each
//   anywhere on the GPU (a full queue falls back to splitting inside the warp). Roots of tiles of 4
//   or less are cut into quarters and started first (planKernel), so the dense cluster's roots do
//   not finish last.
//
// H200 (this workplace, 2026-11; ms: upload + index + labels = all; CuPy EDT with indices in the
// same call; 0 sampled mismatches and 0 full-grid differences in every run; skewed = 90 % of the
// sites in 1 % of the area; bar = CuPy / 3):
//   8192² uniform   100: 0.709 (CuPy 5.31, 7.5x) | 1k 0.712 (5.40, 7.6x) | 10k 0.784 (5.75, 7.3x)
//                  100k: 0.941 (5.97, 6.3x) | 1M 1.368 (6.66, 4.9x)
//                    4M: 1.196 + 0.228 + 1.379 = 2.806 (7.67, 2.7x)          SHORT of 2.557
//   8192² skewed    100: 0.734 (5.29, 7.2x) | 1k 0.746 (5.39, 7.2x) | 10k 0.809 (5.56, 6.9x)
//                  100k: 1.214 (6.03, 5.0x) | 1M 1.724 (6.28, 3.6x)
//                    4M: 1.183 + 0.265 + 1.757 = 3.205 (6.39, 2.0x)          SHORT of 2.130
//   16384² uniform  100 2.46 | 1k 2.48 | 10k 2.58 | 100k 3.18 | 1M 3.89 | 4M 5.25
//          CuPy:       25.39 |   25.50 |    26.02 |     24.82 |   21.08 |   22.42   (10.3x ... 4.3x)
//   16384² skewed   100 2.58 | 1k 2.58 | 10k 2.68 | 100k 2.91 | 1M 4.08 | 4M 6.06
//          CuPy:       25.48 |   25.63 |    24.69 |     25.08 |   25.03 |   22.05   (9.9x ... 3.6x)
// (The sweep ran with DIRECT_LIST=1; 8192² 1M and 4M and 16384² 1M and 4M uniform above are
// from the DIRECT_LIST=0 build, now the default, which was as fast or faster on each.)
// The H100 prototype as it was, on the same H200: 8192² 4M uniform 3.40 ms (labels 1.88), 10k
// skewed 2.04 (labels 1.94: 60 overflowing tiles split in their warp), 1M skewed 1.90, 4M skewed
// 4.64.
// Where the time goes at 8192² 4M uniform: the upload (64 MB at 54 GB/s) is 1.2 ms of the 2.56 the
// bar allows. Index: scattering the points themselves costs 0.47 ms after the upload (random 16-byte
// writes), CUB's radix sort 0.35, the order scattered and the points gathered 0.23. Labels: tiles
// 1.90 ms, the direct scan 1.38; ncu on the direct kernel: issue-bound (82 % of issue slots,
// 1.18e9 warp instructions of which 17 % float64), 64 registers, half occupancy; per candidate
// and pixel the compare with its tie-break, the selects, the loop and the row segments cost more
// than the float64 arithmetic. 4M skewed: labels 1.76 (buckets of 2 for the cluster make the sparse
// tiles scan many empty buckets; the cluster's 2 x 2 tiles) on top of the same upload.
// Tried and dropped: one pixel per lane (1.52-1.56 ms of labels at 4M) and four (1.78, spills);
// the running minimum by selects instead of a branch (1.45 vs 1.38); a per-warp list sorted by
// input index for the first ring, so that a strict compare breaks ties (1.38, no gain; slower at
// 1M); the direct scan from global memory without staging (1.80); earlier, on the H100: a counting
// sort without the overlap, candidates sorted by distance with an early stop, per-quadrant
// sublists.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
constexpr int kCap = 256;         // candidates per warp in shared memory
constexpr int kMaxChunks = 16;    // upload chunks
constexpr int kQueueCap = 1 << 18;  // overflowed tiles per split level
constexpr double kMaxDouble = 1.79769313486231570e308;

struct GridView
{
  int width, height;     // pixels
  int bucket;            // bucket side in pixels (power of two)
  int shift;             // log2(bucket)
  int bx, by;            // buckets per row, column
  const int32_t* start;  // bx*by+1 offsets into sorted sites
  const Point* points;   // sorted by bucket
  const int32_t* index;  // input index per sorted site
  int sitesPerTile;      // target
  int maxTile;           // largest tile side
  double directMax;      // a root is labelled directly when its first ring holds at most this many sites (0: never)
  double directMinFill;  // ... and its buckets hold at least this many sites on average
  int refine;            // tile bounds: 0 as found, 1 tightened when the list overflows, 2 also when widened
};

struct TileJob
{
  int c0, r0, side;
};

struct SplitQueues
{
  TileJob* jobs;  // levels x kQueueCap
  int* count;     // per level
  int levels;
};

// --- Index ----------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t bucketKey(const Point& p, int shift, int bx, int by)
{
  const double fx = floor(p.x / double(1 << shift));
  const double fy = floor(p.y / double(1 << shift));
  const int cx = int(fmin(fmax(fx, 0.0), double(bx - 1)));
  const int cy = int(fmin(fmax(fy, 0.0), double(by - 1)));
  return uint32_t(cy) * uint32_t(bx) + uint32_t(cx);
}

// Radix path: keys of sites [first, first + count).
__global__ void keyKernel(const Point* p, int first, int count, int shift, int bx, int by, uint32_t* key, int32_t* idx)
{
  const int i = first + blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= first + count)
    return;
  key[i] = bucketKey(p[i], shift, bx, by);
  idx[i] = i;
}

// Counting path: key and rank in its bucket (arrival order: the labels do not depend on the order
// of the sites within a bucket, ties being broken by input index everywhere).
__global__ void countKernel(const Point* p, int first, int count, int shift, int bx, int by, uint32_t* key, int32_t* rank,
                            int32_t* bucketCount)
{
  const int i = first + blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= first + count)
    return;
  const uint32_t k = bucketKey(p[i], shift, bx, by);
  key[i] = k;
  rank[i] = atomicAdd(bucketCount + k, 1);
}

__global__ void scatterKernel(const Point* p, const uint32_t* key, const int32_t* rank, const int32_t* start, int n,
                              Point* sorted, int32_t* sortedIdx)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const int at = start[key[i]] + rank[i];
  sorted[at] = p[i];
  sortedIdx[at] = i;
}

// Counting path, second form: only the order is scattered (4-byte writes), the points gathered.
__global__ void orderKernel(const uint32_t* key, const int32_t* rank, const int32_t* start, int n, int32_t* order)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    order[start[key[i]] + rank[i]] = i;
}

__global__ void gatherKernel(const Point* p, const int32_t* order, int n, Point* sorted)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    sorted[i] = p[order[i]];
}

// start[b] = the first sorted position whose key is >= b, for b in [0, buckets].
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

// --- Roots ----------------------------------------------------------------------------------

__device__ void bucketRect(const GridView& g, double x0, double y0, double x1, double y1, int& bx0, int& by0,
                           int& bx1, int& by1)
{
  const double inv = 1.0 / double(g.bucket);
  bx0 = int(fmax(0.0, floor(x0 * inv)));
  by0 = int(fmax(0.0, floor(y0 * inv)));
  bx1 = int(fmin(double(g.bx - 1), floor(x1 * inv)));
  by1 = int(fmin(double(g.by - 1), floor(y1 * inv)));
}

struct RootPlan
{
  int side;        // tile side
  double density;  // sites per square pixel over the root's buckets
};

__device__ RootPlan planRoot(const GridView& g, int c0, int r0, int lane)
{
  int bx0, by0, bx1, by1;
  bucketRect(g, c0, r0, c0 + kRoot - 1, r0 + kRoot - 1, bx0, by0, bx1, by1);
  int n = 0;
  for (int y = by0 + lane; y <= by1; y += 32)
    n += g.start[y * g.bx + bx1 + 1] - g.start[y * g.bx + bx0];
  for (int o = 16; o > 0; o >>= 1)
    n += __shfl_xor_sync(kFull, n, o);
  const double covered = double(bx1 - bx0 + 1) * double(by1 - by0 + 1) * g.bucket * g.bucket;
  const double density = double(n) / covered;
  const double count = density * double(kRoot * kRoot);  // sites per root area
  int T = g.maxTile;
  // Tiles of at most sitesPerTile sites, and tiles above 16 only where they hold at most half a site.
  while (T > 2 && (count * T * T / double(kRoot * kRoot) > g.sitesPerTile ||
                   (T > 16 && count * T * T / double(kRoot * kRoot) > 0.5)))
    T /= 2;
  return RootPlan{T, density};
}

// Whether a root is labelled by the direct scan (dense, evenly filled buckets) rather than tiles.
__device__ bool useDirect(const GridView& g, double density)
{
  if (g.directMax <= 0.0 || g.bucket < 4)
    return false;
  const double fill = density * double(g.bucket) * double(g.bucket);
  const int w = (8 + g.bucket - 1) / g.bucket + 2, h = (4 + g.bucket - 1) / g.bucket + 2;
  return fill >= g.directMinFill && fill * w * h <= g.directMax;
}

// --- Direct labelling: a block per root stages the sites of the root's buckets and two rings of
// buckets around them in shared memory; a warp labels 8 x (4 * DIRECT_PIXELS) pixels, each lane a
// column of DIRECT_PIXELS pixels, every lane scanning the same sites (the block's buckets and one
// ring, then ring after ring) exactly in float64 until every pixel's best is certainly nearer than
// anything outside the scanned rectangle.

constexpr int kStage = 1024;    // sites staged in shared memory per direct root
constexpr int kStageRing = 2;   // rings of buckets staged around the root's own
constexpr int kStageSide = kRoot / 4 + 2 * kStageRing;  // buckets a side at most (bucket >= 4)

struct DirectStage
{
  Point points[kStage];
  int32_t site[kStage];                          // input index
  int32_t start[kStageSide * (kStageSide + 1)];  // per staged row, cols + 1 offsets into points
  int32_t rowOffset[kStageSide];                 // first staged position of each row
  int32_t rowSource[kStageSide];                 // its first sorted slot
  int32_t total;
};

#ifndef DIRECT_PIXELS
#define DIRECT_PIXELS 2  // pixels per lane in the direct scan (a warp labels 8 x (4 * DIRECT_PIXELS))
#endif
#ifndef BRANCH_FREE
#define BRANCH_FREE 0  // the running minimum (with its tie-break) kept by selects rather than a branch
#endif
#ifndef DIRECT_LIST
#define DIRECT_LIST 0  // 1: the first ring from a per-warp list sorted by input index (tried: no faster)
#endif
constexpr int kPix = DIRECT_PIXELS;
constexpr int kBlockH = 4 * kPix;
constexpr int kList = 64;  // sites of a per-warp list

// One lane's pixels: a column, kPix rows 4 apart; the smallest (e, input index) of each.
struct LanePixels
{
  double px;
  double py[kPix];
  double best[kPix];
  int site[kPix];
};

// e of every pixel of the lane to one site, under the contract (the x difference and its square
// are shared: squaredDistance computes exactly these operations), kept when smaller (ties: the
// lowest input index).
__device__ __forceinline__ void considerSite(const Point& q, int site, LanePixels& P)
{
  const double dx = exact::sub(P.px, q.x);
  const double dx2 = exact::mul(dx, dx);
#pragma unroll
  for (int j = 0; j < kPix; ++j)
  {
    const double dy = exact::sub(P.py[j], q.y);
    const double e = exact::add(dx2, exact::mul(dy, dy));
#if BRANCH_FREE
    const bool better = e < P.best[j] || (e == P.best[j] && site < P.site[j]);
    P.best[j] = better ? e : P.best[j];
    P.site[j] = better ? site : P.site[j];
#else
    if (e <= P.best[j] && (e < P.best[j] || site < P.site[j]))
    {
      P.best[j] = e;
      P.site[j] = site;
    }
#endif
  }
}

__device__ __forceinline__ void scanStaged(const DirectStage& S, int stride, int row, int x0, int x1, LanePixels& P)
{
  const int k0 = S.start[row * stride + x0], k1 = S.start[row * stride + x1 + 1];
#pragma unroll 2
  for (int k = k0; k < k1; ++k)
    considerSite(S.points[k], S.site[k], P);
}

__device__ __forceinline__ void scanSlots(const GridView& g, int s0, int s1, LanePixels& P)
{
#pragma unroll 2
  for (int s = s0; s < s1; ++s)
    considerSite(g.points[s], g.index[s], P);
}

// The sites of buckets [X0, X1] x [Y0, Y1] less those of [pX0, pX1] x [pY0, pY1] (empty: pY0 > pY1),
// from the sorted arrays in global memory.
__device__ __forceinline__ void scanRing(const GridView& g, int X0, int Y0, int X1, int Y1, int pX0, int pY0, int pX1,
                                         int pY1, int lane, LanePixels& P)
{
  for (int base = Y0; base <= Y1; base += 32)
  {
    const int y = base + lane;
    int a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    if (y <= Y1)
    {
      const int row = y * g.bx;
      if (y >= pY0 && y <= pY1)
      {
        if (X0 < pX0)
        {
          a0 = g.start[row + X0];
          a1 = g.start[row + pX0];
        }
        if (pX1 < X1)
        {
          b0 = g.start[row + pX1 + 1];
          b1 = g.start[row + X1 + 1];
        }
      }
      else
      {
        a0 = g.start[row + X0];
        a1 = g.start[row + X1 + 1];
      }
    }
    const int rows = min(32, Y1 - base + 1);
    for (int r = 0; r < rows; ++r)
    {
      scanSlots(g, __shfl_sync(kFull, a0, r), __shfl_sync(kFull, a1, r), P);
      scanSlots(g, __shfl_sync(kFull, b0, r), __shfl_sync(kFull, b1, r), P);
    }
  }
}

struct WarpSites
{
  Point points[kList];
  int32_t site[kList];
};

// The first ring from a per-warp list: the staged sites of buckets [X0, X1] x [Y0, Y1] copied into W
// and sorted by input index, so that a strict comparison keeps the lowest index among equal e (the
// lexicographic minimum of (e, index) without a tie-break per site). Only for pixels with nothing
// scanned yet. Returns false (nothing scanned) when the sites are more than kList.
__device__ __forceinline__ bool scanListed(const DirectStage& S, WarpSites& W, int RX0, int RY0, int stride, int X0, int Y0, int X1,
                           int Y1, int lane, LanePixels& P)
{
  const int R = Y1 - Y0 + 1;  // at most 32 rows
  int k0 = 0, len = 0;
  if (lane < R)
  {
    const int row = (Y0 - RY0 + lane) * stride;
    k0 = S.start[row + X0 - RX0];
    len = S.start[row + X1 - RX0 + 1] - k0;
  }
  int incl = len;
  for (int o = 1; o < 32; o <<= 1)
  {
    const int v = __shfl_up_sync(kFull, incl, o);
    if (lane >= o)
      incl += v;
  }
  const int total = __shfl_sync(kFull, incl, 31);
  if (total > kList)
    return false;
  const int excl = incl - len;
  for (int base = 0; base < total; base += 32)
  {
    const int j = base + lane;
    int lo = 0;  // the last row whose first list position is <= j
    for (int step = 16; step > 0; step >>= 1)
    {
      const int v = __shfl_sync(kFull, excl, lo + step);
      if (v <= j)
        lo += step;
    }
    const int rs = __shfl_sync(kFull, k0, lo), re = __shfl_sync(kFull, excl, lo);
    if (j < total)
    {
      W.points[j] = S.points[rs + (j - re)];
      W.site[j] = S.site[rs + (j - re)];
    }
  }
  __syncwarp();
  // Sort by input index: each entry's rank among the (distinct) indices.
  Point held[kList / 32];
  int heldSite[kList / 32], rank[kList / 32];
#pragma unroll
  for (int h = 0; h < kList / 32; ++h)
  {
    const int j = lane + 32 * h;
    rank[h] = 0;
    heldSite[h] = 0;
    if (j < total)
    {
      held[h] = W.points[j];
      heldSite[h] = W.site[j];
      for (int i = 0; i < total; ++i)
        rank[h] += W.site[i] < heldSite[h] ? 1 : 0;
    }
  }
  __syncwarp();
#pragma unroll
  for (int h = 0; h < kList / 32; ++h)
    if (lane + 32 * h < total)
    {
      W.points[rank[h]] = held[h];
      W.site[rank[h]] = heldSite[h];
    }
  __syncwarp();
  int bestK[kPix];
#pragma unroll
  for (int j = 0; j < kPix; ++j)
    bestK[j] = -1;
#pragma unroll 4
  for (int i = 0; i < total; ++i)
  {
    const Point q = W.points[i];
    const double dx = exact::sub(P.px, q.x);
    const double dx2 = exact::mul(dx, dx);
#pragma unroll
    for (int j = 0; j < kPix; ++j)
    {
      const double dy = exact::sub(P.py[j], q.y);
      const double e = exact::add(dx2, exact::mul(dy, dy));  // squaredDistance's operations
      if (e < P.best[j])
      {
        P.best[j] = e;
        bestK[j] = i;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPix; ++j)
    if (bestK[j] >= 0)
      P.site[j] = W.site[bestK[j]];
  __syncwarp();
  return true;
}

// The same from the staged copy (the rectangle lies within the staged one).
__device__ __forceinline__ void scanRingStaged(const DirectStage& S, int RX0, int RY0, int stride, int X0, int Y0,
                                               int X1, int Y1, int pX0, int pY0, int pX1, int pY1, LanePixels& P)
{
  for (int y = Y0; y <= Y1; ++y)
  {
    const int row = y - RY0;
    if (y >= pY0 && y <= pY1)
    {
      if (X0 < pX0)
        scanStaged(S, stride, row, X0 - RX0, pX0 - 1 - RX0, P);
      if (pX1 < X1)
        scanStaged(S, stride, row, pX1 + 1 - RX0, X1 - RX0, P);
    }
    else
      scanStaged(S, stride, row, X0 - RX0, X1 - RX0, P);
  }
}

__global__ void __launch_bounds__(kWarps * 32, 4) directKernel(GridView g, int32_t* outSite, float* outDist,
                                                               unsigned long long* stats)
{
  __shared__ DirectStage S;
#if DIRECT_LIST
  __shared__ WarpSites lists[kWarps];
#endif
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rootsX = (g.width + kRoot - 1) / kRoot;
  const int c0 = (blockIdx.x % rootsX) * kRoot, r0 = (blockIdx.x / rootsX) * kRoot;
  const RootPlan plan = planRoot(g, c0, r0, lane);
  if (!useDirect(g, plan.density))
    return;
  // Stage the sites of the root's buckets and kStageRing rings around them.
  const int RX0 = max(0, (c0 >> g.shift) - kStageRing), RY0 = max(0, (r0 >> g.shift) - kStageRing);
  const int RX1 = min(g.bx - 1, ((min(c0 + kRoot, g.width) - 1) >> g.shift) + kStageRing);
  const int RY1 = min(g.by - 1, ((min(r0 + kRoot, g.height) - 1) >> g.shift) + kStageRing);
  const int cols = RX1 - RX0 + 1, rows = RY1 - RY0 + 1, stride = cols + 1;
  if (warp == 0)
  {
    int s0 = 0, len = 0;
    if (lane < rows)
    {
      s0 = g.start[(RY0 + lane) * g.bx + RX0];
      len = g.start[(RY0 + lane) * g.bx + RX1 + 1] - s0;
    }
    int incl = len;
    for (int o = 1; o < 32; o <<= 1)
    {
      const int v = __shfl_up_sync(kFull, incl, o);
      if (lane >= o)
        incl += v;
    }
    if (lane < rows)
    {
      S.rowOffset[lane] = incl - len;
      S.rowSource[lane] = s0;
    }
    if (lane == 31)
      S.total = incl;
  }
  __syncthreads();
  const int total = S.total;
  const bool staged = total <= kStage;
  if (staged)
  {
    for (int k = threadIdx.x; k < rows * stride; k += kWarps * 32)
    {
      const int r = k / stride, c = k % stride;
      S.start[k] = g.start[(RY0 + r) * g.bx + RX0 + c] - S.rowSource[r] + S.rowOffset[r];
    }
    for (int k = threadIdx.x; k < total; k += kWarps * 32)
    {
      int r = 0;  // the last row whose offset is <= k
      for (int step = 16; step > 0; step >>= 1)
        if (r + step < rows && S.rowOffset[r + step] <= k)
          r += step;
      const int s = S.rowSource[r] + (k - S.rowOffset[r]);
      S.points[k] = g.points[s];
      S.site[k] = g.index[s];
    }
  }
  __syncthreads();
  if (warp == 0 && lane == 0)
    atomicAdd(stats + 1, 1ull);
  const int B = g.bucket;
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  unsigned long long widened = 0;
  for (int b = warp; b < (kRoot / 8) * (kRoot / kBlockH); b += kWarps)
  {
    const int bc0 = c0 + (b % (kRoot / 8)) * 8, br0 = r0 + (b / (kRoot / 8)) * kBlockH;
    if (bc0 >= g.width || br0 >= g.height)
      continue;
    const int pc = bc0 + (lane & 7), pr0 = br0 + (lane >> 3);
    LanePixels P;
    P.px = double(pc) + 0.5;
#pragma unroll
    for (int j = 0; j < kPix; ++j)
    {
      P.py[j] = double(pr0 + 4 * j) + 0.5;
      P.best[j] = inf;
      P.site[j] = 0x7fffffff;
    }
    const int kx0 = bc0 >> g.shift, ky0 = br0 >> g.shift;
    const int kx1 = min(g.bx - 1, min(bc0 + 7, g.width - 1) >> g.shift);
    const int ky1 = min(g.by - 1, min(br0 + kBlockH - 1, g.height - 1) >> g.shift);
    int pX0 = 0, pY0 = 0, pX1 = -1, pY1 = -1;
    for (int k = 1;; ++k)
    {
      const int X0 = max(0, kx0 - k), Y0 = max(0, ky0 - k), X1 = min(g.bx - 1, kx1 + k), Y1 = min(g.by - 1, ky1 + k);
      bool scanned = false;
#if DIRECT_LIST
      if (k == 1 && staged)
        scanned = scanListed(S, lists[warp], RX0, RY0, stride, X0, Y0, X1, Y1, lane, P);
#endif
      if (!scanned)
      {
        if (staged && k <= kStageRing)
          scanRingStaged(S, RX0, RY0, stride, X0, Y0, X1, Y1, pX0, pY0, pX1, pY1, P);
        else
          scanRing(g, X0, Y0, X1, Y1, pX0, pY0, pX1, pY1, lane, P);
      }
      // Twice the distance from each pixel centre to the nearest side of the scanned rectangle
      // that has buckets beyond it (sites outside the grid sit in the edge buckets, which are
      // scanned); beyond it every e is certainly larger than a best certainly within it.
      int tx = 0x7fffffff;
      if (X0 > 0)
        tx = min(tx, 2 * (pc - X0 * B) + 1);
      if (X1 < g.bx - 1)
        tx = min(tx, 2 * ((X1 + 1) * B - pc) - 1);
      bool ok = true;
#pragma unroll
      for (int j = 0; j < kPix; ++j)
      {
        const int pr = pr0 + 4 * j;
        int t = tx;
        if (Y0 > 0)
          t = min(t, 2 * (pr - Y0 * B) + 1);
        if (Y1 < g.by - 1)
          t = min(t, 2 * ((Y1 + 1) * B - pr) - 1);
        const bool valid = pc < g.width && pr < g.height;
        ok = ok && (!valid || t == 0x7fffffff || certainlyWithin(P.best[j], double(t) * double(t) * 0.25));
      }
      if (__all_sync(kFull, ok))
        break;
      if (k == 1)
        ++widened;
      pX0 = X0;
      pY0 = Y0;
      pX1 = X1;
      pY1 = Y1;
    }
#pragma unroll
    for (int j = 0; j < kPix; ++j)
    {
      const int pr = pr0 + 4 * j;
      if (pc < g.width && pr < g.height)
      {
        const int64_t i = int64_t(pr) * g.width + pc;
        outSite[i] = P.site[j];
        outDist[i] = distanceValue(P.best[j], 1.0);
      }
    }
  }
  if (lane == 0 && widened)
    atomicAdd(stats + 2, widened);
}

// --- Tile labelling --------------------------------------------------------------------------

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
      const int rs = __shfl_sync(kFull, s0, lo);
      const int re = __shfl_sync(kFull, excl, lo);
      f(k < total ? rs + (k - re) : -1);
    }
  }
}

__device__ __forceinline__ double radiusOf(double bound)
{
  return exact::mul(exact::sqrt(bound), 1.0 + 0x1p-30) + 1e-6;
}

// The smallest siteBound over every site within the radius of `bound` around the region (the
// nearest site to any point of the region is among them, so this is the best bound sites give).
__device__ double tightenBound(const GridView& g, const Box& region, double bound, int lane)
{
  const double rad = radiusOf(bound);
  int bx0, by0, bx1, by1;
  bucketRect(g, region.x0 - rad, region.y0 - rad, region.x1 + rad, region.y1 + rad, bx0, by0, bx1, by1);
  double b = bound;
  forRect(g, bx0, by0, bx1, by1, lane, [&](int s) {
    if (s >= 0)
      b = minOf(b, siteBound(g.points[s], region));
  });
  for (int o = 16; o > 0; o >>= 1)
    b = minOf(b, __shfl_xor_sync(kFull, b, o));
  return b;
}

// One tile: bound, candidates, pixels. Returns false when its list overflows (the caller splits it).
__device__ bool labelTile(const GridView& g, WarpList& L, int tc0, int tr0, int side, int lane, int32_t* outSite,
                          float* outDist, bool mustFinish)
{
  const int tc1 = min(g.width, tc0 + side), tr1 = min(g.height, tr0 + side);
  const Box region = pixelCentreBox(tc0, tc1, tr0, tr1);
  // Bound: the tile's buckets, then widened by doubling widths until a site is found.
  double bound = kMaxDouble;
  bool widened = false;
  for (int widen = 0;; widen = widen ? widen * 2 : g.bucket)
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
    if (bound < kMaxDouble || (bx0 == 0 && by0 == 0 && bx1 == g.bx - 1 && by1 == g.by - 1))
    {
      widened = widen > 0;
      break;
    }
  }
  // A bound found by widening a square can be far from the best one: tighten it over the sites
  // within its radius (always, or only when the candidates overflow).
  bool tightened = false;
  if (g.refine >= 2 && widened)
  {
    bound = tightenBound(g, region, bound, lane);
    tightened = true;
  }
  int kept = 0, bx0 = 0, by0 = 0, bx1 = -1, by1 = -1;
  for (;;)
  {
    const double rad = radiusOf(bound);
    bucketRect(g, region.x0 - rad, region.y0 - rad, region.x1 + rad, region.y1 + rad, bx0, by0, bx1, by1);
    kept = 0;
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
    if (kept <= kCap || tightened || g.refine < 1)
      break;
    tightened = true;
    const double nb = tightenBound(g, region, bound, lane);
    if (!(nb < bound))
      break;
    bound = nb;
  }
  if (kept > kCap && !mustFinish)
    return false;
  const int w = tc1 - tc0, h = tr1 - tr0;
  if (kept > kCap)
  {
    // A single pixel with too many candidates (heavy duplication): an exact streaming scan.
    const double px = tc0 + 0.5, py = tr0 + 0.5;
    double best = kMaxDouble;
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

// The old way, kept for a full queue: the four children of `parent`, then theirs, in this warp.
__device__ void splitSerially(const GridView& g, WarpList& L, const TileJob& parent, int lane, int32_t* outSite,
                              float* outDist, unsigned long long* stats)
{
  TileJob stack[28];
  int depth = 0;
  const int half0 = parent.side / 2;
  for (int q = 3; q >= 0; --q)
    stack[depth++] = TileJob{parent.c0 + (q & 1) * half0, parent.r0 + (q >> 1) * half0, half0};
  while (depth > 0)
  {
    const TileJob job = stack[--depth];
    if (job.c0 >= g.width || job.r0 >= g.height)
      continue;
    if (!labelTile(g, L, job.c0, job.r0, job.side, lane, outSite, outDist, job.side == 1))
    {
      if (lane == 0)
        atomicAdd(stats, 1ull);
      const int half = job.side / 2;
      for (int q = 3; q >= 0; --q)
        stack[depth++] = TileJob{job.c0 + (q & 1) * half, job.r0 + (q >> 1) * half, half};
    }
  }
}

// Labels a tile; one whose list overflows goes to the split queue of `level` (its four children
// are then labelled by four warps anywhere on the GPU in the next launch).
__device__ void processTile(const GridView& g, WarpList& L, const TileJob& job, int lane, int32_t* outSite,
                            float* outDist, unsigned long long* stats, const SplitQueues& q, int level)
{
  if (job.c0 >= g.width || job.r0 >= g.height)
    return;
  if (labelTile(g, L, job.c0, job.r0, job.side, lane, outSite, outDist, job.side == 1))
    return;
  if (lane == 0)
    atomicAdd(stats, 1ull);
  int at = kQueueCap;
  if (level < q.levels)
  {
    if (lane == 0)
      at = atomicAdd(q.count + level, 1);
    at = __shfl_sync(kFull, at, 0);
  }
  if (at < kQueueCap)
  {
    if (lane == 0)
      q.jobs[size_t(level) * kQueueCap + at] = job;
    return;
  }
  splitSerially(g, L, job, lane, outSite, outDist, stats);
}

// A block's work in the tile kernel: a root, or a quarter of a dense one (many small tiles).
struct RootItem
{
  int c0, r0, extent, side;  // side 0: nothing (a root labelled directly, or split into quarters)
};

// A warp per root: its plan. Dense roots (tile side <= heavySide) become four quarter items listed
// first, so that the costliest work starts first and is spread over four blocks; the others keep
// the roots' order.
__global__ void planKernel(GridView g, int roots, int heavySide, RootItem* heavy, RootItem* light, int* heavyCount)
{
  const int root = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (root >= roots)
    return;
  const int rootsX = (g.width + kRoot - 1) / kRoot;
  const int c0 = (root % rootsX) * kRoot, r0 = (root / rootsX) * kRoot;
  const RootPlan plan = planRoot(g, c0, r0, lane);
  if (lane != 0)
    return;
  RootItem item{c0, r0, kRoot, plan.side};
  if (useDirect(g, plan.density))
    item.side = 0;
  else if (plan.side <= heavySide && plan.side <= kRoot / 2)
  {
    const int at = atomicAdd(heavyCount, 4);
    for (int q = 0; q < 4; ++q)
      heavy[at + q] = RootItem{c0 + (q & 1) * (kRoot / 2), r0 + (q >> 1) * (kRoot / 2), kRoot / 2, plan.side};
    item.side = 0;
  }
  light[root] = item;
}

__global__ void __launch_bounds__(kWarps * 32) tileKernel(GridView g, const RootItem* heavy, const RootItem* light,
                                                          const int* heavyCount, int roots, SplitQueues q,
                                                          int32_t* outSite, float* outDist, unsigned long long* stats)
{
  extern __shared__ unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpList& L = reinterpret_cast<WarpList*>(smem)[warp];
  const int nh = *heavyCount;
  for (int it = blockIdx.x; it < nh + roots; it += gridDim.x)
  {
    const RootItem item = it < nh ? heavy[it] : light[it - nh];
    if (item.side == 0)
      continue;
    const int T = item.side;
    const int perSide = item.extent / T;
    for (int t = warp; t < perSide * perSide; t += kWarps)
      processTile(g, L, TileJob{item.c0 + (t % perSide) * T, item.r0 + (t / perSide) * T, T}, lane, outSite, outDist,
                  stats, q, 0);
  }
}

// The children of the tiles that overflowed at `level`, a warp each, over the whole GPU.
__global__ void __launch_bounds__(kWarps * 32) splitKernel(GridView g, SplitQueues q, int level, int32_t* outSite,
                                                           float* outDist, unsigned long long* stats)
{
  extern __shared__ unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpList& L = reinterpret_cast<WarpList*>(smem)[warp];
  const int parents = min(q.count[level], kQueueCap);
  const int gw = blockIdx.x * kWarps + warp, nw = gridDim.x * kWarps;
  for (int j = gw; j < 4 * parents; j += nw)
  {
    const TileJob p = q.jobs[size_t(level) * kQueueCap + j / 4];
    const int half = p.side / 2, k = j % 4;
    processTile(g, L, TileJob{p.c0 + (k & 1) * half, p.r0 + (k >> 1) * half, half}, lane, outSite, outDist, stats, q,
                level + 1);
  }
}

// --- Checks -----------------------------------------------------------------------------------

__global__ void bruteKernel(const Point* pts, int n, const int64_t* pix, int m, int width, int32_t* site, float* dist)
{
  int k = blockIdx.x;
  if (k >= m)
    return;
  const int64_t i = pix[k];
  const double px = double(i % width) + 0.5, py = double(i / width) + 0.5;
  double best = kMaxDouble;
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

__global__ void sampleKernel(const int32_t* site, const float* dist, const int64_t* pix, int m, int32_t* os, float* od)
{
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < m)
  {
    os[k] = site[pix[k]];
    od[k] = dist[pix[k]];
  }
}

__global__ void diffKernel(const int32_t* a, const float* ad, const int32_t* b, const float* bd, int64_t n,
                           unsigned long long* diff)
{
  unsigned long long d = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    d += (a[i] != b[i] || __float_as_uint(ad[i]) != __float_as_uint(bd[i])) ? 1 : 0;
  for (int o = 16; o > 0; o >>= 1)
    d += __shfl_xor_sync(kFull, d, o);
  if (threadIdx.x % 32 == 0 && d)
    atomicAdd(diff, d);
}

// --- Host ---------------------------------------------------------------------------------------

static double option(int argc, char** argv, const char* name, double fallback)
{
  const size_t l = std::strlen(name);
  for (int a = 4; a < argc; ++a)
    if (!std::strncmp(argv[a], name, l) && argv[a][l] == '=')
      return std::atof(argv[a] + l + 1);
  return fallback;
}

int main(int argc, char** argv)
{
  if (argc < 3)
  {
    std::printf("usage: voronoi_grid size sites [u|s] [target=8 perbucket=4 maxtile=0 direct=24 fill=0.5 refine=2 "
                "heavy=4 chunks=8 sort=2 ref=1]\n");
    return 2;
  }
  const int size = std::atoi(argv[1]);
  const int n = std::atoi(argv[2]);
  const bool skewed = argc > 3 && argv[3][0] == 's';
  const int target = int(option(argc, argv, "target", 8));
  const double perBucket = option(argc, argv, "perbucket", 4.0);
  int maxTile = int(option(argc, argv, "maxtile", 0));  // 0: 32, or 16 with buckets of 2 (dense clusters)
  const double directMax = option(argc, argv, "direct", 24.0);
  const double directMinFill = option(argc, argv, "fill", 0.5);
  const int refine = int(option(argc, argv, "refine", 2));
  const int chunkOption = int(option(argc, argv, "chunks", 8));
  // 0: CUB radix sort; 1: counting sort (ranks by atomics during the upload), points scattered; 2: the
  // same, the order scattered and the points gathered
  const int sortMode = int(option(argc, argv, "sort", 2));
  const bool counting = sortMode != 0;
  const bool reference = option(argc, argv, "ref", 1) != 0;  // compare every pixel with the tile-only labeller
  const int heavySide = int(option(argc, argv, "heavy", 4));  // roots of tiles this small or smaller: quartered, first
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
  int maxRoot = 0;
  {
    const int rootsX = (size + 63) / 64;
    std::vector<int> roots(size_t(rootsX) * rootsX, 0);
    for (int i = 0; i < n; ++i)
    {
      const int rx = std::min(rootsX - 1, std::max(0, int(host[i].x / 64)));
      const int ry = std::min(rootsX - 1, std::max(0, int(host[i].y / 64)));
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
  if (maxTile <= 0)
    maxTile = g.bucket >= 4 ? 32 : 16;
  g.maxTile = maxTile;
  g.directMax = directMax;
  g.directMinFill = directMinFill;
  g.refine = refine;
  const int buckets = g.bx * g.by;
  int bits = 1;
  while ((1ll << bits) < buckets)
    ++bits;
  int levels = 0;
  while ((1 << levels) < maxTile)
    ++levels;
  const int chunks = std::max(1, std::min({chunkOption, kMaxChunks, n / 65536}));

  Point *dIn, *dSorted;
  uint32_t *dKey, *dKeySorted;
  int32_t *dIdx, *dIdxSorted, *dStart, *dCount, *dSite, *dSiteRef, *dQCount;
  float *dDist, *dDistRef;
  TileJob* dJobs;
  unsigned long long* dStats;
  CK(cudaMalloc(&dIn, sizeof(Point) * n));
  CK(cudaMalloc(&dSorted, sizeof(Point) * n));
  CK(cudaMalloc(&dKey, 4ll * n));
  CK(cudaMalloc(&dKeySorted, 4ll * n));
  CK(cudaMalloc(&dIdx, 4ll * n));
  CK(cudaMalloc(&dIdxSorted, 4ll * n));
  CK(cudaMalloc(&dStart, 4ll * (buckets + 1)));
  CK(cudaMalloc(&dCount, 4ll * (buckets + 1)));
  CK(cudaMalloc(&dSite, 4ll * size * size));
  CK(cudaMalloc(&dDist, 4ll * size * size));
  CK(cudaMalloc(&dQCount, 4 * 8));
  CK(cudaMalloc(&dJobs, sizeof(TileJob) * size_t(std::max(levels, 1)) * kQueueCap));
  CK(cudaMalloc(&dStats, 8 * 4));
  const int roots = ((size + kRoot - 1) / kRoot) * ((size + kRoot - 1) / kRoot);
  RootItem *dHeavy, *dLight;
  int* dHeavyCount;
  CK(cudaMalloc(&dHeavy, sizeof(RootItem) * 4 * size_t(roots)));
  CK(cudaMalloc(&dLight, sizeof(RootItem) * size_t(roots)));
  CK(cudaMalloc(&dHeavyCount, 4));
  size_t sortBytes = 0, scanBytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, dKey, dKeySorted, dIdx, dIdxSorted, n, 0, bits);
  cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, dCount, dStart, buckets + 1);
  const size_t tempBytes = std::max(sortBytes, scanBytes);
  void* dTemp;
  CK(cudaMalloc(&dTemp, tempBytes));
  SplitQueues q{dJobs, dQCount, levels};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  cudaStream_t sMain, sCopy;
  CK(cudaStreamCreateWithFlags(&sMain, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sCopy, cudaStreamNonBlocking));
  cudaEvent_t e0, eUp, eKeys, eSort, e2, e3, chunkDone[kMaxChunks];
  cudaEventCreate(&eKeys);
  cudaEventCreate(&eSort);
  cudaEventCreate(&e0);
  cudaEventCreate(&eUp);
  cudaEventCreate(&e2);
  cudaEventCreate(&e3);
  for (auto& e : chunkDone)
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  const size_t smem = sizeof(WarpList) * kWarps;
  CK(cudaFuncSetAttribute(tileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  CK(cudaFuncSetAttribute(splitKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  auto label = [&](const GridView& view, int32_t* site, float* dist) {
    CK(cudaMemsetAsync(dQCount, 0, 4 * 8, sMain));
    CK(cudaMemsetAsync(dHeavyCount, 0, 4, sMain));
    planKernel<<<(roots + kWarps - 1) / kWarps, kWarps * 32, 0, sMain>>>(view, roots, heavySide, dHeavy, dLight,
                                                                        dHeavyCount);
    if (view.directMax > 0)
      directKernel<<<roots, kWarps * 32, 0, sMain>>>(view, site, dist, dStats);
    tileKernel<<<roots, kWarps * 32, smem, sMain>>>(view, dHeavy, dLight, dHeavyCount, roots, q, site, dist, dStats);
    for (int level = 0; level < levels; ++level)
      splitKernel<<<sms * 4, kWarps * 32, smem, sMain>>>(view, q, level, site, dist, dStats);
  };
  std::vector<float> up, idx, lab, all, keysTail, sortPart, lastPart;
  unsigned long long stats[4] = {};
  for (int rep = 0; rep <= reps; ++rep)
  {
    CK(cudaMemsetAsync(dStats, 0, 8 * 4, sMain));
    cudaEventRecord(e0, sMain);
    if (counting)
      CK(cudaMemsetAsync(dCount, 0, 4ll * (buckets + 1), sMain));
    CK(cudaStreamWaitEvent(sCopy, e0, 0));
    for (int c = 0; c < chunks; ++c)
    {
      const int first = int(int64_t(n) * c / chunks), last = int(int64_t(n) * (c + 1) / chunks);
      CK(cudaMemcpyAsync(dIn + first, host + first, sizeof(Point) * (last - first), cudaMemcpyHostToDevice, sCopy));
      cudaEventRecord(chunkDone[c], sCopy);
      CK(cudaStreamWaitEvent(sMain, chunkDone[c], 0));
      const int blocks = (last - first + 255) / 256;
      if (counting)
        countKernel<<<blocks, 256, 0, sMain>>>(dIn, first, last - first, shift, g.bx, g.by, dKey, dIdx, dCount);
      else
        keyKernel<<<blocks, 256, 0, sMain>>>(dIn, first, last - first, shift, g.bx, g.by, dKey, dIdx);
    }
    cudaEventRecord(eUp, sCopy);
    cudaEventRecord(eKeys, sMain);
    size_t bytes = tempBytes;
    if (counting)
    {
      cub::DeviceScan::ExclusiveSum(dTemp, bytes, dCount, dStart, buckets + 1, sMain);
      cudaEventRecord(eSort, sMain);
      if (sortMode == 2)
      {
        orderKernel<<<(n + 255) / 256, 256, 0, sMain>>>(dKey, dIdx, dStart, n, dIdxSorted);
        gatherKernel<<<(n + 255) / 256, 256, 0, sMain>>>(dIn, dIdxSorted, n, dSorted);
      }
      else
        scatterKernel<<<(n + 255) / 256, 256, 0, sMain>>>(dIn, dKey, dIdx, dStart, n, dSorted, dIdxSorted);
    }
    else
    {
      cub::DeviceRadixSort::SortPairs(dTemp, bytes, dKey, dKeySorted, dIdx, dIdxSorted, n, 0, bits, sMain);
      cudaEventRecord(eSort, sMain);
      gatherKernel<<<(n + 255) / 256, 256, 0, sMain>>>(dIn, dIdxSorted, n, dSorted);
      startKernel<<<(buckets + 1 + 255) / 256, 256, 0, sMain>>>(dKeySorted, n, buckets, dStart);
    }
    cudaEventRecord(e2, sMain);
    g.start = dStart;
    g.points = dSorted;
    g.index = dIdxSorted;
    label(g, dSite, dDist);
    cudaEventRecord(e3, sMain);
    CK(cudaEventSynchronize(e3));
    CK(cudaGetLastError());
    float a, b, c, d, k1, k2, k3;
    cudaEventElapsedTime(&k1, eUp, eKeys);
    cudaEventElapsedTime(&k2, eKeys, eSort);
    cudaEventElapsedTime(&k3, eSort, e2);
    if (rep)
    {
      keysTail.push_back(k1);
      sortPart.push_back(k2);
      lastPart.push_back(k3);
    }
    cudaEventElapsedTime(&a, e0, eUp);
    cudaEventElapsedTime(&b, eUp, e2);
    cudaEventElapsedTime(&c, e2, e3);
    cudaEventElapsedTime(&d, e0, e3);
    if (rep)
    {
      up.push_back(a);
      idx.push_back(b);
      lab.push_back(c);
      all.push_back(d);
    }
  }
  auto med = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  CK(cudaMemcpy(stats, dStats, 8 * 4, cudaMemcpyDeviceToHost));
  // Every pixel against the tile-only labeller (no direct roots, bounds as found).
  long long refDiff = -1;
  if (reference)
  {
    CK(cudaMalloc(&dSiteRef, 4ll * size * size));
    CK(cudaMalloc(&dDistRef, 4ll * size * size));
    GridView r = g;
    r.directMax = 0;
    r.refine = 0;
    label(r, dSiteRef, dDistRef);
    CK(cudaMemsetAsync(dStats + 3, 0, 8, sMain));
    diffKernel<<<sms * 8, 256, 0, sMain>>>(dSite, dDist, dSiteRef, dDistRef, int64_t(size) * size, dStats + 3);
    CK(cudaStreamSynchronize(sMain));
    CK(cudaGetLastError());
    unsigned long long dd = 0;
    CK(cudaMemcpy(&dd, dStats + 3, 8, cudaMemcpyDeviceToHost));
    refDiff = (long long)dd;
  }
  // check sampled pixels against brute force
  const int m = 4096;
  std::vector<int64_t> pix(m);
  std::uniform_int_distribution<int64_t> P(0, int64_t(size) * size - 1);
  for (auto& p : pix)
    p = P(rng);
  pix[0] = 0;
  pix[1] = int64_t(size) * size - 1;
  int64_t* dPix;
  int32_t *dBs, *dGs;
  float *dBd, *dGd;
  CK(cudaMalloc(&dPix, 8 * m));
  CK(cudaMalloc(&dBs, 4 * m));
  CK(cudaMalloc(&dBd, 4 * m));
  CK(cudaMalloc(&dGs, 4 * m));
  CK(cudaMalloc(&dGd, 4 * m));
  CK(cudaMemcpy(dPix, pix.data(), 8 * m, cudaMemcpyHostToDevice));
  bruteKernel<<<m, 256>>>(dIn, n, dPix, m, size, dBs, dBd);
  sampleKernel<<<(m + 255) / 256, 256>>>(dSite, dDist, dPix, m, dGs, dGd);
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  std::vector<int32_t> bs(m), gs(m);
  std::vector<float> bd(m), gd(m);
  CK(cudaMemcpy(bs.data(), dBs, 4 * m, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(bd.data(), dBd, 4 * m, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gs.data(), dGs, 4 * m, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gd.data(), dGd, 4 * m, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int k = 0; k < m; ++k)
    if (gs[k] != bs[k] || gd[k] != bd[k])
    {
      if (bad < 3)
        std::printf("  mismatch at (%lld, %lld): ours %d %.9g, brute %d %.9g\n", (long long)(pix[k] % size),
                    (long long)(pix[k] / size), gs[k], gd[k], bs[k], bd[k]);
      ++bad;
    }
  std::printf("size %d sites %d %s bucket %d direct %g fill %g refine %d maxtile %d heavy %d sort %s chunks %d | "
              "upload %.3f index %.3f label %.3f all %.3f ms | index: keys after upload %.3f, %s %.3f, %s %.3f | "
              "direct roots %llu widened blocks %llu overflow tiles %llu | full-grid diffs vs tile-only %lld | "
              "sampled mismatches %d of %d\n",
              size, n, skewed ? "skewed" : "uniform", g.bucket, directMax, directMinFill, refine, maxTile, heavySide,
              sortMode == 2 ? "count-gather" : counting ? "count" : "radix", chunks, med(up), med(idx), med(lab), med(all), med(keysTail),
              counting ? "scan" : "sort", med(sortPart), counting ? "scatter" : "gather+starts", med(lastPart),
              stats[1], stats[2], stats[0], refDiff, bad, m);
  return bad || refDiff > 0 ? 1 : 0;
}
