// How the tiled tools cut a raster into tiles, number each tile's perimeter cells, read a tile with
// its halo, and run a pass over the tiles (tiled_fill.cpp, tiled_flow.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/dem.h"
#include "dem/tiled/distribution.h"
#include "dem/tiled/perimeter.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::dem::tiled::detail {

struct TileLayout
{
  int64_t width = 0, height = 0;          // the raster
  int64_t tileWidth = 0, tileHeight = 0;  // a full tile (the last column and row of tiles may be smaller)
  int64_t tilesX = 0, tilesY = 0;

  TileLayout(int64_t rasterWidth, int64_t rasterHeight, const TiledOptions& options)
    : width(rasterWidth), height(rasterHeight)
  {
    if (width < 1 || height < 1)
      throw InvalidInput("the DEM has no cells");
    if (options.tileWidth < 1 || options.tileHeight < 1)
      throw InvalidInput("tiles must be at least one cell wide and high");
    tileWidth = std::min(options.tileWidth, width);
    tileHeight = std::min(options.tileHeight, height);
    // A tile and its halo are indexed in 32 bits.
    if ((tileWidth + 2) * (tileHeight + 2) >= (int64_t(1) << 32))
      throw InvalidInput("a tile of " + std::to_string(tileWidth) + " x " + std::to_string(tileHeight) +
                         " cells is too large: tiles hold at most 2^32 cells with their halo");
    tilesX = (width + tileWidth - 1) / tileWidth;
    tilesY = (height + tileHeight - 1) / tileHeight;
  }

  int64_t count() const { return tilesX * tilesY; }

  Window tile(int64_t i) const
  {
    const int64_t tx = i % tilesX, ty = i / tilesX;
    Window t;
    t.x0 = tx * tileWidth;
    t.y0 = ty * tileHeight;
    t.width = std::min(tileWidth, width - t.x0);
    t.height = std::min(tileHeight, height - t.y0);
    return t;
  }

  // The tile holding cell (x, y).
  int64_t tileOf(int64_t x, int64_t y) const { return (y / tileHeight) * tilesX + x / tileWidth; }
};

// A tile's perimeter cells in a fixed order: the top row, the bottom row, the left column, the right
// column (each cell once, for tiles one cell wide or high too).
inline int64_t perimeterSize(const Window& t)
{
  return perimeterCount(t.width, t.height);
}

// visit(x, y, k) for the perimeter cells in that order (x, y within the tile).
template <typename Visit>
void forPerimeter(const Window& t, Visit visit)
{
  int64_t k = 0;
  for (int64_t x = 0; x < t.width; ++x)
    visit(x, int64_t(0), k++);
  if (t.height > 1)
    for (int64_t x = 0; x < t.width; ++x)
      visit(x, t.height - 1, k++);
  for (int64_t y = 1; y < t.height - 1; ++y)
    visit(int64_t(0), y, k++);
  if (t.width > 1)
    for (int64_t y = 1; y < t.height - 1; ++y)
      visit(t.width - 1, y, k++);
}

// The place k of perimeter cell (x, y) (within the tile) in that order.
inline int64_t perimeterIndex(const Window& t, int64_t x, int64_t y)
{
  return perimeterPlace(t.width, t.height, x, y);
}

// The tile `t` with a halo of `pad` cells into `out`, (t.width + 2 pad) x (t.height + 2 pad) cells;
// halo cells off the raster hold `outside`. The cells are read in place (RasterSource::readStrided)
// and only the halo off the raster is filled, so that a vector reused from tile to tile (Reused) is
// neither cleared nor copied twice.
template <typename T>
void readWithHalo(const RasterSource<T>& source, const Window& t, T outside, std::vector<T>& out, int64_t pad = 1)
{
  const int64_t pw = t.width + 2 * pad, ph = t.height + 2 * pad;
  resizeHuge(out, std::size_t(pw * ph));
  Window read;
  read.x0 = std::max<int64_t>(0, t.x0 - pad);
  read.y0 = std::max<int64_t>(0, t.y0 - pad);
  read.width = std::min(source.width(), t.x0 + t.width + pad) - read.x0;
  read.height = std::min(source.height(), t.y0 + t.height + pad) - read.y0;
  const int64_t dx = read.x0 - (t.x0 - pad), dy = read.y0 - (t.y0 - pad);
  const auto fill = [&](int64_t y, int64_t x0, int64_t x1) {
    std::fill(out.begin() + y * pw + x0, out.begin() + y * pw + x1, outside);
  };
  for (int64_t y = 0; y < ph; ++y)
    if (y < dy || y >= dy + read.height)
      fill(y, 0, pw);
    else
    {
      fill(y, 0, dx);
      fill(y, dx + read.width, pw);
    }
  source.readStrided(read, out.data() + dy * pw + dx, pw);
}

