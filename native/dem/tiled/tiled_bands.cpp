// The tiled isochrone bands (tiled_dem.h): each tile's band labels counted and their boundary edges
// walked (regions.h's rules) into chains that end where the walk leaves the tile; the chains are
// joined across the tiles' edges into the rings regions.cpp finds on the whole grid, started at the
// same edge and in the same order, so that the same polygons come out.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/region_math.h"
#include "dem/detail/travel_math.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::boundarySides;
using dem::detail::nextEdge;
using detail::TileLayout;

// An edge of the whole grid: 4 x (y * width + x) + side (regions.cpp's ids, whose order starts rings).
inline int64_t edgeId(int64_t width, int64_t x, int64_t y, int side)
{
  return 4 * (y * width + x) + side;
}

// A walk's piece inside one tile: from its first edge (whose edge before lies in another tile) to
// its last (whose edge after, `exit`, does), with the edges where it turns after the first.
struct Chain
{
  int32_t label = 0;
  int64_t first = 0, last = 0, exit = 0;
  int64_t turnsBegin = 0, turnsEnd = 0;  // in the tile's `turns`
};

// A ring found whole: its label and turning edges, from the lowest.
struct Ring
{
  int32_t label = 0;
  int64_t turnsBegin = 0, turnsEnd = 0;
};

// One tile's pieces of one set of labels.
struct TilePieces
{
  std::vector<Chain> chains;
  std::vector<Ring> rings;
  std::vector<int64_t> turns;
};

// The boundary walks of one tile's labels (padded with a one-cell halo: labels of the cells around,
// -1 off the grid, as regions.h's labelAt sees it).
// `sides` and `entered` are working room, reused from tile to tile.
void tracePieces(const std::vector<int32_t>& labels, const Window& t, int64_t width, int32_t count, TilePieces& out,
                 std::vector<uint8_t>& sides, std::vector<uint8_t>& entered)
{
  const int64_t pw = t.width + 2, ph = t.height + 2, tw = t.width;
  const int64_t n = t.cells();
  resizeHuge(sides, std::size_t(n));
  assignHuge(entered, std::size_t(n), uint8_t(0));
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < tw; ++x)
      sides[std::size_t(y * tw + x)] = uint8_t(boundarySides(labels.data(), pw, ph, x + 1, y + 1, count));
  const auto inTile = [&](int64_t px, int64_t py) { return px >= 1 && py >= 1 && px <= tw && py <= t.height; };
  // Which edges have their edge before in the tile: the others start chains.
  for (int64_t q = 0; q < n; ++q)
    for (unsigned bits = sides[std::size_t(q)]; bits; bits &= bits - 1)
    {
      int64_t nx, ny;
      int ns;
      nextEdge(labels.data(), pw, ph, q % tw + 1, q / tw + 1, __builtin_ctz(bits), nx, ny, ns);
      if (inTile(nx, ny))
        entered[std::size_t((ny - 1) * tw + nx - 1)] |= uint8_t(1u << ns);
    }
  const auto walk = [&](int64_t q, int side, bool chain) {
    int64_t px = q % tw + 1, py = q / tw + 1;
    int s = side, previous = -1;
    const int64_t start = out.turns.size();
    const int32_t label = labels[std::size_t(py * pw + px)];
    int64_t last = 0;
    bool firstTurns = false;
    for (;;)
    {
      const int64_t id = edgeId(width, t.x0 + px - 1, t.y0 + py - 1, s);
      sides[std::size_t((py - 1) * tw + px - 1)] &= uint8_t(~(1u << s));
      if (previous >= 0 && s != previous)
        out.turns.push_back(id);
      previous = s;
      last = id;
      int64_t nx, ny;
      int ns;
      nextEdge(labels.data(), pw, ph, px, py, s, nx, ny, ns);
      if (!inTile(nx, ny))
      {
        out.chains.push_back(Chain{label, edgeId(width, t.x0 + q % tw, t.y0 + q / tw, side), last,
                                   edgeId(width, t.x0 + nx - 1, t.y0 + ny - 1, ns), start,
                                   int64_t(out.turns.size())});
        return;
      }
      if (!chain && nx == q % tw + 1 && ny == q / tw + 1 && ns == side)
      {
        firstTurns = side != previous;
        break;
      }
      px = nx, py = ny, s = ns;
    }
    // A ring inside the tile: the first edge turns from the last when their sides differ; started at
    // its lowest turning edge, as regions.cpp starts it.
    if (firstTurns)
      out.turns.insert(out.turns.begin() + start, edgeId(width, t.x0 + q % tw, t.y0 + q / tw, side));
    const auto begin = out.turns.begin() + start;
    std::rotate(begin, std::min_element(begin, out.turns.end()), out.turns.end());
    out.rings.push_back(Ring{label, start, int64_t(out.turns.size())});
  };
  for (int64_t q = 0; q < n; ++q)
    for (unsigned bits = sides[std::size_t(q)] & ~unsigned(entered[std::size_t(q)]); bits; bits &= bits - 1)
      walk(q, __builtin_ctz(bits), true);
  for (int64_t q = 0; q < n; ++q)
    while (sides[std::size_t(q)])
      walk(q, __builtin_ctz(sides[std::size_t(q)]), false);
}

