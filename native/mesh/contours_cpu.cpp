// The CPU backend of the mesh contours: the per-triangle passes on all cores (count, then write
// into place), the linking of line segments by sorting their end nodes, and the chains and rings
// walked in order of their lowest segment, so the result does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <numeric>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/parallel_sort.h"
#include "mesh/detail/contourer.h"

namespace gpugeo::mesh::detail {

namespace {

constexpr int64_t kGrain = 1 << 13;

// Exclusive prefix sum in place; returns the total.
int64_t exclusiveScan(std::vector<int64_t>& v)
{
  int64_t sum = 0;
  for (auto& x : v)
  {
    const int64_t c = x;
    x = sum;
    sum += c;
  }
  return sum;
}

// Line segments in triangle order (all levels of a triangle together), each with its two end
// nodes' keys and points.
struct Segments
{
  std::vector<int64_t> from, to;
  std::vector<int32_t> level;
  std::vector<int32_t> rank;  // s, or count + s for a weak segment
  std::vector<double> point;  // 6 per segment: from x, y, z, to x, y, z
};

ContourLines chainLines(const Segments& seg, int32_t levelCount, int threads, const RunControl& control)
{
  const int64_t count = int64_t(seg.level.size());
  // End 2 s is the start of segment s, 2 s + 1 its end; ends that meet at a node of exactly two
  // ends are partners.
  std::vector<std::pair<int64_t, int32_t>> ends(static_cast<std::size_t>(2 * count));
  parallelFor(count, kGrain, threads, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s)
    {
      ends[std::size_t(2 * s)] = {seg.from[std::size_t(s)], int32_t(2 * s)};
      ends[std::size_t(2 * s + 1)] = {seg.to[std::size_t(s)], int32_t(2 * s + 1)};
    }
  }, &control);
  parallelSort(ends, threads, control);
  std::vector<int32_t> partner(static_cast<std::size_t>(2 * count), -1);
  for (std::size_t i = 0; i < ends.size();)
  {
    std::size_t j = i + 1;
    while (j < ends.size() && ends[j].first == ends[i].first)
      ++j;
    if (j - i == 2)
    {
      partner[std::size_t(ends[i].second)] = ends[i + 1].second;
      partner[std::size_t(ends[i + 1].second)] = ends[i].second;
    }
    i = j;
  }

  // Each chain from its lowest-ranked segment (weak ones rank after the others), in that segment's
  // direction; the chains in order of (level, that rank).
  struct Part
  {
    int64_t order;
    std::vector<double> points;
  };
  std::vector<Part> parts;
  std::vector<uint8_t> done(static_cast<std::size_t>(count), 0);
  std::vector<int32_t> walk;
  auto pointOf = [&](int32_t end) { return &seg.point[std::size_t(3 * end)]; };  // end 2s: from, 2s+1: to
  for (int64_t s0 = 0; s0 < count; ++s0)
  {
    if (done[std::size_t(s0)])
      continue;
    if ((s0 & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    // Back from s0 against its direction to the chain's start, or round to s0.
    int32_t entry = int32_t(2 * s0);  // the end through which the walk enters the current segment
    bool closed = false;
    for (;;)
    {
      const int32_t p = partner[std::size_t(entry)];
      if (p < 0)
        break;
      const int32_t previousEntry = p ^ 1;  // the previous segment is entered at its other end
      if (previousEntry / 2 == s0)
      {
        closed = true;
        break;
      }
      entry = previousEntry;
    }
    if (closed)
      entry = int32_t(2 * s0);
    walk.clear();
    for (;;)
    {
      walk.push_back(entry);
      done[std::size_t(entry / 2)] = 1;
      const int32_t p = partner[std::size_t(entry ^ 1)];
      if (p < 0 || done[std::size_t(p / 2)])
        break;
      entry = p;
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < walk.size(); ++i)
      if (seg.rank[std::size_t(walk[i] / 2)] < seg.rank[std::size_t(walk[best] / 2)])
        best = i;
    const int32_t bestRank = seg.rank[std::size_t(walk[best] / 2)];
    if (walk[best] & 1)  // the walk runs against the best segment: turn it round
    {
      std::reverse(walk.begin(), walk.end());
      for (auto& e : walk)
        e ^= 1;
      best = walk.size() - 1 - best;
    }
    if (closed)
      std::rotate(walk.begin(), walk.begin() + std::ptrdiff_t(best), walk.end());
    Part part;
    part.order = int64_t(seg.level[std::size_t(walk[0] / 2)]) * 2 * count + bestRank;
    const double* first = pointOf(walk[0]);
    part.points.assign(first, first + 3);
    for (const int32_t e : walk)
    {
      const double* q = pointOf(e ^ 1);
      part.points.insert(part.points.end(), q, q + 3);
    }
    parts.push_back(std::move(part));
  }
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.order < b.order; });

