// The CPU backend of the allocation to lines and polygons: the host's bucket index and the search
// by tiles of blocks. The GPU (feature_allocation_cuda.cu) searches by the same tiles, a warp a
// tile, and block by block where its shared lists overflow; both keep every segment that may be
// nearest to a pixel and weigh it with the same formula, so the labels and distances are the same
// bits.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "detail/feature_index.h"
#include "detail/segment_batch.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

using namespace detail;
namespace sg = detail::segments;

namespace {

// The host's bucket index: every segment listed (by its number) in each bucket it passes through, a
// bucket's in the order of the segments; and the pyramid of the buckets' counts. The GPU lists the
// segments' records themselves; here numbers keep the index small (a million segments listed 2
// million times: 8 MB of numbers instead of 96 MB of records, whose first touch alone took 0.3-0.5 s
// on this project's 2-core machine).
struct HostSegmentIndex
{
  std::vector<int64_t> start;
  std::vector<int32_t> entries;
  std::vector<double> inverse;  // per vertex slot: the segment's inv (makeSegment's), 0 for a point
  const Point* vertex = nullptr;
  const int32_t* feature = nullptr;
  Pyramid pyramid;
  std::vector<int32_t> counts;

  // The record of segment i, as makeSegment made it (dx = dy = 0 where inv is 0).
  sg::Segment segment(int32_t i) const
  {
    const double ax = vertex[i].x, ay = vertex[i].y, inv = inverse[static_cast<size_t>(i)];
    const bool line = inv != 0.0;
    return sg::Segment{ax, ay, line ? exact::sub(vertex[i + 1].x, ax) : 0.0, line ? exact::sub(vertex[i + 1].y, ay) : 0.0,
                       inv, feature[i], i};
  }
};

void fillPyramid(HostSegmentIndex& index, const sg::BucketGrid& g, int threads)
{
  index.pyramid = pyramidOf(g);
  const Pyramid& p = index.pyramid;
  resizeHuge(index.counts, static_cast<size_t>(p.levelStart[p.levels]));
  int32_t* counts = index.counts.data();
  const int64_t* start = index.start.data();
  parallelFor(g.count(), 1 << 16, threads, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b)
      counts[b] = static_cast<int32_t>(start[b + 1] - start[b]);
  });
  // Each cell of level k: the sum of its (up to) four cells of level k - 1.
  for (int k = 1; k < p.levels; ++k)
    parallelFor(p.levelHeight[k], 16, threads, [&](int64_t first, int64_t last) {
      const int32_t* below = counts + p.levelStart[k - 1];
      const int wb = p.levelWidth[k - 1], hb = p.levelHeight[k - 1];
      for (int64_t Y = first; Y < last; ++Y)
        for (int X = 0; X < p.levelWidth[k]; ++X)
        {
          int32_t sum = 0;
          for (int64_t y = 2 * Y; y <= std::min<int64_t>(2 * Y + 1, hb - 1); ++y)
            for (int x = 2 * X; x <= std::min(2 * X + 1, wb - 1); ++x)
              sum += below[y * wb + x];
          counts[p.levelStart[k] + Y * p.levelWidth[k] + X] = sum;
        }
    });
}

