// The tiled flat mask (tiled_dem.h): Barnes et al.'s (2014) flats of dem.h, tile by tile.
//
// The steps towards the outlet and from higher ground are breadth-first distances through the flat
// cells, and a flat may wind through many tiles. In a first round each tile finds its flat cells and
// its distances from its own sources, keeping them in the scratch folder and its perimeter's in
// memory; in later rounds each tile whose neighbours' perimeters changed lowers its distances from
// them (a breadth-first pass from the cells where a shorter way comes in, not the whole tile again),
// until no perimeter changes (Bellman-Ford over the tiles: the
// distances only fall, and end at the whole grid's, as a shortest path through a tile is the tile's
// own shortest path between the cells where it enters and leaves). Then the equal-elevation
// components, whose highest count of steps from higher ground the mask needs: labelled in each tile,
// joined through the perimeters by union-find, with their highest count gathered per component. A
// last pass writes the mask.
//
// On the GPU (tile_cuda.h's flatTileCuda) a tile's state stays on the device between rounds while
// TiledOptions::gpuKeepBytes allows, and a visit lowers its distances from the ring's new ones; a
// tile not kept is relaxed again from its own sources and the ring's. Both give what the CPU's
// lowering gives (the distances are the least over the same ways in), and the visit finds the
// tile's components with them. A tile's last visit sees its neighbours' final perimeters, so its
// components then are final too, and the pass for them is not needed: the GPU's run is the rounds
// and the mask.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dem/detail/dem_math.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using dem::detail::isNoData;
using detail::forPerimeter;
using detail::TileLayout;

constexpr int64_t kPad = 2;  // flat cells of the halo's first ring need their own neighbours

// One tile's cells with a halo of two: elevations, which cells (of the tile and the halo's first
// ring) are flat, and the two distances through the flats.
struct FlatTile
{
  Window t;
  int64_t pw = 0;
  int64_t offset[8];
  std::vector<float> z;
  std::vector<uint8_t> flat;
  std::vector<int32_t> towards, away;  // 0: not reached

  int64_t at(int64_t x, int64_t y) const { return (y + kPad) * pw + x + kPad; }  // x, y within the tile
  bool inTile(int64_t p) const
  {
    const int64_t x = p % pw - kPad, y = p / pw - kPad;
    return x >= 0 && y >= 0 && x < t.width && y < t.height;
  }
};

// The perimeter distances every tile keeps between rounds (0: not reached).
struct Perimeters
{
  std::vector<std::vector<int32_t>> towards, away;
};

// What a visit reads of its neighbours: their perimeter distances on its ring (detail::ringOf's, 0
// off the raster and where not reached), as flatTileCuda takes them.
struct Rings
{
  std::vector<int32_t> towards, away;
};

void setGeometry(const Window& t, FlatTile& f)
{
  f.t = t;
  f.pw = t.width + 2 * kPad;
  for (int d = 0; d < 8; ++d)
    f.offset[d] = kDy[d] * f.pw + kDx[d];
}

void readFlatTile(const RasterSource<float>& filled, const Window& t, FlatTile& f)
{
  setGeometry(t, f);
  detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), f.z, kPad);
  // Flat (dem.h): valid, no neighbour NaN (not an edge cell: NaN stands for off the grid too), no
  // neighbour lower; for the tile and the halo's first ring.
  f.flat.assign(f.z.size(), 0);
  for (int64_t y = -1; y <= t.height; ++y)
    for (int64_t x = -1; x <= t.width; ++x)
    {
      const int64_t p = f.at(x, y);
      const float v = f.z[std::size_t(p)];
      if (isNoData(v))
        continue;
      bool flat = true;
      for (int d = 0; d < 8 && flat; ++d)
        flat = f.z[std::size_t(p + f.offset[d])] >= v;  // false for NaN
      f.flat[std::size_t(p)] = flat;
    }
}

