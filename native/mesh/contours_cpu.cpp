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

// A line segment: its two end nodes' keys and points, its level, and whether it is weak (along an
// edge at the level).
struct LineRecord
{
  int64_t from, to;
  int32_t level;
  uint8_t weak;
  double point[6];  // from x, y, z, to x, y, z
};

// A band's boundary segment: its key (triangle, band, segment of the piece), its first node's key
// and point, its band.
struct BandRecord
{
  int64_t key, node;
  int32_t band;
  double point[3];
};

// Runs produce(t, records) for every triangle, on all threads in chunks of kGrain triangles, and
// returns the records in triangle order (one pass, no count first).
template <typename Record, typename Produce>
std::vector<Record> collect(int64_t count, int threads, const RunControl& control, Produce produce)
{
  const int64_t chunks = (count + kGrain - 1) / kGrain;
  std::vector<std::vector<Record>> parts(static_cast<std::size_t>(chunks));
  parallelFor(chunks, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
    {
      auto& out = parts[std::size_t(c)];
      const int64_t end = std::min(count, (c + 1) * kGrain);
      for (int64_t t = c * kGrain; t < end; ++t)
        produce(t, out);
    }
  }, &control);
  std::vector<int64_t> offset(static_cast<std::size_t>(chunks + 1), 0);
  for (int64_t c = 0; c < chunks; ++c)
    offset[std::size_t(c + 1)] = offset[std::size_t(c)] + int64_t(parts[std::size_t(c)].size());
  std::vector<Record> all(static_cast<std::size_t>(offset.back()));
  parallelFor(chunks, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
    {
      std::copy(parts[std::size_t(c)].begin(), parts[std::size_t(c)].end(), all.begin() + offset[std::size_t(c)]);
      std::vector<Record>().swap(parts[std::size_t(c)]);
    }
  }, &control);
  return all;
}

ContourLines chainLines(const std::vector<LineRecord>& seg, int32_t levelCount, int threads, const RunControl& control)
{
  const int64_t count = int64_t(seg.size());
  // A segment's rank: its index, after every segment that is not weak when it is weak.
  auto rank = [&](int64_t s) { return seg[std::size_t(s)].weak ? count + s : s; };
  // End 2 s is the start of segment s, 2 s + 1 its end; ends that meet at a node of exactly two
  // ends are partners.
  std::vector<std::pair<int64_t, int32_t>> ends(static_cast<std::size_t>(2 * count));
  parallelFor(count, kGrain, threads, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s)
    {
      ends[std::size_t(2 * s)] = {seg[std::size_t(s)].from, int32_t(2 * s)};
      ends[std::size_t(2 * s + 1)] = {seg[std::size_t(s)].to, int32_t(2 * s + 1)};
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
  auto pointOf = [&](int32_t end) { return &seg[std::size_t(end / 2)].point[3 * (end & 1)]; };
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
      if (rank(walk[i] / 2) < rank(walk[best] / 2))
        best = i;
    const int64_t bestRank = rank(walk[best] / 2);
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
    part.order = int64_t(seg[std::size_t(walk[0] / 2)].level) * 2 * count + bestRank;
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
      std::vector<LineRecord> seg;
      {
        ScopedStage stage(mTimes, "line segments");
        seg = collect<LineRecord>(nt, mThreads, control, [&](int64_t t, std::vector<LineRecord>& out) {
          if (!valid[std::size_t(t)])
            return;
          double v[3];
          cornerValues(m, f, t, v);
          int32_t first, last;
          lineLevelRange(v, f.levels, nl, first, last);
          uint8_t nodes[2];
          bool weak;
          for (int32_t k = first; k < last; ++k)
          {
            if (lineSegment(m, f, t, v, k, nodes, weak) != 2)
              continue;
            LineRecord r;
            r.from = nodeKey(m, t, nodes[0], k, nl);
            r.to = nodeKey(m, t, nodes[1], k, nl);
            r.level = k;
            r.weak = weak;
            nodePoint(m, f, t, nodes[0], k, r.point);
            nodePoint(m, f, t, nodes[1], k, r.point + 3);
            out.push_back(r);
          }
        });
        lineSegments = int64_t(seg.size());
        checkSegmentCount(lineSegments);
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
        const std::vector<BandRecord> records =
            collect<BandRecord>(nb > 0 ? nt : 0, mThreads, control, [&](int64_t t, std::vector<BandRecord>& out) {
              if (!valid[std::size_t(t)])
                return;
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
                  {
                    BandRecord r;
                    r.key = boundaryKey(t, k, j, nb);
                    r.node = nodeKey(m, t, nodes[j], k, nl);
                    r.band = k;
                    nodePoint(m, f, t, nodes[j], k, r.point);
                    out.push_back(r);
                  }
              }
            });
        const int64_t count = int64_t(records.size());
        checkSegmentCount(lineSegments + count);
        auto keyAt = [&](int64_t s) { return records[std::size_t(s)].key; };
        // Each boundary segment's follower on its ring.
        std::vector<int32_t> next(static_cast<std::size_t>(count), -1);
        std::atomic<bool> broken{false};
        parallelFor(count, kGrain, mThreads, [&](int64_t b, int64_t e) {
          for (int64_t s = b; s < e; ++s)
          {
            const int64_t k = keyAt(s);
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
            const auto it = std::lower_bound(records.begin(), records.end(), want,
                                             [](const BandRecord& r, int64_t w) { return r.key < w; });
            if (it == records.end() || it->key != want)
              broken = true;
            else
              next[std::size_t(s)] = int32_t(it - records.begin());
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
            ringLists[std::size_t(records[std::size_t(s)].band)].push_back(s);
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
              const BandRecord& r = records[std::size_t(c)];
              raw.key.push_back(r.node);
              raw.x.push_back(r.point[0]);
              raw.y.push_back(r.point[1]);
              raw.z.push_back(r.point[2]);
              c = next[std::size_t(c)];
            } while (c != s);
            raw.ringNode.push_back(int64_t(raw.key.size()));
          }
          raw.bandRing.push_back(int64_t(raw.ringNode.size()) - 1);
        }
      }
      ScopedStage stage(mTimes, "assemble polygons");
      out.bands = assembleRings(raw, out.droppedRings, control, mThreads);
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