// Built on `threads` threads: the buckets' counts and then the entries are claimed with atomic
// additions (__atomic builtins: C++17 has no atomic_ref), each bucket's numbers then sorted, so the
// index is the same whatever the threads' timing.
HostSegmentIndex buildHostIndex(const PreparedFeatures& p, int threads, const RunControl& control)
{
  HostSegmentIndex index;
  const sg::BucketGrid& g = p.buckets;
  index.vertex = p.vertex.data();
  index.feature = p.segmentFeature.data();
  assignHuge(index.start, static_cast<size_t>(g.count() + 1), int64_t(0));
  const int64_t slots = static_cast<int64_t>(p.vertex.size());
  assignHuge(index.inverse, static_cast<size_t>(slots), 0.0);
  int64_t* start = index.start.data();
  // The buckets of a segment listed in at most kRemembered of them are remembered from the first
  // pass for the second (the bucket rows' arithmetic was most of the index's time); others are
  // found again.
  constexpr int kRemembered = 4;
  const bool remember = g.count() < int64_t(UINT32_MAX);
  std::vector<uint32_t> remembered;
  std::vector<uint8_t> listed;
  if (remember)
  {
    resizeHuge(remembered, static_cast<size_t>(slots) * kRemembered);
    resizeHuge(listed, static_cast<size_t>(slots));
  }
  parallelFor(slots, 1 << 14, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      if (p.segmentFeature[i] >= 0)
      {
        const sg::Segment s = sg::makeSegment(p.vertex[i].x, p.vertex[i].y, p.vertex[i + 1].x, p.vertex[i + 1].y,
                                              p.segmentFeature[i], static_cast<int32_t>(i));
        index.inverse[static_cast<size_t>(i)] = s.inv;
        int n = 0;
        sg::forEachBucketRow(g, s, [&](int x0, int x1, int y) {
          for (int x = x0; x <= x1; ++x, ++n)
          {
            const int64_t b = int64_t(y) * g.bx + x;
            __atomic_fetch_add(&start[b + 1], 1, __ATOMIC_RELAXED);
            if (remember && n < kRemembered)
              remembered[size_t(i) * kRemembered + size_t(n)] = static_cast<uint32_t>(b);
          }
        });
        if (remember)
          listed[size_t(i)] = static_cast<uint8_t>(std::min(n, kRemembered + 1));
      }
  }, &control);
  if (control.isCanceled())
    throw Canceled();
  for (int64_t b = 0; b < g.count(); ++b)
    start[b + 1] += start[b];
  // The pyramid counts entries in int32, as the GPU's index does.
  if (index.start.back() >= (int64_t(1) << 31))
    throw InvalidInput("The segments would be listed " + std::to_string(index.start.back()) +
                       " times in their buckets, more than the index holds (2^31); use a larger pixel size.");
  resizeHuge(index.entries, static_cast<size_t>(index.start.back()));
  // Each entry takes the slot below its bucket's end (start[b + 1] counts down to the bucket's
  // beginning), then the beginnings move down one place.
  parallelFor(slots, 1 << 14, threads, [&](int64_t first, int64_t last) {
    auto list = [&](int64_t b, int64_t i) {
      const int64_t slot = __atomic_sub_fetch(&start[b + 1], 1, __ATOMIC_RELAXED);
      index.entries[static_cast<size_t>(slot)] = static_cast<int32_t>(i);
    };
    for (int64_t i = first; i < last; ++i)
      if (p.segmentFeature[i] >= 0)
      {
        if (remember && listed[size_t(i)] <= kRemembered)
        {
          for (int k = 0; k < listed[size_t(i)]; ++k)
            list(remembered[size_t(i) * kRemembered + size_t(k)], i);
          continue;
        }
        sg::forEachBucketRow(g, index.segment(static_cast<int32_t>(i)), [&](int x0, int x1, int y) {
          for (int x = x0; x <= x1; ++x)
            list(int64_t(y) * g.bx + x, i);
        });
      }
  }, &control);
  if (control.isCanceled())
    throw Canceled();
  const int64_t total = static_cast<int64_t>(index.entries.size());
  std::copy(index.start.begin() + 1, index.start.end(), index.start.begin());
  index.start.back() = total;
  parallelFor(g.count(), 1 << 12, threads, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b)
      if (start[b + 1] - start[b] > 1)
        std::sort(index.entries.begin() + start[b], index.entries.begin() + start[b + 1]);
  });
  fillPyramid(index, g, threads);
  return index;
}

// What the blocks did, for LabelStats.
struct BlockCounts
{
  int64_t blocks = 0, widened = 0, candidates = 0;
};

// Where labelTileBlocks writes: pixel (c, r) at (r - row0) * stride + (c - col0) of site and
// distance (distance may be null).
struct PixelOut
{
  int32_t* site;
  float* distance;
  int64_t row0, col0, stride;
};

// A cell of the pyramid.
struct CellRef
{
  int k, X, Y;
};

// Scratch of one thread: the tile's segments (each once: `stamp` remembers, per segment id, the
// last tile that took it) with their squared distances from the tile's centre; the tile's list as
// columns; below the tile, lists of indexes into them.
struct TileScratch
{
  const void* owner = nullptr;
  std::vector<uint32_t> stamp;
  uint32_t serial = 0;
  std::vector<sg::Segment> segment;
  std::vector<double> e;
  sg::SegmentColumns tileColumns;
  std::vector<double> fourE;       // cutFour's squared distances, four a segment
  std::vector<uint32_t> lists[4];  // cutFour's lists: the tile's pairs', a pair's blocks', a block's
                                   // quarters', a quarter's cells'
  std::vector<uint32_t> all;       // 0, 1, 2, ...: the tile's whole list
  std::vector<CellRef> stack;
  std::vector<int32_t> outSite;  // the tile's labels and distances before they are written out
  std::vector<float> outDistance;