// Breadth-first spreading through the tile's flat cells from `seeds` (distance, cell), in rising
// order of distance, each step one more: a cell takes a distance where it has none (0) or a larger
// one. Only tile cells are reached. Returns whether any cell's distance changed.
bool spread(const FlatTile& f, std::vector<std::pair<int32_t, int64_t>> seeds, std::vector<int32_t>& dist)
{
  std::sort(seeds.begin(), seeds.end());
  const auto lowers = [&](int64_t p, int64_t to) { return dist[std::size_t(p)] == 0 || to < dist[std::size_t(p)]; };
  std::vector<int64_t> current, next;
  std::size_t s = 0;
  int64_t level = 0;
  bool changed = false;
  while (s < seeds.size() || !current.empty())
  {
    if (current.empty())
      level = seeds[s].first;
    for (; s < seeds.size() && seeds[s].first == level; ++s)
      if (lowers(seeds[s].second, level))
      {
        dist[std::size_t(seeds[s].second)] = int32_t(level);
        current.push_back(seeds[s].second);
      }
    for (const int64_t p : current)
      for (int d = 0; d < 8; ++d)
      {
        const int64_t n = p + f.offset[d];
        if (f.flat[std::size_t(n)] && f.inTile(n) && lowers(n, level + 1))
        {
          dist[std::size_t(n)] = int32_t(level + 1);
          next.push_back(n);
        }
      }
    changed = changed || !current.empty();
    current.swap(next);
    next.clear();
    ++level;
  }
  return changed;
}

// The two distances of a tile from its own sources (distance 1: flat cells beside a low edge, a
// non-flat cell of their elevation; or beside higher ground): the first round's, before any
// neighbour's perimeter is known (later rounds lower them with relax()).
void tileDistances(FlatTile& f, bool withAway)
{
  std::vector<std::pair<int32_t, int64_t>> towardsSeeds, awaySeeds;
  const Window& t = f.t;
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const int64_t p = f.at(x, y);
      if (!f.flat[std::size_t(p)])
        continue;
      const float v = f.z[std::size_t(p)];
      bool lowEdge = false, higher = false;
      for (int d = 0; d < 8; ++d)
      {
        const int64_t n = p + f.offset[d];
        lowEdge = lowEdge || (f.z[std::size_t(n)] == v && !f.flat[std::size_t(n)]);
        higher = higher || f.z[std::size_t(n)] != v;
      }
      if (lowEdge)
        towardsSeeds.emplace_back(1, p);
      if (higher && withAway)
        awaySeeds.emplace_back(1, p);
    }
  f.towards.assign(f.z.size(), 0);
  spread(f, std::move(towardsSeeds), f.towards);
  f.away.clear();
  if (withAway)
  {
    f.away.assign(f.z.size(), 0);
    spread(f, std::move(awaySeeds), f.away);
  }
}

std::vector<int32_t> perimeterOf(const FlatTile& f, const std::vector<int32_t>& dist)
{
  std::vector<int32_t> out(std::size_t(detail::perimeterSize(f.t)), 0);
  if (!dist.empty())  // empty: the distances from higher ground, not asked for
    forPerimeter(f.t, [&](int64_t x, int64_t y, int64_t k) { out[std::size_t(k)] = dist[std::size_t(f.at(x, y))]; });
  return out;
}

// The state the rounds keep of every tile between its visits, in raw files in the scratch folder:
// which cells are flat, and the two distances. The files go with it (their space for the stages after;
// the files close as the members go, just after).
struct FlatState
{
  std::string folder;
  bool owner;
  RawFileRaster<uint8_t> flat;
  RawFileRaster<int32_t> towards, away;
  // create: new files (a run of one, or the coordinator's); else the coordinator's, which a worker
  // opens when it first reads or writes them.
  FlatState(const std::string& scratch, int64_t width, int64_t height, bool create)
    : folder(scratch),
      owner(create),
      flat(folder + "/flat.u8", width, height, modeOf(create)),
      towards(folder + "/towards.i32", width, height, modeOf(create)),
      away(folder + "/away.i32", width, height, modeOf(create))
  {
  }
  ~FlatState()
  {
    if (!owner)  // a worker's: the coordinator's files, which it removes
      return;
    std::error_code ignored;
    for (const char* name : {"/flat.u8", "/towards.i32", "/away.i32"})
      std::filesystem::remove(folder + name, ignored);
  }
  static RawFile::Mode modeOf(bool create) { return create ? RawFile::Mode::Create : RawFile::Mode::Update; }
  FlatState(const FlatState&) = delete;
  FlatState& operator=(const FlatState&) = delete;
};