// A ring of the whole grid: its label, its lowest turning edge (where it starts), and its turning
// edges: a ring of one tile's (tile, ring `begin`), or a ring joined from chains (tile -1,
// joined[begin, end)). 32 bytes: the 40,000^2 run finds millions of rings.
struct Found
{
  int32_t label;
  int32_t tile;
  int64_t lowest;
  int64_t begin, end;
};

struct JoinedRings
{
  std::vector<Found> found;     // sorted by label, then lowest edge (regions.cpp's order)
  std::vector<int64_t> joined;  // the joined rings' turning edges, each from its lowest
};

// Where each chain starts: (first edge, tile, chain), sorted by first edge (16 bytes a chain where a
// hash map took about 50).
struct ChainStart
{
  int64_t first;
  int32_t tile, chain;
  bool operator<(const ChainStart& o) const { return first < o.first; }
};

// The rings of every tile's pieces: the chains joined where one's exit is another's first edge, each
// ring started at its lowest turning edge. The chains' own turning edges are dropped from the tiles
// once copied into the joined rings (only the tiles' whole rings keep theirs).
JoinedRings joinPieces(std::vector<TilePieces>& tiles, const RunControl& control)
{
  JoinedRings out;
  std::vector<ChainStart> chainAt;
  for (std::size_t i = 0; i < tiles.size(); ++i)
  {
    if (tiles.size() > std::size_t(std::numeric_limits<int32_t>::max()) ||
        tiles[i].chains.size() > std::size_t(std::numeric_limits<int32_t>::max()))
      throw InvalidInput("too many tiles or boundary pieces in a tile for the bands' tracing");
    for (std::size_t c = 0; c < tiles[i].chains.size(); ++c)
      chainAt.push_back(ChainStart{tiles[i].chains[c].first, int32_t(i), int32_t(c)});
    for (std::size_t r = 0; r < tiles[i].rings.size(); ++r)
    {
      const Ring& ring = tiles[i].rings[r];
      out.found.push_back(Found{ring.label, int32_t(i), tiles[i].turns[std::size_t(ring.turnsBegin)], int64_t(r), 0});
    }
  }
  std::sort(chainAt.begin(), chainAt.end());
  std::vector<std::vector<uint8_t>> used(tiles.size());
  for (std::size_t i = 0; i < tiles.size(); ++i)
    used[i].assign(tiles[i].chains.size(), 0);
  const auto side = [](int64_t id) { return int(id & 3); };
  std::vector<int64_t> turns;
  for (std::size_t i0 = 0; i0 < tiles.size(); ++i0)
    for (std::size_t c0 = 0; c0 < tiles[i0].chains.size(); ++c0)
    {
      if (used[i0][c0])
        continue;
      if (control.isCanceled())
        throw Canceled();
      turns.clear();
      int64_t i = int64_t(i0), c = int64_t(c0);
      int64_t lastBefore = -1;
      // The first chain's first edge turns from the ring's last edge: known at the end.
      do
      {
        used[std::size_t(i)][std::size_t(c)] = 1;
        const Chain& chain = tiles[std::size_t(i)].chains[std::size_t(c)];
        if (lastBefore >= 0 && side(chain.first) != side(lastBefore))
          turns.push_back(chain.first);
        const std::vector<int64_t>& own = tiles[std::size_t(i)].turns;
        turns.insert(turns.end(), own.begin() + chain.turnsBegin, own.begin() + chain.turnsEnd);
        lastBefore = chain.last;
        const auto next = std::lower_bound(chainAt.begin(), chainAt.end(), ChainStart{chain.exit, 0, 0});
        if (next == chainAt.end() || next->first != chain.exit)
          throw std::logic_error("a region's boundary leaves a tile where no piece of the next tile starts");
        i = next->tile;
        c = next->chain;
      } while (!used[std::size_t(i)][std::size_t(c)]);
      if (i != int64_t(i0) || c != int64_t(c0))
        throw std::logic_error("a region's boundary joins another in the middle");
      const int64_t first = tiles[i0].chains[c0].first;
      if (side(first) != side(lastBefore))
        turns.insert(turns.begin(), first);
      std::rotate(turns.begin(), std::min_element(turns.begin(), turns.end()), turns.end());
      const int64_t begin = int64_t(out.joined.size());
      out.joined.insert(out.joined.end(), turns.begin(), turns.end());
      out.found.push_back(Found{tiles[i0].chains[c0].label, -1, turns.front(), begin, int64_t(out.joined.size())});
    }
  std::vector<ChainStart>().swap(chainAt);
  std::vector<std::vector<uint8_t>>().swap(used);
  for (TilePieces& tile : tiles)
  {
    // Only the whole rings' turning edges stay, in order.
    std::vector<int64_t> kept;
    for (Ring& ring : tile.rings)
    {
      const int64_t begin = int64_t(kept.size());
      kept.insert(kept.end(), tile.turns.begin() + ring.turnsBegin, tile.turns.begin() + ring.turnsEnd);
      ring.turnsBegin = begin;
      ring.turnsEnd = int64_t(kept.size());
    }
    tile.turns.swap(kept);
    std::vector<Chain>().swap(tile.chains);
  }
  std::sort(out.found.begin(), out.found.end(), [](const Found& a, const Found& b) {
    return a.label != b.label ? a.label < b.label : a.lowest < b.lowest;
  });
  return out;
}