  // A new tile: a serial no segment carries yet.
  void next(const void* labeller, size_t ids)
  {
    if (owner != labeller || stamp.size() != ids)
    {
      owner = labeller;
      assignHuge(stamp, ids, uint32_t(0));
      serial = 0;
    }
    if (++serial == 0)
    {
      std::fill(stamp.begin(), stamp.end(), 0);
      serial = 1;
    }
    segment.clear();
    e.clear();
  }
};

// This thread's scratch, its address taken once per call (a thread_local used in the block loop
// itself cost a TLS lookup per use: 5 % of the labelling).
__attribute__((noinline)) TileScratch& threadScratch()
{
  thread_local TileScratch scratch;
  return scratch;
}

// The search for the pixels [c0, c1] x [r0, r1] (a tile; the GPU's searchBox): every segment
// that may be nearest to one of them, into scratch.segment with its squared distance from the
// rectangle's centre in scratch.e; returns the least of those.
// 1. the rectangle's buckets and one ring, a few more while it stays small (kTileRect), or where
//    all are empty a near non-empty bucket (nearestBucket); u, the least distance from the centre
//    plus the radius over their segments, bounds every pixel's nearest;
// 2. every other bucket within u of the rectangle, found by descending the pyramid.
__attribute__((always_inline)) inline double gatherSegments(const SegmentIndexView& v, const HostSegmentIndex& index,
                                                          int c0, int r0, int c1, int r1, TileScratch& scratch)
{
  const PixelDisc disc = discOf(c0, r0, c1, r1);
  double eMin = HUGE_VAL;
  auto scanBucket = [&](int64_t b) {
    for (int64_t k = v.start[b]; k < v.start[b + 1]; ++k)
    {
      const int32_t id = index.entries[static_cast<size_t>(k)];
      uint32_t& seen = scratch.stamp[static_cast<size_t>(id)];
      if (seen == scratch.serial)
        continue;
      seen = scratch.serial;
      const sg::Segment s = index.segment(id);
      const double ec = sg::segmentSquared(disc.cx, disc.cy, s);
      eMin = std::min(eMin, ec);
      scratch.segment.push_back(s);
      scratch.e.push_back(ec);
    }
  };
  // 1. The rectangle's buckets and one ring (a few more while that stays small); where they hold
  //    nothing, a near non-empty bucket found in the pyramid (nearestBucket).
  auto scanNewRuns = [&](const sg::Rect& now, const sg::Rect& before) {
    sg::forNewRuns(now, before, [&](int y, int x0, int x1) {
      for (int x = x0; x <= x1; ++x)
        scanBucket(int64_t(y) * v.g.bx + x);
    });
  };
  auto entriesIn = [&](const sg::Rect& r) {
    int64_t n = 0;
    for (int y = r.y0; y <= r.y1; ++y)
      n += v.rowEntries(y, r.x0, r.x1);
    return n;
  };
  sg::Rect rect = blockRect(v.g, c0, r0, c1, r1, 1);
  scanNewRuns(rect, sg::Rect{});
  int64_t greedy = -1;
  // A few buckets more while the rectangle stays small (most blocks); beyond, the pyramid.
  auto area = [](const sg::Rect& r) { return int64_t(r.x1 - r.x0 + 1) * (r.y1 - r.y0 + 1); };
  for (int m = 2; scratch.segment.empty() && m <= 4; m *= 2)
  {
    const sg::Rect wider = blockRect(v.g, c0, r0, c1, r1, m);
    if (entriesIn(wider) == 0)
      continue;
    scanNewRuns(wider, rect);
    rect = wider;
  }
  if (scratch.segment.empty())
  {
    greedy = nearestBucket(v, c0, r0, c1, r1);
    scanBucket(greedy);
  }
  else
    for (int step = 0; step < kTileGrowSteps; ++step)
    {
      const sg::Rect need = reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect);
      if (rect.contains(need) || area(need) > kTileRect)
        break;
      scanNewRuns(need, rect);
      rect = need;
    }
  // 2. Every other bucket within reach of the rectangle, down the pyramid from the level whose cells
  //    span the reach (the reach shrinks as nearer segments turn up).
  double reach = reachOf(eMin, disc, v.slack);
  const int k0 = levelSpanning(v, double(std::max(c1 - c0, r1 - r0)) + 2.0 * reach + 1.0);
  scratch.stack.clear();
  // (Nothing to do where the reach stays within the buckets already scanned: most blocks.)
  if (greedy >= 0 || !rect.contains(reachRect(v.g, c0, r0, c1, r1, pixelBound(eMin, disc), v.slack, rect)))
  {
    const int shift = v.g.shift + k0;
    const int X0 = sg::clampBucket(double(c0) + 0.5 - reach, shift, v.pyramid.levelWidth[k0]);
    const int X1 = sg::clampBucket(double(c1) + 0.5 + reach, shift, v.pyramid.levelWidth[k0]);
    const int Y0 = sg::clampBucket(double(r0) + 0.5 - reach, shift, v.pyramid.levelHeight[k0]);
    const int Y1 = sg::clampBucket(double(r1) + 0.5 + reach, shift, v.pyramid.levelHeight[k0]);
    for (int Y = Y0; Y <= Y1; ++Y)
      for (int X = X0; X <= X1; ++X)
        scratch.stack.push_back({k0, X, Y});
  }
  while (!scratch.stack.empty())
  {
    const CellRef cell = scratch.stack.back();
    scratch.stack.pop_back();
    if (v.count(cell.k, cell.X, cell.Y) == 0 ||
        beyondReach(cellSquaredDistance(v, cell.k, cell.X, cell.Y, c0, r0, c1, r1), reach))
      continue;
    if (cell.k == 0)
    {
      const int64_t b = int64_t(cell.Y) * v.g.bx + cell.X;
      if (b == greedy || (cell.X >= rect.x0 && cell.X <= rect.x1 && cell.Y >= rect.y0 && cell.Y <= rect.y1))
        continue;
      scanBucket(b);
      reach = reachOf(eMin, disc, v.slack);
      continue;
    }
    for (int j = 0; j < 4; ++j)
    {
      const int x = 2 * cell.X + (j & 1), y = 2 * cell.Y + (j >> 1);
      if (x < v.pyramid.levelWidth[cell.k - 1] && y < v.pyramid.levelHeight[cell.k - 1])
        scratch.stack.push_back({cell.k - 1, x, y});
    }
  }
  return eMin;
}

