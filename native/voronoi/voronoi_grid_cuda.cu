// The CUDA backend's labelling kernels: a band of pixels labelled from the bucket grid of the sites
// (the method is described in voronoi_cuda.cu; the grid is built in voronoi_index_cuda.cu; the
// per-element math is detail/nearest_site.h's, shared with the CPU backend).
#include "detail/bucket_grid.h"

#include "core/cuda_check.h"

namespace gpugeo::voronoi::detail::grid {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr double kMaxDouble = 1.79769313486231570e308;
constexpr int kHeavySide = 4;  // roots of tiles this small or smaller are cut into parts and started first

unsigned blocksFor(long long items, int threads)
{
  return static_cast<unsigned>((items + threads - 1) / threads);
}

// --- Roots -------------------------------------------------------------------------------------

__device__ void bucketRect(const GridView& g, double x0, double y0, double x1, double y1, int& bx0, int& by0, int& bx1,
                           int& by1)
{
  const double inv = 1.0 / double(g.bucket);
  bx0 = int(fmax(0.0, fmin(double(g.bx), floor(x0 * inv))));
  by0 = int(fmax(0.0, fmin(double(g.by), floor(y0 * inv))));
  bx1 = int(fmin(double(g.bx - 1), fmax(-1.0, floor(x1 * inv))));
  by1 = int(fmin(double(g.by - 1), fmax(-1.0, floor(y1 * inv))));
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
  const double count = density * double(kRoot * kRoot);  // sites over the root's area
  int T = g.maxTile;
  // Tiles of at most sitesPerTile sites, and tiles above 16 only where they hold at most half a site.
  while (T > g.minTile && (count * T * T / double(kRoot * kRoot) > g.sitesPerTile ||
                   (T > 16 && count * T * T / double(kRoot * kRoot) > 0.5)))
    T /= 2;
  return RootPlan{T, density};
}

// Whether a root is labelled by the direct scan (dense, evenly filled buckets) rather than by tiles.
__device__ bool useDirect(const GridView& g, double density)
{
  if (g.directMax <= 0.0 || g.bucket < 4)
    return false;
  const double fill = density * double(g.bucket) * double(g.bucket);
  const int w = (8 + g.bucket - 1) / g.bucket + 2, h = (4 + g.bucket - 1) / g.bucket + 2;
  return fill >= g.directMinFill && fill * w * h <= g.directMax;
}

// Whether a root that is not labelled directly is labelled a pixel a thread (crowdedKernel): it holds
// at least crowdedMin sites a pixel.
__device__ bool useCrowded(const GridView& g, double density)
{
  return g.crowdedMin > 0.0 && density >= g.crowdedMin && !useDirect(g, density);
}

__device__ __forceinline__ void store(const GridView& g, int column, int row, int32_t site, double squared)
{
  const long long i = (long long)(row - g.rowBegin) * g.width + column;
  g.outSite[i] = site;
  if (g.outDistance)
    g.outDistance[i] = distanceValue(squared, g.pixelSize);
}

// --- Direct labelling --------------------------------------------------------------------------
// A block per root stages the sites of the root's buckets and two rings of buckets around them in
// shared memory; a warp labels 8 x 8 pixels, each lane a column of 2 pixels 4 rows apart, every lane
// scanning the same sites (the block's buckets and one ring, then ring after ring) exactly in
// float64 until every pixel's best is certainly nearer than anything outside the scanned rectangle.

constexpr int kStage = 1024;                            // sites staged per root
constexpr int kStageRing = 2;                           // rings of buckets staged around the root's own
// Buckets a side at most (bucket >= 4): a root of a band that does not start on a bucket row spans
// one bucket row more.
constexpr int kStageSide = kRoot / 4 + 1 + 2 * kStageRing;
constexpr int kPix = 2;                                 // pixels per lane
constexpr int kBlockH = 4 * kPix;

struct DirectStage
{
  Point points[kStage];
  int32_t site[kStage];                          // input index
  int32_t start[kStageSide * (kStageSide + 1)];  // per staged row, cols + 1 offsets into points
  int32_t rowOffset[kStageSide];                 // first staged position of each row
  int32_t rowSource[kStageSide];                 // its first sorted slot
  int32_t total;
};

struct LanePixels
{
  double px;
  double py[kPix];
  double best[kPix];
  int site[kPix];
};

// e of the lane's pixels to one site under the contract (the x difference and its square are
// shared: squaredDistance computes exactly these operations), kept when smaller (ties: the lowest
// input index).
__device__ __forceinline__ void considerSite(const Point& q, int site, LanePixels& P)
{
  const double dx = exact::sub(P.px, q.x);
  const double dx2 = exact::mul(dx, dx);
#pragma unroll
  for (int j = 0; j < kPix; ++j)
  {
    const double dy = exact::sub(P.py[j], q.y);
    const double e = exact::add(dx2, exact::mul(dy, dy));
    if (e <= P.best[j] && (e < P.best[j] || site < P.site[j]))
    {
      P.best[j] = e;
      P.site[j] = site;
    }
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
// from global memory.
__device__ void scanRing(const GridView& g, int X0, int Y0, int X1, int Y1, int pX0, int pY0, int pX1, int pY1,
                         int lane, LanePixels& P)
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

// The same from the staged copy (the rectangle lies within the staged one).
__device__ void scanRingStaged(const DirectStage& S, int RX0, int RY0, int stride, int X0, int Y0, int X1, int Y1,
                               int pX0, int pY0, int pX1, int pY1, LanePixels& P)
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

// Stages the sites of buckets [RX0, RX1] x [RY0, RY1] (at most kStageSide rows); false when they
// are more than kStage (then nothing is staged and the scan reads global memory).
__device__ bool stageRoot(const GridView& g, DirectStage& S, int RX0, int RY0, int RX1, int RY1)
{
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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
  return staged;
}

// A scan's rectangle of buckets, [X0, X1] x [Y0, Y1], and the one scanned before it ([pX0, pX1] x
// [pY0, pY1]; none at first) whose sites need not be read again.
struct ScanRect
{
  int X0, Y0, X1, Y1;
  int pX0 = 0, pY0 = 0, pX1 = -1, pY1 = -1;

  // Which sides pixel (pc, pr)'s best squared distance `best` is not certainly nearer than: twice
  // the distance from a pixel centre to a side is an odd integer t, so (t/2)^2 is exact, and a best
  // certainly within it is nearer than every site beyond that side. Sides without buckets beyond
  // (the grid's edge buckets hold the sites outside it) need nothing. Added to the flags.
  __device__ void sidesBeyond(const GridView& g, int pc, int pr, double best, bool& left, bool& right, bool& top,
                              bool& bottom) const
  {
    const int B = g.bucket;
    auto beyond = [best](int t) { return !certainlyWithin(best, double(t) * double(t) * 0.25); };
    left = left || (X0 > 0 && beyond(2 * (pc - X0 * B) + 1));
    right = right || (X1 < g.bx - 1 && beyond(2 * ((X1 + 1) * B - pc) - 1));
    top = top || (Y0 > 0 && beyond(2 * (pr - Y0 * B) + 1));
    bottom = bottom || (Y1 < g.by - 1 && beyond(2 * ((Y1 + 1) * B - pr) - 1));
  }

  // Grows by a bucket on the given sides (this rectangle becoming the one before); false for none.
  __device__ bool grow(bool left, bool right, bool top, bool bottom)
  {
    if (!(left || right || top || bottom))
      return false;
    pX0 = X0;
    pY0 = Y0;
    pX1 = X1;
    pY1 = Y1;
    X0 -= left ? 1 : 0;
    X1 += right ? 1 : 0;
    Y0 -= top ? 1 : 0;
    Y1 += bottom ? 1 : 0;
    return true;
  }
};

__global__ void __launch_bounds__(kWarps * 32, 4) directKernel(GridView g, int rootsX, RootSet set)
{
  __shared__ DirectStage S;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int root = set.ids ? set.ids[blockIdx.x] - set.base : int(blockIdx.x);
  const int c0 = (root % rootsX) * kRoot, r0 = g.rowBegin + (root / rootsX) * kRoot;
  const RootPlan plan = planRoot(g, c0, r0, lane);
  if (!useDirect(g, plan.density))
    return;
  const int rowEnd = min(r0 + kRoot, g.rowEnd);
  const int RX0 = max(0, (c0 >> g.shift) - kStageRing), RY0 = max(0, (r0 >> g.shift) - kStageRing);
  const int RX1 = min(g.bx - 1, ((min(c0 + kRoot, g.width) - 1) >> g.shift) + kStageRing);
  const int RY1 = min(g.by - 1, ((rowEnd - 1) >> g.shift) + kStageRing);
  const int stride = RX1 - RX0 + 2;
  const bool staged = stageRoot(g, S, RX0, RY0, RX1, RY1);
  if (threadIdx.x == 0)
    atomicAdd(g.counters + kDirectRoots, 1ull);
  const double inf = __longlong_as_double(0x7ff0000000000000ll);
  for (int b = warp; b < (kRoot / 8) * (kRoot / kBlockH); b += kWarps)
  {
    const int bc0 = c0 + (b % (kRoot / 8)) * 8, br0 = r0 + (b / (kRoot / 8)) * kBlockH;
    if (bc0 >= g.width || br0 >= rowEnd)
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
    // First the block's buckets and one ring; then the rectangle grows by a bucket on each side
    // that some pixel's best does not certainly stay inside of, until none.
    ScanRect R{max(0, kx0 - 1), max(0, ky0 - 1), min(g.bx - 1, kx1 + 1), min(g.by - 1, ky1 + 1)};
    for (;;)
    {
      if (staged && R.X0 >= RX0 && R.Y0 >= RY0 && R.X1 <= RX1 && R.Y1 <= RY1)
        scanRingStaged(S, RX0, RY0, stride, R.X0, R.Y0, R.X1, R.Y1, R.pX0, R.pY0, R.pX1, R.pY1, P);
      else
        scanRing(g, R.X0, R.Y0, R.X1, R.Y1, R.pX0, R.pY0, R.pX1, R.pY1, lane, P);
      bool left = false, right = false, top = false, bottom = false;
#pragma unroll
      for (int j = 0; j < kPix; ++j)
      {
        const int pr = pr0 + 4 * j;
        if (pc < g.width && pr < rowEnd)
          R.sidesBeyond(g, pc, pr, P.best[j], left, right, top, bottom);
      }
      if (!R.grow(__any_sync(kFull, left), __any_sync(kFull, right), __any_sync(kFull, top),
                  __any_sync(kFull, bottom)))
        break;
    }
#pragma unroll
    for (int j = 0; j < kPix; ++j)
    {
      const int pr = pr0 + 4 * j;
      if (pc < g.width && pr < rowEnd)
        store(g, pc, pr, P.site[j], P.best[j]);
    }
  }
}

// --- Crowded labelling -------------------------------------------------------------------------
// Roots whose buckets hold more sites than pixels (buckets of 2 pixels there, too small for the
// direct scan's staging; a tile's list would hold more sites than its pixels) are labelled a pixel a
// thread, 16 x 16 pixels a block: each pixel scans its own bucket exactly in float64, then grows its
// rectangle of buckets by one on each side its best is not certainly nearer than, until none (the
// direct scan's certificate, per pixel). Where a bucket holds a few sites a pixel, most pixels stop
// at their own bucket or one ring.
constexpr int kPatch = 16;  // a block's pixels a side
constexpr int kPatchesPerSide = kRoot / kPatch;

// The sites of slots [s0, s1) against one pixel (the distance contract's squaredDistance; ties: the
// lowest input index, as considerSite).
__device__ __forceinline__ void scanSlotsAlone(const GridView& g, int s0, int s1, double px, double py, double& best,
                                               int& site)
{
  for (int s = s0; s < s1; ++s)
  {
    const double e = squaredDistance(px, py, g.points[s]);
    if (e <= best)
    {
      const int k = g.index[s];
      if (e < best || k < site)
      {
        best = e;
        site = k;
      }
    }
  }
}

// The pixel (pc, pr) of a crowded root: nearest site and squared distance, exactly.
__device__ void labelPixelAlone(const GridView& g, int pc, int pr)
{
  const double px = double(pc) + 0.5, py = double(pr) + 0.5;
  double best = __longlong_as_double(0x7ff0000000000000ll);
  int site = 0x7fffffff;
  ScanRect R{pc >> g.shift, pr >> g.shift, pc >> g.shift, pr >> g.shift};
  for (;;)
  {
    for (int y = R.Y0; y <= R.Y1; ++y)
    {
      const int row = y * g.bx;
      if (y >= R.pY0 && y <= R.pY1)
      {
        if (R.X0 < R.pX0)
          scanSlotsAlone(g, g.start[row + R.X0], g.start[row + R.pX0], px, py, best, site);
        if (R.pX1 < R.X1)
          scanSlotsAlone(g, g.start[row + R.pX1 + 1], g.start[row + R.X1 + 1], px, py, best, site);
      }
      else
        scanSlotsAlone(g, g.start[row + R.X0], g.start[row + R.X1 + 1], px, py, best, site);
    }
    bool left = false, right = false, top = false, bottom = false;
    R.sidesBeyond(g, pc, pr, best, left, right, top, bottom);
    if (!R.grow(left, right, top, bottom))
      break;
  }
  store(g, pc, pr, site, best);
}

// The crowded roots' pixels: a block per 16 x 16 patch, over the whole GPU.
__global__ void __launch_bounds__(kPatch * kPatch) crowdedKernel(GridView g, const RootItem* crowded, const int* counts)
{
  const int patches = counts[1] * kPatchesPerSide * kPatchesPerSide;
  if (blockIdx.x == 0 && threadIdx.x == 0 && counts[1] > 0)
    atomicAdd(g.counters + kCrowdedRoots, (unsigned long long)counts[1]);
  for (int item = blockIdx.x; item < patches; item += gridDim.x)
  {
    const RootItem root = crowded[item / (kPatchesPerSide * kPatchesPerSide)];
    const int patch = item % (kPatchesPerSide * kPatchesPerSide);
    const int pc = root.c0 + (patch % kPatchesPerSide) * kPatch + int(threadIdx.x) % kPatch;
    const int pr = root.r0 + (patch / kPatchesPerSide) * kPatch + int(threadIdx.x) / kPatch;
    if (pc < g.width && pr < g.rowEnd)
      labelPixelAlone(g, pc, pr);
  }
}

// --- Tile labelling ----------------------------------------------------------------------------
// A warp per tile finds a bound (the tile's buckets, widened by doubling until a site is found; a
// bound found by widening is tightened over every site within its radius, as is one whose list
// overflows), gathers the candidates (mayBeNearest) into shared memory and labels the tile's pixels
// by nearestCandidate (float32 with a certified margin, float64 at a near tie). A list longer than
// kCap overflows: the tile goes to the split queue of its level, and the next launch labels its
// four children a warp each anywhere on the GPU.

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

// What a warp counted (lane 0's copy is added to the counters at the end of the kernel).
struct WarpCounts
{
  unsigned long long tiles = 0, split = 0, candidates = 0, refined = 0, exact = 0;

  __device__ void flush(const GridView& g, int lane)
  {
    for (int o = 16; o > 0; o >>= 1)
      refined += __shfl_xor_sync(kFull, refined, o);
    if (lane != 0)
      return;
    if (tiles)
      atomicAdd(g.counters + kTilesLabelled, tiles);
    if (split)
      atomicAdd(g.counters + kTilesSplit, split);
    if (candidates)
      atomicAdd(g.counters + kCandidates, candidates);
    if (refined)
      atomicAdd(g.counters + kRefinedPixels, refined);
    if (exact)
      atomicAdd(g.counters + kExactPixels, exact);
  }
};

// Calls f(slot) (slot -1 for idle lanes, the same number of calls in every lane) for every site of
// the buckets [x0, x1] x [y0, y1], 32 sites at a time over all rows.
template <class F>
__device__ void forRect(const GridView& g, int x0, int y0, int x1, int y1, int lane, F&& f)
{
  for (int rowBase = y0; rowBase <= y1; rowBase += 32)
  {
    const int y = rowBase + lane;
    int s0 = 0, len = 0;
    if (y <= y1 && x0 <= x1)
    {
      s0 = g.start[y * g.bx + x0];
      // Never negative, even where a band is being indexed beside this labelling (an overlapped
      // start, voronoi_cuda.cu, waits only for the bands within a tile's reach; a tile's bound from
      // a site outside the grid may read wider and see a band half written): every slot read stays
      // within the sites (fewer than 2^26 there, so 32 rows' sum fits).
      len = max(0, g.start[y * g.bx + x1 + 1] - s0);
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
      int lo = 0;  // the last row whose first position is <= k
      for (int step = 16; step > 0; step >>= 1)
      {
        const int v = __shfl_sync(kFull, excl, lo + step);
        if (lo + step < 32 && v <= k)
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

__device__ __forceinline__ double warpMin(double v)
{
  for (int o = 16; o > 0; o >>= 1)
    v = minOf(v, __shfl_xor_sync(kFull, v, o));
  return v;
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
  return warpMin(b);
}

// A single pixel whose list still overflows (many sites at nearly one distance): every site of the
// rectangle, exactly.
__device__ void labelPixelExactly(const GridView& g, int column, int row, int bx0, int by0, int bx1, int by1, int lane)
{
  const double px = column + 0.5, py = row + 0.5;
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
    store(g, column, row, bestSite, best);
}

// One tile: bound, candidates, pixels. Returns false when its list overflows (the caller splits it).
__device__ bool labelTile(const GridView& g, WarpList& L, int tc0, int tr0, int side, int lane, WarpCounts& counts)
{
  const int tc1 = min(g.width, tc0 + side), tr1 = min(g.rowEnd, tr0 + side);
  const Box region = pixelCentreBox(tc0, tc1, tr0, tr1);
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
    bound = warpMin(bound);
    if (bound < kMaxDouble || (bx0 == 0 && by0 == 0 && bx1 == g.bx - 1 && by1 == g.by - 1))
    {
      widened = widen > 0;
      break;
    }
  }
  bool tightened = false;
  if (widened)
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
    if (kept <= kCap || tightened)
      break;
    tightened = true;
    const double nb = tightenBound(g, region, bound, lane);
    if (!(nb < bound))
      break;
    bound = nb;
  }
  if (kept > kCap && side > 1)
    return false;
  if (kept > kCap)
  {
    labelPixelExactly(g, tc0, tr0, bx0, by0, bx1, by1, lane);
    ++counts.exact;
    __syncwarp();
    return true;
  }
  ++counts.tiles;
  counts.candidates += kept;
  const int w = tc1 - tc0, h = tr1 - tr0;
  for (int p = lane; p < w * h; p += 32)
  {
    const int c = tc0 + p % w, r = tr0 + p / w;
    const PixelAnswer a =
      nearestCandidate(GridCandidates{L.local, L.slot, g.points, g.index, kept}, c, r, tc0, tr0, float(side * side));
    counts.refined += a.refined ? 1 : 0;
    store(g, c, r, a.site, a.squared);
  }
  __syncwarp();
  return true;
}

struct SplitQueues
{
  TileJob* jobs;  // levels x kQueueCap
  int* count;     // per level
  int levels;
};

// For a full queue: the four children of `parent`, then theirs, in this warp.
__device__ void splitInWarp(const GridView& g, WarpList& L, const TileJob& parent, int lane, WarpCounts& counts)
{
  TileJob stack[28];
  int depth = 0;
  const int half0 = parent.side / 2;
  for (int q = 3; q >= 0; --q)
    stack[depth++] = TileJob{parent.c0 + (q & 1) * half0, parent.r0 + (q >> 1) * half0, half0};
  while (depth > 0)
  {
    const TileJob job = stack[--depth];
    if (job.c0 >= g.width || job.r0 >= g.rowEnd)
      continue;
    if (!labelTile(g, L, job.c0, job.r0, job.side, lane, counts))
    {
      ++counts.split;
      const int half = job.side / 2;
      for (int q = 3; q >= 0; --q)
        stack[depth++] = TileJob{job.c0 + (q & 1) * half, job.r0 + (q >> 1) * half, half};
    }
  }
}

// Labels a tile; one whose list overflows goes to the split queue of `level`.
__device__ void processTile(const GridView& g, WarpList& L, const TileJob& job, int lane, const SplitQueues& q,
                            int level, WarpCounts& counts)
{
  if (job.c0 >= g.width || job.r0 >= g.rowEnd)
    return;
  if (labelTile(g, L, job.c0, job.r0, job.side, lane, counts))
    return;
  ++counts.split;
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
  splitInWarp(g, L, job, lane, counts);
}

// A warp per root: its plan. Crowded roots are listed for crowdedKernel. Dense roots (tile side <=
// kHeavySide) become kHeavyParts items of a side kRoot / kHeavyPerSide each, listed first, so that the
// costliest work starts first and is spread over many blocks (a dense cluster of a few roots keeps
// the whole GPU busy). counts[0] counts the heavy items, counts[1] the crowded roots.
__global__ void planKernel(GridView g, int rootsX, RootSet set, RootItem* heavy, RootItem* light, RootItem* crowded,
                           int* counts)
{
  const int slot = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (slot >= set.count)
    return;
  const int root = set.ids ? set.ids[slot] - set.base : slot;
  const int c0 = (root % rootsX) * kRoot, r0 = g.rowBegin + (root / rootsX) * kRoot;
  const RootPlan plan = planRoot(g, c0, r0, lane);
  if (lane != 0)
    return;
  RootItem item{c0, r0, kRoot, plan.side};
  if (useDirect(g, plan.density))
    item.side = 0;
  else if (useCrowded(g, plan.density))
  {
    crowded[atomicAdd(counts + 1, 1)] = item;
    item.side = 0;
  }
  else if (plan.side <= kHeavySide)
  {
    constexpr int part = kRoot / kHeavyPerSide;
    const int at = atomicAdd(counts, kHeavyParts);
    for (int q = 0; q < kHeavyParts; ++q)
      heavy[at + q] = RootItem{c0 + (q % kHeavyPerSide) * part, r0 + (q / kHeavyPerSide) * part, part, plan.side};
    item.side = 0;
  }
  light[slot] = item;
}

__global__ void __launch_bounds__(kWarps * 32) tileKernel(GridView g, const RootItem* heavy, const RootItem* light,
                                                          const int* heavyCount, int roots, SplitQueues q)
{
  extern __shared__ unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpList& L = reinterpret_cast<WarpList*>(smem)[warp];
  WarpCounts counts;
  const int nh = *heavyCount;
  for (int it = blockIdx.x; it < nh + roots; it += gridDim.x)
  {
    const RootItem item = it < nh ? heavy[it] : light[it - nh];
    if (item.side == 0)
      continue;
    const int T = item.side;
    const int perSide = item.extent / T;
    for (int t = warp; t < perSide * perSide; t += kWarps)
      processTile(g, L, TileJob{item.c0 + (t % perSide) * T, item.r0 + (t / perSide) * T, T}, lane, q, 0, counts);
  }
  counts.flush(g, lane);
}

// The children of the tiles that overflowed at `level`, a warp each, over the whole GPU.
__global__ void __launch_bounds__(kWarps * 32) splitKernel(GridView g, SplitQueues q, int level)
{
  extern __shared__ unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpList& L = reinterpret_cast<WarpList*>(smem)[warp];
  WarpCounts counts;
  const int parents = min(q.count[level], kQueueCap);
  const int gw = blockIdx.x * kWarps + warp, nw = gridDim.x * kWarps;
  for (int j = gw; j < 4 * parents; j += nw)
  {
    const TileJob p = q.jobs[size_t(level) * kQueueCap + j / 4];
    const int half = p.side / 2, k = j % 4;
    processTile(g, L, TileJob{p.c0 + (k & 1) * half, p.r0 + (k >> 1) * half, half}, lane, q, level + 1, counts);
  }
  counts.flush(g, lane);
}

}  // namespace

// --- Launches ----------------------------------------------------------------------------------

void prepareLabels()
{
  const int smem = int(sizeof(WarpList) * kWarps);
  GPUGEO_CUDA_CHECK(cudaFuncSetAttribute(tileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  GPUGEO_CUDA_CHECK(cudaFuncSetAttribute(splitKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}

void launchLabels(const GridView& g, RootSet set, int levels, RootItem* heavy, RootItem* light, RootItem* crowded,
                  int* counts, TileJob* jobs, int multiprocessors, cudaStream_t stream,
                  void (*phase)(void*, const char*), void* phaseContext)
{
  const int rootsX = (g.width + kRoot - 1) / kRoot;
  if (!set.ids)
    set.count = rootsX * ((g.rowEnd - g.rowBegin + kRoot - 1) / kRoot);
  const int roots = set.count;
  if (roots == 0)
    return;
  const size_t smem = sizeof(WarpList) * kWarps;
  GPUGEO_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(int) * size_t(2 + levels), stream));
  planKernel<<<blocksFor(roots, kWarps), kWarps * 32, 0, stream>>>(g, rootsX, set, heavy, light, crowded, counts);
  GPUGEO_CUDA_CHECK_LAUNCH();
  phase(phaseContext, "plan");
  if (g.crowdedMin > 0)
  {
    // As many blocks as fit at once; each takes patches in turn (most launches have none).
    crowdedKernel<<<multiprocessors * 8, kPatch * kPatch, 0, stream>>>(g, crowded, counts);
    GPUGEO_CUDA_CHECK_LAUNCH();
    phase(phaseContext, "crowded");
  }
  if (g.directMax > 0)
  {
    directKernel<<<roots, kWarps * 32, 0, stream>>>(g, rootsX, set);
    GPUGEO_CUDA_CHECK_LAUNCH();
    phase(phaseContext, "direct");
  }
  const SplitQueues q{jobs, counts + 2, levels};
  tileKernel<<<roots, kWarps * 32, smem, stream>>>(g, heavy, light, counts, roots, q);
  GPUGEO_CUDA_CHECK_LAUNCH();
  phase(phaseContext, "tiles");
  for (int level = 0; level < levels; ++level)
  {
    splitKernel<<<multiprocessors * 4, kWarps * 32, smem, stream>>>(g, q, level);
    GPUGEO_CUDA_CHECK_LAUNCH();
  }
  phase(phaseContext, "splits");
}

}  // namespace gpugeo::voronoi::detail::grid
