// The CUDA backend of the allocation to lines and polygons (feature_allocation.h): the same prepared
// input as the CPU (feature_allocation.cpp), the bucket index built on the device, a warp per block
// of 8 x 8 pixels taking the CPU's steps (labelBlock there) with the shared math of
// detail/segment_grid.h and detail/feature_index.h, so that labels and distances are the CPU's bit
// for bit.
//
// Index: each segment's buckets counted (forEachBucketRow), an exclusive scan of the counts (CUB),
// (bucket, segment) pairs written and sorted by bucket (CUB's radix sort), each bucket's first
// entry found by binary search, the segments gathered in that order.
// Index: also the pyramid of the buckets' counts, a level a launch.
// Labels: the warp finds the bound and the candidate buckets as the CPU does (the block's buckets
// and ring, a few more while the rectangle stays small, nearestBucket where they are empty, the
// pyramid descended level by level with the warp's cells in a shared-memory stack; its lanes over
// the entries, the least squared distance by a warp reduction; the entries and their distances
// kept in shared memory), keeps the segments that may be nearest, each once (a hash set of segment
// ids), copied into shared memory (up to kKeepCap), and each 2 x 2 cell of pixels (two lanes) cuts
// that list again for itself before scanning it. A block whose lists overflow visits the same
// buckets again for each cell, with the block's cut (where even the stack overflowed: every bucket
// of the square around the block within reach). LabelStats' candidates count the blocks' lists here
// (the CPU counts its cells' lists).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "core/errors.h"
#include "core/parallel.h"
#include "detail/feature_index.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;
using cuda::DeviceBuffer;
namespace sg = detail::segments;

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarps = 4;       // warps (blocks of pixels) per CUDA block
constexpr int kScanCap = 192;   // entries a warp keeps with their distances while it scans
constexpr int kKeepCap = 96;    // segments it keeps for its pixels
constexpr int kTable = 256;     // its hash set of segment ids (a power of two)
constexpr int kStack = 256;     // its stack of pyramid cells

enum Counter
{
  kBlocks,
  kWidened,
  kCandidates,
  kInside,
  kCounterCount
};

__global__ void makeSegmentsKernel(const Point* vertex, const int32_t* feature, int64_t slots, sg::Segment* seg,
                                   int64_t* count, sg::BucketGrid g)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots)
    return;
  const int32_t f = feature[i];
  if (f < 0)
  {
    seg[i] = sg::Segment{0.0, 0.0, 0.0, 0.0, 0.0, -1, int32_t(i)};
    count[i] = 0;
    return;
  }
  const sg::Segment s = sg::makeSegment(vertex[i].x, vertex[i].y, vertex[i + 1].x, vertex[i + 1].y, f, int32_t(i));
  seg[i] = s;
  count[i] = sg::bucketCount(g, s);
}

__global__ void emitKernel(const sg::Segment* seg, const int64_t* offset, int64_t slots, sg::BucketGrid g,
                           uint32_t* key, int32_t* value)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots || seg[i].feature < 0)
    return;
  int64_t at = offset[i];
  const int64_t end = offset[i + 1];  // the count pass's total: never written past
  sg::forEachBucketRow(g, seg[i], [&](int x0, int x1, int y) {
    for (int x = x0; x <= x1 && at < end; ++x, ++at)
    {
      key[at] = uint32_t(int64_t(y) * g.bx + x);
      value[at] = int32_t(i);
    }
  });
}

__global__ void startKernel(const uint32_t* key, int64_t n, int64_t buckets, int64_t* start)
{
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b > buckets)
    return;
  int64_t lo = 0, hi = n;  // the first entry whose key is >= b
  while (lo < hi)
  {
    const int64_t mid = (lo + hi) / 2;
    if (int64_t(key[mid]) < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  start[b] = lo;
}

__global__ void bucketCountKernel(const int64_t* start, int64_t buckets, int32_t* counts)
{
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < buckets)
    counts[b] = int32_t(start[b + 1] - start[b]);
}

// A level of the pyramid from the one below: each cell the sum of its (up to) four children.
__global__ void levelUpKernel(const int32_t* below, int widthBelow, int heightBelow, int32_t* above, int width,
                              int height)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(width) * height)
    return;
  const int X = int(i % width), Y = int(i / width);
  int32_t sum = 0;
  for (int j = 0; j < 4; ++j)
  {
    const int x = 2 * X + (j & 1), y = 2 * Y + (j >> 1);
    if (x < widthBelow && y < heightBelow)
      sum += below[int64_t(y) * widthBelow + x];
  }
  above[i] = sum;
}