// A quarter's list up to this long is scanned whole by its cells' pixels, not cut again per cell
// (on the uniform 8192^2 bench the cut took a third of the labelling).
constexpr size_t kWholeQuarter = 8;

// A rectangle's four parts of side `side`: part k from (c0 + (k & 1) * side, r0 + (k >> 1) * side),
// clipped to the rectangle. A part wholly outside it (at the raster's edge) is empty.
struct Parts
{
  int c0[4], r0[4], c1[4], r1[4];

  bool empty(int k) const { return c0[k] > c1[k] || r0[k] > r1[k]; }
};

Parts partsOf(int c0, int r0, int c1, int r1, int side)
{
  Parts p;
  for (int k = 0; k < 4; ++k)
  {
    p.c0[k] = c0 + (k & 1) * side;
    p.r0[k] = r0 + (k >> 1) * side;
    p.c1[k] = std::min(p.c0[k] + side - 1, c1);
    p.r1[k] = std::min(p.r0[k] + side - 1, r1);
  }
  return p;
}

// Which of the segments `which` (n indexes into c) may be nearest to a pixel of each of the four
// parts (keepLimit from each part's centre): each segment weighed from the four centres at once, a
// lane per part, then kept by each part whose limit it is within. Part k's list, as indexes into c,
// goes to to + k * n (listed[k] of them). An empty part is weighed from part 0's centre and its list
// is not to be used.
__attribute__((always_inline)) inline void cutFour(const sg::SegmentColumns& c, const uint32_t* which, size_t n,
                                                  const Parts& parts, double slack, std::vector<double>& eScratch,
                                                  uint32_t* to, size_t listed[4])
{
  PixelDisc disc[4];
  for (int k = 0; k < 4; ++k)
  {
    const int j = parts.empty(k) ? 0 : k;
    disc[k] = discOf(parts.c0[j], parts.r0[j], parts.c1[j], parts.r1[j]);
  }
  eScratch.resize(std::max(4 * n, eScratch.size()));
  double* e = eScratch.data();
  const sg::Lanes cx{disc[0].cx, disc[1].cx, disc[2].cx, disc[3].cx};
  const sg::Lanes cy{disc[0].cy, disc[1].cy, disc[2].cy, disc[3].cy};
  sg::Lanes least = sg::splat(HUGE_VAL);
  for (size_t j = 0; j < n; ++j)
  {
    const size_t k = which[j];
    const sg::Lanes d = sg::segmentSquaredLanes(cx, cy, sg::splat(c.ax[k]), sg::splat(c.ay[k]), sg::splat(c.dx[k]),
                                                sg::splat(c.dy[k]), sg::splat(c.inv[k]), sg::splat(c.dd[k]));
    std::memcpy(e + 4 * j, &d, sizeof d);
    least = d < least ? d : least;
  }
  sg::Lanes limit = least;
  for (int k = 0; k < 4; ++k)
    limit[k] = keepLimit(pixelBound(least[k], disc[k]), disc[k], slack);
  size_t count[4] = {0, 0, 0, 0};
  for (size_t j = 0; j < n; ++j)
  {
    const sg::LaneInts keep = sg::loadLanes(e + 4 * j) <= limit;  // -1 where kept
    for (int k = 0; k < 4; ++k)
    {
      to[size_t(k) * n + count[k]] = which[j];
      count[k] -= static_cast<size_t>(keep[k]);
    }
  }
  for (int k = 0; k < 4; ++k)
    listed[k] = count[k];
}