// A padded array from a tile's own cells (the halo zero).
template <typename T>
std::vector<T> padded(const FlatTile& f, const std::vector<T>& cells)
{
  std::vector<T> out(std::size_t(f.pw * (f.t.height + 2 * kPad)), T(0));
  for (int64_t y = 0; y < f.t.height; ++y)
    std::copy(cells.begin() + y * f.t.width, cells.begin() + (y + 1) * f.t.width, out.begin() + f.at(0, y));
  return out;
}

// A padded array's tile cells.
template <typename T>
std::vector<T> unpadded(const FlatTile& f, const std::vector<T>& cells)
{
  std::vector<T> out(std::size_t(f.t.cells()));
  for (int64_t y = 0; y < f.t.height; ++y)
    std::copy(cells.begin() + f.at(0, y), cells.begin() + f.at(0, y) + f.t.width, out.begin() + y * f.t.width);
  return out;
}

void saveState(const FlatTile& f, FlatState& state, bool withAway)
{
  state.flat.write(f.t, unpadded(f, f.flat).data());
  state.towards.write(f.t, unpadded(f, f.towards).data());
  if (withAway)
    state.away.write(f.t, unpadded(f, f.away).data());
}

template <typename T>
std::vector<T> loadPadded(const FlatTile& f, const RasterSource<T>& source)
{
  std::vector<T> cells(std::size_t(f.t.cells()));
  source.read(f.t, cells.data());
  return padded(f, cells);
}

// Lowers a tile's distances `dist` (padded) where its neighbours' perimeter distances on its ring
// (detail::ringOf's) now give a shorter way in, and from there on through the tile's flat cells.
// Returns whether any fell.
bool relax(FlatTile& f, const std::vector<int32_t>& ring, std::vector<int32_t>& dist)
{
  std::vector<std::pair<int32_t, int64_t>> seeds;
  detail::forRing(f.t, ring, [&](int64_t x, int64_t y, int32_t d) {
    if (d <= 0)
      return;
    const int64_t h = f.at(x, y);
    for (int m = 0; m < 8; ++m)
    {
      const int64_t n = h + f.offset[m];
      if (f.inTile(n) && f.flat[std::size_t(n)] && (dist[std::size_t(n)] == 0 || d + 1 < dist[std::size_t(n)]))
        seeds.emplace_back(d + 1, n);
    }
  });
  return spread(f, std::move(seeds), dist);
}

// The equal-elevation components of a tile's valid cells (8-connected), as each cell's root in a
// union-find over the tile's cells (y * width + x; -1 for nodata).
std::vector<int32_t> tileComponents(const FlatTile& f)
{
  const Window& t = f.t;
  std::vector<int32_t> root(std::size_t(t.cells()), -1);
  const auto find = [&](int32_t i) {
    while (root[std::size_t(i)] != i)
      i = root[std::size_t(i)] = root[std::size_t(root[std::size_t(i)])];
    return i;
  };
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const float v = f.z[std::size_t(f.at(x, y))];
      if (isNoData(v))
        continue;
      const int32_t c = int32_t(y * t.width + x);
      root[std::size_t(c)] = c;
      // The neighbours already visited: W, NW, N, NE.
      for (const int d : {4, 5, 6, 7})
      {
        const int64_t nx = x + kDx[d], ny = y + kDy[d];
        if (nx < 0 || ny < 0 || nx >= t.width || f.z[std::size_t(f.at(nx, ny))] != v)
          continue;
        const int32_t a = find(c), b = find(int32_t(ny * t.width + nx));
        root[std::size_t(std::max(a, b))] = std::min(a, b);
      }
    }
  for (int32_t i = 0; i < int32_t(root.size()); ++i)
    if (root[std::size_t(i)] >= 0)
      root[std::size_t(i)] = find(i);
  return root;
}