__global__ void gatherKernel(const sg::Segment* seg, const int32_t* value, int64_t n, sg::Segment* entries)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n)
    entries[k] = seg[value[k]];
}

__global__ void fillKernel(int32_t* out, int64_t n, int32_t value)
{
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

// A warp per span: its pixels take the lowest feature whose interior holds them.
__global__ void paintKernel(const Span* spans, int64_t first, int64_t last, int64_t row0, int width, int32_t* cover)
{
  const int lane = threadIdx.x % 32;
  for (int64_t k = first + (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; k < last;
       k += (int64_t(gridDim.x) * blockDim.x) / 32)
  {
    const Span s = spans[k];
    int32_t* line = cover + (int64_t(s.row) - row0) * width;
    for (int c = s.c0 + lane; c <= s.c1; c += 32)
      atomicMin(line + c, s.feature);
  }
}

__device__ __forceinline__ double warpMin(double v)
{
  for (int o = 16; o > 0; o >>= 1)
    v = minOf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ __forceinline__ int64_t warpSum(int64_t v)
{
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFull, v, o);
  return v;
}

struct Band
{
  int row0, rowEnd;
  const int32_t* cover;  // band-relative, or null
  int32_t* site;
  float* distance;       // may be null
  double pixelSize;
  unsigned long long* counters;
};

// A lane's 2 x 2 cell of pixels (cell lane % 16 of the block; lanes l and l + 16 share a cell,
// each taking every other entry of the block's list, and merge their bests at the end).
struct CellPixels
{
  double best[4];
  int32_t label[4];
};

__device__ __forceinline__ void evaluate(const sg::Segment& s, double px, double py, CellPixels& p)
{
#pragma unroll
  for (int j = 0; j < 4; ++j)
  {
    const double e = sg::segmentSquared(px + double(j & 1), py + double(j >> 1), s);
    if (sg::better(e, s.feature, p.best[j], p.label[j]))
    {
      p.best[j] = e;
      p.label[j] = s.feature;
    }
  }
}

// Adds segment id to the warp's hash set; false if it was there (a copy from another bucket).
__device__ __forceinline__ bool firstCopy(int32_t* table, int32_t id)
{
  uint32_t slot = (uint32_t(id) * 2654435761u) & (kTable - 1);
  for (int probe = 0; probe < kTable; ++probe)
  {
    const int32_t old = atomicCAS(table + slot, -1, id);
    if (old == -1)
      return true;
    if (old == id)
      return false;
    slot = (slot + 1) & (kTable - 1);
  }
  return true;  // a full table keeps the copy: it costs time only
}

// A warp's shared memory: the entries it scanned with their squared distances from the block's
// centre, then the segments it keeps (each once).
struct WarpStage
{
  int32_t scanned[kScanCap];
  double e[kScanCap];
  sg::Segment keep[kKeepCap];
  int32_t table[kTable];
  int32_t stack[kStack];
};

// A pyramid cell packed in 32 bits: its level, and its index within the level (< 2^24).
__device__ __forceinline__ int32_t packCell(const SegmentIndexView& v, int k, int X, int Y)
{
  return (k << 26) | int32_t(int64_t(Y) * v.pyramid.levelWidth[k] + X);
}

// Calls visit(b) (warp-uniform) for every bucket b within reachNow() of the block's pixels that is
// neither in `rect` nor `skip`, descending the pyramid from the level whose cells span the reach
// (labelBlock's step 2 on the CPU); the reach may shrink between visits. False when the warp's
// stack overflowed (then not every bucket was visited).
template <class Reach, class Visit>
__device__ bool forFarBuckets(const SegmentIndexView& v, int c0, int r0, int c1, int r1, const sg::Rect& rect,
                              int64_t skip, int32_t* stack, int lane, Reach&& reachNow, Visit&& visit)
{
  double reach = reachNow();
  const int k0 = levelSpanning(v, double(maxOf(c1 - c0, r1 - r0)) + 2.0 * reach + 1.0);
  const int shift = v.g.shift + k0;
  const int X0 = sg::clampBucket(double(c0) + 0.5 - reach, shift, v.pyramid.levelWidth[k0]);
  const int X1 = sg::clampBucket(double(c1) + 0.5 + reach, shift, v.pyramid.levelWidth[k0]);
  const int Y0 = sg::clampBucket(double(r0) + 0.5 - reach, shift, v.pyramid.levelHeight[k0]);
  const int Y1 = sg::clampBucket(double(r1) + 0.5 + reach, shift, v.pyramid.levelHeight[k0]);
  const int first = (X1 - X0 + 1) * (Y1 - Y0 + 1);
  if (first > kStack)
    return false;
  for (int i = lane; i < first; i += 32)
    stack[i] = packCell(v, k0, X0 + i % (X1 - X0 + 1), Y0 + i / (X1 - X0 + 1));
  int n = first;
  bool complete = true;
  __syncwarp();
  while (n > 0)
  {
    const int take = minOf(n, 32);
    n -= take;
    const bool has = lane < take;
    const int32_t packed = has ? stack[n + lane] : 0;
    __syncwarp();
    const int k = packed >> 26, index = packed & ((1 << 26) - 1);
    const int X = has ? index % v.pyramid.levelWidth[k] : 0, Y = has ? index / v.pyramid.levelWidth[k] : 0;
    const bool keep = has && v.count(k, X, Y) > 0 &&
                      !beyondReach(cellSquaredDistance(v, k, X, Y, c0, r0, c1, r1), reach);
    const int64_t bucket = int64_t(Y) * v.g.bx + X;
    const bool leaf = keep && k == 0 && bucket != skip &&
                      !(X >= rect.x0 && X <= rect.x1 && Y >= rect.y0 && Y <= rect.y1);
    for (int j = 0; j < 4; ++j)
    {
      const int x = 2 * X + (j & 1), y = 2 * Y + (j >> 1);
      const bool push = keep && k > 0 && x < v.pyramid.levelWidth[k - 1] && y < v.pyramid.levelHeight[k - 1];
      const unsigned votes = __ballot_sync(kFull, push);
      const int at = n + __popc(votes & ((1u << lane) - 1));
      if (push && at < kStack)
        stack[at] = packCell(v, k - 1, x, y);
      n += __popc(votes);
      if (n > kStack)
      {
        complete = false;
        n = kStack;
      }
    }
    __syncwarp();
    unsigned leaves = __ballot_sync(kFull, leaf);
    while (leaves)
    {
      const int source = __ffs(leaves) - 1;
      leaves &= leaves - 1;
      visit(__shfl_sync(kFull, bucket, source));
      reach = reachNow();
    }
  }
  return complete;
}

// Appends what each lane holds (when `has`) to a warp's array of `cap`; n counts them all, so
// n > cap afterwards means some did not fit.
template <class Store>
__device__ __forceinline__ void append(bool has, int& n, int cap, int lane, Store&& store)
{
  const unsigned votes = __ballot_sync(kFull, has);
  const int at = n + __popc(votes & ((1u << lane) - 1));
  if (has && at < cap)
    store(at);
  n += __popc(votes);
}

__global__ void __launch_bounds__(kWarps * 32) labelKernel(SegmentIndexView v, Band band, int blocksX, int64_t blocks)
{
  __shared__ WarpStage stageOf[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t block = int64_t(blockIdx.x) * kWarps + warp;
  if (block >= blocks)
    return;
  WarpStage& S = stageOf[warp];
  constexpr int K = sg::kBlock;
  const int c0 = int(block % blocksX) * K, r0 = band.row0 + int(block / blocksX) * K;
  const int c1 = minOf(c0 + K, v.width) - 1, r1 = minOf(r0 + K, band.rowEnd) - 1;
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  for (int i = lane; i < kTable; i += 32)
    S.table[i] = -1;

  // 1. The block's buckets and one ring (or the nearest non-empty bucket), then every other bucket
  //    within reach down the pyramid, as labelBlock on the CPU; the entries kept in shared memory
  //    with their distances while they fit.
  sg::Rect rect = blockRect(v.g, c0, r0, c1, r1, 1);
  double eMin = HUGE_VAL;
  int nScanned = 0;
  auto scanRange = [&](int64_t b, int64_t e) {
    for (int64_t base = b; base < e; base += 32)
    {
      const int64_t k = base + lane;
      const double ec = k < e ? sg::segmentSquared(disc.cx, disc.cy, v.entries[k]) : HUGE_VAL;
      eMin = minOf(eMin, ec);
      append(k < e, nScanned, kScanCap, lane, [&](int at) {
        S.scanned[at] = int32_t(k);
        S.e[at] = ec;
      });
    }
  };
  auto scanNewRuns = [&](const sg::Rect& now, const sg::Rect& before) {
    sg::forNewRuns(now, before, [&](int y, int x0, int x1) {
      scanRange(v.start[int64_t(y) * v.g.bx + x0], v.start[int64_t(y) * v.g.bx + x1 + 1]);
    });
    eMin = warpMin(eMin);
  };
  auto entriesIn = [&](const sg::Rect& r) {
    int64_t n = 0;
    for (int y = r.y0 + lane; y <= r.y1; y += 32)
      n += v.rowEntries(y, r.x0, r.x1);
    return warpSum(n);
  };
  scanNewRuns(rect, sg::Rect{});
  const int widened = eMin == HUGE_VAL ? 1 : 0;
  // A few buckets more while the rectangle stays small (most blocks); beyond, the pyramid.
  auto area = [](const sg::Rect& r) { return int64_t(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1); };
  for (int m = 2; eMin == HUGE_VAL && m <= 4; m *= 2)
  {
    const sg::Rect wider = blockRect(v.g, c0, r0, c1, r1, m);
    if (entriesIn(wider) == 0)
      continue;
    scanNewRuns(wider, rect);
    rect = wider;
  }
  int64_t greedy = -1;
  if (eMin == HUGE_VAL)
  {
    greedy = nearestBucket(v, c0, r0, c1, r1);
    scanRange(v.start[greedy], v.start[greedy + 1]);
    eMin = warpMin(eMin);
  }
  else
    for (int step = 0; step < 3; ++step)
    {
      const sg::Rect need = reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect);
      if (rect.contains(need) || area(need) > kSmallRect)
        break;
      scanNewRuns(need, rect);
      rect = need;
    }
  // (Nothing to do where the reach stays within the buckets already scanned: most blocks.)
  const bool far =
    greedy >= 0 || !rect.contains(reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect));
  bool searched = true;
  if (far)
    searched = forFarBuckets(v, c0, r0, c1, r1, rect, greedy, S.stack, lane, [&] { return reachOf(eMin, disc, v.slack); },
                             [&](int64_t b) {
                               scanRange(v.start[b], v.start[b + 1]);
                               eMin = warpMin(eMin);
                             });
  const double limit = keepLimit(pixelBound(eMin, disc), disc, v.slack);
  // Every entry that may be nearest, again (when shared memory could not hold them): the same
  // buckets, with the final reach; or, where the search's stack overflowed, every bucket within
  // reach in the rectangle around the block.
  const sg::Rect square = reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect);
  auto forSquare = [&](auto&& visitRange) {
    sg::forNewRuns(square, sg::Rect{}, [&](int y, int x0, int x1) {
      visitRange(v.start[int64_t(y) * v.g.bx + x0], v.start[int64_t(y) * v.g.bx + x1 + 1]);
    });
  };
  auto forCandidateRanges = [&](auto&& visitRange) {
    if (!searched)
    {
      forSquare(visitRange);
      return;
    }
    sg::forNewRuns(rect, sg::Rect{}, [&](int y, int x0, int x1) {
      visitRange(v.start[int64_t(y) * v.g.bx + x0], v.start[int64_t(y) * v.g.bx + x1 + 1]);
    });
    if (greedy >= 0)
      visitRange(v.start[greedy], v.start[greedy + 1]);
    // This descent starts from the final reach's level and may overflow where the first did not:
    // then the square as well (a bucket visited twice costs time only: copies are merged by id
    // and evaluating a segment twice changes nothing).
    if (far && !forFarBuckets(v, c0, r0, c1, r1, rect, greedy, S.stack, lane,
                              [&] { return reachOf(eMin, disc, v.slack); },
                              [&](int64_t b) { visitRange(v.start[b], v.start[b + 1]); }))
      forSquare(visitRange);
  };
  __syncwarp();

  // 2. The segments that may be nearest, each once, copied into shared memory while they fit (the
  //    scanned entries are all of them only when the search did not overflow its stack).
  int n = 0;
  if (searched && nScanned <= kScanCap)
  {
    for (int base = 0; base < nScanned; base += 32)
    {
      const int i = base + lane;
      bool keep = i < nScanned && S.e[i] <= limit;
      const sg::Segment* s = keep ? v.entries + S.scanned[i] : nullptr;
      if (keep)
        keep = firstCopy(S.table, s->id);
      append(keep, n, kKeepCap, lane, [&](int at) { S.keep[at] = *s; });
    }
  }
  else
  {
    forCandidateRanges([&](int64_t b, int64_t e) {
      for (int64_t base = b; base < e; base += 32)
      {
        const int64_t k = base + lane;
        bool keep = k < e && sg::segmentSquared(disc.cx, disc.cy, v.entries[k]) <= limit;
        if (keep)
          keep = firstCopy(S.table, v.entries[k].id);
        append(keep, n, kKeepCap, lane, [&](int at) { S.keep[at] = v.entries[k]; });
      }
    });
  }
  const bool overflow = n > kKeepCap;
  __syncwarp();

  // 3. Each cell's own cut of the list, then its four pixels.
  const int cell = lane & 15, half = lane >> 4;
  const int cc0 = c0 + (cell & 3) * 2, cr0 = r0 + (cell >> 2) * 2;
  const bool valid = cc0 <= c1 && cr0 <= r1;
  const PixelDisc cdisc = discOf(cc0, cr0, minOf(cc0 + 1, c1), minOf(cr0 + 1, r1));
  CellPixels p;
  int inside = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
  {
    const int pc = cc0 + (j & 1), pr = cr0 + (j >> 1);
    const int32_t covered = (band.cover && pc <= c1 && pr <= r1) ? band.cover[int64_t(pr - band.row0) * v.width + pc]
                                                                 : INT32_MAX;
    p.best[j] = covered != INT32_MAX ? 0.0 : HUGE_VAL;
    p.label[j] = covered;
    inside += (half == 0 && covered != INT32_MAX) ? 1 : 0;
  }
  const double px = double(cc0) + 0.5, py = double(cr0) + 0.5;
  if (!overflow)
  {
    double eCell = HUGE_VAL;
    if (valid)
      for (int t = half; t < n; t += 2)
        eCell = minOf(eCell, sg::segmentSquared(cdisc.cx, cdisc.cy, S.keep[t]));
    eCell = minOf(eCell, __shfl_xor_sync(kFull, eCell, 16));
    const double cellLimit = keepLimit(pixelBound(eCell, cdisc), cdisc, v.slack);
    if (valid)
      for (int t = half; t < n; t += 2)
      {
        const sg::Segment& s = S.keep[t];
        if (sg::segmentSquared(cdisc.cx, cdisc.cy, s) <= cellLimit)
          evaluate(s, px, py, p);
      }
  }
  else
  {
    // Too many to keep (piles of segments): every candidate entry within the block's cut.
    forCandidateRanges([&](int64_t b, int64_t e) {
      if (valid)
        for (int64_t k = b + half; k < e; k += 2)
        {
          const sg::Segment s = v.entries[k];
          if (sg::segmentSquared(disc.cx, disc.cy, s) <= limit)
            evaluate(s, px, py, p);
        }
    });
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
  {
    const double otherBest = __shfl_xor_sync(kFull, p.best[j], 16);
    const int32_t otherLabel = __shfl_xor_sync(kFull, p.label[j], 16);
    if (sg::better(otherBest, otherLabel, p.best[j], p.label[j]))
    {
      p.best[j] = otherBest;
      p.label[j] = otherLabel;
    }
    const int pc = cc0 + (j & 1), pr = cr0 + (j >> 1);
    if (half == 0 && pc <= c1 && pr <= r1)
    {
      const int64_t at = int64_t(pr - band.row0) * v.width + pc;
      band.site[at] = p.label[j];
      if (band.distance)
        band.distance[at] = distanceValue(p.best[j], band.pixelSize);
    }
  }
  inside = int(warpSum(inside));
  if (lane == 0)
  {
    atomicAdd(band.counters + kBlocks, 1ull);
    if (widened)
      atomicAdd(band.counters + kWidened, 1ull);
    atomicAdd(band.counters + kCandidates, (unsigned long long)n);
    if (inside)
      atomicAdd(band.counters + kInside, (unsigned long long)inside);
  }
}

unsigned gridFor(int64_t n, int threads = 256)
{
  return static_cast<unsigned>(std::max<int64_t>(1, (n + threads - 1) / threads));
}

class GpuFeatureLabeller final : public Labeller
{
public:
  GpuFeatureLabeller(const Grid& grid, const FeatureSites& features, const FeatureLabellerOptions& options,
                     const RunControl& control)
    : mGrid(grid), mOptions(options)
  {
    const GpuInfo& gpu = probeGpu();
    if (!gpu.usable)
      throw DeviceUnavailable(gpu.reason);
    mDeviceName = gpu.name;
    mDevice = gpu.device;
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    const int threads = options.threads > 0 ? options.threads : defaultThreadCount();
    PreparedFeatures prepared;
    {
      ScopedStage stage(mTimes, "prepare");
      prepared = prepareFeatures(grid, features, options.interior, threads, control);
    }
    if (control.isCanceled())
      throw Canceled();
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking));
    try
    {
      buildIndex(prepared);
    }
    catch (...)
    {
      cudaStreamDestroy(mStream);
      throw;
    }
    mStats.uniqueSites = prepared.featuresWithSegments;
  }

  ~GpuFeatureLabeller() override
  {
    cudaSetDevice(mDevice);
    cudaStreamSynchronize(mStream);
    cudaStreamDestroy(mStream);
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
    int64_t done = 0;
    while (done < rows)
    {
      if (control.isCanceled())
        throw Canceled();
      const int64_t part = std::min(bandRows(distance != nullptr), rows - done);
      try
      {
        const size_t pixels = static_cast<size_t>(part * mGrid.width);
        mSiteOut.resize(pixels);
        if (distance)
          mDistanceOut.resize(pixels);
        if (mSpanCount)
          mCover.resize(pixels);
        cuda::EventTimer compute;
        compute.start(mStream);
        launchBand(row0 + done, part, distance != nullptr);
        compute.stop(mStream);
        mTimes.add("compute", compute.milliseconds());
        const auto downloadStart = std::chrono::steady_clock::now();
        cuda::copyToHost(site + done * mGrid.width, mSiteOut.data(), pixels * sizeof(int32_t));
        if (distance)
          cuda::copyToHost(distance + done * mGrid.width, mDistanceOut.data(), pixels * sizeof(float));
        mTimes.add("download",
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - downloadStart).count());
      }
      catch (const DeviceOutOfMemory&)
      {
        GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
        mSiteOut.release();
        mDistanceOut.release();
        mCover.release();
        if (mBandRows <= sg::kBlock)
          throw;
        mBandRows = std::max<int64_t>(sg::kBlock, mBandRows / 2 / sg::kBlock * sg::kBlock);
        mWarnings.push_back("The GPU ran out of memory; continuing in bands of " + std::to_string(mBandRows) + " rows.");
        continue;
      }
      done += part;
    }
  }

  Backend backend() const override { return Backend::Gpu; }
  std::string deviceName() const override { return mDeviceName; }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override
  {
    unsigned long long counters[kCounterCount] = {};
    GPUGEO_CUDA_CHECK(cudaSetDevice(mDevice));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpy(counters, mCounters.data(), sizeof(counters), cudaMemcpyDeviceToHost));
    mStats.tiles = static_cast<int64_t>(counters[kBlocks]);
    mStats.splitTiles = static_cast<int64_t>(counters[kWidened]);
    mStats.candidates = static_cast<int64_t>(counters[kCandidates]);
    mStats.refinedPixels = static_cast<int64_t>(counters[kInside]);
    return mStats;
  }
  std::vector<std::string> warnings() const override { return mWarnings; }

