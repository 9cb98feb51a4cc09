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
#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "dem/detail/dem_math.h"
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
  RawFileRaster<uint8_t> flat;
  RawFileRaster<int32_t> towards, away;
  FlatState(const std::string& scratch, int64_t width, int64_t height)
    : folder(scratch),
      flat(folder + "/flat.u8", width, height),
      towards(folder + "/towards.i32", width, height),
      away(folder + "/away.i32", width, height)
  {
  }
  ~FlatState()
  {
    std::error_code ignored;
    for (const char* name : {"/flat.u8", "/towards.i32", "/away.i32"})
      std::filesystem::remove(folder + name, ignored);
  }
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

// Lowers a tile's distances `dist` (padded) where its neighbours' perimeter distances now give a
// shorter way in, and from there on through the tile's flat cells. Returns whether any fell.
bool relax(FlatTile& f, const TileLayout& layout, const std::vector<std::vector<int32_t>>& perimeter,
           std::vector<int32_t>& dist)
{
  std::vector<std::pair<int32_t, int64_t>> seeds;
  const Window& t = f.t;
  detail::forHaloRing(layout, t, [&](int64_t x, int64_t y, int64_t j, int64_t k) {
    const int32_t d = perimeter[std::size_t(j)][std::size_t(k)];
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

}  // namespace

void flatMaskTiled(const RasterSource<float>& filled, const RowSizes& rows, RasterSink<int32_t>& mask,
                   FlatGradient gradient, const std::string& scratchFolder, const TiledOptions& options,
                   const RunControl& control, TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(filled.width(), filled.height(), rows, options, kFlatsBytesPerTileCell, kPad, out);
  const bool withAway = gradient == FlatGradient::Combined;
  const int64_t count = layout.count();

  // Rounds until no perimeter distance changes.
  Perimeters perimeters;
  perimeters.towards.resize(std::size_t(count));
  perimeters.away.resize(std::size_t(count));
  int64_t perimeterCells = 0;
  for (int64_t i = 0; i < count; ++i)
  {
    const int64_t size = detail::perimeterSize(layout.tile(i));
    perimeterCells += size;
    perimeters.towards[std::size_t(i)].assign(std::size_t(size), 0);
    perimeters.away[std::size_t(i)].assign(std::size_t(size), 0);
  }
  out.graphBytes = perimeterCells * int64_t(4 * sizeof(int32_t));
  FlatState state(scratchFolder, layout.width, layout.height);
  std::vector<uint8_t> active(std::size_t(count), 1);
  int rounds = 0;
  {
    ScopedStage timing(out.times, "flats: distances (rounds)");
    for (bool changed = true; changed;)
    {
      ++rounds;
      std::vector<int64_t> work;
      for (int64_t i = 0; i < count; ++i)
        if (active[std::size_t(i)])
          work.push_back(i);
      Perimeters fresh;
      fresh.towards.resize(work.size());
      fresh.away.resize(work.size());
      std::mutex progress;
      int64_t done = 0;
      parallelFor(int64_t(work.size()), 1, options.threads, [&](int64_t b, int64_t e) {
        FlatTile f;
        for (int64_t w = b; w < e; ++w)
        {
          const Window t = layout.tile(work[std::size_t(w)]);
          if (rounds == 1)
          {
            // The first visit: the DEM read, the flats found, the distances from the tile's sources.
            readFlatTile(filled, t, f);
            tileDistances(f, withAway);
            saveState(f, state, withAway);
          }
          else
          {
            // Later visits: the tile's state, lowered from its neighbours' new perimeters.
            setGeometry(t, f);
            f.flat = loadPadded(f, state.flat);
            f.towards = loadPadded(f, state.towards);
            if (relax(f, layout, perimeters.towards, f.towards))
              state.towards.write(t, unpadded(f, f.towards).data());
            if (withAway)
            {
              f.away = loadPadded(f, state.away);
              if (relax(f, layout, perimeters.away, f.away))
                state.away.write(t, unpadded(f, f.away).data());
            }
            else
              f.away.clear();
          }
          fresh.towards[std::size_t(w)] = perimeterOf(f, f.towards);
          fresh.away[std::size_t(w)] = perimeterOf(f, f.away);
          std::lock_guard<std::mutex> lock(progress);
          ++done;
          if (options.onTile)
            options.onTile(rounds, done, int64_t(work.size()));
        }
      }, &control);
      if (control.isCanceled())
        throw Canceled();
      std::fill(active.begin(), active.end(), 0);
      changed = false;
      for (std::size_t w = 0; w < work.size(); ++w)
      {
        const int64_t i = work[w];
        if (fresh.towards[w] == perimeters.towards[std::size_t(i)] && fresh.away[w] == perimeters.away[std::size_t(i)])
          continue;
        perimeters.towards[std::size_t(i)] = std::move(fresh.towards[w]);
        perimeters.away[std::size_t(i)] = std::move(fresh.away[w]);
        changed = true;
        detail::markNeighbours(layout, i, active);
      }
    }
  }
  out.passes = rounds;

  // The components' highest count of steps from higher ground (Combined only): per tile, then joined.
  std::vector<int64_t> firstNode(std::size_t(count) + 1, 0);
  for (int64_t i = 0; i < count; ++i)
    firstNode[std::size_t(i) + 1] = firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  std::vector<int64_t> parent;
  std::vector<int32_t> highest;
  const auto find = [&](int64_t v) {
    while (parent[std::size_t(v)] != v)
      v = parent[std::size_t(v)] = parent[std::size_t(parent[std::size_t(v)])];
    return v;
  };
  if (withAway)
  {
    std::vector<TileComponents> components(static_cast<std::size_t>(count));
    std::vector<std::vector<float>> perimeterZ(static_cast<std::size_t>(count));
    detail::forEachTile(layout, rounds + 1, "flats: components", options, control, out, [&](int64_t i) {
      FlatTile f;
      readFlatTile(filled, layout.tile(i), f);
      f.away = loadPadded(f, state.away);
      const std::vector<int32_t> root = tileComponents(f);
      std::vector<int32_t> most(root.size(), 0);  // at each root: the highest count of its flat cells
      for (int64_t y = 0; y < f.t.height; ++y)
        for (int64_t x = 0; x < f.t.width; ++x)
        {
          const int32_t r = root[std::size_t(y * f.t.width + x)];
          if (r >= 0)
            most[std::size_t(r)] = std::max(most[std::size_t(r)], f.away[std::size_t(f.at(x, y))]);
        }
      TileComponents& mine = components[std::size_t(i)];
      const int64_t size = detail::perimeterSize(f.t);
      mine.first.assign(std::size_t(size), -1);
      mine.highest.assign(std::size_t(size), 0);
      perimeterZ[std::size_t(i)].resize(std::size_t(size));
      std::vector<int32_t> firstOfRoot(root.size(), -1);
      forPerimeter(f.t, [&](int64_t x, int64_t y, int64_t k) {
        perimeterZ[std::size_t(i)][std::size_t(k)] = f.z[std::size_t(f.at(x, y))];
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
    });
    ++out.passes;
    ScopedStage timing(out.times, "flats: components joined");
    parent.resize(std::size_t(firstNode.back()));
    std::iota(parent.begin(), parent.end(), int64_t(0));
    highest.assign(parent.size(), 0);
    for (int64_t i = 0; i < count; ++i)
    {
      const Window t = layout.tile(i);
      const TileComponents& mine = components[std::size_t(i)];
      forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
        const int32_t own = mine.first[std::size_t(k)];
        if (own < 0)
          return;
        const float v = perimeterZ[std::size_t(i)][std::size_t(k)];
        detail::forNeighboursInOtherTiles(layout, t, x, y, [&](int64_t j, int64_t kn, int64_t, int64_t) {
          const int32_t theirs = components[std::size_t(j)].first[std::size_t(kn)];
          if (theirs < 0 || perimeterZ[std::size_t(j)][std::size_t(kn)] != v)
            return;
          const int64_t a = find(firstNode[std::size_t(i)] + own), b = find(firstNode[std::size_t(j)] + theirs);
          parent[std::size_t(std::max(a, b))] = std::min(a, b);
        });
      });
    }
    for (int64_t i = 0; i < count; ++i)
    {
      const TileComponents& mine = components[std::size_t(i)];
      for (std::size_t k = 0; k < mine.first.size(); ++k)
        if (mine.first[k] == int32_t(k))
        {
          const int64_t r = find(firstNode[std::size_t(i)] + int64_t(k));
          highest[std::size_t(r)] = std::max(highest[std::size_t(r)], mine.highest[k]);
        }
    }
    // Every node pointing at its root, so that the last pass only reads (on all threads).
    for (int64_t v = 0; v < int64_t(parent.size()); ++v)
      parent[std::size_t(v)] = find(v);
    components.clear();
  }

  // The last pass: each tile's mask from its distances (and its components), written.
  detail::forEachTile(layout, out.passes + 1, "flats: mask", options, control, out, [&](int64_t i) {
    FlatTile f;
    const Window t = layout.tile(i);
    setGeometry(t, f);
    f.towards = loadPadded(f, state.towards);
    std::vector<int32_t> cells(std::size_t(t.cells()), 0);
    if (!withAway)
    {
      for (int64_t y = 0; y < t.height; ++y)
        for (int64_t x = 0; x < t.width; ++x)
          cells[std::size_t(y * t.width + x)] = f.towards[std::size_t(f.at(x, y))];
      mask.write(t, cells.data());
      return;
    }
    detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), f.z, kPad);
    f.away = loadPadded(f, state.away);
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
        most[std::size_t(r)] = highest[std::size_t(parent[std::size_t(firstNode[std::size_t(i)] + k)])];
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
        cells[std::size_t(y * t.width + x)] = 2 * towards + (away > 0 ? top - away : 0);
      }
    mask.write(t, cells.data());
  });
  ++out.passes;
}

}  // namespace gpugeo::dem::tiled