// Room for four lists of n in `lists`, returned.
inline uint32_t* fourLists(std::vector<uint32_t>& lists, size_t n)
{
  if (lists.size() < 4 * n)
    lists.resize(4 * n);
  return lists.data();
}

// The 2 x 2 cell [kc0, kc1] x [kr0, kr1]: its four pixels (some may lie outside a partial block) take
// the best of the segments `which` of c (from the interior's 0 where they are inside), each segment
// against all four at once (segment_batch.h); written to out.
template <bool kAvx2>
__attribute__((always_inline)) inline void labelCell(const SegmentIndexView& v, const sg::SegmentColumns& c,
                                                    const uint32_t* which, size_t n, int kc0, int kr0, int kc1, int kr1,
                                                    int64_t bandRow0, const int32_t* cover, const PixelOut& out,
                                                    double pixelSize)
{
  sg::Lanes best = {};
  sg::LaneInts label = {};
  for (int j = 0; j < 4; ++j)
  {
    const int col = kc0 + (j & 1), row = kr0 + (j >> 1);
    const int32_t covered =
      (cover && col <= kc1 && row <= kr1) ? cover[(int64_t(row) - bandRow0) * v.width + col] : INT32_MAX;
    best[j] = covered != INT32_MAX ? 0.0 : HUGE_VAL;
    label[j] = covered;
  }
  sg::scanCell(c, which, n, double(kc0) + 0.5, double(kr0) + 0.5, best, label);
  float value[4];
  if (out.distance)
  {
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (kAvx2)
      sg::distanceLanesAvx2(best, pixelSize, value);
    else
#endif
      sg::distanceLanes(best, pixelSize, value);
  }
  for (int j = 0; j < 4; ++j)
  {
    const int col = kc0 + (j & 1), row = kr0 + (j >> 1);
    if (col > kc1 || row > kr1)
      continue;
    const int64_t at = (int64_t(row) - out.row0) * out.stride + (col - out.col0);
    out.site[at] = static_cast<int32_t>(label[j]);
    if (out.distance)
      out.distance[at] = value[j];
  }
}

// The largest side of a tile (tileSideOf): labelTileBlocks divides a tile into at most 2 x 2 pairs of
// blocks, so a tile may not be wider than four blocks.
constexpr int kTileMaxSide = 4 * sg::kBlock;
static_assert(kTileMaxSide <= 2 * (2 * sg::kBlock), "labelTileBlocks labels at most 2 x 2 pairs of blocks a tile");