// What the components pass keeps of a tile: for each perimeter cell, the place of its component's
// first perimeter cell (-1 on nodata), and for that first cell the component's highest count of
// steps from higher ground within the tile.
struct TileComponents
{
  std::vector<int32_t> first;
  std::vector<int32_t> highest;
};

// TileComponents from a GPU visit's components per perimeter place.
TileComponents componentsOf(const detail::FlatTileResult& visit)
{
  TileComponents mine;
  mine.first.assign(visit.component.size(), -1);
  mine.highest.assign(visit.component.size(), 0);
  std::unordered_map<int32_t, int32_t> firstOf;
  for (std::size_t k = 0; k < visit.component.size(); ++k)
  {
    if (visit.component[k] < 0)
      continue;
    const auto [at, isNew] = firstOf.emplace(visit.component[k], int32_t(k));
    if (isNew)
      mine.highest[k] = visit.highest[k];
    mine.first[k] = at->second;
  }
  return mine;
}

// The perimeter cells' elevations of a tile read with flats' halo.
std::vector<float> perimeterElevations(const FlatTile& f)
{
  std::vector<float> z(std::size_t(detail::perimeterSize(f.t)));
  forPerimeter(f.t, [&](int64_t x, int64_t y, int64_t k) { z[std::size_t(k)] = f.z[std::size_t(f.at(x, y))]; });
  return z;
}

// What the flat mask's steps share.
struct FlatRun
{
  const RasterSource<float>& filled;
  const TileLayout& layout;
  const TiledOptions& options;
  const RunControl& control;
  TiledReport& out;
  bool withAway = false;
  bool gpu = false;
  std::optional<FlatState> state;            // the CPU's tiles between rounds
  std::unique_ptr<detail::FlatTilesOnGpu> onGpu;  // the GPU's tiles between rounds, as many as kept
  Perimeters perimeters;                     // every tile's perimeter distances
  std::vector<TileComponents> components;    // Combined: every tile's components on its perimeter
  std::vector<std::vector<float>> perimeterZ;  // and its perimeter's elevations
  std::vector<int64_t> firstNode;            // each tile's first node in the joined components
  std::vector<int64_t> parent;               // the joined components (each node pointing at its root)
  std::vector<int32_t> highest;              // at each root: the greatest distance from higher ground
  detail::Reused<FlatTile> gpuVisits;        // the GPU visits' host arrays, reused
  detail::Reused<std::vector<int32_t>> gpuMasks;

  FlatRun(const RasterSource<float>& f, const TileLayout& l, const TiledOptions& o, const RunControl& c, TiledReport& r)
    : filled(f), layout(l), options(o), control(c), out(r)
  {
  }
};

// A round's visit to tile i on the CPU: the first reads the DEM and finds the distances from the
// tile's own sources; the later ones lower the kept distances from the neighbours' perimeters.
void visitOnCpu(FlatRun& run, int64_t i, bool firstVisit, const Rings& rings, Perimeters& fresh)
{
  FlatTile f;
  const Window t = run.layout.tile(i);
  FlatState& state = *run.state;
  if (firstVisit)
  {
    readFlatTile(run.filled, t, f);
    tileDistances(f, run.withAway);
    saveState(f, state, run.withAway);
  }
  else
  {
    setGeometry(t, f);
    f.flat = loadPadded(f, state.flat);
    f.towards = loadPadded(f, state.towards);
    if (relax(f, rings.towards, f.towards))
      state.towards.write(t, unpadded(f, f.towards).data());
    if (run.withAway)
    {
      f.away = loadPadded(f, state.away);
      if (relax(f, rings.away, f.away))
        state.away.write(t, unpadded(f, f.away).data());
    }
    else
      f.away.clear();
  }
  fresh.towards[std::size_t(i)] = perimeterOf(f, f.towards);
  fresh.away[std::size_t(i)] = perimeterOf(f, f.away);
}