// The tile's own cells (without the halo) of a padded array, into `cells`.
template <typename T>
void withoutHalo(const std::vector<T>& padded, const Window& t, std::vector<T>& cells)
{
  const int64_t pw = t.width + 2;
  resizeHuge(cells, std::size_t(t.cells()));
  for (int64_t y = 0; y < t.height; ++y)
    std::copy(padded.begin() + (y + 1) * pw + 1, padded.begin() + (y + 1) * pw + 1 + t.width,
              cells.begin() + y * t.width);
}

template <typename T>
std::vector<T> withoutHalo(const std::vector<T>& padded, const Window& t)
{
  std::vector<T> cells;
  withoutHalo(padded, t, cells);
  return cells;
}

// Working arrays that a pass's tiles reuse: a tile's thread takes a Set, and gives it back when the
// tile is done, so that the large arrays of a pass are allocated, and their pages faulted in, once
// per thread rather than once per tile (at 40,000² on the GPU machine, fresh arrays' page faults and
// clearing took more of the host's time than any of the work). At most as many Sets as the pass has
// threads; clear() frees them when the pass ends, so that they never add to the next step's memory.
template <typename Set>
class Reused
{
public:
  class Lease
  {
  public:
    Lease(Reused& pool, std::unique_ptr<Set> set) : mPool(pool), mSet(std::move(set)) {}
    ~Lease()
    {
      std::lock_guard<std::mutex> lock(mPool.mLock);
      mPool.mFree.push_back(std::move(mSet));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Set& operator*() const { return *mSet; }
    Set* operator->() const { return mSet.get(); }

  private:
    Reused& mPool;
    std::unique_ptr<Set> mSet;
  };

  void clear()
  {
    std::lock_guard<std::mutex> lock(mLock);
    mFree.clear();
  }

  Lease take()
  {
    std::lock_guard<std::mutex> lock(mLock);
    if (mFree.empty())
      return Lease(*this, std::make_unique<Set>());
    std::unique_ptr<Set> set = std::move(mFree.back());
    mFree.pop_back();
    return Lease(*this, std::move(set));
  }

private:
  std::mutex mLock;
  std::vector<std::unique_ptr<Set>> mFree;
};

// Whether the run is shared by several processes (TiledOptions::cluster, distribution.h), and
// whether this process holds the run's perimeters and graphs (the coordinator, or a run of one).
inline bool distributedRun(const TiledOptions& options)
{
  return options.cluster && options.cluster->distributed();
}
inline bool holdsGraph(const TiledOptions& options)
{
  return !distributedRun(options) || options.cluster->coordinator();
}

// "tile 7 (columns 1024-2047, rows 0-1023)", for messages.
std::string describeTile(const TileLayout& layout, int64_t i);

// Runs body(tile) over `tiles` on the options' threads, timing the pass as `stage` in the report and
// telling options.onTile (pass `pass`) as each tile ends. In a distributed run the coordinator hands
// the tiles out (with traffic.in) and takes their results (traffic.out); the workers run the bodies
// (distribution.h's rules).
template <typename Body>
void forTiles(const TileLayout& layout, const std::vector<int64_t>& tiles, int pass, const std::string& stage,
              const TiledOptions& options, const RunControl& control, TiledReport& report, Body body,
              const TileTraffic& traffic = {})
{
  ScopedStage timing(report.times, stage);
  const int64_t count = int64_t(tiles.size());
  if (distributedRun(options))
  {
    options.cluster->pass(
      tiles, traffic, [&](int64_t i) { body(i); },
      [&](int64_t done) {
        if (options.onTile)
          options.onTile(pass, done, count);
      },
      [&](int64_t i) { return describeTile(layout, i); }, control);
    return;
  }
  std::mutex progress;
  int64_t done = 0;
  parallelFor(count, 1, options.threads, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w)
    {
      body(tiles[std::size_t(w)]);
      std::lock_guard<std::mutex> lock(progress);
      ++done;
      if (options.onTile)
        options.onTile(pass, done, count);
    }
  }, &control);
  if (control.isCanceled())
    throw Canceled();
}

