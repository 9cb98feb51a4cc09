// The tiled travel times and the outlet's snap (tiled_dem.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/errors.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/travel_math.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
using detail::forPerimeter;
using detail::TileLayout;

// Where a perimeter cell's path goes once it leaves its tile: a cell of another tile (its index
// y * width + x), the outlet, or nowhere (a pit, off the grid, onto nodata: outside the watershed).
constexpr int64_t kToNowhere = -1;
constexpr int64_t kToOutlet = -2;

// One tile's inputs for the cells' step times: directions and elevations with a one-cell halo
// (nodata and NaN off the grid, as travel_time.cpp sees the grid's edge), the accumulated areas, and
// the Manning coefficients with the halo where the model has them.
struct TileInputs
{
  Window t;
  int64_t pw = 0, ph = 0;
  std::vector<uint8_t> dir;
  std::vector<float> z, manning;
  std::vector<int64_t> area;  // the tile's cells (on the GPU: with the halo, 0 there)
  int64_t outlet = -1;  // the outlet's place in the tile (y * width + x), or -1
  // Working room of the passes, reused from tile to tile with the inputs (detail::Reused).
  std::vector<double> minutes;
  std::vector<uint8_t> state;
  std::vector<double> sum;
  std::vector<int64_t> to, path;
  dem::detail::TileTravel travel;
};

struct StepModel
{
  const VelocityModel& model;
  double overlandNPower;
  const RowSizes& rows;
};

void readInputs(const RasterSource<float>& filled, const RasterSource<uint8_t>& directions,
                const RasterSource<int64_t>& area, const RasterSource<float>* manning, const VelocityModel& model,
                const Window& t, int64_t outlet, int64_t width, bool forGpu, TileInputs& in)
{
  in.t = t;
  in.pw = t.width + 2;
  in.ph = t.height + 2;
  detail::readWithHalo(directions, t, kNoData, in.dir);
  in.z.clear();
  in.area.clear();
  in.manning.clear();
  if (model.kind != VelocityModel::Kind::Constant)
  {
    detail::readWithHalo(filled, t, std::numeric_limits<float>::quiet_NaN(), in.z);
    if (forGpu)
      detail::readWithHalo(area, t, int64_t(0), in.area);
    else
    {
      in.area.resize(std::size_t(t.cells()));
      area.read(t, in.area.data());
    }
  }
  if (model.kind == VelocityModel::Kind::Manning && manning)
    detail::readWithHalo(*manning, t, std::numeric_limits<float>::quiet_NaN(), in.manning);
  const int64_t ox = outlet % width, oy = outlet / width;
  in.outlet = t.contains(ox, oy) ? (oy - t.y0) * t.width + (ox - t.x0) : -1;
}

// The step time (minutes) and speed of tile cell q, as travel_time.cpp computes them.
double stepOf(const TileInputs& in, const StepModel& s, int64_t q, double* speed = nullptr)
{
  const int64_t x = q % in.t.width, y = q / in.t.width;
  const int64_t p = (y + 1) * in.pw + x + 1;
  const uint8_t d = in.dir[std::size_t(p)];
  const double width = s.rows.cellWidth[std::size_t(in.t.y0 + y)], height = s.rows.cellHeight[std::size_t(in.t.y0 + y)];
  int64_t receiver = -1;
  if (d < 8 && in.dir[std::size_t(p + kDy[d] * in.pw + kDx[d])] != kNoData)
    receiver = p + kDy[d] * in.pw + kDx[d];
  const double length = dem::detail::flowLength(width, height, d);
  const double v = dem::detail::cellSpeed(s.model, s.overlandNPower, in.z.empty() ? nullptr : in.z.data(),
                                          in.manning.empty() ? nullptr : in.manning.data(), in.pw, in.ph, x + 1,
                                          y + 1, receiver, in.area.empty() ? 0 : in.area[std::size_t(q)], width,
                                          height, d);
  if (speed)
    *speed = v;
  return length / v / 60.0;
}