// Tile i on the GPU (flatTileCuda) with the perimeters' distances on its ring, `f` holding its
// elevations after; with `joined`, its mask to `mask`.
detail::FlatTileResult flatTileOnGpu(const FlatRun& run, int64_t i, const Rings& rings, const int32_t* joined,
                                     int32_t* mask, FlatTile& f)
{
  const Window t = run.layout.tile(i);
  setGeometry(t, f);
  // A tile kept on the GPU since its last visit needs no elevations (f.z left empty).
  if (!run.onGpu || !run.onGpu->holds(i))
    detail::readWithHalo(run.filled, t, std::numeric_limits<float>::quiet_NaN(), f.z, kPad);
  else
    f.z.clear();
  const detail::GpuTurn turn(run.options.gpuTiles);
  return detail::flatTileCuda(f.z.empty() ? nullptr : f.z.data(), t.width, t.height, rings.towards.data(),
                              rings.away.data(), run.withAway, joined, mask, run.control, run.onGpu.get(), i);
}

// A round's visit to tile i on the GPU: the distances from the tile's sources and the ring's, and
// (Combined) its components, which are final after its last visit.
void visitOnGpu(FlatRun& run, int64_t i, const Rings& rings, Perimeters& fresh)
{
  const auto held = run.gpuVisits.take();
  FlatTile& f = *held;
  detail::FlatTileResult visit = flatTileOnGpu(run, i, rings, nullptr, nullptr, f);
  fresh.towards[std::size_t(i)] = std::move(visit.towards);
  fresh.away[std::size_t(i)] = std::move(visit.away);
  if (run.withAway)
  {
    run.components[std::size_t(i)] = componentsOf(visit);
    if (!f.z.empty())  // else kept from the visit that read them
      run.perimeterZ[std::size_t(i)] = perimeterElevations(f);
  }
}

// Each tile's rings as the perimeters stand (what a visit reads), made where they are held or sent
// with the tile.
detail::ToTiles<Rings> ringsToTiles(const FlatRun& run)
{
  return detail::ToTiles<Rings>(
    run.options, run.layout.count(),
    [&run](int64_t i) {
      const Window t = run.layout.tile(i);
      return Rings{detail::ringOf(run.layout, t, run.perimeters.towards, 0),
                   detail::ringOf(run.layout, t, run.perimeters.away, 0)};
    },
    [](Archive& a, Rings& r) {
      a.vector(r.towards);
      a.vector(r.away);
    });
}

// Rounds over the tiles until no perimeter distance changes; returns the number of rounds. In a
// distributed run the coordinator chooses each round's tiles and shares whether another round
// follows.
int distanceRounds(FlatRun& run)
{
  const int64_t count = run.layout.count();
  std::vector<uint8_t> active(std::size_t(count), 1);
  int rounds = 0;
  ScopedStage timing(run.out.times, "flats: distances (all rounds, with the coordinator's work)");
  detail::ToTiles<Rings> rings = ringsToTiles(run);
  for (bool changed = true; changed;)
  {
    ++rounds;
    std::vector<int64_t> work;
    for (int64_t i = 0; i < count; ++i)
      if (active[std::size_t(i)])
        work.push_back(i);
    Perimeters fresh;  // per tile: this round's perimeters of the tiles visited
    fresh.towards.resize(std::size_t(count));
    fresh.away.resize(std::size_t(count));
    TileTraffic traffic;
    traffic.in = [&](int64_t i, Archive& a) { rings.traffic(i, a); };
    traffic.out = [&](int64_t i, Archive& a) {
      a.vector(fresh.towards[std::size_t(i)]);
      a.vector(fresh.away[std::size_t(i)]);
      if (run.gpu && run.withAway)
      {
        a.vector(run.components[std::size_t(i)].first);
        a.vector(run.components[std::size_t(i)].highest);
        a.vector(run.perimeterZ[std::size_t(i)]);
      }
    };
    detail::forTiles(run.layout, work, rounds, "flats: distances (rounds)", run.options, run.control, run.out,
                     [&](int64_t i) {
                       const Rings mine = rings.get(i);
                       if (run.gpu)
                         visitOnGpu(run, i, mine, fresh);
                       else
                         visitOnCpu(run, i, rounds == 1, mine, fresh);
                     }, traffic);
    // The next round visits the tiles beside the perimeter cells that changed (a tile that reads
    // none of them would find nothing new).
    std::fill(active.begin(), active.end(), 0);
    changed = false;
    if (detail::holdsGraph(run.options))
    {
      for (const int64_t i : work)
      {
        std::vector<int32_t>& towards = run.perimeters.towards[std::size_t(i)];
        std::vector<int32_t>& away = run.perimeters.away[std::size_t(i)];
        std::vector<int32_t>& newTowards = fresh.towards[std::size_t(i)];
        std::vector<int32_t>& newAway = fresh.away[std::size_t(i)];
        if (newTowards == towards && newAway == away)
          continue;
        const Window t = run.layout.tile(i);
        forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
          if (newTowards[std::size_t(k)] != towards[std::size_t(k)] || newAway[std::size_t(k)] != away[std::size_t(k)])
            detail::forNeighboursInOtherTiles(run.layout, t, x, y,
                                              [&](int64_t j, int64_t, int64_t, int64_t) { active[std::size_t(j)] = 1; });
        });
        towards = std::move(newTowards);
        away = std::move(newAway);
      }
      changed = std::find(active.begin(), active.end(), uint8_t(1)) != active.end();
    }
    detail::share(run.options, [&](Archive& a) { a.value(changed); });
  }
  return rounds;
}