// forTiles over every tile of the layout.
std::vector<int64_t> allTiles(const TileLayout& layout);
template <typename Body>
void forEachTile(const TileLayout& layout, int pass, const std::string& stage, const TiledOptions& options,
                 const RunControl& control, TiledReport& report, Body body, const TileTraffic& traffic = {})
{
  forTiles(layout, allTiles(layout), pass, stage, options, control, report, body, traffic);
}

// The coordinator's state to the workers of a distributed run (Cluster::share); nothing otherwise.
inline void share(const TiledOptions& options, const std::function<void(Archive&)>& visit)
{
  if (distributedRun(options))
    options.cluster->share(visit);
}

// A pass's per-tile results (counts, summaries), each written by its tile's body and sent back with
// it in a distributed run, merged by the caller after the pass.
template <typename T>
TileTraffic sendBack(std::vector<T>& perTile)
{
  return TileTraffic{nullptr, [&perTile](int64_t i, Archive& a) { a.value(perTile[std::size_t(i)]); }};
}

// A Grid of the rows' cell sizes without elevations (for dem.h's per-row sums and checks).
inline Grid rowGrid(const RowSizes& rows, int64_t width, int64_t height)
{
  Grid grid;
  grid.width = width;
  grid.height = height;
  grid.cellWidth = rows.cellWidth.data();
  grid.cellHeight = rows.cellHeight.data();
  return grid;
}

// Checks the rows' cell sizes against the raster and dem.h's limits.
void checkRows(const RowSizes& rows, int64_t height);

// The start every tiled tool makes: the layout of a width x height raster, the rows checked, and the
// report told the tiles and the working memory of one tile (with a halo of `pad`) in flight.
inline TileLayout beginTiledRun(int64_t width, int64_t height, const RowSizes& rows, const TiledOptions& options,
                                int64_t bytesPerTileCell, int64_t pad, TiledReport& report)
{
  const TileLayout layout(width, height, options);
  checkRows(rows, layout.height);
  report.tileWidth = layout.tileWidth;
  report.tileHeight = layout.tileHeight;
  report.tiles = layout.count();
  report.tileBytes = (layout.tileWidth + 2 * pad) * (layout.tileHeight + 2 * pad) * bytesPerTileCell;
  return layout;
}

// visit(j, k, nx, ny) for each neighbour (nx, ny) of the cell (x, y) of tile `t` (x, y within it)
// that lies in another tile of the raster: j that tile, k the neighbour's place on its perimeter.
template <typename Visit>
void forNeighboursInOtherTiles(const TileLayout& layout, const Window& t, int64_t x, int64_t y, Visit visit)
{
  const int64_t gx = t.x0 + x, gy = t.y0 + y;
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = gx + kDx[d], ny = gy + kDy[d];
    if (nx < 0 || ny < 0 || nx >= layout.width || ny >= layout.height ||
        (nx >= t.x0 && ny >= t.y0 && nx < t.x0 + t.width && ny < t.y0 + t.height))
      continue;
    const int64_t j = layout.tileOf(nx, ny);
    const Window u = layout.tile(j);
    visit(j, perimeterIndex(u, nx - u.x0, ny - u.y0), nx, ny);
  }
}