private:
  void buildIndex(const PreparedFeatures& p)
  {
    const int64_t slots = static_cast<int64_t>(p.vertex.size());
    const int64_t buckets = p.buckets.count();
    cuda::PinnedBuffer<Point> hostVertex;
    cuda::PinnedBuffer<int32_t> hostFeature;
    hostVertex.resize(static_cast<size_t>(slots));
    hostFeature.resize(static_cast<size_t>(slots));
    std::copy(p.vertex.begin(), p.vertex.end(), hostVertex.data());
    std::copy(p.segmentFeature.begin(), p.segmentFeature.end(), hostFeature.data());
    DeviceBuffer<Point> vertex(static_cast<size_t>(slots));
    DeviceBuffer<int32_t> feature(static_cast<size_t>(slots));
    DeviceBuffer<sg::Segment> seg(static_cast<size_t>(slots));
    DeviceBuffer<int64_t> count(static_cast<size_t>(slots) + 1), offset(static_cast<size_t>(slots) + 1);
    mCounters.resize(kCounterCount);

    cuda::EventTimer upload, index;
    upload.start(mStream);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(vertex.data(), hostVertex.data(), sizeof(Point) * size_t(slots),
                                      cudaMemcpyHostToDevice, mStream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(feature.data(), hostFeature.data(), sizeof(int32_t) * size_t(slots),
                                      cudaMemcpyHostToDevice, mStream));
    if (!p.spans.empty())
    {
      mSpans.resize(p.spans.size());
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(mSpans.data(), p.spans.data(), sizeof(Span) * p.spans.size(),
                                        cudaMemcpyHostToDevice, mStream));
      mRowSpan = p.rowSpan;
      mSpanCount = static_cast<int64_t>(p.spans.size());
    }
    upload.stop(mStream);
    mTimes.add("upload", upload.milliseconds());

    index.start(mStream);
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(count.data() + slots, 0, sizeof(int64_t), mStream));
    makeSegmentsKernel<<<gridFor(slots), 256, 0, mStream>>>(vertex.data(), feature.data(), slots, seg.data(),
                                                             count.data(), p.buckets);
    GPUGEO_CUDA_CHECK_LAUNCH();
    size_t scanBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, count.data(), offset.data(), slots + 1, mStream));
    DeviceBuffer<unsigned char> temp(scanBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), scanBytes, count.data(), offset.data(), slots + 1, mStream));
    int64_t total = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(&total, offset.data() + slots, sizeof(total), cudaMemcpyDeviceToHost, mStream));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(mStream));
    if (total >= (int64_t(1) << 31))
      throw DeviceOutOfMemory("the segments would be listed " + std::to_string(total) +
                              " times in their buckets, more than the GPU index holds (2^31)");
    DeviceBuffer<uint32_t> key(static_cast<size_t>(total)), keySorted(static_cast<size_t>(total));
    DeviceBuffer<int32_t> value(static_cast<size_t>(total)), valueSorted(static_cast<size_t>(total));
    emitKernel<<<gridFor(slots), 256, 0, mStream>>>(seg.data(), offset.data(), slots, p.buckets, key.data(),
                                                     value.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    int bits = 1;
    while (bits < 32 && (int64_t(1) << bits) < buckets)
      ++bits;
    size_t sortBytes = 0;
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, key.data(), keySorted.data(), value.data(),
                                                      valueSorted.data(), total, 0, bits, mStream));
    temp.resize(sortBytes);
    GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), sortBytes, key.data(), keySorted.data(),
                                                      value.data(), valueSorted.data(), total, 0, bits, mStream));
    mStart.resize(static_cast<size_t>(buckets + 1));
    startKernel<<<gridFor(buckets + 1), 256, 0, mStream>>>(keySorted.data(), total, buckets, mStart.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    mPyramid = pyramidOf(p.buckets);
    mCounts.resize(static_cast<size_t>(mPyramid.levelStart[mPyramid.levels]));
    bucketCountKernel<<<gridFor(buckets), 256, 0, mStream>>>(mStart.data(), buckets, mCounts.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    for (int k = 1; k < mPyramid.levels; ++k)
    {
      levelUpKernel<<<gridFor(int64_t(mPyramid.levelWidth[k]) * mPyramid.levelHeight[k]), 256, 0, mStream>>>(
        mCounts.data() + mPyramid.levelStart[k - 1], mPyramid.levelWidth[k - 1], mPyramid.levelHeight[k - 1],
        mCounts.data() + mPyramid.levelStart[k], mPyramid.levelWidth[k], mPyramid.levelHeight[k]);
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    mEntries.resize(static_cast<size_t>(std::max<int64_t>(1, total)));
    gatherKernel<<<gridFor(total), 256, 0, mStream>>>(seg.data(), valueSorted.data(), total, mEntries.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(mCounters.data(), 0, sizeof(unsigned long long) * kCounterCount, mStream));
    index.stop(mStream);
    mTimes.add("index", index.milliseconds());

    mView.g = p.buckets;
    mView.start = mStart.data();
    mView.entries = mEntries.data();
    mView.pyramid = mPyramid;
    mView.counts = mCounts.data();
    mView.slack = p.slack;
    mView.width = static_cast<int>(mGrid.width);
    mView.height = static_cast<int>(mGrid.height);
  }

  void launchBand(int64_t row0, int64_t rows, bool withDistance)
  {
    const int64_t pixels = rows * mGrid.width;
    Band band{static_cast<int>(row0), static_cast<int>(row0 + rows), nullptr, mSiteOut.data(),
              withDistance ? mDistanceOut.data() : nullptr, mGrid.pixelSize, mCounters.data()};
    if (mSpanCount)
    {
      fillKernel<<<gridFor(pixels, 1024) > 4096 ? 4096 : gridFor(pixels, 1024), 1024, 0, mStream>>>(mCover.data(),
                                                                                                      pixels, INT32_MAX);
      GPUGEO_CUDA_CHECK_LAUNCH();
      const int64_t first = mRowSpan[static_cast<size_t>(row0)], last = mRowSpan[static_cast<size_t>(row0 + rows)];
      if (last > first)
      {
        paintKernel<<<gridFor((last - first) * 32) > 8192 ? 8192 : gridFor((last - first) * 32), 256, 0, mStream>>>(
          mSpans.data(), first, last, row0, static_cast<int>(mGrid.width), mCover.data());
        GPUGEO_CUDA_CHECK_LAUNCH();
      }
      band.cover = mCover.data();
    }
    constexpr int K = sg::kBlock;
    const int blocksX = static_cast<int>((mGrid.width + K - 1) / K);
    const int64_t blocks = int64_t(blocksX) * ((rows + K - 1) / K);
    labelKernel<<<gridFor(blocks, kWarps), kWarps * 32, 0, mStream>>>(mView, band, blocksX, blocks);
    GPUGEO_CUDA_CHECK_LAUNCH();
  }

  // Rows per band: what the memory budget allows, in whole blocks of rows.
  int64_t bandRows(bool withDistance)
  {
    if (mBandRows == 0)
    {
      size_t budget = mOptions.gpuMemoryBudget;
      if (budget == 0)
      {
        size_t freeBytes = 0, totalBytes = 0;
        GPUGEO_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
        budget = std::min<size_t>(freeBytes / 2, size_t(4) << 30);
      }
      const double bytesPerRow = double(mGrid.width) * (4.0 + (withDistance ? 4.0 : 0.0) + (mSpanCount ? 4.0 : 0.0));
      mBandRows = std::max<int64_t>(sg::kBlock, int64_t(double(budget) / bytesPerRow) / sg::kBlock * sg::kBlock);
      mBandRows = std::min(mBandRows, (mGrid.height + sg::kBlock - 1) / sg::kBlock * sg::kBlock);
    }
    return mBandRows;
  }

  Grid mGrid;
  FeatureLabellerOptions mOptions;
  std::string mDeviceName;
  int mDevice = 0;
  cudaStream_t mStream = nullptr;
  StageTimes mTimes;
  mutable LabelStats mStats;
  std::vector<std::string> mWarnings;
  int64_t mBandRows = 0;

  SegmentIndexView mView;
  DeviceBuffer<int64_t> mStart;
  DeviceBuffer<sg::Segment> mEntries;
  Pyramid mPyramid;
  DeviceBuffer<int32_t> mCounts;
  DeviceBuffer<Span> mSpans;
  std::vector<int64_t> mRowSpan;
  int64_t mSpanCount = 0;
  DeviceBuffer<unsigned long long> mCounters;
  DeviceBuffer<int32_t> mSiteOut;
  DeviceBuffer<float> mDistanceOut;
  DeviceBuffer<int32_t> mCover;
};

}  // namespace

std::unique_ptr<Labeller> makeGpuFeatureLabeller(const Grid& grid, const FeatureSites& features,
                                                 const FeatureLabellerOptions& options, const RunControl& control)
{
  return std::make_unique<GpuFeatureLabeller>(grid, features, options, control);
}

}  // namespace gpugeo::voronoi