// Where the path of tile cell q goes next: another tile cell (>= 0), or (as a negative code) the
// outlet, nowhere, or a cell of another tile (kLeaves, the cell in *target).
constexpr int64_t kLeaves = -3;
int64_t nextOf(const TileInputs& in, int64_t q, int64_t width, int64_t* target)
{
  if (q == in.outlet)
    return kToOutlet;
  const int64_t x = q % in.t.width, y = q / in.t.width;
  const uint8_t d = in.dir[std::size_t((y + 1) * in.pw + x + 1)];
  if (d >= 8)
    return kToNowhere;
  const int64_t nx = x + kDx[d], ny = y + kDy[d];
  if (in.dir[std::size_t((ny + 1) * in.pw + nx + 1)] == kNoData)
    return kToNowhere;
  if (nx >= 0 && ny >= 0 && nx < in.t.width && ny < in.t.height)
    return ny * in.t.width + nx;
  *target = (in.t.y0 + ny) * width + in.t.x0 + nx;
  return kLeaves;
}

// The forest of perimeter cells: each cell's sum of steps down its path to where the path leaves
// its tile (the last cell in the tile included) and where it goes then; then its time.
struct PerimeterForest
{
  std::vector<int64_t> firstNode;  // per tile
  std::vector<int64_t> to;         // a cell of another tile, kToOutlet or kToNowhere
  std::vector<double> sum, time;   // time: NaN outside the watershed
  int64_t nodeOf(const TileLayout& layout, int64_t cell) const
  {
    const int64_t x = cell % layout.width, y = cell / layout.width;
    const int64_t j = layout.tileOf(x, y);
    const Window u = layout.tile(j);
    return firstNode[std::size_t(j)] + detail::perimeterIndex(u, x - u.x0, y - u.y0);
  }
};

// Pass 1 for one tile: each valid perimeter cell's sum and destination, the paths walked down once
// (a cell met again gives its answer to the paths that reach it).
void perimeterSums(TileInputs& in, const StepModel& s, int64_t width, int64_t first, PerimeterForest& f)
{
  const int64_t n = in.t.cells();
  std::vector<uint8_t>& state = in.state;  // 0 not seen, 1 on the path being walked, 2 done
  assignHuge(state, std::size_t(n), uint8_t(0));
  std::vector<double>& sum = in.sum;
  assignHuge(sum, std::size_t(n), 0.0);
  std::vector<int64_t>& to = in.to;
  assignHuge(to, std::size_t(n), kToNowhere);
  std::vector<int64_t>& path = in.path;
  forPerimeter(in.t, [&](int64_t x, int64_t y, int64_t k) {
    const int64_t q0 = y * in.t.width + x;
    if (in.dir[std::size_t((y + 1) * in.pw + x + 1)] == kNoData)
      return;
    path.clear();
    int64_t q = q0, next = 0, target = -1;
    for (;;)
    {
      if (state[std::size_t(q)] == 2)
        break;
      if (state[std::size_t(q)] == 1)
        throw LoopedDirections("the flow directions go round in a loop; no travel time can be summed");
      state[std::size_t(q)] = 1;
      path.push_back(q);
      next = nextOf(in, q, width, &target);
      if (next < 0)
        break;
      q = next;
    }
    // Back up the path: the last cell ends it (or is a cell already done).
    std::size_t i = path.size();
    if (i > 0 && state[std::size_t(q)] == 1)  // the walk ended at path.back(), its own end
    {
      const int64_t last = path[--i];
      to[std::size_t(last)] = next == kLeaves ? target : next;
      sum[std::size_t(last)] = next == kToNowhere ? 0.0 : stepOf(in, s, last);
      state[std::size_t(last)] = 2;
    }
    while (i > 0)
    {
      const int64_t c = path[--i];
      int64_t unused;
      const int64_t r = nextOf(in, c, width, &unused);
      to[std::size_t(c)] = to[std::size_t(r)];
      sum[std::size_t(c)] = to[std::size_t(c)] == kToNowhere ? 0.0 : stepOf(in, s, c) + sum[std::size_t(r)];
      state[std::size_t(c)] = 2;
    }
    f.to[std::size_t(first + k)] = to[std::size_t(q0)];
    f.sum[std::size_t(first + k)] = sum[std::size_t(q0)];
  });
}

