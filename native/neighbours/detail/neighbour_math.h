// The per-element math of the neighbour index, shared by the CPU and the CUDA backends so that both
// compute the same bits: Morton codes, the quadtree leaf of a point in Morton order, squared
// distances, box distances, and the region tree's layout.
#pragma once

#include <cstdint>

#include "core/exact_math.h"
#include "core/hd.h"
#include "neighbours/neighbours.h"

namespace gpugeo::neighbours::detail {

constexpr int kFanout = 4;
constexpr int kMaxTreeLevels = 24;  // 4^23 regions is far more than kMaxPoints

// Bits an axis of the Morton code, and the quadtree (octree) levels they give.
template <int D>
struct MortonTraits;
template <>
struct MortonTraits<2>
{
  static constexpr int kBits = 32;
  static constexpr int kLevels = 32;
};
template <>
struct MortonTraits<3>
{
  static constexpr int kBits = 21;
  static constexpr int kLevels = 21;
};

template <int D>
struct Point
{
  double c[D];
};

template <int D>
struct Box
{
  double lo[D], hi[D];
};

GPUGEO_HD uint64_t spreadBits2(uint64_t v)  // 32 bits to the even bits of 64
{
  v &= 0xffffffffull;
  v = (v | (v << 16)) & 0x0000ffff0000ffffull;
  v = (v | (v << 8)) & 0x00ff00ff00ff00ffull;
  v = (v | (v << 4)) & 0x0f0f0f0f0f0f0f0full;
  v = (v | (v << 2)) & 0x3333333333333333ull;
  v = (v | (v << 1)) & 0x5555555555555555ull;
  return v;
}

GPUGEO_HD uint64_t spreadBits3(uint64_t v)  // 21 bits to every third bit of 63
{
  v &= 0x1fffffull;
  v = (v | (v << 32)) & 0x1f00000000ffffull;
  v = (v | (v << 16)) & 0x1f0000ff0000ffull;
  v = (v | (v << 8)) & 0x100f00f00f00f00full;
  v = (v | (v << 4)) & 0x10c30c30c30c30c3ull;
  v = (v | (v << 2)) & 0x1249249249249249ull;
  return v;
}

// The quantisation of the local coordinates: q = floor((c - lo) * scale), clamped to the axis's bits.
template <int D>
struct Quantiser
{
  double lo[D];
  double scale[D];
};

// The local frame from the per-axis minima and maxima of the points: the origin (the centre of their
// box, subtracted from every coordinate) and the quantiser (the same scale on every axis, so that the
// quadtree's cells are squares or cubes). The CPU and the GPU both call this.
template <int D>
GPUGEO_HD void frameFromBounds(const double* lo, const double* hi, double* origin, Quantiser<D>& q)
{
  double extent = 0.0;
  for (int a = 0; a < D; ++a)
  {
    origin[a] = exact::mul(0.5, exact::add(lo[a], hi[a]));
    q.lo[a] = exact::sub(lo[a], origin[a]);
    const double e = exact::sub(exact::sub(hi[a], origin[a]), q.lo[a]);
    extent = e > extent ? e : extent;
  }
  const double cells = double((uint64_t(1) << MortonTraits<D>::kBits) - 1);
  for (int a = 0; a < D; ++a)
    q.scale[a] = extent > 0.0 ? exact::div(cells, extent) : 0.0;
}

template <int D>
GPUGEO_HD uint64_t mortonCode(const Quantiser<D>& q, const Point<D>& p)
{
  constexpr double kMax = double((uint64_t(1) << MortonTraits<D>::kBits) - 1);
  uint64_t cell[D];
  for (int a = 0; a < D; ++a)
  {
    double v = exact::mul(exact::sub(p.c[a], q.lo[a]), q.scale[a]);
    v = v < 0.0 ? 0.0 : (v > kMax ? kMax : v);
    cell[a] = uint64_t(v);
  }
  if constexpr (D == 2)
    return (spreadBits2(cell[0]) << 1) | spreadBits2(cell[1]);
  else
    return (spreadBits3(cell[0]) << 2) | (spreadBits3(cell[1]) << 1) | spreadBits3(cell[2]);
}

GPUGEO_HD int countLeadingZeros64(uint64_t v)
{
#ifdef __CUDA_ARCH__
  return __clzll(static_cast<long long>(v));
#else
  return v == 0 ? 64 : __builtin_clzll(v);
#endif
}

// The number of quadtree levels two sorted codes share (the depth of their common cell);
// kLevels when they are equal.
template <int D>
GPUGEO_HD int sharedLevels(uint64_t a, uint64_t b)
{
  constexpr int kUnused = 64 - D * MortonTraits<D>::kLevels;  // leading bits the code never uses
  const uint64_t x = a ^ b;
  if (x == 0)
    return MortonTraits<D>::kLevels;
  return (countLeadingZeros64(x) - kUnused) / D;
}

// delta(i) for sorted codes: sharedLevels(code[i - 1], code[i]); -1 at i = 0 and i = n (the ends of
// the array end every cell).
template <int D>
GPUGEO_HD int delta(const uint64_t* codes, int64_t n, int64_t i)
{
  return i <= 0 || i >= n ? -1 : sharedLevels<D>(codes[i - 1], codes[i]);
}

// The level of the quadtree leaf that holds sorted position i: the coarsest cell around i with at
// most kCapacity points. Such a cell spans fewer than kCapacity positions on each side of i, so only
// that window is read. The cell at level l around i is [i - left(l), i + 1 + right(l)), left(l) the
// number of consecutive delta(i), delta(i - 1), ... that are >= l, right(l) the same for delta(i + 1),
// ...; its size is <= kCapacity iff fewer than kCapacity of the 2 kCapacity running minima on both
// sides are >= l. So the leaf's level is one more than the kCapacity-th largest of those minima
// (merging two non-increasing sequences). Returns kLevels + 1 when even the finest cell (one code)
// holds more than kCapacity points: a run of equal codes, cut into pieces of kCapacity by the caller.
template <int D, int kCapacity>
GPUGEO_HD int leafLevel(const uint64_t* codes, int64_t n, int64_t i)
{
  int leftMin = 1 << 30, rightMin = 1 << 30;
  int64_t l = i, r = i + 1;  // next positions whose delta to read on each side
  int leftValue = 0, rightValue = 0;
  bool leftDone = false, rightDone = false;
  // Pop the larger of the two next running minima, kCapacity times.
  int kth = -1;
  auto nextLeft = [&]() {
    if (!leftDone)
    {
      const int d = delta<D>(codes, n, l);
      leftMin = d < leftMin ? d : leftMin;
      leftValue = leftMin;
      leftDone = leftMin < 0;
      --l;
    }
    else
      leftValue = -1;
  };
  auto nextRight = [&]() {
    if (!rightDone)
    {
      const int d = delta<D>(codes, n, r);
      rightMin = d < rightMin ? d : rightMin;
      rightValue = rightMin;
      rightDone = rightMin < 0;
      ++r;
    }
    else
      rightValue = -1;
  };
  nextLeft();
  nextRight();
  for (int t = 0; t < kCapacity; ++t)
  {
    if (leftValue >= rightValue)
    {
      kth = leftValue;
      nextLeft();
    }
    else
    {
      kth = rightValue;
      nextRight();
    }
  }
  return kth + 1;
}

template <int D>
GPUGEO_HD double distance2(const Point<D>& p, const Point<D>& q)
{
  double s = 0.0;
  for (int a = 0; a < D; ++a)
  {
    const double d = exact::sub(p.c[a], q.c[a]);
    s = a == 0 ? exact::mul(d, d) : exact::add(s, exact::mul(d, d));
  }
  return s;
}

// A lower bound of the squared distance from p to any point of the box: exact for the point of the
// box nearest to p, computed with the same operations as distance2, so that a point of the box at
// distance2 <= bound is never pruned.
template <int D>
GPUGEO_HD double boxDistance2(const Box<D>& b, const Point<D>& p)
{
  Point<D> nearest;
  for (int a = 0; a < D; ++a)
    nearest.c[a] = p.c[a] < b.lo[a] ? b.lo[a] : (p.c[a] > b.hi[a] ? b.hi[a] : p.c[a]);
  return distance2(p, nearest);
}

// The same between two boxes (the gap on each axis).
template <int D>
GPUGEO_HD double boxBoxDistance2(const Box<D>& a, const Box<D>& b)
{
  double s = 0.0;
  for (int k = 0; k < D; ++k)
  {
    const double gap = a.hi[k] < b.lo[k] ? exact::sub(b.lo[k], a.hi[k]) : (b.hi[k] < a.lo[k] ? exact::sub(a.lo[k], b.hi[k]) : 0.0);
    s = k == 0 ? exact::mul(gap, gap) : exact::add(s, exact::mul(gap, gap));
  }
  return s;
}

template <int D>
GPUGEO_HD void growBox(Box<D>& b, const Box<D>& o)
{
  for (int a = 0; a < D; ++a)
  {
    b.lo[a] = o.lo[a] < b.lo[a] ? o.lo[a] : b.lo[a];
    b.hi[a] = o.hi[a] > b.hi[a] ? o.hi[a] : b.hi[a];
  }
}

// The box of points[first, last) (at least one point).
template <int D>
GPUGEO_HD Box<D> boxOf(const Point<D>* points, int64_t first, int64_t last)
{
  Box<D> box;
  for (int a = 0; a < D; ++a)
    box.lo[a] = box.hi[a] = points[first].c[a];
  for (int64_t i = first + 1; i < last; ++i)
    for (int a = 0; a < D; ++a)
    {
      box.lo[a] = points[i].c[a] < box.lo[a] ? points[i].c[a] : box.lo[a];
      box.hi[a] = points[i].c[a] > box.hi[a] ? points[i].c[a] : box.hi[a];
    }
  return box;
}

// The box of parent p over a level of `count` child boxes.
template <int D>
GPUGEO_HD Box<D> parentBox(const Box<D>* children, int64_t count, int64_t p)
{
  Box<D> box = children[p * kFanout];
  const int64_t last = (p + 1) * kFanout < count ? (p + 1) * kFanout : count;
  for (int64_t c = p * kFanout + 1; c < last; ++c)
    growBox(box, children[c]);
  return box;
}

// The region tree: level 0 holds the regions' boxes, level h + 1 one box for every kFanout boxes
// of level h, up to a single root.
template <int D>
struct TreeView
{
  const Box<D>* boxes = nullptr;  // all levels, level 0 first
  int levels = 0;
  int64_t levelOffset[kMaxTreeLevels] = {};
  int64_t levelSize[kMaxTreeLevels] = {};
};

// The regions and their points in Morton order.
template <int D>
struct RegionView
{
  const Point<D>* points = nullptr;   // local coordinates, Morton order
  const int32_t* original = nullptr;  // input index of each
  const int64_t* start = nullptr;     // regions + 1 entries
  int64_t regions = 0;
  TreeView<D> tree;
};

struct Hit
{
  double d2;
  int32_t index;  // input index
};

// The order of neighbours: nearer first, then the lower input index.
GPUGEO_HD bool closer(const Hit& a, const Hit& b)
{
  return a.d2 < b.d2 || (a.d2 == b.d2 && a.index < b.index);
}

// Writes one point's summary into the requested arrays at its input index `self`: its neighbour
// count, the mean of its neighbours' distances (their sum in scan order over the count) and its
// nearest other point (index -1 or INT32_MAX: none).
GPUGEO_HD void writeSummary(const SummaryOutput& out, int64_t self, int32_t count, double sum, const Hit& nearest)
{
  const bool found = nearest.index >= 0 && nearest.index != INT32_MAX;
  if (out.count)
    out.count[self] = count;
  if (out.meanDistance)
    out.meanDistance[self] = count > 0 ? exact::div(sum, double(count)) : __builtin_nan("");
  if (out.nearest)
    out.nearest[self] = found ? nearest.index : -1;
  if (out.nearestDistance)
    out.nearestDistance[self] = found ? exact::sqrt(nearest.d2) : __builtin_nan("");
}

// Calls visit(region) for every region whose box lies within r2 of `box`, in increasing order.
template <int D, typename Visit>
GPUGEO_HD void forEachCandidateRegion(const TreeView<D>& t, const Box<D>& box, double r2, Visit visit)
{
  int64_t stack[kMaxTreeLevels * kFanout];
  int8_t level[kMaxTreeLevels * kFanout];
  int top = 1;
  stack[0] = 0;
  level[0] = int8_t(t.levels - 1);
  while (top > 0)
  {
    --top;
    const int64_t node = stack[top];
    const int l = level[top];
    if (boxBoxDistance2(t.boxes[t.levelOffset[l] + node], box) > r2)
      continue;
    if (l == 0)
    {
      visit(node);
      continue;
    }
    const int64_t first = node * kFanout;
    const int64_t last = first + kFanout < t.levelSize[l - 1] ? first + kFanout : t.levelSize[l - 1];
    for (int64_t c = last - 1; c >= first; --c)  // pushed in reverse: popped in increasing order
    {
      stack[top] = c;
      level[top] = int8_t(l - 1);
      ++top;
    }
  }
}

// Calls visit(position) for every point of the regions whose box may hold a point within bound()
// of p (a region is skipped only when its box is farther than the bound), nearest boxes first; the
// bound is read again before each box, so that a k-nearest search prunes as it fills.
template <int D, typename Bound, typename Visit>
GPUGEO_HD void searchTree(const RegionView<D>& v, const Point<D>& p, Bound bound, Visit visit)
{
  const TreeView<D>& t = v.tree;
  int64_t stack[kMaxTreeLevels * kFanout];
  int8_t level[kMaxTreeLevels * kFanout];
  int top = 1;
  stack[0] = 0;
  level[0] = int8_t(t.levels - 1);
  while (top > 0)
  {
    --top;
    const int64_t node = stack[top];
    const int l = level[top];
    if (boxDistance2(t.boxes[t.levelOffset[l] + node], p) > bound())
      continue;
    if (l == 0)
    {
      for (int64_t i = v.start[node]; i < v.start[node + 1]; ++i)
        visit(i);
      continue;
    }
    const int64_t first = node * kFanout;
    const int64_t last = first + kFanout < t.levelSize[l - 1] ? first + kFanout : t.levelSize[l - 1];
    double d[kFanout];
    int64_t c[kFanout];
    int m = 0;
    for (int64_t k = first; k < last; ++k, ++m)
    {
      c[m] = k;
      d[m] = boxDistance2(t.boxes[t.levelOffset[l - 1] + k], p);
    }
    for (int a = 1; a < m; ++a)  // farthest first onto the stack, so the nearest is popped first
      for (int b = a; b > 0 && d[b] > d[b - 1]; --b)
      {
        const double td = d[b];
        d[b] = d[b - 1];
        d[b - 1] = td;
        const int64_t tc = c[b];
        c[b] = c[b - 1];
        c[b - 1] = tc;
      }
    for (int a = 0; a < m; ++a)
    {
      stack[top] = c[a];
      level[top] = int8_t(l - 1);
      ++top;
    }
  }
}

// The k nearest (by closer()) in a max-heap on caller-provided storage of k entries.
class KHeap
{
public:
  GPUGEO_HD KHeap(Hit* storage, int k) : mHeap(storage), mK(k) {}
  GPUGEO_HD void clear() { mSize = 0; }
  GPUGEO_HD int size() const { return mSize; }
  GPUGEO_HD bool full() const { return mSize == mK; }
  GPUGEO_HD double worst() const { return mHeap[0].d2; }
  GPUGEO_HD void offer(const Hit& h)
  {
    if (mSize < mK)
    {
      int i = mSize++;
      while (i > 0 && closer(mHeap[(i - 1) / 2], h))
      {
        mHeap[i] = mHeap[(i - 1) / 2];
        i = (i - 1) / 2;
      }
      mHeap[i] = h;
    }
    else if (closer(h, mHeap[0]))
      siftDown(h, mSize);
  }
  // Sorts the storage nearest first (the heap is spent).
  GPUGEO_HD void sort()
  {
    for (int n = mSize - 1; n > 0; --n)
    {
      const Hit top = mHeap[0];
      siftDown(mHeap[n], n);
      mHeap[n] = top;
    }
  }
  GPUGEO_HD const Hit& operator[](int i) const { return mHeap[i]; }

private:
  // Puts h at the root of a heap of `size` entries and sifts it down.
  GPUGEO_HD void siftDown(const Hit& h, int size)
  {
    int i = 0;
    for (;;)
    {
      int c = 2 * i + 1;
      if (c >= size)
        break;
      if (c + 1 < size && closer(mHeap[c], mHeap[c + 1]))
        ++c;
      if (!closer(h, mHeap[c]))
        break;
      mHeap[i] = mHeap[c];
      i = c;
    }
    mHeap[i] = h;
  }

