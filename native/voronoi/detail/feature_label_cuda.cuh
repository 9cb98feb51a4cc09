// The labelling kernels of the CUDA allocation to lines and polygons: a warp per 32 x 32 tile
// (tileKernel) and a warp per 8 x 8 block for what overflows (labelKernel), with their device
// helpers. The design is described at the top of feature_allocation_cuda.cu, the only file that
// includes this one (it launches the kernels and reads the counters).
#pragma once

#include <cstdint>

#include "feature_index.h"

namespace gpugeo::voronoi::feature_cuda {

using namespace detail;
namespace sg = detail::segments;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarps = 4;       // warps (blocks of pixels) per CUDA block
constexpr int kScanCap = 192;   // entries a warp keeps with their distances while it scans
constexpr int kKeepCap = 96;    // segments it keeps for its pixels
constexpr int kTable = 256;     // its hash set of segment ids (a power of two)
constexpr int kStack = 256;     // its stack of pyramid cells
// A tile (tileKernel): kTileBlocks x kTileBlocks blocks searched as one by a warp, which keeps up to
// kTileScanCap entries it scanned and kTileListCap segments that may be nearest to the tile.
constexpr int kTileBlocks = 4;
constexpr int kTileScanCap = 640;
constexpr int kTileListCap = 384;
constexpr int kTileTable = 1024;

enum Counter
{
  kBlocks,
  kWidened,
  kCandidates,
  kInside,
  kLeftByTile,   // blocks left to labelKernel because their tile's search or list overflowed
  kLeftByBlock,  // blocks left because their own cut list overflowed
  kCounterCount
};

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
__device__ __forceinline__ bool firstCopy(int32_t* table, int size, int32_t id)
{
  uint32_t slot = (uint32_t(id) * 2654435761u) & uint32_t(size - 1);
#pragma unroll 1
  for (int probe = 0; probe < size; ++probe)
  {
    const int32_t old = atomicCAS(table + slot, -1, id);
    if (old == -1)
      return true;
    if (old == id)
      return false;
    slot = (slot + 1) & uint32_t(size - 1);
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

// What a warp's search of a box of pixels found (searchBox).
struct BoxSearch
{
  sg::Rect rect;    // the buckets scanned as a rectangle
  double eMin;      // the least squared distance from the box's centre over every entry scanned
  int64_t greedy;   // the bucket nearestBucket gave where the rectangle held nothing (-1: none)
  bool far;         // buckets beyond the rectangle were searched down the pyramid
  bool searched;    // false where the pyramid's stack overflowed (not every bucket was visited)
  bool widened;     // the box's buckets and ring held nothing
  int nScanned;     // entries scanned; the first `cap` kept in scanned / e
};

// The candidate search for the pixels [c0, c1] x [r0, r1] by a warp, as gatherSegments on the CPU:
// the box's buckets and one ring (or the nearest non-empty bucket), a few more while the rectangle
// stays within rectLimit buckets (growSteps times at most), then every other bucket within reach
// down the pyramid; its lanes over the entries, the least squared distance by a warp reduction; the
// entries scanned and their distances from the box's centre kept in scanned / e while they fit.
template <int Cap>
__device__ __forceinline__ BoxSearch searchBox(const SegmentIndexView& v, int c0, int r0, int c1, int r1,
                                               const PixelDisc& disc, int64_t rectLimit, int growSteps,
                                               int32_t* scanned, double* e, int32_t* stack, int lane)
{
  BoxSearch s;
  s.rect = blockRect(v.g, c0, r0, c1, r1, 1);
  s.eMin = HUGE_VAL;
  s.greedy = -1;
  s.nScanned = 0;
  double& eMin = s.eMin;
  auto scanRange = [&](int64_t b, int64_t end) {
    for (int64_t base = b; base < end; base += 32)
    {
      const int64_t k = base + lane;
      const double ec = k < end ? sg::segmentSquared(disc.cx, disc.cy, v.entries[k]) : HUGE_VAL;
      eMin = minOf(eMin, ec);
      append(k < end, s.nScanned, Cap, lane, [&](int at) {
        scanned[at] = int32_t(k);
        e[at] = ec;
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
  scanNewRuns(s.rect, sg::Rect{});
  s.widened = eMin == HUGE_VAL;
  // A few buckets more while the rectangle stays small; beyond, the pyramid.
  auto area = [](const sg::Rect& r) { return int64_t(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1); };
  for (int m = 2; eMin == HUGE_VAL && m <= 4; m *= 2)
  {
    const sg::Rect wider = blockRect(v.g, c0, r0, c1, r1, m);
    if (entriesIn(wider) == 0)
      continue;
    scanNewRuns(wider, s.rect);
    s.rect = wider;
  }
  if (eMin == HUGE_VAL)
  {
    s.greedy = nearestBucket(v, c0, r0, c1, r1);
    scanRange(v.start[s.greedy], v.start[s.greedy + 1]);
    eMin = warpMin(eMin);
  }
  else
    for (int step = 0; step < growSteps; ++step)
    {
      const sg::Rect need = reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, s.rect);
      if (s.rect.contains(need) || area(need) > rectLimit)
        break;
      scanNewRuns(need, s.rect);
      s.rect = need;
    }
  // (Nothing to do where the reach stays within the buckets already scanned: most boxes.)
  s.far = s.greedy >= 0 || !s.rect.contains(reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, s.rect));
  s.searched = true;
  if (s.far)
    s.searched = forFarBuckets(v, c0, r0, c1, r1, s.rect, s.greedy, stack, lane,
                               [&] { return reachOf(eMin, disc, v.slack); },
                               [&](int64_t b) {
                                 scanRange(v.start[b], v.start[b + 1]);
                                 eMin = warpMin(eMin);
                               });
  return s;
}

// Each 2 x 2 cell of the block [c0, c1] x [r0, r1] cuts the block's list `keep` (n segments) again
// for itself and its four pixels take the best of what remains (from the interior's 0 where they
// are inside), written to the band; where `overflow`, forOverflow(visitRange) gives every candidate
// entry instead, cut by the block's `limit`. Returns the pixels inside a polygon (warp-uniform).
template <class ForEntries>
__device__ __forceinline__ int labelCells(const SegmentIndexView& v, const Band& band, int c0, int r0, int c1, int r1,
                                          const PixelDisc& disc, double limit, const sg::Segment* keep, int n,
                                          bool overflow, int lane, ForEntries&& forOverflow)
{
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
        eCell = minOf(eCell, sg::segmentSquared(cdisc.cx, cdisc.cy, keep[t]));
    eCell = minOf(eCell, __shfl_xor_sync(kFull, eCell, 16));
    const double cellLimit = keepLimit(pixelBound(eCell, cdisc), cdisc, v.slack);
    if (valid)
      for (int t = half; t < n; t += 2)
      {
        const sg::Segment& s = keep[t];
        if (sg::segmentSquared(cdisc.cx, cdisc.cy, s) <= cellLimit)
          evaluate(s, px, py, p);
      }
  }
  else
  {
    // Too many to keep (piles of segments): every candidate entry within the block's cut.
    forOverflow([&](int64_t b, int64_t e) {
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
  return int(warpSum(inside));
}

// A block's counts for LabelStats (lane 0).
__device__ __forceinline__ void countBlock(const Band& band, bool widened, int candidates, int inside, int lane)
{
  if (lane != 0)
    return;
  atomicAdd(band.counters + kBlocks, 1ull);
  if (widened)
    atomicAdd(band.counters + kWidened, 1ull);
  atomicAdd(band.counters + kCandidates, (unsigned long long)candidates);
  if (inside)
    atomicAdd(band.counters + kInside, (unsigned long long)inside);
}

// The pixels of block `block` (blocksX a row, from the band's first row) by a warp on its own: its
// search (searchBox), the segments that may be nearest each once (a hash set of ids) in shared
// memory, then its cells (labelCells). Where the lists overflow shared memory, the same buckets
// are visited again for each cell, with the block's cut (where even the stack overflowed: every
// bucket of the square around the block within reach).
__device__ __forceinline__ void labelBlock(const SegmentIndexView& v, const Band& band, int blocksX, int64_t block,
                                           WarpStage& S, int lane)
{
  constexpr int K = sg::kBlock;
  const int c0 = int(block % blocksX) * K, r0 = band.row0 + int(block / blocksX) * K;
  const int c1 = minOf(c0 + K, v.width) - 1, r1 = minOf(r0 + K, band.rowEnd) - 1;
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  for (int i = lane; i < kTable; i += 32)
    S.table[i] = -1;

  // 1. The search.
  const BoxSearch found = searchBox<kScanCap>(v, c0, r0, c1, r1, disc, kSmallRect, 3, S.scanned, S.e, S.stack, lane);
  const sg::Rect rect = found.rect;
  const double eMin = found.eMin;
  const int64_t greedy = found.greedy;
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
    if (!found.searched)
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
    if (found.far && !forFarBuckets(v, c0, r0, c1, r1, rect, greedy, S.stack, lane,
                                    [&] { return reachOf(eMin, disc, v.slack); },
                                    [&](int64_t b) { visitRange(v.start[b], v.start[b + 1]); }))
      forSquare(visitRange);
  };
  __syncwarp();

  // 2. The segments that may be nearest, each once, copied into shared memory while they fit (the
  //    scanned entries are all of them only when the search did not overflow its stack).
  int n = 0;
  if (found.searched && found.nScanned <= kScanCap)
  {
    for (int base = 0; base < found.nScanned; base += 32)
    {
      const int i = base + lane;
      bool keep = i < found.nScanned && S.e[i] <= limit;
      const sg::Segment* s = keep ? v.entries + S.scanned[i] : nullptr;
      if (keep)
        keep = firstCopy(S.table, kTable, s->id);
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
          keep = firstCopy(S.table, kTable, v.entries[k].id);
        append(keep, n, kKeepCap, lane, [&](int at) { S.keep[at] = v.entries[k]; });
      }
    });
  }
  __syncwarp();

  // 3. Each cell's own cut of the list, then its four pixels.
  const int inside = labelCells(v, band, c0, r0, c1, r1, disc, limit, S.keep, n, n > kKeepCap, lane, forCandidateRanges);
  countBlock(band, found.widened, n, inside, lane);
}

// The blocks listed by tileKernel (list[0 .. *listed - 1]), each by a warp on its own (labelBlock).
__global__ void __launch_bounds__(kWarps * 32) labelKernel(SegmentIndexView v, Band band, int blocksX,
                                                           const int32_t* list, const unsigned* listed)
{
  __shared__ WarpStage stageOf[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t count = *listed;
  for (int64_t i = int64_t(blockIdx.x) * kWarps + warp; i < count; i += int64_t(gridDim.x) * kWarps)
    labelBlock(v, band, blocksX, list[i], stageOf[warp], lane);
}

// A tile's shared memory (a warp's), in two phases. The search: the entries scanned with their
// squared distances from the tile's centre, its hash set and stack; the tile's list (entry
// positions of the segments that may be nearest to one of its pixels, each once) is then written
// over `scanned` from its start (an entry is written at or before the one being read). The blocks:
// beside that list, a block's squared distances to its entries and its cut list of segments, over
// the search's arrays. Sharing the memory lets more tiles run at once on a multiprocessor.
struct TileStage
{
  int32_t scanned[kTileScanCap];  // then the tile's list, its first n <= kTileListCap
  union
  {
    struct
    {
      double e[kTileScanCap];
      int32_t table[kTileTable];
      int32_t stack[kStack];
    } search;
    struct
    {
      double e[kTileListCap];
      sg::Segment keep[kKeepCap];
    } block;
  };
};
static_assert(kTileListCap <= kTileScanCap, "the tile's list is written over its scanned entries");

// A warp per tile of kTileBlocks x kTileBlocks blocks, as the CPU labels (labelTileBlocks there): the
// search once for the tile (searchBox), its list of segments that may be nearest each once, then
// for each block the list cut from the tile's (as keepNearest on the CPU) and its cells
// (labelCells). A tile whose search or list overflows shared memory, or a block whose list does,
// is left to labelKernel (its blocks appended to `list`).
__global__ void __launch_bounds__(32) tileKernel(SegmentIndexView v, Band band, int blocksX, int blocksY, int tilesX,
                                                 int32_t* list, unsigned* listed)
{
  __shared__ TileStage T;
  constexpr int K = sg::kBlock;
  const int lane = threadIdx.x;
  const int tx = int(blockIdx.x % unsigned(tilesX)), ty = int(blockIdx.x / unsigned(tilesX));
  const int bx0 = tx * kTileBlocks, by0 = ty * kTileBlocks;
  const int bx1 = minOf(bx0 + kTileBlocks, blocksX) - 1, by1 = minOf(by0 + kTileBlocks, blocksY) - 1;
  auto leave = [&](int bx, int by, Counter why) {
    if (lane == 0)
    {
      list[atomicAdd(listed, 1u)] = by * blocksX + bx;
      atomicAdd(band.counters + why, 1ull);
    }
  };
  const int c0 = bx0 * K, r0 = band.row0 + by0 * K;
  const int c1 = minOf((bx1 + 1) * K, v.width) - 1, r1 = minOf(band.row0 + (by1 + 1) * K, band.rowEnd) - 1;
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  for (int i = lane; i < kTileTable; i += 32)
    T.search.table[i] = -1;
  __syncwarp();
  const BoxSearch found = searchBox<kTileScanCap>(v, c0, r0, c1, r1, disc, kTileRect, kTileGrowSteps, T.scanned,
                                                  T.search.e, T.search.stack, lane);
  const double limit = keepLimit(pixelBound(found.eMin, disc), disc, v.slack);
  int n = 0;
  const bool scannedAll = found.searched && found.nScanned <= kTileScanCap;
  if (scannedAll)
  {
    __syncwarp();
    for (int base = 0; base < found.nScanned; base += 32)
    {
      const int i = base + lane;
      bool keep = i < found.nScanned && T.search.e[i] <= limit;
      const int32_t k = keep ? T.scanned[i] : 0;
      if (keep)
        keep = firstCopy(T.search.table, kTileTable, v.entries[k].id);
      __syncwarp();  // every lane has read scanned[i] before any writes the list over it
      append(keep, n, kTileListCap, lane, [&](int at) { T.scanned[at] = k; });
    }
  }
  __syncwarp();
  const int32_t* tileList = T.scanned;
  if (!scannedAll || n > kTileListCap)
  {
    for (int by = by0; by <= by1; ++by)
      for (int bx = bx0; bx <= bx1; ++bx)
        leave(bx, by, kLeftByTile);
    return;
  }
  for (int by = by0; by <= by1; ++by)
    for (int bx = bx0; bx <= bx1; ++bx)
    {
      const int b0 = bx * K, q0 = band.row0 + by * K;
      const int b1 = minOf(b0 + K, v.width) - 1, q1 = minOf(q0 + K, band.rowEnd) - 1;
      const PixelDisc bdisc = discOf(b0, q0, b1, q1);
      // Each entry's squared distance from the block's centre once (lane i % 32 writes and reads
      // entry i), their least, then the entries within the block's cut.
      double eBlock = HUGE_VAL;
      for (int i = lane; i < n; i += 32)
      {
        const double e = sg::segmentSquared(bdisc.cx, bdisc.cy, v.entries[tileList[i]]);
        T.block.e[i] = e;
        eBlock = minOf(eBlock, e);
      }
      eBlock = warpMin(eBlock);
      const double blockLimit = keepLimit(pixelBound(eBlock, bdisc), bdisc, v.slack);
      int m = 0;
      for (int base = 0; base < n; base += 32)
      {
        const int i = base + lane;
        const bool keep = i < n && T.block.e[i] <= blockLimit;
        const sg::Segment* s = keep ? v.entries + tileList[i] : nullptr;
        append(keep, m, kKeepCap, lane, [&](int at) { T.block.keep[at] = *s; });
      }
      __syncwarp();
      if (m > kKeepCap)
      {
        leave(bx, by, kLeftByBlock);
        continue;
      }
      // (The CPU's count of blocks whose buckets and ring hold nothing.)
      const sg::Rect ring = blockRect(v.g, b0, q0, b1, q1, 1);
      int64_t inRing = 0;
      for (int y = ring.y0 + lane; y <= ring.y1; y += 32)
        inRing += v.rowEntries(y, ring.x0, ring.x1);
      const bool widened = warpSum(inRing) == 0;
      const int inside = labelCells(v, band, b0, q0, b1, q1, bdisc, blockLimit, T.block.keep, m, false, lane,
                                    [](auto&&) {});
      countBlock(band, widened, m, inside, lane);
      __syncwarp();
    }
}

}  // namespace gpugeo::voronoi::feature_cuda