// visit(x, y, j, k) for each cell of the ring around tile `t` (x, y within the tile: -1 to width and
// height) that lies on the raster: the perimeter cell k of tile j.
template <typename Visit>
void forHaloRing(const TileLayout& layout, const Window& t, Visit visit)
{
  for (int64_t y = -1; y <= t.height; ++y)
    for (int64_t x = -1; x <= t.width; x = (y == -1 || y == t.height || x == t.width) ? x + 1 : t.width)
    {
      const int64_t gx = t.x0 + x, gy = t.y0 + y;
      if (gx < 0 || gy < 0 || gx >= layout.width || gy >= layout.height)
        continue;
      const int64_t j = layout.tileOf(gx, gy);
      const Window u = layout.tile(j);
      visit(x, y, j, perimeterIndex(u, gx - u.x0, gy - u.y0));
    }
}

// The values the tiles around tile t hold on their perimeters, at the ring of cells around t: one a
// ring cell, in the perimeter order of the (width + 2) x (height + 2) window around t (`outside` off
// the raster). What a tile of the flats' and the raise's rounds reads of its neighbours.
// valueAt(j, k): perimeter cell k of tile j's value.
template <typename T, typename ValueAt>
std::vector<T> ringOf(const TileLayout& layout, const Window& t, T outside, ValueAt valueAt)
{
  std::vector<T> ring(std::size_t(perimeterCount(t.width + 2, t.height + 2)), outside);
  forHaloRing(layout, t, [&](int64_t x, int64_t y, int64_t j, int64_t k) {
    ring[std::size_t(perimeterPlace(t.width + 2, t.height + 2, x + 1, y + 1))] = valueAt(j, k);
  });
  return ring;
}
template <typename T>
std::vector<T> ringOf(const TileLayout& layout, const Window& t, const std::vector<std::vector<T>>& perimeter, T outside)
{
  return ringOf(layout, t, outside, [&](int64_t j, int64_t k) { return perimeter[std::size_t(j)][std::size_t(k)]; });
}

// visit(x, y, value) for each cell of a ring (ringOf's; x, y within the tile: -1 to width and height).
template <typename T, typename Visit>
void forRing(const Window& t, const std::vector<T>& ring, Visit visit)
{
  forPerimeter(Window{0, 0, t.width + 2, t.height + 2},
               [&](int64_t x, int64_t y, int64_t k) { visit(x - 1, y - 1, ring[std::size_t(k)]); });
}

// What a tile's body reads of the coordinator's state (its ring, its components' levels): made by
// make(tile) where this process holds that state (a run of one), else made on the coordinator and
// sent with the tile (traffic(), for TileTraffic::in) into the tile's slot, which get() empties.
template <typename T>
class ToTiles
{
public:
  ToTiles(const TiledOptions& options, int64_t tiles, std::function<T(int64_t)> make,
          std::function<void(Archive&, T&)> visit)
    : mDistributed(distributedRun(options)), mMake(std::move(make)), mVisit(std::move(visit))
  {
    if (mDistributed)
      mSlots.resize(std::size_t(tiles));
  }
  T get(int64_t i) { return mDistributed ? std::move(mSlots[std::size_t(i)]) : mMake(i); }
  void traffic(int64_t i, Archive& a)
  {
    if (a.loading())
      mVisit(a, mSlots[std::size_t(i)]);
    else
    {
      T value = mMake(i);
      mVisit(a, value);
    }
  }

private:
  bool mDistributed;
  std::function<T(int64_t)> mMake;
  std::function<void(Archive&, T&)> mVisit;
  std::vector<T> mSlots;
};

// ToTiles' visit for a vector.
template <typename T>
void visitVector(Archive& a, std::vector<T>& v)
{
  a.vector(v);
}

// Marks the (up to eight) tiles around tile i: they read its perimeter.
inline void markNeighbours(const TileLayout& layout, int64_t i, std::vector<uint8_t>& marks)
{
  const int64_t tx = i % layout.tilesX, ty = i / layout.tilesX;
  for (int64_t ny = std::max<int64_t>(0, ty - 1); ny <= std::min(layout.tilesY - 1, ty + 1); ++ny)
    for (int64_t nx = std::max<int64_t>(0, tx - 1); nx <= std::min(layout.tilesX - 1, tx + 1); ++nx)
      if (ny != ty || nx != tx)
        marks[std::size_t(ny * layout.tilesX + nx)] = 1;
}

}  // namespace gpugeo::dem::tiled::detail