// The tile's pixels from the tile's list, down a quadtree of lists: the tile's 16 x 16 pairs of
// blocks (a tile is at most kTileMaxSide pixels a side), their 8 x 8 blocks, the blocks' 4 x 4
// quarters and the quarters' 2 x 2 cells each keep those of their parent's segments that may be
// nearest to one of their pixels (cutFour: four parts at a time, as indexes into the tile's
// columns); a cell's four pixels then take the best of its list (labelCell). Inlined into one
// function per instruction set.
template <bool kAvx2>
__attribute__((always_inline)) inline void labelTileBlocks(const SegmentIndexView& v, int tc0, int tr0, int tc1,
                                                          int tr1, int64_t bandRow0, const int32_t* cover,
                                                          const PixelOut& out, double pixelSize, TileScratch& scratch,
                                                          BlockCounts& counts)
{
  constexpr int K = sg::kBlock;
  const sg::SegmentColumns& tile = scratch.tileColumns;
  const size_t tileN = tile.n;
  for (size_t j = scratch.all.size(); j < tileN; ++j)
    scratch.all.push_back(static_cast<uint32_t>(j));
  const Parts pairs = partsOf(tc0, tr0, tc1, tr1, 2 * K);
  size_t pairListed[4];
  uint32_t* pairLists = fourLists(scratch.lists[0], tileN);
  cutFour(tile, scratch.all.data(), tileN, pairs, v.slack, scratch.fourE, pairLists, pairListed);
  for (int p = 0; p < 4; ++p)
  {
    if (pairs.empty(p))
      continue;
    const uint32_t* pairList = pairLists + size_t(p) * tileN;
    const size_t np = pairListed[p];
    const Parts blocks = partsOf(pairs.c0[p], pairs.r0[p], pairs.c1[p], pairs.r1[p], K);
    size_t blockListed[4];
    uint32_t* blockLists = fourLists(scratch.lists[1], np);
    cutFour(tile, pairList, np, blocks, v.slack, scratch.fourE, blockLists, blockListed);
    for (int b = 0; b < 4; ++b)
    {
      if (blocks.empty(b))
        continue;
      const int c0 = blocks.c0[b], r0 = blocks.r0[b], c1 = blocks.c1[b], r1 = blocks.r1[b];
      ++counts.blocks;
      // (The GPU's count of blocks whose buckets and ring hold nothing.)
      const sg::Rect ring = blockRect(v.g, c0, r0, c1, r1, 1);
      int64_t inRing = 0;
      for (int y = ring.y0; y <= ring.y1; ++y)
        inRing += v.rowEntries(y, ring.x0, ring.x1);
      counts.widened += inRing == 0 ? 1 : 0;
      const uint32_t* blockList = blockLists + size_t(b) * np;
      const Parts quarters = partsOf(c0, r0, c1, r1, K / 2);
      size_t quarterListed[4];
      uint32_t* quarterLists = fourLists(scratch.lists[2], blockListed[b]);
      cutFour(tile, blockList, blockListed[b], quarters, v.slack, scratch.fourE, quarterLists, quarterListed);
      for (int q = 0; q < 4; ++q)
      {
        if (quarters.empty(q))
          continue;
        const uint32_t* quarterList = quarterLists + size_t(q) * blockListed[b];
        const size_t nq = quarterListed[q];
        const Parts cells = partsOf(quarters.c0[q], quarters.r0[q], quarters.c1[q], quarters.r1[q], 2);
        // The four cells' lists: the whole quarter's where it is short (scanning a few more costs
        // less than the cut), else those that may be nearest to each.
        const uint32_t* cellList[4];
        size_t cellListed[4];
        if (nq <= kWholeQuarter)
          for (int k = 0; k < 4; ++k)
          {
            cellList[k] = quarterList;
            cellListed[k] = nq;
          }
        else
        {
          uint32_t* lists = fourLists(scratch.lists[3], nq);
          cutFour(tile, quarterList, nq, cells, v.slack, scratch.fourE, lists, cellListed);
          for (int k = 0; k < 4; ++k)
            cellList[k] = lists + size_t(k) * nq;
        }
        for (int k = 0; k < 4; ++k)
        {
          if (cells.empty(k))
            continue;
          counts.candidates += int64_t(cellListed[k]);
          labelCell<kAvx2>(v, tile, cellList[k], cellListed[k], cells.c0[k], cells.r0[k], cells.c1[k],
                           cells.r1[k], bandRow0, cover, out, pixelSize);
        }
      }
    }
  }
}