// The CPU's pass for the tiles' components (Combined): each tile's components on its perimeter, with
// their greatest distances from higher ground within the tile.
void componentsPass(FlatRun& run)
{
  detail::forEachTile(run.layout, run.out.passes + 1, "flats: components", run.options, run.control, run.out,
                      [&](int64_t i) {
    FlatTile f;
    readFlatTile(run.filled, run.layout.tile(i), f);
    f.away = loadPadded(f, run.state->away);
    const std::vector<int32_t> root = tileComponents(f);
    std::vector<int32_t> most(root.size(), 0);  // at each root: the highest count of its flat cells
    for (int64_t y = 0; y < f.t.height; ++y)
      for (int64_t x = 0; x < f.t.width; ++x)
      {
        const int32_t r = root[std::size_t(y * f.t.width + x)];
        if (r >= 0)
          most[std::size_t(r)] = std::max(most[std::size_t(r)], f.away[std::size_t(f.at(x, y))]);
      }
    TileComponents& mine = run.components[std::size_t(i)];
    const int64_t size = detail::perimeterSize(f.t);
    mine.first.assign(std::size_t(size), -1);
    mine.highest.assign(std::size_t(size), 0);
    std::vector<int32_t> firstOfRoot(root.size(), -1);
    forPerimeter(f.t, [&](int64_t x, int64_t y, int64_t k) {
      const int32_t r = root[std::size_t(y * f.t.width + x)];
      if (r < 0)
        return;
      if (firstOfRoot[std::size_t(r)] < 0)
      {
        firstOfRoot[std::size_t(r)] = int32_t(k);
        mine.highest[std::size_t(k)] = most[std::size_t(r)];
      }
      mine.first[std::size_t(k)] = firstOfRoot[std::size_t(r)];
    });
    run.perimeterZ[std::size_t(i)] = perimeterElevations(f);
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    a.vector(run.components[std::size_t(i)].first);
    a.vector(run.components[std::size_t(i)].highest);
    a.vector(run.perimeterZ[std::size_t(i)]);
  }});
  ++run.out.passes;
}

