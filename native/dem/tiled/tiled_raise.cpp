// The tiled raising of flats (tiled_dem.h): dem.h's raiseFlats, tile by tile.
//
// Every flat cell is raised by its mask in float32 steps (a pass over the tiles, into the work
// raster); then cells left without a lower neighbour are raised, each to one step above its lowest
// neighbour, until none is left. dem.h shows that any order of those raises ends at the same DEM (the
// lowest in which those cells drain): so each tile raises its own cells against its halo as it
// stands, and rounds over the tiles whose neighbours' perimeters rose go on until no perimeter
// rises. A chain of overtaken cells along a tile border would take a round for each crossing
// (hundreds of rounds over a few tiles), so in one process a tile also raises a band of its
// neighbours' cells (read from the work raster as they stand; kept only for its own cells): every
// raise made from elevations at or below the final ones stays at or below them, and a tile's own
// cells drain against any higher halo, so the rounds end at the same DEM, in a few rounds. A tile
// drained once is drained again from its perimeter and band only (only its frame can have risen
// since), writes back only the box of its cells that rose, and is kept in memory between its visits
// while TiledOptions::hostKeepBytes allows.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "dem/detail/dem_math.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::isNoData;
using detail::forPerimeter;
using detail::TileLayout;

// The current (raised) elevations of every tile's perimeter cells, as the last round left them.
using PerimeterLevels = std::vector<std::vector<float>>;

// One tile with a frame of `pad` cells a side: the filled elevations, the mask and the current
// elevations. The frame's outer ring is held as it is; the `pad` - 1 cells inside it (the band, of
// the neighbouring tiles) may be raised here too, tentatively: only the tile's own cells are kept.
struct RaiseTile
{
  Window t;
  int64_t pad = 1;
  int64_t pw = 0;
  int64_t offset[8];
  std::vector<float> filled, current;
  std::vector<int32_t> mask;

  int64_t at(int64_t x, int64_t y) const { return (y + pad) * pw + x + pad; }
  bool inTile(int64_t p) const
  {
    const int64_t x = p % pw - pad, y = p / pw - pad;
    return x >= 0 && y >= 0 && x < t.width && y < t.height;
  }
  // The tile's cells and its band: all but the frame's outer ring.
  bool raisable(int64_t p) const
  {
    const int64_t x = p % pw, y = p / pw;
    const int64_t ph = t.height + 2 * pad;
    return x > 0 && y > 0 && x < pw - 1 && y < ph - 1;
  }
  bool noLowerNeighbour(const std::vector<float>& z, int64_t p) const
  {
    const float v = z[std::size_t(p)];
    for (int d = 0; d < 8; ++d)
      if (z[std::size_t(p + offset[d])] < v)
        return false;
    return true;
  }
  // dem.h's cells to raise in turn: valid, not edge cells, no lower neighbour now, and draining in
  // the filled DEM (a lower neighbour there, or a mask).
  bool undrained(int64_t p) const
  {
    if (isNoData(current[std::size_t(p)]))
      return false;
    for (int d = 0; d < 8; ++d)
      if (isNoData(filled[std::size_t(p + offset[d])]))
        return false;  // an edge cell (a neighbour off the grid or on nodata)
    return noLowerNeighbour(current, p) && (mask[std::size_t(p)] > 0 || !noLowerNeighbour(filled, p));
  }
};

void readRaiseTile(const RasterSource<float>& filled, const RasterSource<int32_t>& mask, const Window& t,
                   RaiseTile& r, int64_t pad = 1)
{
  r.t = t;
  r.pad = pad;
  r.pw = t.width + 2 * pad;
  for (int d = 0; d < 8; ++d)
    r.offset[d] = kDy[d] * r.pw + kDx[d];
  detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), r.filled, pad);
  detail::readWithHalo(mask, t, int32_t(0), r.mask, pad);
}

// The frame of `r.current` (its `pad` cells a side around the tile) as `work` holds it now, the rest
// as it is: four strips, clipped to the grid (what lies off it stays NaN).
void readFrame(const RasterSource<float>& work, RaiseTile& r)
{
  const Window& t = r.t;
  const int64_t p = r.pad;
  const Window strips[4] = {{t.x0 - p, t.y0 - p, t.width + 2 * p, p},
                            {t.x0 - p, t.y0 + t.height, t.width + 2 * p, p},
                            {t.x0 - p, t.y0, p, t.height},
                            {t.x0 + t.width, t.y0, p, t.height}};
  for (const Window& s : strips)
  {
    const int64_t x0 = std::max<int64_t>(s.x0, 0), y0 = std::max<int64_t>(s.y0, 0);
    const int64_t x1 = std::min(s.x0 + s.width, work.width()), y1 = std::min(s.y0 + s.height, work.height());
    if (x1 <= x0 || y1 <= y0)
      continue;
    work.readStrided(Window{x0, y0, x1 - x0, y1 - y0}, r.current.data() + r.at(x0 - t.x0, y0 - t.y0), r.pw);
  }
}