// Copies n 4-byte values to dst, where it can with non-temporal stores (16 bytes at a time from a
// 16-byte boundary), the rest plainly. The caller fences (sfence) before others read dst.
template <typename T>
void streamOut(T* dst, const T* src, int n)
{
  static_assert(sizeof(T) == 4, "4-byte values");
  int k = 0;
#if defined(__SSE2__)
  while (k < n && (reinterpret_cast<uintptr_t>(dst + k) & 15) != 0)
  {
    dst[k] = src[k];
    ++k;
  }
  for (; k + 4 <= n; k += 4)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
#endif
  for (; k < n; ++k)
    dst[k] = src[k];
}

// The pixels [tc0, tc1] x [tr0, tr1]: the search for the whole tile, then its blocks. Inlined into
// one function per instruction set (below).
template <bool kAvx2>
__attribute__((always_inline)) inline void labelTileWith(const SegmentIndexView& v, const HostSegmentIndex& index,
                                                        const void* labeller, size_t ids, int tc0, int tr0, int tc1,
                                                        int tr1, int64_t bandRow0, const int32_t* cover, int32_t* site,
                                                        float* distance, double pixelSize, TileScratch& scratch,
                                                        BlockCounts& counts)
{
  scratch.next(labeller, ids);
  const double eMin = gatherSegments(v, index, tc0, tr0, tc1, tr1, scratch);
  const PixelDisc disc = discOf(tc0, tr0, tc1, tr1);
  const double limit = keepLimit(pixelBound(eMin, disc), disc, v.slack);
  scratch.tileColumns.clear();
  for (size_t k = 0; k < scratch.segment.size(); ++k)
    if (scratch.e[k] <= limit)
      scratch.tileColumns.push(scratch.segment[k]);
  // Labelled into the scratch's tile first, then written out row by row with streaming stores
  // (the band is written once and not read back here: no cache line of it is fetched first).
  const int w = tc1 - tc0 + 1;
  scratch.outSite.resize(size_t(w) * size_t(tr1 - tr0 + 1));
  scratch.outDistance.resize(scratch.outSite.size());
  labelTileBlocks<kAvx2>(v, tc0, tr0, tc1, tr1, bandRow0, cover,
                         PixelOut{scratch.outSite.data(), distance ? scratch.outDistance.data() : nullptr, tr0, tc0, w},
                         pixelSize, scratch, counts);
  for (int r = tr0; r <= tr1; ++r)
  {
    const int64_t at = (int64_t(r) - bandRow0) * v.width + tc0;
    streamOut(site + at, scratch.outSite.data() + size_t(r - tr0) * size_t(w), w);
    if (distance)
      streamOut(distance + at, scratch.outDistance.data() + size_t(r - tr0) * size_t(w), w);
  }
}

// labelTileWith compiled twice, for AVX2 and for any x86-64, the one to run chosen by the processor
// (with AVX2 the cuts and scans run four lanes to an instruction and the search about 5 % faster; the
// values are the same bits). Chosen in plain code, not by an ifunc (target_clones): ThreadSanitizer's
// build crashed in the resolver.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void labelTileAvx2(const SegmentIndexView& v, const HostSegmentIndex& index,
                                                   const void* labeller, size_t ids, int tc0, int tr0, int tc1, int tr1,
                                                   int64_t bandRow0, const int32_t* cover, int32_t* site,
                                                   float* distance, double pixelSize, TileScratch& scratch,
                                                   BlockCounts& counts)
{
  labelTileWith<true>(v, index, labeller, ids, tc0, tr0, tc1, tr1, bandRow0, cover, site, distance, pixelSize, scratch,
                      counts);
}

const bool kHaveAvx2 = [] {
  __builtin_cpu_init();  // (this runs among the library's constructors: detect the processor first)
  return __builtin_cpu_supports("avx2") != 0;
}();
#endif
std::atomic<bool> gAllowAvx2{true};

void labelTile(const SegmentIndexView& v, const HostSegmentIndex& index, const void* labeller, size_t ids, int tc0,
               int tr0, int tc1, int tr1, int64_t bandRow0, const int32_t* cover, int32_t* site, float* distance,
               double pixelSize, TileScratch& scratch, BlockCounts& counts)
{
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHaveAvx2 && gAllowAvx2.load(std::memory_order_relaxed))
    return labelTileAvx2(v, index, labeller, ids, tc0, tr0, tc1, tr1, bandRow0, cover, site, distance, pixelSize,
                         scratch, counts);
#endif
  labelTileWith<false>(v, index, labeller, ids, tc0, tr0, tc1, tr1, bandRow0, cover, site, distance, pixelSize,
                       scratch, counts);
}