// The tiles' components joined across their perimeters by union-find, each root holding the joined
// component's greatest distance from higher ground.
void joinComponents(FlatRun& run)
{
  ScopedStage timing(run.out.times, "flats: components joined");
  const TileLayout& layout = run.layout;
  const int64_t count = layout.count();
  auto& parent = run.parent;
  const auto find = [&](int64_t v) {
    while (parent[std::size_t(v)] != v)
      v = parent[std::size_t(v)] = parent[std::size_t(parent[std::size_t(v)])];
    return v;
  };
  parent.resize(std::size_t(run.firstNode.back()));
  std::iota(parent.begin(), parent.end(), int64_t(0));
  run.highest.assign(parent.size(), 0);
  for (int64_t i = 0; i < count; ++i)
  {
    const Window t = layout.tile(i);
    const TileComponents& mine = run.components[std::size_t(i)];
    forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const int32_t own = mine.first[std::size_t(k)];
      if (own < 0)
        return;
      const float v = run.perimeterZ[std::size_t(i)][std::size_t(k)];
      detail::forNeighboursInOtherTiles(layout, t, x, y, [&](int64_t j, int64_t kn, int64_t, int64_t) {
        const int32_t theirs = run.components[std::size_t(j)].first[std::size_t(kn)];
        if (theirs < 0 || run.perimeterZ[std::size_t(j)][std::size_t(kn)] != v)
          return;
        const int64_t a = find(run.firstNode[std::size_t(i)] + own), b = find(run.firstNode[std::size_t(j)] + theirs);
        parent[std::size_t(std::max(a, b))] = std::min(a, b);
      });
    });
  }
  for (int64_t i = 0; i < count; ++i)
  {
    const TileComponents& mine = run.components[std::size_t(i)];
    for (std::size_t k = 0; k < mine.first.size(); ++k)
      if (mine.first[k] == int32_t(k))
      {
        const int64_t r = find(run.firstNode[std::size_t(i)] + int64_t(k));
        run.highest[std::size_t(r)] = std::max(run.highest[std::size_t(r)], mine.highest[k]);
      }
  }
  // Every node pointing at its root, so that the last pass only reads (on all threads).
  for (int64_t v = 0; v < int64_t(parent.size()); ++v)
    parent[std::size_t(v)] = find(v);
  run.perimeterZ.clear();
}

// For each perimeter place of tile i, the greatest distance from higher ground of its joined
// component (0 on nodata): what the mask of Combined needs of the joined components.
std::vector<int32_t> joinedOf(const FlatRun& run, int64_t i)
{
  std::vector<int32_t> joined(std::size_t(detail::perimeterSize(run.layout.tile(i))), 0);
  if (!run.withAway)
    return joined;
  const TileComponents& mine = run.components[std::size_t(i)];
  for (std::size_t k = 0; k < joined.size(); ++k)
    if (mine.first[k] >= 0)
      joined[k] = run.highest[std::size_t(run.parent[std::size_t(run.firstNode[std::size_t(i)] + mine.first[k])])];
  return joined;
}

// The last pass on the CPU: tile i's mask from its kept distances (and its components).
std::vector<int32_t> maskOnCpu(FlatRun& run, int64_t i, const std::vector<int32_t>& joined)
{
  FlatTile f;
  const Window t = run.layout.tile(i);
  setGeometry(t, f);
  f.towards = loadPadded(f, run.state->towards);
  std::vector<int32_t> cells(std::size_t(t.cells()), 0);
  if (!run.withAway)
  {
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
        cells[std::size_t(y * t.width + x)] = f.towards[std::size_t(f.at(x, y))];
    return cells;
  }
  detail::readWithHalo(run.filled, t, std::numeric_limits<float>::quiet_NaN(), f.z, kPad);
  f.away = loadPadded(f, run.state->away);
  const std::vector<int32_t> root = tileComponents(f);
  std::vector<int32_t> most(root.size(), 0);
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const int32_t r = root[std::size_t(y * t.width + x)];
      if (r >= 0)
        most[std::size_t(r)] = std::max(most[std::size_t(r)], f.away[std::size_t(f.at(x, y))]);
    }
  // Components that reach the perimeter take their joined component's highest count.
  std::vector<int32_t> firstOfRoot(root.size(), -1);
  forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
    const int32_t r = root[std::size_t(y * t.width + x)];
    if (r >= 0 && firstOfRoot[std::size_t(r)] < 0)
    {
      firstOfRoot[std::size_t(r)] = int32_t(k);
      most[std::size_t(r)] = joined[std::size_t(k)];
    }
  });
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const int64_t p = f.at(x, y);
      const int32_t towards = f.towards[std::size_t(p)], away = f.away[std::size_t(p)];
      if (towards == 0)
        continue;
      const int32_t top = most[std::size_t(root[std::size_t(y * t.width + x)])];
      cells[std::size_t(y * t.width + x)] = dem::detail::combinedFlatMask(towards, away, top);
    }
  return cells;
}