// The halo of `r.current` from the neighbours' perimeter levels on its ring (detail::ringOf's, NaN off
// the grid).
void haloFromRing(RaiseTile& r, const std::vector<float>& ring)
{
  detail::forRing(r.t, ring, [&](int64_t x, int64_t y, float level) { r.current[std::size_t(r.at(x, y))] = level; });
}

// Tiles kept between the rounds (TiledOptions::hostKeepBytes), the least recently visited given up
// first. A tile is taken out while a thread works on it and given back after: its cells are as its
// last visit left them (no other tile writes them); its frame is read again.
class KeptTiles
{
public:
  explicit KeptTiles(int64_t bytes) : mBytes(bytes) {}

  bool take(int64_t i, RaiseTile& r)
  {
    std::lock_guard<std::mutex> lock(mLock);
    const auto found = mTiles.find(i);
    if (found == mTiles.end())
      return false;
    r = std::move(found->second.tile);
    mHeld -= bytesOf(r);
    mTiles.erase(found);
    return true;
  }

  void give(int64_t i, RaiseTile&& r, int64_t round)
  {
    const int64_t bytes = bytesOf(r);
    if (bytes > mBytes)
      return;
    std::lock_guard<std::mutex> lock(mLock);
    while (mHeld + bytes > mBytes)
    {
      auto oldest = mTiles.begin();
      for (auto it = mTiles.begin(); it != mTiles.end(); ++it)
        if (std::make_pair(it->second.round, it->first) < std::make_pair(oldest->second.round, oldest->first))
          oldest = it;
      mHeld -= bytesOf(oldest->second.tile);
      mTiles.erase(oldest);
    }
    mHeld += bytes;
    mTiles[i] = Kept{std::move(r), round};
  }

private:
  struct Kept
  {
    RaiseTile tile;
    int64_t round = 0;
  };
  static int64_t bytesOf(const RaiseTile& r)
  {
    return int64_t(r.filled.size() + r.current.size()) * int64_t(sizeof(float)) +
           int64_t(r.mask.size() * sizeof(int32_t));
  }

  const int64_t mBytes;
  int64_t mHeld = 0;
  std::mutex mLock;
  std::map<int64_t, Kept> mTiles;
};

// The band of the neighbours' cells that a tile raises with its own in one process: wide enough that
// a front of overtaken cells running along a tile border moves within one tile's visit instead of a
// round a cell: a 32nd of the tile's side (at least 1, at most 32 cells), so that the window grows
// little beyond the tile and its halo.
int64_t raiseBand(const TileLayout& layout)
{
  return std::clamp<int64_t>(std::min(layout.tileWidth, layout.tileHeight) / 32, 1, 32);
}

// The rows and columns of a tile's cells that rose in a drain (empty: none).
struct Risen
{
  int64_t x0 = std::numeric_limits<int64_t>::max(), y0 = std::numeric_limits<int64_t>::max(), x1 = -1, y1 = -1;

  bool any() const { return x1 >= 0; }
  void add(int64_t x, int64_t y)
  {
    x0 = std::min(x0, x);
    y0 = std::min(y0, y);
    x1 = std::max(x1, x);
    y1 = std::max(y1, y);
  }
};

// Raises the undrained cells of the tile and its band, lowest first, each to one step above its
// lowest neighbour, until none is left (the frame's outer ring held as it is). The search starts from
// every such cell (`whole`), or from the tile's perimeter and the band only: once a tile has been
// drained, only its frame can have changed (elevations only rise), and a cell of the tile left
// without a lower neighbour by that is a perimeter cell; the cells it then overtakes are found from
// it. Returns the box of the tile's cells that rose.
Risen drainTile(RaiseTile& r, bool whole)
{
  using Entry = std::pair<float, int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> open;
  const auto seed = [&](int64_t x, int64_t y) {
    if (r.undrained(r.at(x, y)))
      open.emplace(r.current[std::size_t(r.at(x, y))], r.at(x, y));
  };
  const int64_t band = r.pad - 1;
  for (int64_t y = -band; y < r.t.height + band; ++y)
  {
    const bool inner = y > 0 && y < r.t.height - 1 && !whole;  // rows whose tile cells need no seeding
    for (int64_t x = -band; x < r.t.width + band; ++x)
    {
      if (inner && x > 0 && x < r.t.width - 1)
        x = r.t.width - 1;  // on to the tile's last column
      seed(x, y);
    }
  }
  Risen risen;
  while (!open.empty())
  {
    const auto [level, p] = open.top();
    open.pop();
    if (level != r.current[std::size_t(p)] || !r.undrained(p))
      continue;
    float lowest = std::numeric_limits<float>::infinity();
    for (int d = 0; d < 8; ++d)
      lowest = std::min(lowest, r.current[std::size_t(p + r.offset[d])]);
    const float raisedTo = raiseBySteps(lowest, 1);
    if (!(raisedTo > r.current[std::size_t(p)]))
      continue;  // at the largest finite float: nothing above to raise it to
    r.current[std::size_t(p)] = raisedTo;
    if (r.inTile(p))
      risen.add(p % r.pw - r.pad, p / r.pw - r.pad);
    for (int d = 0; d < 8; ++d)
    {
      const int64_t n = p + r.offset[d];
      if (r.raisable(n) && r.current[std::size_t(n)] <= raisedTo && r.undrained(n))
        open.emplace(r.current[std::size_t(n)], n);
    }
  }
  return risen;
}