// The turning edges of found ring f (its corners).
int64_t ringSize(const std::vector<TilePieces>& tiles, const JoinedRings& rings, std::size_t f)
{
  const Found& ring = rings.found[f];
  if (ring.tile < 0)
    return ring.end - ring.begin;
  const Ring& r = tiles[std::size_t(ring.tile)].rings[std::size_t(ring.begin)];
  return r.turnsEnd - r.turnsBegin;
}

// The rings of labels first .. first + count - 1, found[ringOf[first] .. ringOf[first + count]), as
// regions.cpp gives the whole grid's: RawRings with its corner keys, a band per label (for
// polygonsFromRings, which assembles them side by side on the threads).
RawRings labelRings(const std::vector<TilePieces>& tiles, const JoinedRings& rings,
                    const std::vector<std::size_t>& ringOf, int32_t first, int32_t count, int64_t width,
                    int64_t height, int threads, const RunControl& control)
{
  RawRings raw;
  raw.vertexCount = (width + 1) * (height + 1);
  const std::size_t begin = ringOf[std::size_t(first)], end = ringOf[std::size_t(first + count)];
  for (int32_t k = 0; k <= count; ++k)
    raw.bandRing.push_back(int64_t(ringOf[std::size_t(first + k)] - begin));
  raw.ringNode.resize(end - begin + 1);
  raw.ringNode[0] = 0;
  for (std::size_t f = begin; f < end; ++f)
    raw.ringNode[f - begin + 1] = raw.ringNode[f - begin] + ringSize(tiles, rings, f);
  // Each ring's keys in its place, the rings on the threads.
  resizeHuge(raw.key, std::size_t(raw.ringNode.back()));
  const int64_t stride = width + 1;
  const auto key = [&](int64_t id) {
    const int64_t cell = id >> 2, s = id & 3;
    const int64_t y = cell / width, x = cell - y * width;
    return dem::detail::edgeStartRow(y, int(s)) * stride + dem::detail::edgeStartColumn(x, int(s));
  };
  parallelFor(int64_t(end - begin), 256, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      const Found& ring = rings.found[begin + std::size_t(i)];
      int64_t* out = raw.key.data() + raw.ringNode[std::size_t(i)];
      if (ring.tile >= 0)
      {
        const TilePieces& tile = tiles[std::size_t(ring.tile)];
        const Ring& r = tile.rings[std::size_t(ring.begin)];
        for (int64_t k = r.turnsBegin; k < r.turnsEnd; ++k)
          *out++ = key(tile.turns[std::size_t(k)]);
      }
      else
        for (int64_t k = ring.begin; k < ring.end; ++k)
          *out++ = key(rings.joined[std::size_t(k)]);
    }
  }, &control);
  return raw;
}