// The side of the tiles searched as one: four buckets (so about 16 segments a tile where the
// segments are spread evenly), one block at least, four blocks a side at most.
int tileSideOf(const sg::BucketGrid& g)
{
  return std::clamp(4 << g.shift, sg::kBlock, kTileMaxSide);
}

class CpuFeatureLabeller final : public Labeller
{
public:
  CpuFeatureLabeller(const Grid& grid, const FeatureSites& features, const FeatureLabellerOptions& options,
                     const RunControl& control)
    : mGrid(grid), mThreads(options.threads > 0 ? options.threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "prepare");
    mPrepared = prepareFeatures(grid, features, options.interior, mThreads, control);
    mIndex = buildHostIndex(mPrepared, mThreads, control);
    mView.g = mPrepared.buckets;
    mView.start = mIndex.start.data();
    mView.entries = nullptr;  // the CPU lists numbers (mIndex.entries)
    mView.pyramid = mIndex.pyramid;
    mView.counts = mIndex.counts.data();
    mView.slack = mPrepared.slack;
    mView.width = static_cast<int>(grid.width);
    mView.height = static_cast<int>(grid.height);
    mStats.uniqueSites = mPrepared.featuresWithSegments;
  }

  void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) override
  {
    if (row0 < 0 || rows < 0 || row0 + rows > mGrid.height)
      throw InvalidInput("rows " + std::to_string(row0) + " to " + std::to_string(row0 + rows) +
                         " are outside the grid of " + std::to_string(mGrid.height) + " rows");
    ScopedStage stage(mTimes, "compute");
    const bool covered = !mPrepared.rowSpan.empty();
    if (covered)
    {
      resizeHuge(mCover, static_cast<size_t>(rows * mGrid.width));
      paintCover(mPrepared, mGrid.width, row0, rows, mCover.data(), mThreads);
      int64_t inside = 0;
      for (int32_t c : mCover)
        inside += c != INT32_MAX;
      mStats.refinedPixels += inside;
    }
    const int side = tileSideOf(mPrepared.buckets);
    const int64_t tilesX = (mGrid.width + side - 1) / side, tilesY = (rows + side - 1) / side;
    std::atomic<int64_t> blocks{0}, widened{0}, candidates{0};
    parallelFor(
      tilesX * tilesY, 8, mThreads,  // (8 tiles a chunk: a fence and the counters' additions per chunk)
      [&](int64_t first, int64_t last) {
        TileScratch& scratch = threadScratch();
        BlockCounts counts;
        for (int64_t t = first; t < last; ++t)
        {
          const int64_t tc0 = (t % tilesX) * side, tr0 = row0 + (t / tilesX) * side;
          labelTile(mView, mIndex, this, mPrepared.vertex.size(), static_cast<int>(tc0), static_cast<int>(tr0),
                    static_cast<int>(std::min(tc0 + side, mGrid.width) - 1),
                    static_cast<int>(std::min(tr0 + side, row0 + rows) - 1), row0, covered ? mCover.data() : nullptr,
                    site, distance, mGrid.pixelSize, scratch, counts);
        }
#if defined(__SSE2__)
        _mm_sfence();  // (streamOut's stores, before the caller reads the band)
#endif
        blocks += counts.blocks;
        widened += counts.widened;
        candidates += counts.candidates;
      },
      &control);
    mStats.tiles += blocks;
    mStats.splitTiles += widened;
    mStats.candidates += candidates;
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string deviceName() const override { return cpuDescription(mThreads); }
  const StageTimes& times() const override { return mTimes; }
  const LabelStats& stats() const override { return mStats; }
  std::vector<std::string> warnings() const override { return {}; }

private:
  Grid mGrid;
  int mThreads;
  PreparedFeatures mPrepared;
  HostSegmentIndex mIndex;
  SegmentIndexView mView;
  std::vector<int32_t> mCover;
  StageTimes mTimes;
  LabelStats mStats;
};

}  // namespace

namespace detail {

bool allowAvx2Labelling(bool allow)
{
  return gAllowAvx2.exchange(allow);
}

}  // namespace detail

std::unique_ptr<Labeller> makeCpuFeatureLabeller(const Grid& grid, const FeatureSites& features,
                                                 const FeatureLabellerOptions& options, const RunControl& control)
{
  return std::make_unique<CpuFeatureLabeller>(grid, features, options, control);
}

}  // namespace gpugeo::voronoi
