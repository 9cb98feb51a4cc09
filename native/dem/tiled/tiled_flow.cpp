// The tiled directions and accumulation (tiled_dem.h).
#include <algorithm>
#include <limits>
#include <vector>

#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace detail {

void checkRows(const RowSizes& rows, int64_t height)
{
  if (int64_t(rows.cellWidth.size()) != height || int64_t(rows.cellHeight.size()) != height)
    throw InvalidInput("the cell sizes must give one width and one height per row of the DEM");
  validateCellSizes(rows.cellWidth.data(), rows.cellHeight.data(), height);
}

}  // namespace detail

namespace {

using dem::detail::cellArea;
using dem::detail::InnerAround;
using detail::forPerimeter;
using detail::TileLayout;

// A cell's area in 1e-6 m^2 per row (dem_math.h's cellArea).
std::vector<int64_t> rowAreas(const RowSizes& rows)
{
  const Grid grid = detail::rowGrid(rows, 0, int64_t(rows.cellWidth.size()));
  std::vector<int64_t> areas(rows.cellWidth.size());
  for (std::size_t y = 0; y < areas.size(); ++y)
    areas[y] = cellArea(grid, int64_t(y));
  return areas;
}

constexpr int32_t kNone = -1;  // a cell's receiver: none (a pit, off the grid, onto nodata)
constexpr int32_t kExit = -2;  // a cell's receiver: a valid cell of another tile

// One tile's accumulation on its own: its cells' sums along the directions inside the tile, each
// valid cell counting itself and, for a perimeter cell, the inflow `extra` gives it from other tiles
// (per perimeter place; null: none). `receiver` keeps each cell's receiver in the tile (its place
// y * width + x), kNone or kExit. Throws LoopedDirections where the directions loop in the tile.
// The arrays are reused from tile to tile (detail::Reused); `inflow` and `sources` are working room.
struct TileSums
{
  std::vector<int32_t> receiver;
  std::vector<int64_t> cells, area;
  std::vector<uint8_t> inflow;
  std::vector<int32_t> sources;
};

// Tile cell (x, y)'s receiver in the tile (its place y * width + x), kNone or kExit, from the
// directions with their halo.
int32_t receiverAt(const std::vector<uint8_t>& dir, const Window& t, int64_t x, int64_t y)
{
  const int64_t tw = t.width, pw = tw + 2;
  const int64_t p = (y + 1) * pw + x + 1;
  const uint8_t d = dir[std::size_t(p)];
  if (d >= 8 || dir[std::size_t(p + kDy[d] * pw + kDx[d])] == kNoData)
    return kNone;
  const int64_t nx = x + kDx[d], ny = y + kDy[d];
  return nx >= 0 && ny >= 0 && nx < tw && ny < t.height ? int32_t(ny * tw + nx) : kExit;
}

int32_t receiverOf(const std::vector<uint8_t>& dir, const Window& t, int64_t q)
{
  return receiverAt(dir, t, q % t.width, q / t.width);
}

void accumulateTile(const std::vector<uint8_t>& dir, const Window& t, const std::vector<int64_t>& rowArea,
                    const int64_t* extraCells, const int64_t* extraArea, TileSums& s)
{
  const int64_t tw = t.width, pw = tw + 2, n = t.cells();
  resizeHuge(s.receiver, std::size_t(n));
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < tw; ++x)
      s.receiver[std::size_t(y * tw + x)] = receiverAt(dir, t, x, y);
  assignHuge(s.cells, std::size_t(n), int64_t(0));
  assignHuge(s.area, std::size_t(n), int64_t(0));
  std::vector<uint8_t>& inflow = s.inflow;
  assignHuge(inflow, std::size_t(n), uint8_t(0));
  int64_t valid = 0;
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < tw; ++x)
    {
      const int64_t p = (y + 1) * pw + x + 1, q = y * tw + x;
      if (dir[std::size_t(p)] == kNoData)
        continue;
      ++valid;
      s.cells[std::size_t(q)] = 1;
      s.area[std::size_t(q)] = rowArea[std::size_t(t.y0 + y)];
      for (int k = 0; k < 8; ++k)
      {
        const int64_t mx = x + kDx[k], my = y + kDy[k];
        if (mx >= 0 && my >= 0 && mx < tw && my < t.height && dir[std::size_t((my + 1) * pw + mx + 1)] == ((k + 4) & 7))
          ++inflow[std::size_t(q)];
      }
    }
  if (extraCells)
    forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const std::size_t q = std::size_t(y * tw + x);
      s.cells[q] += extraCells[k];
      s.area[q] = int64_t(uint64_t(s.area[q]) + uint64_t(extraArea[k]));
    });
  // The sums down the paths from the sources (valid cells nothing in the tile drains into), each cell
  // passed on once all its inflows have come.
  std::vector<int32_t>& sources = s.sources;
  sources.clear();
  for (int64_t q = 0; q < n; ++q)
    if (inflow[std::size_t(q)] == 0 && dir[std::size_t((q / tw + 1) * pw + q % tw + 1)] != kNoData)
      sources.push_back(int32_t(q));
  int64_t done = 0;
  for (const int32_t q : sources)
  {
    ++done;
    for (int64_t c = q, r = s.receiver[std::size_t(q)]; r >= 0; c = r, r = s.receiver[std::size_t(c)])
    {
      s.cells[std::size_t(r)] += s.cells[std::size_t(c)];
      s.area[std::size_t(r)] = int64_t(uint64_t(s.area[std::size_t(r)]) + uint64_t(s.area[std::size_t(c)]));
      if (--inflow[std::size_t(r)] != 0)
        break;
      ++done;
    }
  }
  if (done != valid)
    throw LoopedDirections("the flow directions go round in a loop; they cannot be accumulated");
}