// Band k of `some` as a BandPolygons of one band.
BandPolygons bandOf(const BandPolygons& some, std::size_t k)
{
  BandPolygons one;
  const int64_t p0 = some.bandPolygon[k], p1 = some.bandPolygon[k + 1];
  const int64_t r0 = some.polygonRing[std::size_t(p0)], r1 = some.polygonRing[std::size_t(p1)];
  const int64_t v0 = some.ringPoint[std::size_t(r0)], v1 = some.ringPoint[std::size_t(r1)];
  one.bandPolygon = {0, p1 - p0};
  for (int64_t p = p0; p <= p1; ++p)
    one.polygonRing.push_back(some.polygonRing[std::size_t(p)] - r0);
  for (int64_t r = r0; r <= r1; ++r)
    one.ringPoint.push_back(some.ringPoint[std::size_t(r)] - v0);
  one.x.assign(some.x.begin() + v0, some.x.begin() + v1);
  one.y.assign(some.y.begin() + v0, some.y.begin() + v1);
  return one;
}

// Appends the bands of `some` to `all`, after its own (taking its arrays where `all` has none).
void appendBands(BandPolygons& all, BandPolygons&& some)
{
  if (all.bandPolygon.empty())
  {
    all = std::move(some);
    return;
  }
  const int64_t polygons = all.bandPolygon.back(), rings = all.polygonRing.back(), points = all.ringPoint.back();
  for (std::size_t k = 1; k < some.bandPolygon.size(); ++k)
    all.bandPolygon.push_back(polygons + some.bandPolygon[k]);
  for (std::size_t q = 1; q < some.polygonRing.size(); ++q)
    all.polygonRing.push_back(rings + some.polygonRing[q]);
  for (std::size_t r = 1; r < some.ringPoint.size(); ++r)
    all.ringPoint.push_back(points + some.ringPoint[r]);
  all.x.insert(all.x.end(), some.x.begin(), some.x.end());
  all.y.insert(all.y.end(), some.y.begin(), some.y.end());
}