  Hit* mHeap;
  int mK;
  int mSize = 0;
};

// The k nearest of position i (itself excluded) within bound2 (inclusive), sorted nearest first
// into heap; returns how many.
template <int D>
GPUGEO_HD int kNearest(const RegionView<D>& v, int64_t i, double bound2, KHeap& heap)
{
  const Point<D> p = v.points[i];
  heap.clear();
  searchTree(v, p, [&] { return heap.full() && heap.worst() < bound2 ? heap.worst() : bound2; }, [&](int64_t j) {
    if (j == i)
      return;
    const double d2 = distance2(p, v.points[j]);
    if (d2 <= bound2)
      heap.offer(Hit{d2, v.original[j]});
  });
  heap.sort();
  return heap.size();
}

// The nearest other point of position i at any distance; index -1 when there is none.
template <int D>
GPUGEO_HD Hit nearestOther(const RegionView<D>& v, int64_t i)
{
  const Point<D> p = v.points[i];
  Hit best{__builtin_huge_val(), -1};
  searchTree(v, p, [&] { return best.d2; }, [&](int64_t j) {
    if (j == i)
      return;
    const Hit h{distance2(p, v.points[j]), v.original[j]};
    if (best.index < 0 || closer(h, best))
      best = h;
  });
  return best;
}

}  // namespace gpugeo::neighbours::detail