// The cells of `r` in the box `b` (tile coordinates), row-major, and the box as a window of the grid.
std::pair<Window, std::vector<float>> risenCells(const RaiseTile& r, const Risen& b)
{
  const Window w{r.t.x0 + b.x0, r.t.y0 + b.y0, b.x1 - b.x0 + 1, b.y1 - b.y0 + 1};
  std::vector<float> cells(std::size_t(w.cells()));
  for (int64_t y = 0; y < w.height; ++y)
    std::copy_n(r.current.begin() + r.at(b.x0, b.y0 + y), w.width, cells.begin() + y * w.width);
  return {w, std::move(cells)};
}

std::vector<float> perimeterLevels(const RaiseTile& r)
{
  std::vector<float> out(std::size_t(detail::perimeterSize(r.t)));
  forPerimeter(r.t, [&](int64_t x, int64_t y, int64_t k) { out[std::size_t(k)] = r.current[std::size_t(r.at(x, y))]; });
  return out;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b)
{
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return x == y || (isNoData(x) && isNoData(y));
         });
}

}  // namespace

RaisedCounts raiseFlatsTiled(const RasterSource<float>& filled, const RasterSource<int32_t>& mask,
                             const RowSizes& rows, RawFileRaster<float>& work, RasterSink<float>& raised,
                             const TiledOptions& options, const RunControl& control, TiledReport* report,
                             const RasterSource<float>* original, const FilledTileObserver& observe)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(filled.width(), filled.height(), rows, options, kRaiseBytesPerTileCell, 1, out);
  const int64_t count = layout.count();
  PerimeterLevels levels(static_cast<std::size_t>(count));
  int64_t perimeterCells = 0;
  for (int64_t i = 0; i < count; ++i)
    perimeterCells += detail::perimeterSize(layout.tile(i));
  out.graphBytes = perimeterCells * int64_t(2 * sizeof(float));

  // Pass 1: each cell raised by its mask, into the work raster; the perimeters kept.
  std::vector<int64_t> tileCounts(std::size_t(count), 0);  // raised by the mask, then in turn
  detail::forEachTile(layout, 1, "raise: by the mask", options, control, out, [&](int64_t i) {
    RaiseTile r;
    readRaiseTile(filled, mask, layout.tile(i), r);
    std::vector<float> cells(std::size_t(r.t.cells()));
    int64_t raisedByMask = 0;
    for (int64_t y = 0; y < r.t.height; ++y)
      for (int64_t x = 0; x < r.t.width; ++x)
      {
        const std::size_t p = std::size_t(r.at(x, y));
        const int32_t m = r.mask[p];
        const float v = r.filled[p];
        raisedByMask += m > 0 && !isNoData(v);
        cells[std::size_t(y * r.t.width + x)] = m > 0 ? raiseBySteps(v, m) : v;
      }
    work.write(r.t, cells.data());
    std::vector<float> perimeter(std::size_t(detail::perimeterSize(r.t)));
    forPerimeter(r.t, [&](int64_t x, int64_t y, int64_t k) {
      perimeter[std::size_t(k)] = cells[std::size_t(y * r.t.width + x)];
    });
    levels[std::size_t(i)] = std::move(perimeter);
    tileCounts[std::size_t(i)] = raisedByMask;
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    a.vector(levels[std::size_t(i)]);
    a.value(tileCounts[std::size_t(i)]);
  }});
  out.passes = 1;
  RaisedCounts counts;
  for (const int64_t raised : tileCounts)
    counts.raised += raised;

  // Rounds: each active tile drained against its neighbours' perimeters on its ring, until none rises
  // (in a distributed run the coordinator chooses each round's tiles and shares whether another
  // round follows).
  std::vector<uint8_t> active(std::size_t(count), 1);
  {
    ScopedStage timing(out.times, "raise: overtaken cells (all rounds, with the coordinator's work)");
    detail::ToTiles<std::vector<float>> rings(
      options, count,
      [&](int64_t i) { return detail::ringOf(layout, layout.tile(i), levels, std::numeric_limits<float>::quiet_NaN()); },
      detail::visitVector<float>);
    KeptTiles kept(detail::distributedRun(options) ? 0 : options.hostKeepBytes);
    // In one process a tile also raises a band of its neighbours' cells, read from the work raster
    // (a lock keeps each read whole against the other threads' writes); across processes its halo is
    // the ring of the neighbours' perimeters.
    const bool banded = !detail::distributedRun(options);
    const int64_t pad = banded ? 1 + raiseBand(layout) : 1;
    std::shared_mutex workLock;
    for (bool changed = true, firstRound = true; changed; firstRound = false)
    {
      ++out.passes;
      std::vector<int64_t> jobs;
      for (int64_t i = 0; i < count; ++i)
        if (active[std::size_t(i)])
          jobs.push_back(i);
      std::vector<std::vector<float>> fresh(static_cast<std::size_t>(count));  // the risen tiles' new perimeters
      std::vector<uint8_t> rose(std::size_t(count), 0);
      TileTraffic traffic;
      traffic.in = [&](int64_t i, Archive& a) { rings.traffic(i, a); };
      traffic.out = [&](int64_t i, Archive& a) {
        a.value(rose[std::size_t(i)]);
        a.vector(fresh[std::size_t(i)]);
      };
      detail::forTiles(layout, jobs, out.passes, "raise: overtaken cells (rounds)", options, control, out,
                       [&](int64_t i) {
                         RaiseTile r;
                         const bool wasKept = kept.take(i, r);
                         if (!wasKept)
                           readRaiseTile(filled, mask, layout.tile(i), r, pad);
                         if (banded)
                         {
                           std::shared_lock<std::shared_mutex> reading(workLock);
                           if (wasKept)
                             readFrame(work, r);
                           else
                             detail::readWithHalo(static_cast<const RasterSource<float>&>(work), r.t,
                                                  std::numeric_limits<float>::quiet_NaN(), r.current, pad);
                         }
                         else
                         {
                           if (!wasKept)
                             detail::readWithHalo(static_cast<const RasterSource<float>&>(work), r.t,
                                                  std::numeric_limits<float>::quiet_NaN(), r.current);
                           haloFromRing(r, rings.get(i));
                         }
                         // Perimeter seeds suffice after the first round because every tile is
                         // drained whole in it (all start active) and only tile i writes its cells.
                         const Risen risen = drainTile(r, firstRound);
                         if (risen.any())
                         {
                           rose[std::size_t(i)] = 1;
                           const auto [box, cells] = risenCells(r, risen);
                           {
                             std::unique_lock<std::shared_mutex> writing(workLock);
                             work.write(box, cells.data());
                           }
                           fresh[std::size_t(i)] = perimeterLevels(r);
                         }
                         kept.give(i, std::move(r), out.passes);
                       }, traffic);
      std::fill(active.begin(), active.end(), 0);
      changed = false;
      if (detail::holdsGraph(options))
        for (const int64_t i : jobs)
        {
          if (!rose[std::size_t(i)] || sameBits(fresh[std::size_t(i)], levels[std::size_t(i)]))
            continue;
          levels[std::size_t(i)] = std::move(fresh[std::size_t(i)]);
          changed = true;
          detail::markNeighbours(layout, i, active);
        }
      detail::share(options, [&](Archive& a) { a.value(changed); });
    }
  }

  // The last pass: the raised DEM written, the cells raised in turn counted (those above their
  // mask's raise).
  std::mutex observing;
  detail::forEachTile(layout, out.passes + 1, "raise: write", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    RaiseTile r;
    readRaiseTile(filled, mask, t, r);
    std::vector<float> cells(std::size_t(t.cells()));
    work.read(t, cells.data());
    int64_t inTurn = 0;
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
      {
        const std::size_t p = std::size_t(r.at(x, y));
        const float byMask = r.mask[p] > 0 ? raiseBySteps(r.filled[p], r.mask[p]) : r.filled[p];
        inTurn += !isNoData(byMask) && cells[std::size_t(y * t.width + x)] != byMask;
      }
    if (observe)
    {
      std::vector<float> input(std::size_t(t.cells()));
      (original ? *original : filled).read(t, input.data());
      std::lock_guard<std::mutex> lock(observing);
      observe(t, input.data(), cells.data());
    }
    raised.write(t, cells.data());
    tileCounts[std::size_t(i)] = inTurn;
  }, detail::sendBack(tileCounts));
  ++out.passes;
  for (const int64_t inTurn : tileCounts)
    counts.raisedInTurn += inTurn;
  return counts;
}

}  // namespace gpugeo::dem::tiled