// The forest's times: a node's sum plus the time of the node its path enters (the outlet's path
// ends there), resolved down each path once.
void forestTimes(const TileLayout& layout, PerimeterForest& f, const RunControl& control)
{
  const int64_t nodes = int64_t(f.to.size());
  std::vector<uint8_t> state(std::size_t(nodes), 0);
  f.time.assign(std::size_t(nodes), kNan);
  std::vector<int64_t> path;
  for (int64_t v0 = 0; v0 < nodes; ++v0)
  {
    if ((v0 & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    path.clear();
    int64_t v = v0;
    while (state[std::size_t(v)] == 0 && f.to[std::size_t(v)] >= 0)
    {
      state[std::size_t(v)] = 1;
      path.push_back(v);
      v = f.nodeOf(layout, f.to[std::size_t(v)]);
    }
    if (state[std::size_t(v)] == 1)
      throw LoopedDirections("the flow directions go round in a loop across tiles; no travel time can be summed");
    if (state[std::size_t(v)] == 0)  // the path's end: the outlet or nowhere
    {
      f.time[std::size_t(v)] = f.to[std::size_t(v)] == kToOutlet ? f.sum[std::size_t(v)] : kNan;
      state[std::size_t(v)] = 2;
    }
    for (std::size_t i = path.size(); i-- > 0;)
    {
      const int64_t u = path[i];
      f.time[std::size_t(u)] = f.sum[std::size_t(u)] + f.time[std::size_t(f.nodeOf(layout, f.to[std::size_t(u)]))];
      state[std::size_t(u)] = 2;
    }
  }
}

// --- The same passes with the tile's paths summed on the GPU (dem_cuda.h's travelTileCuda) ---

// The tile as travelTileCuda takes it: the elevations, directions and areas with the halo (in `in`;
// zeros where the model reads none), the rows' cell sizes with the halo's (the nearest row's off the
// raster: no halo cell's own step is used).
struct PaddedTile
{
  std::vector<double> cellWidth, cellHeight;
  Grid grid;
  VelocityModel model;
  int64_t outlet = -1;
};

PaddedTile paddedTile(TileInputs& in, const StepModel& s, int64_t rasterHeight)
{
  PaddedTile p;
  if (in.z.empty())
    assignHuge(in.z, std::size_t(in.pw * in.ph), 0.f);
  if (in.area.empty())
    assignHuge(in.area, std::size_t(in.pw * in.ph), int64_t(0));
  for (int64_t py = 0; py < in.ph; ++py)
  {
    const int64_t row = std::clamp<int64_t>(in.t.y0 + py - 1, 0, rasterHeight - 1);
    p.cellWidth.push_back(s.rows.cellWidth[std::size_t(row)]);
    p.cellHeight.push_back(s.rows.cellHeight[std::size_t(row)]);
  }
  p.grid = Grid{in.z.data(), in.pw, in.ph, p.cellWidth.data(), p.cellHeight.data()};
  p.model = s.model;
  p.model.manning = in.manning.empty() ? nullptr : in.manning.data();
  if (in.outlet >= 0)
    p.outlet = (in.outlet / in.t.width + 1) * in.pw + in.outlet % in.t.width + 1;
  return p;
}

// Pass 1 on the GPU: each valid perimeter cell's sum of steps to where its path leaves the tile and
// where it goes then, as perimeterSums finds them.
void perimeterSumsOnGpu(TileInputs& in, const StepModel& s, const TileLayout& layout, int64_t first,
                        int gpuTiles, const RunControl& control, PerimeterForest& f)
{
  const PaddedTile p = paddedTile(in, s, layout.height);
  dem::detail::TileTravel& paths = in.travel;
  {
    const detail::GpuTurn turn(gpuTiles);
    dem::detail::travelTileCuda(p.grid, in.dir.data(), in.area.data(), p.model, p.outlet, nullptr, true, control, paths);
  }
  forPerimeter(in.t, [&](int64_t x, int64_t y, int64_t k) {
    if (in.dir[std::size_t((y + 1) * in.pw + x + 1)] == kNoData || std::isnan(paths.minutes[std::size_t(k)]))
      return;  // nowhere, with no sum
    const int64_t end = paths.end[std::size_t(k)];
    if (end == p.outlet)
      f.to[std::size_t(first + k)] = kToOutlet;
    else
      f.to[std::size_t(first + k)] = (in.t.y0 + end / in.pw - 1) * layout.width + in.t.x0 + end % in.pw - 1;
    f.sum[std::size_t(first + k)] = paths.minutes[std::size_t(k)];
  });
}

// What pass 2 finds in a tile.
struct TileStats
{
  std::vector<int64_t> rowCells;  // the watershed's cells per row of the tile
  double minSpeed = std::numeric_limits<double>::infinity(), maxSpeed = -std::numeric_limits<double>::infinity();
  double minTime = std::numeric_limits<double>::infinity(), maxTime = -std::numeric_limits<double>::infinity();
};

// Pass 2 for one tile: its times summed up the paths from the cells that leave the tile into the
// watershed (their times from the forest) and from the outlet, in travel_time.cpp's way (a cell's
// step plus its receiver's time).
const std::vector<double>& tileTimes(TileInputs& in, const StepModel& s, const TileLayout& layout,
                                     const std::vector<double>& ring, TileStats& stats)
{
  const int64_t n = in.t.cells(), tw = in.t.width;
  std::vector<double>& minutes = in.minutes;
  assignHuge(minutes, std::size_t(n), kNan);
  stats.rowCells.assign(std::size_t(in.t.height), 0);
  std::vector<int64_t>& queue = in.path;
  queue.clear();
  const auto settle = [&](int64_t q, double downstream) {
    double v;
    minutes[std::size_t(q)] = stepOf(in, s, q, &v) + downstream;
    stats.minSpeed = std::min(stats.minSpeed, v);
    stats.maxSpeed = std::max(stats.maxSpeed, v);
    ++stats.rowCells[std::size_t(q / tw)];
    queue.push_back(q);
  };
  if (in.outlet >= 0)
  {
    double v;
    minutes[std::size_t(in.outlet)] = stepOf(in, s, in.outlet, &v);
    stats.minSpeed = stats.maxSpeed = v;
    ++stats.rowCells[std::size_t(in.outlet / tw)];
    queue.push_back(in.outlet);
  }
  forPerimeter(in.t, [&](int64_t x, int64_t y, int64_t) {
    const int64_t q = y * tw + x;
    int64_t target = -1;
    if (q == in.outlet || nextOf(in, q, layout.width, &target) != kLeaves)
      return;
    const int64_t rx = target % layout.width - in.t.x0, ry = target / layout.width - in.t.y0;
    const double downstream = ring[std::size_t(detail::perimeterPlace(in.pw, in.ph, rx + 1, ry + 1))];
    if (!std::isnan(downstream))
      settle(q, downstream);
  });
  for (std::size_t head = 0; head < queue.size(); ++head)
  {
    const int64_t c = queue[head], x = c % tw, y = c / tw;
    for (int d = 0; d < 8; ++d)
    {
      const int64_t nx = x + kDx[d], ny = y + kDy[d];
      if (nx < 0 || ny < 0 || nx >= tw || ny >= in.t.height)
        continue;
      const int64_t nb = ny * tw + nx;
      if (nb != in.outlet && in.dir[std::size_t((ny + 1) * in.pw + nx + 1)] == uint8_t((d + 4) & 7))
        settle(nb, minutes[std::size_t(c)]);
    }
  }
  for (const int64_t q : queue)
  {
    stats.minTime = std::min(stats.minTime, minutes[std::size_t(q)]);
    stats.maxTime = std::max(stats.maxTime, minutes[std::size_t(q)]);
  }
  return minutes;
}

// Pass 2 on the GPU: the tile's times from its halo cells' times to the outlet (the forest's, on its
// ring).
const std::vector<double>& tileTimesOnGpu(TileInputs& in, const StepModel& s, const TileLayout& layout,
                                          const std::vector<double>& ring, int gpuTiles, const RunControl& control,
                                          TileStats& stats)
{
  const PaddedTile p = paddedTile(in, s, layout.height);
  dem::detail::TileTravel& times = in.travel;
  {
    const detail::GpuTurn turn(gpuTiles);
    dem::detail::travelTileCuda(p.grid, in.dir.data(), in.area.data(), p.model, p.outlet, ring.data(), false,
                                control, times);
  }
  stats.rowCells.assign(std::size_t(in.t.height), 0);
  for (int64_t y = 0; y < in.t.height; ++y)
  {
    const double* row = times.minutes.data() + y * in.t.width;
    int64_t cells = 0;
    for (int64_t x = 0; x < in.t.width; ++x)
    {
      const double m = row[x];
      if (std::isnan(m))
        continue;
      ++cells;
      stats.minTime = std::min(stats.minTime, m);
      stats.maxTime = std::max(stats.maxTime, m);
    }
    stats.rowCells[std::size_t(y)] = cells;
  }
  if (!std::isnan(times.minSpeed))
  {
    stats.minSpeed = times.minSpeed;
    stats.maxSpeed = times.maxSpeed;
  }
  return times.minutes;
}

// Whether any cell of tile i reaches the outlet: the outlet lies in the tile, or a path leaves it
// towards the outlet. A path from a cell of the tile to the outlet elsewhere leaves the tile by one
// of its perimeter cells, whose time the forest then has; so where every perimeter cell's time is
// NaN and the outlet lies elsewhere, every cell's is.
bool reachesOutlet(const TileLayout& layout, const PerimeterForest& f, int64_t i, int64_t outlet)
{
  if (layout.tile(i).contains(outlet % layout.width, outlet / layout.width))
    return true;
  for (int64_t node = f.firstNode[std::size_t(i)]; node < f.firstNode[std::size_t(i) + 1]; ++node)
    if (!std::isnan(f.time[std::size_t(node)]))
      return true;
  return false;
}

}  // namespace

TravelSummary travelTimeTiled(const RasterSource<float>& filled, const RasterSource<uint8_t>& directions,
                              const RasterSource<int64_t>& area, const RasterSource<float>* manning,
                              const RowSizes& rows, int64_t outlet, const VelocityModel& model,
                              RasterSink<double>& minutes, const TiledOptions& options, const RunControl& control,
                              TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  validateModel(model);
  const TileLayout layout = detail::beginTiledRun(directions.width(), directions.height(), rows, options,
                                                  kTravelBytesPerTileCell, 1, out);
  const auto sameSize = [&](int64_t w, int64_t h) { return w == layout.width && h == layout.height; };
  if (!sameSize(filled.width(), filled.height()) || !sameSize(area.width(), area.height()) ||
      (manning && !sameSize(manning->width(), manning->height())))
    throw InvalidInput("the filled DEM, the directions, the accumulation and the Manning raster must have one size");
  if (outlet < 0 || outlet >= layout.width * layout.height)
    throw InvalidInput("the outlet lies outside the DEM");
  {
    const int64_t ox = outlet % layout.width, oy = outlet / layout.width;
    Window at{ox, oy, 1, 1};
    uint8_t d = kNoData;
    directions.read(at, &d);
    if (d == kNoData)
      throw InvalidInput("the outlet lies on a nodata cell");
  }
  const StepModel steps{model, dem::detail::manningNPower(model.overlandN), rows};
  const bool gpu = options.backend == Backend::Gpu;

  PerimeterForest f;
  f.firstNode.resize(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    f.firstNode[std::size_t(i) + 1] = f.firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = f.firstNode.back();
  f.to.assign(std::size_t(nodes), kToNowhere);
  f.sum.assign(std::size_t(nodes), 0.0);
  out.graphBytes = nodes * int64_t(sizeof(int64_t) + 2 * sizeof(double) + 1);

  detail::Reused<TileInputs> inputs;
  detail::forEachTile(layout, 1, "travel time pass 1 (perimeter paths)", options, control, out, [&](int64_t i) {
    const auto held = inputs.take();
    TileInputs& in = *held;
    readInputs(filled, directions, area, manning, model, layout.tile(i), outlet, layout.width, gpu, in);
    if (gpu)
      perimeterSumsOnGpu(in, steps, layout, f.firstNode[std::size_t(i)], options.gpuTiles, control, f);
    else
      perimeterSums(in, steps, layout.width, f.firstNode[std::size_t(i)], f);
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    const int64_t first = f.firstNode[std::size_t(i)], n = f.firstNode[std::size_t(i) + 1] - first;
    a.span(f.to.data() + first, n);
    a.span(f.sum.data() + first, n);
  }});
  inputs.clear();
  if (detail::holdsGraph(options))  // the coordinator's, in a distributed run
  {
    ScopedStage timing(out.times, "travel time forest");
    forestTimes(layout, f, control);
  }

  // Pass 2: each tile reads whether it reaches the outlet and the times on its ring (its neighbours'
  // perimeter cells' times).
  struct TileIn
  {
    uint8_t reaches = 0;
    std::vector<double> ring;
  };
  detail::ToTiles<TileIn> toTiles(
    options, layout.count(),
    [&](int64_t i) {
      TileIn in;
      in.reaches = reachesOutlet(layout, f, i, outlet);
      if (in.reaches)
        in.ring = detail::ringOf(layout, layout.tile(i), kNan, [&](int64_t j, int64_t k) {
          return f.time[std::size_t(f.firstNode[std::size_t(j)] + k)];
        });
      return in;
    },
    [](Archive& a, TileIn& in) {
      a.value(in.reaches);
      a.vector(in.ring);
    });
  struct TileOut
  {
    uint8_t reaches = 0;
    TileStats stats;
  };
  std::vector<TileOut> tileOut(std::size_t(layout.count()));
  TileTraffic traffic;
  traffic.in = [&](int64_t i, Archive& a) { toTiles.traffic(i, a); };
  traffic.out = [&](int64_t i, Archive& a) {
    TileOut& mine = tileOut[std::size_t(i)];
    a.value(mine.reaches);
    a.vector(mine.stats.rowCells);
    a.value(mine.stats.minSpeed);
    a.value(mine.stats.maxSpeed);
    a.value(mine.stats.minTime);
    a.value(mine.stats.maxTime);
  };
  detail::forEachTile(layout, 2, "travel time pass 2 (times; write)", options, control, out, [&](int64_t i) {
    const auto held = inputs.take();
    TileInputs& in = *held;
    const Window t = layout.tile(i);
    const TileIn reads = toTiles.get(i);
    if (!reads.reaches)
    {
      assignHuge(in.minutes, std::size_t(t.cells()), kNan);
      minutes.write(t, in.minutes.data());
      return;
    }
    readInputs(filled, directions, area, manning, model, t, outlet, layout.width, gpu, in);
    TileOut& mine = tileOut[std::size_t(i)];
    mine.reaches = 1;
    const std::vector<double>& times = gpu ? tileTimesOnGpu(in, steps, layout, reads.ring, options.gpuTiles, control,
                                                            mine.stats)
                                           : tileTimes(in, steps, layout, reads.ring, mine.stats);
    minutes.write(t, times.data());
  }, traffic);
  inputs.clear();
  out.passes = 2;
  TravelSummary summary;
  std::vector<int64_t> rowCells(std::size_t(layout.height), 0);
  TileStats all;
  summary.tilesWithTimes.assign(std::size_t(layout.count()), 0);
  for (int64_t i = 0; i < layout.count(); ++i)
  {
    const TileOut& mine = tileOut[std::size_t(i)];
    if (!mine.reaches)
      continue;
    summary.tilesWithTimes[std::size_t(i)] = 1;
    const Window t = layout.tile(i);
    for (int64_t y = 0; y < t.height; ++y)
      rowCells[std::size_t(t.y0 + y)] += mine.stats.rowCells[std::size_t(y)];
    all.minSpeed = std::min(all.minSpeed, mine.stats.minSpeed);
    all.maxSpeed = std::max(all.maxSpeed, mine.stats.maxSpeed);
    all.minTime = std::min(all.minTime, mine.stats.minTime);
    all.maxTime = std::max(all.maxTime, mine.stats.maxTime);
  }
  TravelTimes counted;
  dem::detail::watershedFromRows(detail::rowGrid(rows, layout.width, layout.height), rowCells, counted);
  summary.watershedCells = counted.watershedCells;
  summary.watershedArea = counted.watershedArea;
  summary.minSpeed = all.minSpeed;
  summary.maxSpeed = all.maxSpeed;
  summary.minTime = all.minTime;
  summary.maxTime = all.maxTime;
  return summary;
}

namespace {

// The cell of highest value within `radius` metres of cell (x, y) (ties to the lowest index; -1 where
// no valid cell lies there), reading windows of at most `tileSide` cells a side: read(window, valid,
// values) fills the window's validity (1: a cell) and, with `ranked`, its values; without, the first
// valid cell in row order is taken.
template <typename T, typename Read>
int64_t highestWithin(int64_t w, int64_t h, const RowSizes& rows, int64_t x, int64_t y, double radius,
                      int64_t tileSide, bool ranked, Read read)
{
  if (x < 0 || y < 0 || x >= w || y >= h)
    throw InvalidInput("the outlet lies outside the DEM");
  if (!(radius >= 0) || !std::isfinite(radius))
    throw InvalidInput("the snap distance must be zero or more");
  if (int64_t(rows.cellWidth.size()) != h || int64_t(rows.cellHeight.size()) != h)
    throw InvalidInput("the cell sizes must give one width and one height per row of the DEM");
  const double cw = rows.cellWidth[std::size_t(y)], ch = rows.cellHeight[std::size_t(y)];
  const int64_t reach = int64_t(std::min(std::floor(radius / std::min(cw, ch)), double(std::max(w, h))));
  const int64_t x0 = std::max<int64_t>(0, x - reach), x1 = std::min(w - 1, x + reach);
  const int64_t y0 = std::max<int64_t>(0, y - reach), y1 = std::min(h - 1, y + reach);
  const int64_t side = std::max<int64_t>(1, tileSide);
  int64_t best = -1;
  T bestValue = T();
  std::vector<uint8_t> valid;
  std::vector<T> values;
  // Window by window; the best of each (the first of the highest, in row-major order) against the
  // best so far by value, then by index: the cell snapOutlet finds.
  for (int64_t wy = y0; wy <= y1; wy += side)
    for (int64_t wx = x0; wx <= x1; wx += side)
    {
      const Window win{wx, wy, std::min(side, x1 + 1 - wx), std::min(side, y1 + 1 - wy)};
      valid.resize(std::size_t(win.cells()));
      values.resize(ranked ? valid.size() : 0);
      read(win, valid, values);
      for (int64_t yy = 0; yy < win.height; ++yy)
        for (int64_t xx = 0; xx < win.width; ++xx)
        {
          const std::size_t q = std::size_t(yy * win.width + xx);
          if (!valid[q])
            continue;
          const double dx = double(win.x0 + xx - x) * cw, dy = double(win.y0 + yy - y) * ch;
          if (!(dx * dx + dy * dy <= radius * radius))
            continue;
          const int64_t c = (win.y0 + yy) * w + win.x0 + xx;
          if (!ranked)
            return c;
          if (best < 0 || values[q] > bestValue || (values[q] == bestValue && c < best))
          {
            best = c;
            bestValue = values[q];
          }
        }
    }
  return best;
}

}  // namespace

int64_t snapOutletTiled(const RasterSource<float>& z, const RasterSource<int64_t>* cells, const RowSizes& rows,
                        int64_t x, int64_t y, double radius, int64_t tileSide)
{
  std::vector<float> zs;
  return highestWithin<int64_t>(z.width(), z.height(), rows, x, y, radius, tileSide, cells != nullptr,
                                [&](const Window& win, std::vector<uint8_t>& valid, std::vector<int64_t>& counts) {
                                  zs.resize(valid.size());
                                  z.read(win, zs.data());
                                  for (std::size_t q = 0; q < zs.size(); ++q)
                                    valid[q] = !std::isnan(zs[q]);
                                  if (cells)
                                    cells->read(win, counts.data());
                                });
}

int64_t snapToHighestTiled(const RasterSource<double>& values, const RowSizes& rows, int64_t x, int64_t y,
                           double radius, int64_t tileSide)
{
  return highestWithin<double>(values.width(), values.height(), rows, x, y, radius, tileSide, true,
                               [&](const Window& win, std::vector<uint8_t>& valid, std::vector<double>& v) {
                                 values.read(win, v.data());
                                 for (std::size_t q = 0; q < v.size(); ++q)
                                   valid[q] = !std::isnan(v[q]);
                               });
}

}  // namespace gpugeo::dem::tiled