// accumulateTile's sums on the GPU (dem_cuda.h's accumulation of the tile alone, the inflows at its
// border): every cell's, or with perimeterOnly only the perimeter cells', per place (pass 1's links
// need no more). No receivers.
void accumulateTileOnGpu(const std::vector<uint8_t>& dir, const Window& t, const RowSizes& rows,
                         const int64_t* extraCells, const int64_t* extraArea, bool perimeterOnly, TileSums& s,
                         int gpuTiles, const RunControl& control)
{
  Grid grid;
  grid.width = t.width;
  grid.height = t.height;
  grid.cellWidth = rows.cellWidth.data() + t.y0;
  grid.cellHeight = rows.cellHeight.data() + t.y0;
  Accumulation sums;
  sums.cells = std::move(s.cells);
  sums.area = std::move(s.area);
  {
    const detail::GpuTurn turn(gpuTiles);
    dem::detail::accumulationTileCuda(grid, dir.data(), extraCells, extraArea, perimeterOnly, control, sums);
  }
  s.cells = std::move(sums.cells);
  s.area = std::move(sums.area);
}

// One tile's directions (without its halo, into `cells`) from its elevations and flat mask (null:
// none) with a one-cell halo.
void tileDirections(const std::vector<float>& z, const std::vector<int32_t>* mask, const Window& t,
                    const RowSizes& rows, std::vector<uint8_t>& cells)
{
  const int64_t pw = t.width + 2;
  resizeHuge(cells, std::size_t(t.cells()));
  for (int64_t y = 0; y < t.height; ++y)
  {
    const double width = rows.cellWidth[std::size_t(t.y0 + y)], height = rows.cellHeight[std::size_t(t.y0 + y)];
    for (int64_t x = 0; x < t.width; ++x)
    {
      const float* zc = z.data() + (y + 1) * pw + x + 1;
      const int32_t* maskC = mask ? mask->data() + (y + 1) * pw + x + 1 : nullptr;
      cells[std::size_t(y * t.width + x)] = dem::detail::d8DirectionAround(*zc, InnerAround{zc, maskC, pw}, mask != nullptr,
                                                                           maskC ? *maskC : 0, width, height);
    }
  }
}

// The same on the GPU: dem_cuda.h's directions over the tile with its halo.
void tileDirectionsOnGpu(const std::vector<float>& z, const std::vector<int32_t>* mask, const Window& t,
                         const RowSizes& rows, int gpuTiles, const RunControl& control, std::vector<uint8_t>& cells)
{
  const int64_t ph = t.height + 2;
  std::vector<double> width(static_cast<std::size_t>(ph)), height(static_cast<std::size_t>(ph));
  for (int64_t y = 0; y < ph; ++y)
  {
    const std::size_t row = std::size_t(std::clamp<int64_t>(t.y0 + y - 1, 0, int64_t(rows.cellWidth.size()) - 1));
    width[std::size_t(y)] = rows.cellWidth[row];
    height[std::size_t(y)] = rows.cellHeight[row];
  }
  Grid grid;
  grid.z = z.data();
  grid.width = t.width + 2;
  grid.height = ph;
  grid.cellWidth = width.data();
  grid.cellHeight = height.data();
  const detail::GpuTurn turn(gpuTiles);
  dem::detail::directionsWithMaskCuda(grid, mask ? mask->data() : nullptr, control, cells);
}