  ContourLines lines;
  lines.levelPart.push_back(0);
  lines.partPoint.push_back(0);
  std::size_t next = 0;
  for (int32_t k = 0; k < levelCount; ++k)
  {
    for (; next < parts.size() && parts[next].order < int64_t(k + 1) * 2 * count; ++next)
    {
      const auto& points = parts[next].points;
      for (std::size_t i = 0; i < points.size(); i += 3)
      {
        lines.x.push_back(points[i]);
        lines.y.push_back(points[i + 1]);
        lines.z.push_back(points[i + 2]);
      }
      lines.partPoint.push_back(int64_t(lines.x.size()));
    }
    lines.levelPart.push_back(int64_t(lines.partPoint.size()) - 1);
  }
  return lines;
}

class CpuContourer final : public MeshContourer
{
public:
  CpuContourer(const Mesh& mesh, int threads, const RunControl& control)
    : mThreads(threads > 0 ? threads : defaultThreadCount())
  {
    ScopedStage stage(mPrepareTimes, "prepare mesh");
    mMesh = prepareMesh(mesh, mThreads, control);
  }

  Backend backend() const override { return Backend::Cpu; }
  const StageTimes& times() const override { return mTimes; }

  Contours contour(const Field& field, const std::vector<double>& levels, const ContourOptions& options,
                   const RunControl& control) override
  {
    validateLevels(levels);
    if (!field.values)
      throw InvalidInput("the field's values must not be null");
    mTimes = mPrepareTimes;
    const int64_t nt = mMesh.source.triangleCount;
    const int32_t nl = int32_t(levels.size());
    std::vector<uint8_t> valid;
    Contours out;
    {
      ScopedStage stage(mTimes, "classify");
      markValid(mMesh, field, valid, mThreads, control);
      out.trianglesUsed = std::accumulate(valid.begin(), valid.end(), int64_t(0));
    }
    const MeshArrays m = meshArrays(mMesh);
    FieldArrays f;
    f.value = field.values;
    f.valid = valid.data();
    f.levels = levels.data();
    f.levelCount = nl;

    int64_t lineSegments = 0;
    if (options.lines)
    {
      Segments seg;
      {
        ScopedStage stage(mTimes, "line segments");
        std::vector<int64_t> offset(static_cast<std::size_t>(nt), 0);
        parallelFor(nt, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t)
          {
            if (!valid[std::size_t(t)])
              continue;
            double v[3];
            cornerValues(m, f, t, v);
            int32_t first, last;
            lineLevelRange(v, f.levels, nl, first, last);
            int64_t c = 0;
            uint8_t nodes[2];
            bool weak;
            for (int32_t k = first; k < last; ++k)
              c += lineSegment(m, f, t, v, k, nodes, weak) == 2;
            offset[std::size_t(t)] = c;
          }
        }, &control);
        lineSegments = exclusiveScan(offset);
        checkSegmentCount(lineSegments);
        seg.from.resize(std::size_t(lineSegments));
        seg.to.resize(std::size_t(lineSegments));
        seg.level.resize(std::size_t(lineSegments));
        seg.rank.resize(std::size_t(lineSegments));
        seg.point.resize(std::size_t(6 * lineSegments));
        parallelFor(nt, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t)
          {
            if (!valid[std::size_t(t)])
              continue;
            double v[3];
            cornerValues(m, f, t, v);
            int32_t first, last;
            lineLevelRange(v, f.levels, nl, first, last);
            int64_t s = offset[std::size_t(t)];
            uint8_t nodes[2];
            bool weak;
            for (int32_t k = first; k < last; ++k)
            {
              if (lineSegment(m, f, t, v, k, nodes, weak) != 2)
                continue;
              seg.rank[std::size_t(s)] = int32_t(weak ? lineSegments + s : s);
              seg.from[std::size_t(s)] = nodeKey(m, t, nodes[0], k, nl);
              seg.to[std::size_t(s)] = nodeKey(m, t, nodes[1], k, nl);
              seg.level[std::size_t(s)] = k;
              nodePoint(m, f, t, nodes[0], k, &seg.point[std::size_t(6 * s)]);
              nodePoint(m, f, t, nodes[1], k, &seg.point[std::size_t(6 * s + 3)]);
              ++s;
            }
          }
        }, &control);
      }
      ScopedStage stage(mTimes, "join lines");
      out.lines = chainLines(seg, nl, mThreads, control);
    }

    if (options.bands)
    {
      const int32_t nb = nl >= 2 ? nl - 1 : 0;
      RawRings raw;
      raw.vertexCount = mMesh.source.vertexCount;
      {
        ScopedStage stage(mTimes, "band boundaries");
        std::vector<int64_t> offset(static_cast<std::size_t>(nt), 0);
        auto forEachBoundary = [&](int64_t t, auto&& visit) {
          double v[3];
          cornerValues(m, f, t, v);
          int32_t first, last;
          bandRange(v, f.levels, nl, first, last);
          for (int32_t k = first; k < last; ++k)
          {
            uint8_t nodes[kMaxPieceNodes + 1];
            const int n = pieceNodes(v, f.levels[k], f.levels[k + 1], nodes);
            if (n < 3)
              continue;
            for (int j = 0; j < n; ++j)
              if (onBoundary(m, f, t, v, nodes, n, j, k))
                visit(k, nodes, j);
          }
        };
        parallelFor(nb > 0 ? nt : 0, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t)
            if (valid[std::size_t(t)])
            {
              int64_t c = 0;
              forEachBoundary(t, [&](int32_t, const uint8_t*, int) { ++c; });
              offset[std::size_t(t)] = c;
            }
        }, &control);
        const int64_t count = exclusiveScan(offset);
        checkSegmentCount(lineSegments + count);
        std::vector<int64_t> key(static_cast<std::size_t>(count)), node(static_cast<std::size_t>(count));
        std::vector<int32_t> band(static_cast<std::size_t>(count));
        std::vector<double> point(static_cast<std::size_t>(3 * count));
        parallelFor(nb > 0 ? nt : 0, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t)
            if (valid[std::size_t(t)])
            {
              int64_t s = offset[std::size_t(t)];
              forEachBoundary(t, [&](int32_t k, const uint8_t* nodes, int j) {
                key[std::size_t(s)] = boundaryKey(t, k, j, nb);
                node[std::size_t(s)] = nodeKey(m, t, nodes[j], k, nl);
                band[std::size_t(s)] = k;
                nodePoint(m, f, t, nodes[j], k, &point[std::size_t(3 * s)]);
                ++s;
              });
            }
        }, &control);
        // Each boundary segment's follower on its ring.
        std::vector<int32_t> next(static_cast<std::size_t>(count), -1);
        std::atomic<bool> broken{false};
        parallelFor(count, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t s = b; s < e; ++s)
          {
            const int64_t k = key[std::size_t(s)];
            const int j = int(k & 7);
            const int64_t tb = k >> 3;
            int64_t nt2;
            int nj;
            if (!nextBoundarySegment(m, f, tb / nb, j, int32_t(tb % nb), nt2, nj))
            {
              broken = true;
              continue;
            }
            const int64_t want = boundaryKey(nt2, int32_t(tb % nb), nj, nb);
            const auto it = std::lower_bound(key.begin(), key.end(), want);
            if (it == key.end() || *it != want)
              broken = true;
            else
              next[std::size_t(s)] = int32_t(it - key.begin());
          }
        }, &control);
        if (broken)
          throw InvalidInput("the mesh's triangles overlap or their edges do not match; the bands cannot be traced");
        // Rings in order of their lowest segment, by band.
        std::vector<uint8_t> done(static_cast<std::size_t>(count), 0);
        std::vector<std::vector<int64_t>> ringLists(static_cast<std::size_t>(nb));  // start segment of each ring
        for (int64_t s = 0; s < count; ++s)
          if (!done[std::size_t(s)])
          {
            int64_t c = s;
            for (; !done[std::size_t(c)]; c = next[std::size_t(c)])
              done[std::size_t(c)] = 1;
            if (c != s)  // the walk must come back to where it began
              throw InvalidInput("the mesh's triangles overlap or their edges do not match; the bands cannot be traced");
            ringLists[std::size_t(band[std::size_t(s)])].push_back(s);
          }
        raw.bandRing.push_back(0);
        raw.ringNode.push_back(0);
        for (int32_t k = 0; k < nb; ++k)
        {
          for (const int64_t s : ringLists[std::size_t(k)])
          {
            int64_t c = s, length = 0;
            do
            {
              if (++length > count)
                throw InvalidInput("the mesh's triangles overlap or their edges do not match; the bands cannot be traced");
              raw.key.push_back(node[std::size_t(c)]);
              raw.x.push_back(point[std::size_t(3 * c)]);
              raw.y.push_back(point[std::size_t(3 * c + 1)]);
              raw.z.push_back(point[std::size_t(3 * c + 2)]);
              c = next[std::size_t(c)];
            } while (c != s);
            raw.ringNode.push_back(int64_t(raw.key.size()));
          }
          raw.bandRing.push_back(int64_t(raw.ringNode.size()) - 1);
        }
      }
      ScopedStage stage(mTimes, "assemble polygons");
      out.bands = assembleBands(raw, out.droppedRings, control);
    }
    return out;
  }

private:
  int mThreads;
  PreparedMesh mMesh;
  StageTimes mPrepareTimes, mTimes;
};

}  // namespace

std::unique_ptr<MeshContourer> makeCpuContourer(const Mesh& mesh, int threads, const RunControl& control)
{
  return std::make_unique<CpuContourer>(mesh, threads, control);
}

}  // namespace gpugeo::mesh::detail
