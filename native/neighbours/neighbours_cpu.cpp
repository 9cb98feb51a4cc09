// The CPU backend of the neighbour index: every region's candidate regions from the region tree,
// then each point against the points of those regions; all cores, one region a work item.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/parallel_sort.h"
#include "neighbours/neighbour_index.h"

namespace gpugeo::neighbours::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Regions whose box lies within r2 of `box`, in increasing order.
template <int D>
void candidateRegions(const TreeView<D>& t, const Box<D>& box, double r2, std::vector<int64_t>& out)
{
  out.clear();
  forEachCandidateRegion(t, box, r2, [&](int64_t region) { out.push_back(region); });
}

template <int D>
class CpuIndex final : public NeighbourIndex
{
public:
  CpuIndex(const Points& points, int threads, const RunControl& control) : mThreads(threads > 0 ? threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "index");
    mIndex = buildHostIndex(localFrame<D>(points, mThreads, control), mThreads, control);
    mView = mIndex.view();
  }

  Backend backend() const override { return Backend::Cpu; }
  const StageTimes& times() const override { return mTimes; }

  Layout layout() const override
  {
    Layout l;
    l.order = mIndex.original;
    l.start = mIndex.start;
    l.dimensions = D;
    return l;
  }

  int64_t pointCount() const override { return int64_t(mIndex.points.size()); }

  void summarizeInto(const Query& query, const SummaryOutput& out, const RunControl& control) override
  {
    validateQuery(query);
    if (!out.count && !out.nearest && !out.nearestDistance && !out.meanDistance)
      return;
    ScopedStage stage(mTimes, "compute");
    const bool wantSum = out.meanDistance != nullptr;
    const bool wantNearest = out.nearest != nullptr || out.nearestDistance != nullptr;
    const double r2 = query.radius * query.radius;
    if (query.k == 0)
    {
      forEachRegion(control, 1, [&](int64_t region, std::vector<int64_t>& candidates, KHeap&) {
        candidateRegions(mView.tree, mView.tree.boxes[region], r2, candidates);
        for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
        {
          const Point<D>& p = mView.points[i];
          int32_t count = 0;
          double sum = 0.0;
          Hit best{kInf, INT32_MAX};
          for (int64_t q : candidates)
            for (int64_t j = mView.start[q]; j < mView.start[q + 1]; ++j)
            {
              const double d2 = distance2(p, mView.points[j]);
              if (d2 <= r2 && j != i)
              {
                ++count;
                if (wantSum)
                  sum += std::sqrt(d2);
                const Hit h{d2, mView.original[j]};
                if (wantNearest && closer(h, best))
                  best = h;
              }
            }
          if (count == 0 && wantNearest)
            best = nearestOther(mView, i);
          writeSummary(out, mView.original[i], count, sum, best);
        }
      });
      return;
    }
    const double bound = query.radius > 0.0 ? r2 : kInf;
    forEachRegion(control, query.k, [&](int64_t region, std::vector<int64_t>&, KHeap& heap) {
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        const int found = kNearest(mView, i, bound, heap);
        double sum = 0.0;
        for (int h = 0; h < found && wantSum; ++h)
          sum += std::sqrt(heap[h].d2);
        const Hit best = found > 0 ? heap[0] : wantNearest ? nearestOther(mView, i) : Hit{kInf, -1};
        writeSummary(out, mView.original[i], found, sum, best);
      }
    });
  }

  int64_t countPairs(const Query& query, const RunControl& control) override
  {
    validateQuery(query);
    countPairsOnce(query, control);
    return mPairCount.total;
  }

  int64_t pairsInto(const Query& query, const PairsOutput& out, int64_t capacity, const RunControl& control) override
  {
    validateQuery(query);
    countPairsOnce(query, control);
    const int64_t total = mPairCount.total;
    requirePairsFit(total, capacity, out);
    // What the count kept is used once: it goes when the pairs are written.
    const PairCount count = std::move(mPairCount);
    mPairCount = PairCount{};
    ScopedStage stage(mTimes, "pairs");
    if (query.k > 0)
    {
      const std::vector<std::pair<int32_t, int32_t>>& edges = count.edges;
      std::vector<int64_t> position(mIndex.original.size());
      for (std::size_t i = 0; i < position.size(); ++i)
        position[std::size_t(mIndex.original[i])] = int64_t(i);
      parallelFor(total, 1 << 14, mThreads, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k)
        {
          const auto [a, c] = edges[std::size_t(k)];
          out.a[k] = a;
          out.b[k] = c;
          if (out.distance)
            out.distance[k] =
              std::sqrt(distance2(mView.points[position[std::size_t(a)]], mView.points[position[std::size_t(c)]]));
        }
      }, &control);
      return total;
    }
    const double r2 = query.radius * query.radius;
    const std::vector<int64_t>& offset = count.offsets;
    forEachRegion(control, 1, [&](int64_t region, std::vector<int64_t>& candidates, KHeap&) {
      candidateRegions(mView.tree, mView.tree.boxes[region], r2, candidates);
      std::vector<std::pair<int32_t, double>> found;
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        const Point<D>& p = mView.points[i];
        const int32_t self = mView.original[i];
        found.clear();
        for (int64_t q : candidates)
          for (int64_t j = mView.start[q]; j < mView.start[q + 1]; ++j)
            if (mView.original[j] > self)
            {
              const double d2 = distance2(p, mView.points[j]);
              if (d2 <= r2)
                found.push_back({mView.original[j], std::sqrt(d2)});
            }
        std::sort(found.begin(), found.end());
        int64_t at = offset[std::size_t(self)];
        for (const auto& [b, d] : found)
        {
          out.a[at] = self;
          out.b[at] = b;
          if (out.distance)
            out.distance[at] = d;
          ++at;
        }
      }
    });
    return total;
  }

  Clusters dbscan(const DbscanOptions& options, const RunControl& control) override
  {
    validateDbscan(options);
    ScopedStage stage(mTimes, "compute");
    const int64_t n = int64_t(mIndex.points.size());
    const double r2 = options.eps * options.eps;
    // Core points: the eps-neighbourhood, the point itself included, holds minPoints or more.
    std::vector<uint8_t> core(std::size_t(n), 0);  // by Morton position
    forEachRegion(control, 1, [&](int64_t region, std::vector<int64_t>& candidates, KHeap&) {
      candidateRegions(mView.tree, mView.tree.boxes[region], r2, candidates);
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        int64_t count = 0;
        for (int64_t q : candidates)
          for (int64_t j = mView.start[q]; j < mView.start[q + 1] && count < options.minPoints; ++j)
            count += distance2(mView.points[i], mView.points[j]) <= r2;
        core[std::size_t(i)] = count >= options.minPoints;
      }
    });
    // Core points within eps of each other: union-find on input indices, each root linked to the
    // lower one (so a component's root is its lowest index, whatever the order of the unions).
    std::vector<std::atomic<int32_t>> parent(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      parent[std::size_t(i)].store(int32_t(i), std::memory_order_relaxed);
    auto find = [&](int32_t x) {
      for (;;)
      {
        const int32_t p = parent[std::size_t(x)].load(std::memory_order_relaxed);
        if (p == x)
          return x;
        const int32_t g = parent[std::size_t(p)].load(std::memory_order_relaxed);
        if (g != p)  // path halving; losing the race only leaves a longer path
        {
          int32_t expected = p;
          parent[std::size_t(x)].compare_exchange_weak(expected, g, std::memory_order_relaxed);
        }
        x = p;
      }
    };
    auto unite = [&](int32_t a, int32_t b) {
      for (;;)
      {
        a = find(a);
        b = find(b);
        if (a == b)
          return;
        if (a < b)
          std::swap(a, b);
        int32_t expected = a;
        if (parent[std::size_t(a)].compare_exchange_strong(expected, b, std::memory_order_relaxed))
          return;
      }
    };
    // Border points: the lowest-index core neighbour, by Morton position.
    std::vector<int32_t> borderOf(std::size_t(n), INT32_MAX);  // input index of that core point
    forEachRegion(control, 1, [&](int64_t region, std::vector<int64_t>& candidates, KHeap&) {
      candidateRegions(mView.tree, mView.tree.boxes[region], r2, candidates);
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        const int32_t self = mView.original[i];
        for (int64_t q : candidates)
          for (int64_t j = mView.start[q]; j < mView.start[q + 1]; ++j)
          {
            if (!core[std::size_t(j)] || j == i || distance2(mView.points[i], mView.points[j]) > r2)
              continue;
            if (core[std::size_t(i)])
            {
              if (mView.original[j] < self)
                unite(self, mView.original[j]);
            }
            else
              borderOf[std::size_t(i)] = std::min(borderOf[std::size_t(i)], mView.original[j]);
          }
      }
    });
    // By input index, for assignClusters.
    std::vector<uint8_t> coreByInput(std::size_t(n), 0);
    std::vector<int32_t> root(std::size_t(n), -1), borderCore(std::size_t(n), INT32_MAX);
    for (int64_t i = 0; i < n; ++i)
    {
      const int32_t self = mView.original[i];
      coreByInput[std::size_t(self)] = core[std::size_t(i)];
      borderCore[std::size_t(self)] = borderOf[std::size_t(i)];
    }
    for (int64_t i = 0; i < n; ++i)
      if (coreByInput[std::size_t(i)])
        root[std::size_t(i)] = find(int32_t(i));
    return assignClusters(std::move(coreByInput), root, borderCore, options.borderPointsAreNoise);
  }