// The global graph of the perimeter cells (Barnes 2017), a node per perimeter cell of every tile.
struct PerimeterGraph
{
  std::vector<int64_t> firstNode;     // per tile
  std::vector<int64_t> link;          // the node where the cell's flow leaves its tile, or -1
  std::vector<int64_t> target;        // an exit node's receiver (a node of another tile), or -1
  std::vector<int64_t> exitCells, exitArea;  // an exit's sums in its tile (then with the inflows passing)
  std::vector<int64_t> inCells, inArea;      // the inflow a node receives from other tiles
  std::vector<uint8_t> pendingIn;            // exits of other tiles not yet summed that drain into it
  std::vector<int32_t> pendingExit;          // nodes linked to an exit not yet final
  std::vector<uint8_t> valid;
};

}  // namespace

DirectionCounts directionsTiled(const RasterSource<float>& filled, const RowSizes& rows,
                                RasterSink<uint8_t>& directions, const TiledOptions& options,
                                const RunControl& control, TiledReport* report, const RasterSource<int32_t>* mask)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout =
    detail::beginTiledRun(filled.width(), filled.height(), rows, options, kDirectionsBytesPerTileCell, 1, out);
  std::vector<DirectionCounts> tileCounts(std::size_t(layout.count()));
  struct Buffers
  {
    std::vector<float> z;
    std::vector<int32_t> flats;
    std::vector<uint8_t> cells;
  };
  detail::Reused<Buffers> buffers;
  detail::forEachTile(layout, 1, "directions", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto b = buffers.take();
    const std::vector<float>& z = b->z;
    const std::vector<uint8_t>& cells = b->cells;
    detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), b->z);
    if (mask)
      detail::readWithHalo(*mask, t, int32_t(0), b->flats);
    const int64_t pw = t.width + 2;
    if (options.backend == Backend::Gpu)
      tileDirectionsOnGpu(z, mask ? &b->flats : nullptr, t, rows, options.gpuTiles, control, b->cells);
    else
      tileDirections(z, mask ? &b->flats : nullptr, t, rows, b->cells);
    DirectionCounts mine;
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
      {
        const uint8_t d = cells[std::size_t(y * t.width + x)];
        if (d == kNoData)
          continue;
        ++mine.perDirection[d < 8 ? d : 8];
        // Off the grid or onto nodata: a NaN in the halo, as the grid's edge is.
        mine.drainingOut += d < 8 && dem::detail::isNoData(z[std::size_t((y + 1 + kDy[d]) * pw + x + 1 + kDx[d])]);
      }
    directions.write(t, cells.data());
    tileCounts[std::size_t(i)] = mine;
  }, detail::sendBack(tileCounts));
  out.passes = 1;
  DirectionCounts counts;
  for (const DirectionCounts& mine : tileCounts)
  {
    for (int d = 0; d < 9; ++d)
      counts.perDirection[d] += mine.perDirection[d];
    counts.drainingOut += mine.drainingOut;
  }
  return counts;
}