// The last pass on the GPU: tile i's distances again from the final perimeters on its rings, and its
// mask (into `cells`).
void maskOnGpu(FlatRun& run, int64_t i, const Rings& rings, const std::vector<int32_t>& joined,
               std::vector<int32_t>& cells)
{
  resizeHuge(cells, std::size_t(run.layout.tile(i).cells()));
  const auto held = run.gpuVisits.take();
  flatTileOnGpu(run, i, rings, joined.data(), cells.data(), *held);
}

}  // namespace

void flatMaskTiled(const RasterSource<float>& filled, const RowSizes& rows, RasterSink<int32_t>& mask,
                   FlatGradient gradient, const std::string& scratchFolder, const TiledOptions& options,
                   const RunControl& control, TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(filled.width(), filled.height(), rows, options, kFlatsBytesPerTileCell, kPad, out);
  FlatRun run(filled, layout, options, control, out);
  run.withAway = gradient == FlatGradient::Combined;
  // The GPU's rounds keep their state on the device (or none) and have no components pass, the CPU's
  // keep it in the scratch folder: a distributed run takes the GPU's path when every worker holds a
  // GPU, else the CPU's on every rank. On the GPUs a tile's later visit on a rank that keeps none of
  // it starts again from its elevations, as a tile not kept does; on a rank that kept it from an
  // earlier round it lowers those distances from the ring's, which ends at the same least distances
  // (the ring's only fall from round to round: tile_cuda.h). A rank's kept tiles stay until the mask
  // pass has visited them there, or the mask is done.
  run.gpu = detail::distributedRun(options)
              ? options.cluster->everyWorker(options.backend == Backend::Gpu, control)
              : options.backend == Backend::Gpu;
  const int64_t count = layout.count();
  run.perimeters.towards.resize(std::size_t(count));
  run.perimeters.away.resize(std::size_t(count));
  run.firstNode.assign(std::size_t(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i)
  {
    const int64_t size = detail::perimeterSize(layout.tile(i));
    run.firstNode[std::size_t(i) + 1] = run.firstNode[std::size_t(i)] + size;
    run.perimeters.towards[std::size_t(i)].assign(std::size_t(size), 0);
    run.perimeters.away[std::size_t(i)].assign(std::size_t(size), 0);
  }
  out.graphBytes = run.firstNode.back() * int64_t(4 * sizeof(int32_t));
  // The CPU's state between rounds, in files the coordinator creates; the workers of a distributed
  // run open them when their tiles first need them (RawFile::Mode::Update: the scratch folder is on a
  // file system the ranks share).
  if (!run.gpu)
    run.state.emplace(scratchFolder, layout.width, layout.height, detail::holdsGraph(options));
  if (run.gpu)
    run.onGpu = std::make_unique<detail::FlatTilesOnGpu>(count, options.gpuKeepBytes);
  if (run.withAway)
  {
    run.components.resize(std::size_t(count));
    run.perimeterZ.resize(std::size_t(count));
  }

  out.passes = distanceRounds(run);
  if (run.withAway)
  {
    if (!run.gpu)
      componentsPass(run);
    if (detail::holdsGraph(options))
      joinComponents(run);
  }
  // The mask: each tile reads its joined components' levels (Combined) and, on the GPU, its rings.
  detail::ToTiles<std::vector<int32_t>> joined(
    options, count, [&](int64_t i) { return joinedOf(run, i); }, detail::visitVector<int32_t>);
  detail::ToTiles<Rings> rings = ringsToTiles(run);
  TileTraffic traffic;
  traffic.in = [&](int64_t i, Archive& a) {
    joined.traffic(i, a);
    if (run.gpu)
      rings.traffic(i, a);
  };
  detail::forEachTile(layout, out.passes + 1, "flats: mask", options, control, out, [&](int64_t i) {
    const std::vector<int32_t> levels = joined.get(i);
    if (!run.gpu)
    {
      mask.write(layout.tile(i), maskOnCpu(run, i, levels).data());
      return;
    }
    const auto cells = run.gpuMasks.take();
    maskOnGpu(run, i, rings.get(i), levels, *cells);
    mask.write(layout.tile(i), cells->data());
  }, traffic);
  ++out.passes;
}

}  // namespace gpugeo::dem::tiled
