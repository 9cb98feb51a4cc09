// Rings to polygons (core/polygon_rings.h); a grid over the shells' boxes finds the shells a hole may
// lie in.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/polygon_rings.h"

namespace gpugeo {

namespace {

// A loop's nodes (indices into the raw arrays, not repeated at the end): a ring that does not touch
// itself is its own raw nodes first .. first + count - 1 (no copy, which for many small rings cost
// more than the rest); a loop cut out of one that does lists them.
struct Loop
{
  int64_t first = 0, count = 0;  // when `node` is empty
  std::vector<int64_t> node;
  double area = 0;  // signed, counter-clockwise positive
  double box[4] = {0, 0, 0, 0};

  std::size_t size() const { return node.empty() ? std::size_t(count) : node.size(); }
  std::size_t at(std::size_t i) const { return std::size_t(node.empty() ? first + int64_t(i) : node[i]); }
};

void measure(const RawRings& raw, Loop& loop)
{
  const std::size_t n = loop.size();
  const double ox = raw.x[loop.at(0)], oy = raw.y[loop.at(0)];
  double twice = 0;
  loop.box[0] = loop.box[2] = ox;
  loop.box[1] = loop.box[3] = oy;
  for (std::size_t i = 0; i < n; ++i)
  {
    const std::size_t a = loop.at(i), b = loop.at(i + 1 < n ? i + 1 : 0);
    twice += (raw.x[a] - ox) * (raw.y[b] - oy) - (raw.x[b] - ox) * (raw.y[a] - oy);
    loop.box[0] = std::min(loop.box[0], raw.x[a]);
    loop.box[1] = std::min(loop.box[1], raw.y[a]);
    loop.box[2] = std::max(loop.box[2], raw.x[a]);
    loop.box[3] = std::max(loop.box[3], raw.y[a]);
  }
  loop.area = twice / 2;
}

// Whether the ring of nodes [begin, end) passes a node twice, among the nodes with keys below
// vertexCount (on a mesh only vertices can come twice: a crossing has one segment in and one out).
// Its keys go into an open-addressing table twice its size: linear in the nodes (a sort of all the
// (ring, key) pairs was most of the polygons' time on the host).
bool ringRepeats(const RawRings& raw, int64_t begin, int64_t end, std::vector<int64_t>& table)
{
  int bits = 4;
  while ((int64_t(1) << bits) < 2 * (end - begin))
    ++bits;
  table.assign(std::size_t(1) << bits, -1);  // keys are not negative
  const std::size_t mask = table.size() - 1;
  for (int64_t i = begin; i < end; ++i)
  {
    const int64_t k = raw.key[std::size_t(i)];
    if (k >= raw.vertexCount)
      continue;
    std::size_t slot = std::size_t((uint64_t(k) * 0x9E3779B97F4A7C15ull) >> (64 - bits));
    while (table[slot] != -1 && table[slot] != k)
      slot = (slot + 1) & mask;
    if (table[slot] == k)
      return true;
    table[slot] = k;
  }
  return false;
}

// Bits over the keys lo .. lo + 64 words - 1: a large ring's seen and repeated keys where its keys
// lie close together (a raster's regions: a ring's corners are neighbours, so its keys span about
// its rows times the grid's width). A hash table of the ring's keys misses the cache at almost every
// node of a ring of millions (at 40,000² a band's few huge rings took seconds on one thread each);
// bits walked along the ring mostly stay in it.
struct KeyBits
{
  int64_t lo = 0;
  std::vector<uint64_t> words;
  void reset(int64_t low, int64_t high)
  {
    lo = low;
    words.assign(std::size_t((high - low) / 64 + 1), 0);
  }
  bool test(int64_t k) const { return (words[std::size_t((k - lo) >> 6)] >> ((k - lo) & 63)) & 1u; }
  // Sets the key's bit; whether it was set already.
  bool set(int64_t k)
  {
    uint64_t& w = words[std::size_t((k - lo) >> 6)];
    const uint64_t bit = uint64_t(1) << ((k - lo) & 63);
    const bool was = (w & bit) != 0;
    w |= bit;
    return was;
  }
};

// The rings that KeyBits takes: of at least this many nodes, their keys' range at most kBitsPerNode
// times their nodes (the bits then take at most kBitsPerNode / 8 bytes a node, less than the tables).
constexpr int64_t kBitsFromNodes = 1 << 16;
constexpr int64_t kBitsPerNode = 128;

// The keys of a large compact ring [begin, end) that it passes more than once, in `twice` (`seen` is
// working room); null when the ring is not one for bits. *vertexRepeats: whether one of them is below
// raw.vertexCount (ringRepeats' answer).
KeyBits* repeatedKeys(const RawRings& raw, int64_t begin, int64_t end, KeyBits& seen, KeyBits& twice,
                      bool* vertexRepeats)
{
  if (end - begin < kBitsFromNodes)
    return nullptr;
  const auto [lo, hi] = std::minmax_element(raw.key.begin() + begin, raw.key.begin() + end);
  if (*hi - *lo > kBitsPerNode * (end - begin))
    return nullptr;
  seen.reset(*lo, *hi);
  twice.reset(*lo, *hi);
  *vertexRepeats = false;
  for (int64_t i = begin; i < end; ++i)
  {
    const int64_t k = raw.key[std::size_t(i)];
    if (seen.set(k))
    {
      twice.set(k);
      *vertexRepeats = *vertexRepeats || k < raw.vertexCount;
    }
  }
  return &twice;
}

// The loops of one ring: split wherever it comes back to a node it passed. The keys of the path
// walked so far are found through an open-addressing table of (key, index in the path) twice the
// ring's size; an entry whose index is past the path's end, or at a node of another key, was cut
// off with a loop and counts as absent (so nothing is ever erased). With `twice` (repeatedKeys) only
// the keys the ring passes more than once go into the table, twice their number: a key met once is
// never looked up again, so the loops are the same.
void splitRing(const RawRings& raw, int64_t begin, int64_t end, bool repeats, std::vector<Loop>& loops,
               std::vector<std::pair<int64_t, int64_t>>& table, const KeyBits* twice = nullptr)
{
  if (!repeats)
  {
    Loop loop;
    loop.first = begin;
    loop.count = end - begin;
    loops.push_back(std::move(loop));
    return;
  }
  int64_t tabled = end - begin;
  if (twice)
  {
    tabled = 0;
    for (const uint64_t w : twice->words)
      tabled += __builtin_popcountll(w);
  }
  int bits = 4;
  while ((int64_t(1) << bits) < 2 * tabled)
    ++bits;
  table.assign(std::size_t(1) << bits, {-1, 0});  // keys are not negative
  const std::size_t mask = table.size() - 1;
  std::vector<int64_t> path;
  for (int64_t i = begin; i < end; ++i)
  {
    const int64_t k = raw.key[std::size_t(i)];
    if (twice && !twice->test(k))
    {
      path.push_back(i);
      continue;
    }
    std::size_t slot = std::size_t((uint64_t(k) * 0x9E3779B97F4A7C15ull) >> (64 - bits));
    while (table[slot].first != -1 && table[slot].first != k)
      slot = (slot + 1) & mask;
    const int64_t p = table[slot].second;
    const bool onPath =
      table[slot].first == k && p < int64_t(path.size()) && raw.key[std::size_t(path[std::size_t(p)])] == k;
    if (!onPath)
    {
      table[slot] = {k, int64_t(path.size())};
      path.push_back(i);
      continue;
    }
    Loop loop;
    loop.node.assign(path.begin() + std::ptrdiff_t(p), path.end());
    loops.push_back(std::move(loop));
    path.resize(std::size_t(p) + 1);
  }
  Loop rest;
  rest.node = std::move(path);
  loops.push_back(std::move(rest));
}

// Whether (px, py) lies inside the ring: a ray to the right crossing its edges an odd number of times.
inline bool crosses(const RawRings& raw, std::size_t a, std::size_t b, double px, double py)
{
  const double xi = raw.x[a], yi = raw.y[a], xj = raw.x[b], yj = raw.y[b];
  return (yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi;
}

bool inside(const RawRings& raw, const Loop& ring, double px, double py)
{
  bool in = false;
  const std::size_t n = ring.size();
  for (std::size_t i = 0, j = n - 1; i < n; j = i++)
    in ^= crosses(raw, ring.at(i), ring.at(j), px, py);
  return in;
}

// A ring's edges by horizontal slab of its box, for rings of many nodes that many holes are tested
// against (a band whose one large shell holds a million small holes was quadratic): only the edges
// whose y-range meets the point's slab are tested, each with inside()'s own test, so the answer is
// inside()'s.
class SlabIndex
{
public:
  static constexpr std::size_t kMinNodes = 256;

  SlabIndex(const RawRings& raw, const Loop& ring) : mLow(ring.box[1])
  {
    const std::size_t n = ring.size();
    mSlabs = std::clamp<std::size_t>(n / 8, 1, std::size_t(1) << 20);
    mHeight = std::max(ring.box[3] - ring.box[1], 1e-300);
    mFirst.assign(mSlabs + 1, 0);
    const auto forSlabsOf = [&](std::size_t i, auto visit) {
      const std::size_t a = ring.at(i), b = ring.at(i + 1 < n ? i + 1 : 0);
      const std::size_t s0 = slab(std::min(raw.y[a], raw.y[b])), s1 = slab(std::max(raw.y[a], raw.y[b]));
      for (std::size_t s = s0; s <= s1; ++s)
        visit(s);
    };
    for (std::size_t i = 0; i < n; ++i)
      forSlabsOf(i, [&](std::size_t s) { ++mFirst[s + 1]; });
    for (std::size_t s = 0; s < mSlabs; ++s)
      mFirst[s + 1] += mFirst[s];
    mEdge.resize(mFirst.back());
    std::vector<std::size_t> next(mFirst.begin(), mFirst.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      forSlabsOf(i, [&](std::size_t s) { mEdge[next[s]++] = i; });
  }

  bool inside(const RawRings& raw, const Loop& ring, double px, double py) const
  {
    const std::size_t n = ring.size(), s = slab(py);
    bool in = false;
    for (std::size_t k = mFirst[s]; k < mFirst[s + 1]; ++k)
    {
      const std::size_t i = mEdge[k];
      in ^= crosses(raw, ring.at(i + 1 < n ? i + 1 : 0), ring.at(i), px, py);
    }
    return in;
  }

private:
  std::size_t slab(double y) const
  {
    const double f = std::floor((y - mLow) / mHeight * double(mSlabs));
    return std::size_t(std::clamp(f, 0.0, double(mSlabs - 1)));
  }
  double mLow, mHeight = 1;
  std::size_t mSlabs = 1;
  std::vector<std::size_t> mFirst, mEdge;
};

// For each hole, the index of the smallest shell that holds it, or -1.
std::vector<int64_t> holeOwners(const RawRings& raw, const std::vector<Loop>& shells, const std::vector<Loop>& holes,
                                int threads)
{
  std::vector<int64_t> owner(holes.size(), -1);
  if (shells.size() == 1)
  {
    std::fill(owner.begin(), owner.end(), 0);
    return owner;
  }
  if (shells.empty() || holes.empty())
    return owner;
  // Shells by area, smallest first, in a grid over their boxes.
  std::vector<int64_t> order(shells.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = int64_t(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return shells[std::size_t(a)].area < shells[std::size_t(b)].area; });
  double box[4] = {shells[0].box[0], shells[0].box[1], shells[0].box[2], shells[0].box[3]};
  for (const auto& s : shells)
  {
    box[0] = std::min(box[0], s.box[0]);
    box[1] = std::min(box[1], s.box[1]);
    box[2] = std::max(box[2], s.box[2]);
    box[3] = std::max(box[3], s.box[3]);
  }
  const int side = int(std::clamp(std::sqrt(double(shells.size())), 1.0, 512.0));
  const double w = std::max(box[2] - box[0], 1e-300), h = std::max(box[3] - box[1], 1e-300);
  auto cell = [&](double v, double lo, double extent) {
    return std::clamp(int(std::floor((v - lo) / extent * side)), 0, side - 1);
  };
  // The grid's lists in one array (each grid cell's shells from first[cell], smallest first): counted,
  // then filled, so that a band of many small shells costs no allocation per grid cell.
  const std::size_t cells = std::size_t(side) * std::size_t(side);
  std::vector<int64_t> first(cells + 1, 0);
  const auto forCellsOf = [&](const Loop& l, auto visit) {
    const int x0 = cell(l.box[0], box[0], w), x1 = cell(l.box[2], box[0], w);
    const int y0 = cell(l.box[1], box[1], h), y1 = cell(l.box[3], box[1], h);
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x)
        visit(std::size_t(y) * std::size_t(side) + std::size_t(x));
  };
  for (const int64_t s : order)
    forCellsOf(shells[std::size_t(s)], [&](std::size_t g) { ++first[g + 1]; });
  for (std::size_t g = 0; g < cells; ++g)
    first[g + 1] += first[g];
  std::vector<int64_t> listed(static_cast<std::size_t>(first.back()));
  {
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (const int64_t s : order)
      forCellsOf(shells[std::size_t(s)], [&](std::size_t g) { listed[std::size_t(next[g]++)] = s; });
  }
  // A large shell's index is built when a hole first needs it (once, whichever thread asks first).
  std::vector<std::unique_ptr<SlabIndex>> index(shells.size());
  const std::unique_ptr<std::once_flag[]> built(new std::once_flag[shells.size()]);
  const auto holds = [&](int64_t s, double px, double py) {
    const Loop& l = shells[std::size_t(s)];
    if (l.size() < SlabIndex::kMinNodes)
      return inside(raw, l, px, py);
    std::call_once(built[std::size_t(s)], [&] { index[std::size_t(s)] = std::make_unique<SlabIndex>(raw, l); });
    return index[std::size_t(s)]->inside(raw, l, px, py);
  };
  parallelFor(int64_t(holes.size()), 256, threads, [&](int64_t from, int64_t to) {
    for (std::size_t i = std::size_t(from); i < std::size_t(to); ++i)
    {
      const Loop& hole = holes[i];
      // A point of the hole's boundary that no shell passes through: the middle of its first segment.
      const std::size_t a = hole.at(0), b = hole.at(1);
      const double px = (raw.x[a] + raw.x[b]) / 2, py = (raw.y[a] + raw.y[b]) / 2;
      const std::size_t g = std::size_t(cell(py, box[1], h)) * std::size_t(side) + std::size_t(cell(px, box[0], w));
      for (int64_t k = first[g]; k < first[g + 1]; ++k)
      {
        const int64_t s = listed[std::size_t(k)];
        const Loop& l = shells[std::size_t(s)];
        if (l.box[0] <= hole.box[0] && hole.box[2] <= l.box[2] && l.box[1] <= hole.box[1] && hole.box[3] <= l.box[3] &&
            holds(s, px, py))
        {
          owner[i] = s;
          break;
        }
      }
    }
  });
  return owner;
}

// Band k's rings split into loops, in the rings' order: the rings cut into contiguous runs, each
// split on its own thread with its own tables, the runs' loops then put back in order.
std::vector<Loop> bandLoops(const RawRings& raw, int64_t k, int threads)
{
  const int64_t r0 = raw.bandRing[std::size_t(k)], r1 = raw.bandRing[std::size_t(k) + 1];
  const int64_t runs = std::min<int64_t>(r1 - r0, threads > 1 ? int64_t(threads) * 8 : 1);
  std::vector<std::vector<Loop>> loopsOf(std::size_t(std::max<int64_t>(runs, 0)));
  parallelFor(runs, 1, threads, [&](int64_t b, int64_t e) {
    std::vector<int64_t> keys;  // ringRepeats' table, kept from ring to ring
    std::vector<std::pair<int64_t, int64_t>> table;  // splitRing's
    KeyBits seen, twice;  // repeatedKeys'
    for (int64_t run = b; run < e; ++run)
    {
      std::vector<Loop>& loops = loopsOf[std::size_t(run)];
      for (int64_t r = r0 + (r1 - r0) * run / runs; r < r0 + (r1 - r0) * (run + 1) / runs; ++r)
      {
        const int64_t begin = raw.ringNode[std::size_t(r)], end = raw.ringNode[std::size_t(r + 1)];
        bool repeats = false;
        const KeyBits* bits = repeatedKeys(raw, begin, end, seen, twice, &repeats);
        if (!bits)
          repeats = ringRepeats(raw, begin, end, keys);
        splitRing(raw, begin, end, repeats, loops, table, bits);
      }
    }
  });
  if (loopsOf.size() == 1)
    return std::move(loopsOf[0]);
  std::vector<Loop> loops;
  std::size_t count = 0;
  for (const auto& run : loopsOf)
    count += run.size();
  loops.reserve(count);
  for (auto& run : loopsOf)
    std::move(run.begin(), run.end(), std::back_inserter(loops));
  return loops;
}

}  // namespace

BandPolygons assembleRings(const RawRings& raw, int64_t& droppedRings, const RunControl& control, int threads)
{
  // Each band on its own (on all threads): its rings split into loops, sorted into shells and holes,
  // and listed in the order they are written (each shell followed by its holes); then the bands'
  // places in the output arrays, and the coordinates copied there (on all threads again).
  struct Band
  {
    std::vector<Loop> rings;               // in output order
    std::vector<int64_t> ringsOfPolygon;   // per polygon
    int64_t points = 0, dropped = 0;
  };
  const std::size_t bandCount = raw.bandRing.empty() ? 0 : raw.bandRing.size() - 1;
  std::vector<Band> bands(bandCount);
  // Fewer bands than threads (a few large bands: the tiled isochrones assemble them a few at a time):
  // each band's splitting, measuring and hole finding run on its share of the threads too.
  const int all = threads > 0 ? threads : defaultThreadCount();
  const int inner = bandCount > 0 ? std::max(1, all / int(std::min<std::size_t>(bandCount, std::size_t(all)))) : 1;
  parallelFor(int64_t(bandCount), 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
    {
      Band& band = bands[std::size_t(k)];
      std::vector<Loop> loops = bandLoops(raw, k, inner);
      parallelFor(int64_t(loops.size()), 4096, inner, [&](int64_t lb, int64_t le) {
        for (int64_t i = lb; i < le; ++i)
          if (loops[std::size_t(i)].size() >= 3)
            measure(raw, loops[std::size_t(i)]);
      });
      std::vector<Loop> shells, holes;
      shells.reserve(loops.size());
      holes.reserve(loops.size());
      for (auto& loop : loops)
      {
        if (loop.size() < 3)
        {
          ++band.dropped;
          continue;
        }
        if (loop.area > 0)
          shells.push_back(std::move(loop));
        else if (loop.area < 0)
          holes.push_back(std::move(loop));
        else
          ++band.dropped;
      }
      const std::vector<int64_t> owner = holeOwners(raw, shells, holes, inner);
      // Each shell's holes, in the order of the holes, from firstHole[shell] in holesOf.
      std::vector<int64_t> firstHole(shells.size() + 1, 0);
      for (std::size_t i = 0; i < holes.size(); ++i)
      {
        if (owner[i] < 0)
          ++band.dropped;
        else
          ++firstHole[std::size_t(owner[i]) + 1];
      }
      for (std::size_t k = 0; k < shells.size(); ++k)
        firstHole[k + 1] += firstHole[k];
      std::vector<std::size_t> holesOf(static_cast<std::size_t>(firstHole.back()));
      {
        std::vector<int64_t> next(firstHole.begin(), firstHole.end() - 1);
        for (std::size_t i = 0; i < holes.size(); ++i)
          if (owner[i] >= 0)
            holesOf[std::size_t(next[std::size_t(owner[i])]++)] = i;
      }
      band.rings.reserve(shells.size() + holes.size());
      auto keep = [&](Loop&& loop) {
        band.points += int64_t(loop.size()) + 1;  // the first point repeated at the end
        band.rings.push_back(std::move(loop));
      };
      for (std::size_t s = 0; s < shells.size(); ++s)
      {
        keep(std::move(shells[s]));
        for (int64_t k = firstHole[s]; k < firstHole[s + 1]; ++k)
          keep(std::move(holes[holesOf[std::size_t(k)]]));
        band.ringsOfPolygon.push_back(firstHole[s + 1] - firstHole[s] + 1);
      }
    }
  }, &control);