AccumulationSummary accumulationTiled(const RasterSource<uint8_t>& directions, const RowSizes& rows,
                                      RasterSink<int64_t>& cells,
                       RasterSink<int64_t>& area, const TiledOptions& options, const RunControl& control,
                       TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  const TileLayout layout = detail::beginTiledRun(directions.width(), directions.height(), rows, options,
                                                  kAccumulationBytesPerTileCell, 1, out);
  const std::vector<int64_t> rowArea = rowAreas(rows);

  PerimeterGraph g;
  g.firstNode.resize(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    g.firstNode[std::size_t(i) + 1] = g.firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = g.firstNode.back();
  g.link.assign(std::size_t(nodes), -1);
  g.target.assign(std::size_t(nodes), -1);
  g.exitCells.assign(std::size_t(nodes), 0);
  g.exitArea.assign(std::size_t(nodes), 0);
  g.inCells.assign(std::size_t(nodes), 0);
  g.inArea.assign(std::size_t(nodes), 0);
  g.valid.assign(std::size_t(nodes), 0);
  out.graphBytes = nodes * int64_t(6 * sizeof(int64_t) + 2 * sizeof(uint8_t) + sizeof(int32_t));

  // Pass 1: each tile on its own; each perimeter cell linked to the exit its flow leaves by.
  struct Buffers
  {
    std::vector<uint8_t> dir;
    TileSums sums;
    std::vector<int32_t> exitOf, path;
  };
  detail::Reused<Buffers> buffers;
  const bool gpu = options.backend == Backend::Gpu;
  detail::forEachTile(layout, 1, "accumulation pass 1 (tiles on their own)", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto b = buffers.take();
    const std::vector<uint8_t>& dir = b->dir;
    TileSums& s = b->sums;
    detail::readWithHalo(directions, t, kNoData, b->dir);
    // The sums per cell on the CPU, per perimeter place on the GPU.
    if (gpu)
      accumulateTileOnGpu(dir, t, rows, nullptr, nullptr, true, s, options.gpuTiles, control);
    else
      accumulateTile(dir, t, rowArea, nullptr, nullptr, s);
    const int64_t first = g.firstNode[std::size_t(i)];
    std::vector<int32_t>& exitOf = b->exitOf;
    assignHuge(exitOf, std::size_t(t.cells()), -3);  // -3: not yet known
    std::vector<int32_t>& path = b->path;
    forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const int32_t q = int32_t(y * t.width + x);
      if (dir[std::size_t((y + 1) * (t.width + 2) + x + 1)] == kNoData)
        return;
      const int64_t node = first + k;
      g.valid[std::size_t(node)] = 1;
      // Down the path to where it leaves the tile or ends, remembering the answer along it.
      path.clear();
      int32_t c = q, r = receiverOf(dir, t, q);
      while (exitOf[std::size_t(c)] == -3 && r >= 0)
      {
        path.push_back(c);
        c = r;
        r = receiverOf(dir, t, c);
      }
      int32_t exit = exitOf[std::size_t(c)];
      if (exit == -3)
        exit = r == kExit ? c : -1;
      exitOf[std::size_t(c)] = exit;
      for (const int32_t on : path)
        exitOf[std::size_t(on)] = exit;
      if (exit >= 0)
        g.link[std::size_t(node)] = first + detail::perimeterIndex(t, exit % t.width, exit / t.width);
      if (receiverOf(dir, t, q) == kExit)
      {
        const uint8_t d = dir[std::size_t((y + 1) * (t.width + 2) + x + 1)];
        const int64_t nx = t.x0 + x + kDx[d], ny = t.y0 + y + kDy[d];
        const int64_t j = layout.tileOf(nx, ny);
        const Window u = layout.tile(j);
        g.target[std::size_t(node)] = g.firstNode[std::size_t(j)] + detail::perimeterIndex(u, nx - u.x0, ny - u.y0);
        const std::size_t at = std::size_t(gpu ? k : q);
        g.exitCells[std::size_t(node)] = s.cells[at];
        g.exitArea[std::size_t(node)] = s.area[at];
      }
    });
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    const int64_t first = g.firstNode[std::size_t(i)], n = g.firstNode[std::size_t(i) + 1] - first;
    a.span(g.valid.data() + first, n);
    a.span(g.link.data() + first, n);
    a.span(g.target.data() + first, n);
    a.span(g.exitCells.data() + first, n);
    a.span(g.exitArea.data() + first, n);
  }});
  buffers.clear();

  // The graph summed in dependency order: a node's inflow is final once every exit draining into it
  // is; an exit's outflow once every node linked to it is (on the coordinator of a distributed run:
  // each tile's inflows go out with it in pass 2).
  if (detail::holdsGraph(options))
  {
    ScopedStage graphTiming(out.times, "accumulation graph");
    g.pendingIn.assign(std::size_t(nodes), 0);
    g.pendingExit.assign(std::size_t(nodes), 0);
    int64_t valid = 0;
    for (int64_t v = 0; v < nodes; ++v)
    {
      if (!g.valid[std::size_t(v)])
        continue;
      ++valid;
      if (g.target[std::size_t(v)] >= 0)
        ++g.pendingIn[std::size_t(g.target[std::size_t(v)])];
      if (g.link[std::size_t(v)] >= 0)
        ++g.pendingExit[std::size_t(g.link[std::size_t(v)])];
    }
    std::vector<int64_t> ready;
    for (int64_t v = 0; v < nodes; ++v)
      if (g.valid[std::size_t(v)] && g.pendingIn[std::size_t(v)] == 0)
        ready.push_back(v);
    int64_t done = 0;
    while (!ready.empty())
    {
      const int64_t v = ready.back();
      ready.pop_back();
      ++done;
      const int64_t e = g.link[std::size_t(v)];
      if (e < 0)
        continue;
      g.exitCells[std::size_t(e)] += g.inCells[std::size_t(v)];
      g.exitArea[std::size_t(e)] = int64_t(uint64_t(g.exitArea[std::size_t(e)]) + uint64_t(g.inArea[std::size_t(v)]));
      if (--g.pendingExit[std::size_t(e)] != 0)
        continue;
      const int64_t to = g.target[std::size_t(e)];
      g.inCells[std::size_t(to)] += g.exitCells[std::size_t(e)];
      g.inArea[std::size_t(to)] = int64_t(uint64_t(g.inArea[std::size_t(to)]) + uint64_t(g.exitArea[std::size_t(e)]));
      if (--g.pendingIn[std::size_t(to)] == 0)
        ready.push_back(to);
    }
    if (done != valid)
      throw LoopedDirections("the flow directions go round in a loop; they cannot be accumulated");
  }

  // Pass 2: each tile again with its inflows from other tiles; the terminals summed up, and the
  // largest count kept for the check of the area's range.
  struct TileSummary
  {
    AccumulationSummary summary;
    int64_t mostCells = 0;
  };
  std::vector<TileSummary> tileSummaries(std::size_t(layout.count()));
  TileTraffic traffic = detail::sendBack(tileSummaries);
  traffic.in = [&](int64_t i, Archive& a) {
    const int64_t first = g.firstNode[std::size_t(i)], n = g.firstNode[std::size_t(i) + 1] - first;
    a.span(g.inCells.data() + first, n);
    a.span(g.inArea.data() + first, n);
  };
  detail::forEachTile(layout, 2, "accumulation pass 2 (with inflows; write)", options, control, out, [&](int64_t i) {
    const Window t = layout.tile(i);
    const auto b = buffers.take();
    const std::vector<uint8_t>& dir = b->dir;
    TileSums& s = b->sums;
    detail::readWithHalo(directions, t, kNoData, b->dir);
    const int64_t first = g.firstNode[std::size_t(i)];
    if (gpu)
      accumulateTileOnGpu(dir, t, rows, g.inCells.data() + first, g.inArea.data() + first, false, s,
                          options.gpuTiles, control);
    else
      accumulateTile(dir, t, rowArea, g.inCells.data() + first, g.inArea.data() + first, s);
    AccumulationSummary mine;
    int64_t tileMost = 0;
    const int64_t pw = t.width + 2;
    for (int64_t y = 0; y < t.height; ++y)
      for (int64_t x = 0; x < t.width; ++x)
      {
        const std::size_t q = std::size_t(y * t.width + x);
        const uint8_t d = dir[std::size_t((y + 1) * pw + x + 1)];
        tileMost = std::max(tileMost, s.cells[q]);
        // A terminal: no direction, or one off the grid or onto nodata (kNoData in the halo).
        if (d == kNoData || (d < 8 && dir[std::size_t((y + 1 + kDy[d]) * pw + x + 1 + kDx[d])] != kNoData))
          continue;
        (d >= 8 ? mine.pits : mine.outlets) += 1;
        mine.reached += s.cells[q];
        const int64_t c = (t.y0 + y) * layout.width + t.x0 + x;
        if (mine.largestCell < 0 || s.cells[q] > mine.largestCells)
        {
          mine.largestCell = c;
          mine.largestCells = s.cells[q];
          mine.largestArea = s.area[q];
        }
      }
    cells.write(t, s.cells.data());
    area.write(t, s.area.data());
    tileSummaries[std::size_t(i)] = TileSummary{mine, tileMost};
  }, traffic);
  buffers.clear();
  out.passes = 2;
  AccumulationSummary summary;
  int64_t mostCells = 0;
  for (const auto& [mine, tileMost] : tileSummaries)
  {
    mostCells = std::max(mostCells, tileMost);
    summary.outlets += mine.outlets;
    summary.pits += mine.pits;
    summary.reached += mine.reached;
    if (mine.largestCell >= 0 &&
        (summary.largestCell < 0 || mine.largestCells > summary.largestCells ||
         (mine.largestCells == summary.largestCells && mine.largestCell < summary.largestCell)))
    {
      summary.largestCell = mine.largestCell;
      summary.largestCells = mine.largestCells;
      summary.largestArea = mine.largestArea;
    }
  }
  const Grid grid = detail::rowGrid(rows, layout.width, layout.height);
  if (dem::detail::upstreamAreaCanOverflow(grid))
    dem::detail::checkUpstreamArea(grid, mostCells);
  return summary;
}

}  // namespace gpugeo::dem::tiled