// The polygons of each label 0 .. count - 1 in turn: given to `onBand` (with the label's cells and
// area from `counts`) and dropped, or, without it, gathered into one BandPolygons. Labels are
// assembled together, side by side on the threads, while their rings' corners number at most
// `groupCorners` (a label with more goes alone).
BandPolygons labelsPolygons(std::vector<TilePieces>& tiles, int32_t count, int64_t width, int64_t height,
                            const RunControl& control, int threads, int64_t groupCorners, const TiledBands* counts,
                            const BandObserver& onBand, StageTimes& times)
{
  ScopedStage joining(times, "bands (pieces joined)");
  const JoinedRings rings = joinPieces(tiles, control);
  joining.stop();
  ScopedStage polygons(times, "bands (polygons)");
  // Each label's first ring in rings.found (sorted by label), and its corners.
  std::vector<std::size_t> ringOf(std::size_t(count) + 1, 0);
  std::vector<int64_t> corners(std::size_t(count), 0);
  for (std::size_t f = 0, k = 0; k < std::size_t(count); ++k)
  {
    ringOf[k] = f;
    for (; f < rings.found.size() && rings.found[f].label == int32_t(k); ++f)
      corners[k] += ringSize(tiles, rings, f);
    ringOf[k + 1] = f;
  }
  BandPolygons all;
  for (int32_t first = 0; first < count;)
  {
    int32_t group = 1;
    int64_t together = corners[std::size_t(first)];
    while (first + group < count && together + corners[std::size_t(first + group)] <= groupCorners)
      together += corners[std::size_t(first + group++)];
    ScopedStage listing(times, "bands (polygons: corners listed)");
    RawRings raw = labelRings(tiles, rings, ringOf, first, group, width, height, threads, control);
    listing.stop();
    ScopedStage assembling(times, "bands (polygons: rings assembled)");
    BandPolygons some = dem::detail::polygonsFromRings(std::move(raw), width, control, threads);
    assembling.stop();
    ScopedStage handing(times, "bands (polygons: handed over)");
    if (!onBand)
      appendBands(all, std::move(some));
    for (int32_t k = 0; k < group && onBand; ++k)
    {
      BandPolygons one = bandOf(some, std::size_t(k));
      onBand(first + k, counts->bandCells[std::size_t(first + k)], counts->bandArea[std::size_t(first + k)], one);
    }
    first += group;
  }
  return all;
}

}  // namespace