  BandPolygons out;
  std::vector<int64_t> firstPoint(bandCount + 1, 0), firstRing(bandCount + 1, 0);
  out.bandPolygon.assign(bandCount + 1, 0);
  for (std::size_t k = 0; k < bandCount; ++k)
  {
    firstPoint[k + 1] = firstPoint[k] + bands[k].points;
    firstRing[k + 1] = firstRing[k] + int64_t(bands[k].rings.size());
    out.bandPolygon[k + 1] = out.bandPolygon[k] + int64_t(bands[k].ringsOfPolygon.size());
    droppedRings += bands[k].dropped;
  }
  const bool withZ = !raw.z.empty();
  const std::size_t points = std::size_t(firstPoint.back());
  parallelFor(withZ ? 3 : 2, 1, threads, [&](int64_t job, int64_t) {  // fresh pages faulted on all threads
    (job == 0 ? out.x : job == 1 ? out.y : out.z).resize(points);
  }, &control);
  out.ringPoint.resize(std::size_t(firstRing.back()) + 1);
  out.polygonRing.resize(std::size_t(out.bandPolygon.back()) + 1);
  out.ringPoint[0] = 0;
  out.polygonRing[0] = 0;
  parallelFor(int64_t(bandCount), 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
    {
      const Band& band = bands[std::size_t(k)];
      int64_t point = firstPoint[std::size_t(k)];
      int64_t ring = firstRing[std::size_t(k)];
      for (const Loop& loop : band.rings)
      {
        const std::size_t size = loop.size();
        for (std::size_t i = 0; i <= size; ++i)
        {
          const std::size_t from = loop.at(i < size ? i : 0);
          out.x[std::size_t(point)] = raw.x[from];
          out.y[std::size_t(point)] = raw.y[from];
          if (withZ)
            out.z[std::size_t(point)] = raw.z[from];
          ++point;
        }
        out.ringPoint[std::size_t(++ring)] = point;
      }
      ring = firstRing[std::size_t(k)];
      int64_t polygon = out.bandPolygon[std::size_t(k)];
      for (const int64_t rings : band.ringsOfPolygon)
      {
        ring += rings;
        out.polygonRing[std::size_t(++polygon)] = ring;
      }
    }
  }, &control);
  return out;
}

}  // namespace gpugeo