private:
  // body(region, candidates scratch, a k-nearest heap) over all regions, in parallel.
  template <typename Body>
  void forEachRegion(const RunControl& control, int k, Body body)
  {
    parallelFor(mView.regions, 64, mThreads, [&](int64_t b, int64_t e) {
      std::vector<int64_t> candidates;
      std::vector<Hit> storage(std::size_t(std::max(k, 1)));
      KHeap heap(storage.data(), std::max(k, 1));
      for (int64_t r = b; r < e; ++r)
        body(r, candidates, heap);
    }, &control);
  }

  // What countPairs() found, kept for pairsInto() with the same query: the radius pairs' offsets by
  // input index, or the k-nearest pairs.
  struct PairCount
  {
    Query query{-1.0, -1};
    int64_t total = 0;
    std::vector<int64_t> offsets;
    std::vector<std::pair<int32_t, int32_t>> edges;
  };

  void countPairsOnce(const Query& query, const RunControl& control)
  {
    if (mPairCount.query.radius == query.radius && mPairCount.query.k == query.k)
      return;
    mPairCount = PairCount{};
    if (query.k > 0)
    {
      mPairCount.edges = kNearestPairs(query, control);
      mPairCount.total = int64_t(mPairCount.edges.size());
    }
    else
    {
      ScopedStage stage(mTimes, "compute");
      mPairCount.offsets = radiusPairCounts(query.radius * query.radius, control);
      for (int64_t& c : mPairCount.offsets)
      {
        const int64_t count = c;
        c = mPairCount.total;
        mPairCount.total += count;
      }
    }
    mPairCount.query = query;
  }

  // Per input index a, the number of b > a within r2.
  std::vector<int64_t> radiusPairCounts(double r2, const RunControl& control)
  {
    std::vector<int64_t> counts(mIndex.points.size(), 0);
    forEachRegion(control, 1, [&](int64_t region, std::vector<int64_t>& candidates, KHeap&) {
      candidateRegions(mView.tree, mView.tree.boxes[region], r2, candidates);
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        const int32_t self = mView.original[i];
        int64_t count = 0;
        for (int64_t q : candidates)
          for (int64_t j = mView.start[q]; j < mView.start[q + 1]; ++j)
            count += mView.original[j] > self && distance2(mView.points[i], mView.points[j]) <= r2;
        counts[std::size_t(self)] = count;
      }
    });
    return counts;
  }

  // The union of the directed k-nearest relations as (a < b) pairs, sorted.
  std::vector<std::pair<int32_t, int32_t>> kNearestPairs(const Query& query, const RunControl& control)
  {
    ScopedStage stage(mTimes, "compute");
    const int64_t n = int64_t(mIndex.points.size());
    const double bound = query.radius > 0.0 ? query.radius * query.radius : kInf;
    std::vector<std::pair<int32_t, int32_t>> edges(std::size_t(n) * std::size_t(query.k), {INT32_MAX, INT32_MAX});
    forEachRegion(control, query.k, [&](int64_t region, std::vector<int64_t>&, KHeap& heap) {
      for (int64_t i = mView.start[region]; i < mView.start[region + 1]; ++i)
      {
        const int32_t self = mView.original[i];
        const int found = kNearest(mView, i, bound, heap);
        int64_t at = int64_t(self) * query.k;
        for (int h = 0; h < found; ++h)
          edges[std::size_t(at++)] = {std::min(self, heap[h].index), std::max(self, heap[h].index)};
      }
    });
    parallelSort(edges, mThreads, control);
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    while (!edges.empty() && edges.back().first == INT32_MAX)
      edges.pop_back();
    return edges;
  }

  int mThreads;
  StageTimes mTimes;
  HostIndex<D> mIndex;
  RegionView<D> mView;
  PairCount mPairCount;
};

}  // namespace

std::unique_ptr<NeighbourIndex> makeCpuIndex(const Points& points, int threads, const RunControl& control)
{
  if (points.z)
    return std::make_unique<CpuIndex<3>>(points, threads, control);
  return std::make_unique<CpuIndex<2>>(points, threads, control);
}

}  // namespace gpugeo::neighbours::detail