TiledBands bandsTiled(const RasterSource<double>& minutes, const RowSizes& rows, double interval, int32_t bands,
                      RasterSink<double>* copy, const TiledOptions& options, const RunControl& control,
                      TiledReport* report, const BandObserver& onBand, const std::vector<uint8_t>* tilesWithTimes)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  if (!(interval > 0) || !std::isfinite(interval))
    throw InvalidInput("the interval must be a positive number of minutes");
  if (bands < 1)
    throw InvalidInput("there must be at least one band");
  const TileLayout layout =
    detail::beginTiledRun(minutes.width(), minutes.height(), rows, options, kBandsBytesPerTileCell, 1, out);
  std::vector<TilePieces> bandPieces(std::size_t(layout.count())), shedPieces(std::size_t(layout.count()));
  // Each tile's cells per band and row, for the areas.
  struct RowCount
  {
    int32_t band;
    int64_t row, cells;
  };
  std::vector<std::vector<RowCount>> tileRows(std::size_t(layout.count()));
  const bool skipping = tilesWithTimes && int64_t(tilesWithTimes->size()) == layout.count();
  struct Buffers
  {
    std::vector<double> times, copied;
    std::vector<int32_t> band, shed;
    std::vector<uint8_t> sides, entered;
  };
  detail::Reused<Buffers> buffers;
  // Whether a tile holds no time (the coordinator's word, in a distributed run).
  detail::ToTiles<uint8_t> timeless(
    options, layout.count(), [&](int64_t i) { return uint8_t(skipping && !(*tilesWithTimes)[std::size_t(i)]); },
    [](Archive& a, uint8_t& v) { a.value(v); });
  TileTraffic traffic;
  traffic.in = [&](int64_t i, Archive& a) { timeless.traffic(i, a); };
  traffic.out = [&](int64_t i, Archive& a) {
    for (TilePieces* pieces : {&bandPieces[std::size_t(i)], &shedPieces[std::size_t(i)]})
    {
      a.vector(pieces->chains);
      a.vector(pieces->rings);
      a.vector(pieces->turns);
    }
    a.vector(tileRows[std::size_t(i)]);
  };
  detail::forEachTile(layout, 1, "bands (labels, boundaries)", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto b = buffers.take();
    if (timeless.get(i))
    {
      if (copy)
      {
        assignHuge(b->copied, std::size_t(t.cells()), std::numeric_limits<double>::quiet_NaN());
        copy->write(t, b->copied.data());
      }
      return;
    }
    std::vector<double>& times = b->times;
    detail::readWithHalo(minutes, t, std::numeric_limits<double>::quiet_NaN(), times);
    const int64_t pw = t.width + 2, cells = pw * (t.height + 2);
    std::vector<int32_t>& band = b->band;
    std::vector<int32_t>& shed = b->shed;
    resizeHuge(band, std::size_t(cells));
    resizeHuge(shed, std::size_t(cells));
    for (int64_t p = 0; p < cells; ++p)
    {
      const bool inside = !std::isnan(times[std::size_t(p)]);
      band[std::size_t(p)] = inside ? dem::detail::bandOfTime(times[std::size_t(p)], interval) : -1;
      shed[std::size_t(p)] = inside ? 0 : -1;
    }
    // Each row's cells per band, counted in a dense array (the bands a row touches, listed).
    std::vector<RowCount>& mine = tileRows[std::size_t(i)];
    std::vector<int64_t> inRow(static_cast<std::size_t>(bands), 0);
    std::vector<int32_t> touched;
    for (int64_t y = 0; y < t.height; ++y)
    {
      for (int64_t x = 0; x < t.width; ++x)
      {
        const int32_t k = band[std::size_t((y + 1) * pw + x + 1)];
        if (k < 0)
          continue;
        if (k >= bands)
          throw InvalidInput("a travel time lies past the last band");
        if (inRow[std::size_t(k)]++ == 0)
          touched.push_back(k);
      }
      for (const int32_t k : touched)
      {
        mine.push_back(RowCount{k, t.y0 + y, inRow[std::size_t(k)]});
        inRow[std::size_t(k)] = 0;
      }
      touched.clear();
    }
    tracePieces(band, t, layout.width, bands, bandPieces[std::size_t(i)], b->sides, b->entered);
    tracePieces(shed, t, layout.width, 1, shedPieces[std::size_t(i)], b->sides, b->entered);
    if (copy)
    {
      detail::withoutHalo(times, t, b->copied);
      copy->write(t, b->copied.data());
    }
  }, traffic);
  buffers.clear();
  out.passes = 1;
  TiledBands result;
  if (!detail::holdsGraph(options))  // a worker: the coordinator assembles the bands
    return result;
  // Cells per band and row, for the areas (band-major, then row: the order of the sums below).
  std::map<std::pair<int32_t, int64_t>, int64_t> perRow;
  for (const std::vector<RowCount>& mine : tileRows)
    for (const RowCount& c : mine)
      perRow[{c.band, c.row}] += c.cells;
  std::vector<std::vector<RowCount>>().swap(tileRows);
  result.bandCells.assign(std::size_t(bands), 0);
  result.bandArea.assign(std::size_t(bands), 0.0);
  for (const auto& [key, n] : perRow)
  {
    const std::size_t k = std::size_t(key.first), y = std::size_t(key.second);
    result.bandCells[k] += n;
    result.bandArea[k] += double(n) * (rows.cellWidth[y] * rows.cellHeight[y]);
  }
  const int threads = options.threads;
  // Bands assembled together hold about 40 bytes a corner: an eighth of the corners of the cells of
  // the tiles in flight (whose memory is free by now) keeps them within the tiles' working memory.
  const int64_t groupCorners =
    int64_t(std::max(1, threads > 0 ? threads : defaultThreadCount())) * layout.tileWidth * layout.tileHeight / 8;
  result.watershed = labelsPolygons(shedPieces, 1, layout.width, layout.height, control, threads, groupCorners,
                                    nullptr, nullptr, out.times);
  std::vector<TilePieces>().swap(shedPieces);
  result.bands = labelsPolygons(bandPieces, bands, layout.width, layout.height, control, threads, groupCorners,
                                &result, onBand, out.times);
  return result;
}

}  // namespace gpugeo::dem::tiled
