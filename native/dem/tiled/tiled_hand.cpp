// Height above the nearest drainage tile by tile (hand.h's heights and distances, the same bits). A
// tile is resolved as a whole grid (detail/down_paths.h, on the options' backend) with its one-cell
// halo ring held as known ends: pass 1 holds each ring cell as an end of its own at length 0, so that
// the tile's perimeter cells learn where their paths end: at a stream cell of the tile (its
// elevation, the length to it), at no stream, or at the ring cell where they leave the tile, which
// is a neighbour tile's perimeter cell. The coordinator follows those links from perimeter to
// perimeter, adding the lengths, to each perimeter cell's stream elevation and length (a chain that
// comes back on itself reaches none). Pass 2 holds the ring at those and resolves the tile again, now
// for good, writing the heights and distances. The lengths are integers (fixed point): the sums are
// the in-memory run's whatever the tiles.
#include <cmath>
#include <limits>
#include <vector>

#include "core/errors.h"
#include "dem/detail/down_paths.h"
#include "dem/hand.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using detail::perimeterCell;
using detail::perimeterCount;
using detail::perimeterPlace;
using detail::TileLayout;
using dem::detail::kPathNone;
using dem::detail::kPathUnknown;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// A tile with its halo: the inputs and (on the CPU) the paths' ends and lengths.
struct TileWork
{
  std::vector<float> z;
  std::vector<uint8_t> directions, streams;
  std::vector<int64_t> steps, end, length;
};

// What a tile's ring holds in pass 2: per ring cell, the elevation of the stream its path reaches
// (NaN: none, or off the raster) and its length to it.
struct Ring
{
  std::vector<float> z;
  std::vector<int64_t> length;
};

void visitRing(Archive& a, Ring& ring)
{
  a.vector(ring.z);
  a.vector(ring.length);
}

bool onRing(int64_t cell, int64_t pw, int64_t ph)
{
  const int64_t x = cell % pw, y = cell / pw;
  return x == 0 || y == 0 || x == pw - 1 || y == ph - 1;
}

// Reads tile t with its halo and its padded rows' steps (the rows off the raster hold only ring
// cells, whose steps are not taken).
void readTile(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
              const RasterSource<uint8_t>& streams, const RowSizes& rows, double unit, const TileLayout& layout,
              const Window& t, TileWork& work)
{
  const int64_t ph = t.height + 2;
  detail::readWithHalo(elevations, t, kNan, work.z);
  detail::readWithHalo(directions, t, kNoData, work.directions);
  detail::readWithHalo(streams, t, uint8_t(0), work.streams);
  std::vector<double> cw(static_cast<std::size_t>(ph)), ch(static_cast<std::size_t>(ph));
  for (int64_t y = 0; y < ph; ++y)
  {
    const int64_t gy = std::min(std::max<int64_t>(t.y0 + y - 1, 0), layout.height - 1);
    cw[std::size_t(y)] = rows.cellWidth[std::size_t(gy)];
    ch[std::size_t(y)] = rows.cellHeight[std::size_t(gy)];
  }
  work.steps = dem::detail::rowSteps(cw.data(), ch.data(), ph, unit);
}

// Which ring cells of tile t hold a known end (on the raster and known(k)), and their lengths.
template <typename Known, typename Length>
void ringEnds(const TileLayout& layout, const Window& t, Known known, Length length, std::vector<uint8_t>& ringKnown,
              std::vector<int64_t>& ringLength)
{
  const int64_t pw = t.width + 2, ph = t.height + 2;
  ringKnown.assign(std::size_t(perimeterCount(pw, ph)), 0);
  ringLength.assign(ringKnown.size(), 0);
  for (int64_t k = 0; k < int64_t(ringKnown.size()); ++k)
  {
    int64_t x = 0, y = 0;
    perimeterCell(pw, ph, k, x, y);
    const int64_t gx = t.x0 + x - 1, gy = t.y0 + y - 1;
    if (gx >= 0 && gy >= 0 && gx < layout.width && gy < layout.height && known(k))
    {
      ringKnown[std::size_t(k)] = 1;
      ringLength[std::size_t(k)] = length(k);
    }
  }
}

// What a resolved tile gives its pass: in pass 1 each perimeter cell's end (a padded index, < 0
// none) and length; in pass 2 the tile's heights and distances (NaN where none) and counts.
struct TileOutcome
{
  std::vector<int64_t> perimeterEnd, perimeterLength;
  std::vector<float> heights, distances;
  HandSummary sum;
};

// The tile's paths resolved on the CPU: the stream cells end their own paths, the ring cells as given.
void resolveOnCpu(TileWork& work, const Window& t, const std::vector<uint8_t>& ringKnown,
                  const std::vector<int64_t>& ringLength, const RunControl& control)
{
  const int64_t pw = t.width + 2, ph = t.height + 2;
  work.end.assign(std::size_t(pw * ph), kPathUnknown);
  work.length.assign(std::size_t(pw * ph), 0);
  for (int64_t y = 1; y < ph - 1; ++y)
    for (int64_t x = 1; x < pw - 1; ++x)
    {
      const std::size_t c = std::size_t(y * pw + x);
      if (!std::isfinite(work.z[c]) || work.directions[c] == kNoData)
      {
        work.end[c] = kPathNone;
        work.directions[c] = kNoData;
      }
      else if (work.streams[c] != 0)
        work.end[c] = int64_t(c);
    }
  for (int64_t k = 0; k < int64_t(ringKnown.size()); ++k)
  {
    int64_t x = 0, y = 0;
    perimeterCell(pw, ph, k, x, y);
    const std::size_t c = std::size_t(y * pw + x);
    work.end[c] = ringKnown[std::size_t(k)] ? int64_t(c) : kPathNone;
    work.length[c] = ringLength[std::size_t(k)];
  }
  dem::detail::resolvePathsCpu(work.directions.data(), pw, ph, work.steps.data(), work.end.data(),
                               work.length.data(), control);
}

// Resolves tile t (read into `work`) with its ring on the options' backend; pass 1 (ringZ null)
// gives the perimeter's ends, pass 2 the heights (and distances when asked for).
void resolveTile(TileWork& work, const Window& t, const std::vector<uint8_t>& ringKnown,
                 const std::vector<int64_t>& ringLength, const std::vector<float>* ringZ, double unit,
                 bool wantDistances, const TiledOptions& options, const RunControl& control, TileOutcome& out)
{
  const int64_t pw = t.width + 2, ph = t.height + 2;
  if (!ringZ)
  {
    out.perimeterEnd.assign(std::size_t(detail::perimeterSize(t)), kPathNone);
    out.perimeterLength.assign(out.perimeterEnd.size(), 0);
  }
  else
  {
    out.heights.assign(std::size_t(t.cells()), kNan);
    if (wantDistances)
      out.distances.assign(std::size_t(t.cells()), kNan);
  }
  if (options.backend == Backend::Gpu)
  {
    const detail::GpuTurn turn(options.gpuTiles);
    const dem::detail::DrainageCounts counts = dem::detail::resolveTileCuda(
      work.z.data(), work.directions.data(), work.streams.data(), pw, ph, work.steps.data(), ringKnown.data(),
      ringLength.data(), ringZ ? ringZ->data() : nullptr, unit, ringZ ? nullptr : out.perimeterEnd.data(),
      ringZ ? nullptr : out.perimeterLength.data(), ringZ ? out.heights.data() : nullptr,
      ringZ && wantDistances ? out.distances.data() : nullptr, control);
    out.sum = HandSummary{counts.streamCells, counts.drained, counts.undrained};
    return;
  }
  resolveOnCpu(work, t, ringKnown, ringLength, control);
  if (!ringZ)
  {
    detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const std::size_t c = std::size_t((y + 1) * pw + x + 1);
      out.perimeterEnd[std::size_t(k)] = work.end[c];
      out.perimeterLength[std::size_t(k)] = work.length[c];
    });
    return;
  }
  out.sum = HandSummary();
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x)
    {
      const std::size_t c = std::size_t((y + 1) * pw + x + 1), o = std::size_t(y * t.width + x);
      const int64_t e = work.end[c];
      if (work.directions[c] == kNoData)
        continue;
      out.sum.streamCells += work.streams[c] != 0;
      if (e < 0)
      {
        ++out.sum.undrained;
        continue;
      }
      ++out.sum.drained;
      const float zEnd = onRing(e, pw, ph) ? (*ringZ)[std::size_t(perimeterPlace(pw, ph, e % pw, e / pw))]
                                           : work.z[std::size_t(e)];
      out.heights[o] = float(double(work.z[c]) - double(zEnd));
      if (wantDistances)
        out.distances[o] = float(double(work.length[c]) * unit);
    }
}

// The working sets a pass's tiles reuse.
struct TileSet
{
  TileWork work;
  TileOutcome outcome;
  std::vector<uint8_t> ringKnown;
  std::vector<int64_t> ringLength;
};

}  // namespace

HandSummary handTiled(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                      const RasterSource<uint8_t>& streams, const RowSizes& rows, RasterSink<float>& height,
                      RasterSink<float>* distance, const TiledOptions& options, const RunControl& control,
                      TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  if (directions.width() != elevations.width() || directions.height() != elevations.height() ||
      streams.width() != elevations.width() || streams.height() != elevations.height())
    throw InvalidInput("height above drainage: the elevations, directions and streams differ in size");
  const TileLayout layout = detail::beginTiledRun(elevations.width(), elevations.height(), rows, options,
                                                  kHandBytesPerTileCell, 1, out);
  const double unit = dem::detail::pathUnit(rows.cellWidth.data(), rows.cellHeight.data(), layout.height,
                                            layout.width * layout.height);

  // Pass 1: where each perimeter cell's path ends: the perimeter node where it enters another tile
  // (to), or a stream's elevation (NaN: none); and its length to there.
  std::vector<int64_t> firstNode(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    firstNode[std::size_t(i) + 1] = firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = firstNode.back();
  std::vector<int64_t> to(std::size_t(nodes), -1), length(std::size_t(nodes), 0);
  std::vector<float> endZ(std::size_t(nodes), kNan);
  out.graphBytes = nodes * int64_t(2 * sizeof(int64_t) + sizeof(float) + sizeof(uint8_t));
  detail::Reused<TileSet> sets;
  detail::forEachTile(layout, 1, "height above drainage pass 1 (perimeter paths)", options, control, out,
                      [&](int64_t i) {
    const auto held = sets.take();
    TileSet& set = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2, ph = t.height + 2;
    readTile(elevations, directions, streams, rows, unit, layout, t, set.work);
    ringEnds(layout, t, [](int64_t) { return true; }, [](int64_t) { return int64_t(0); }, set.ringKnown,
             set.ringLength);
    resolveTile(set.work, t, set.ringKnown, set.ringLength, nullptr, unit, false, options, control, set.outcome);
    std::vector<int64_t> ringNode(std::size_t(perimeterCount(pw, ph)), -1);
    detail::forHaloRing(layout, t, [&](int64_t x, int64_t y, int64_t j, int64_t k) {
      ringNode[std::size_t(perimeterPlace(pw, ph, x + 1, y + 1))] = firstNode[std::size_t(j)] + k;
    });
    for (int64_t k = 0; k < detail::perimeterSize(t); ++k)
    {
      const std::size_t node = std::size_t(firstNode[std::size_t(i)] + k);
      const int64_t e = set.outcome.perimeterEnd[std::size_t(k)];
      if (e < 0)
        continue;
      length[node] = set.outcome.perimeterLength[std::size_t(k)];
      if (onRing(e, pw, ph))
        to[node] = ringNode[std::size_t(perimeterPlace(pw, ph, e % pw, e / pw))];
      else
        endZ[node] = set.work.z[std::size_t(e)];
    }
  }, TileTraffic{nullptr, [&](int64_t i, Archive& a) {
    const int64_t first = firstNode[std::size_t(i)], count = firstNode[std::size_t(i) + 1] - first;
    a.span(to.data() + first, count);
    a.span(length.data() + first, count);
    a.span(endZ.data() + first, count);
  }});

  // The coordinator: each node's stream elevation and length, following the links (a chain that
  // meets itself reaches none).
  std::vector<float> finalZ;
  std::vector<int64_t> finalLength;
  if (detail::holdsGraph(options))
  {
    ScopedStage timing(out.times, "height above drainage graph");
    enum : uint8_t { kUnknown, kOnChain, kDone };
    std::vector<uint8_t> state(std::size_t(nodes), kUnknown);
    finalZ.assign(std::size_t(nodes), kNan);
    finalLength.assign(std::size_t(nodes), 0);
    std::vector<int64_t> chain;
    for (int64_t start = 0; start < nodes; ++start)
    {
      int64_t n = start;
      while (state[std::size_t(n)] == kUnknown)
      {
        if (to[std::size_t(n)] < 0)
        {
          finalZ[std::size_t(n)] = endZ[std::size_t(n)];
          finalLength[std::size_t(n)] = length[std::size_t(n)];
          state[std::size_t(n)] = kDone;
          break;
        }
        state[std::size_t(n)] = kOnChain;
        chain.push_back(n);
        n = to[std::size_t(n)];
      }
      const bool reached = state[std::size_t(n)] == kDone && !std::isnan(finalZ[std::size_t(n)]);
      const float z = reached ? finalZ[std::size_t(n)] : kNan;
      int64_t total = reached ? finalLength[std::size_t(n)] : 0;
      for (auto c = chain.rbegin(); c != chain.rend(); ++c)
      {
        if (reached)
          total += length[std::size_t(*c)];
        finalZ[std::size_t(*c)] = z;
        finalLength[std::size_t(*c)] = total;
        state[std::size_t(*c)] = kDone;
      }
      chain.clear();
    }
  }

  // Pass 2: each tile with its ring at the final ends; the heights and distances written.
  detail::ToTiles<Ring> rings(
    options, layout.count(),
    [&](int64_t i) {
      const Window t = layout.tile(i);
      Ring ring;
      ring.z = detail::ringOf(layout, t, kNan, [&](int64_t j, int64_t k) {
        return finalZ[std::size_t(firstNode[std::size_t(j)] + k)];
      });
      ring.length = detail::ringOf(layout, t, int64_t(0), [&](int64_t j, int64_t k) {
        return finalLength[std::size_t(firstNode[std::size_t(j)] + k)];
      });
      return ring;
    },
    visitRing);
  std::vector<HandSummary> sums(std::size_t(layout.count()));
  TileTraffic traffic;
  traffic.in = [&](int64_t i, Archive& a) { rings.traffic(i, a); };
  traffic.out = detail::sendBack(sums).out;
  detail::forEachTile(layout, 2, "height above drainage pass 2 (heights; write)", options, control, out,
                      [&](int64_t i) {
    const auto held = sets.take();
    TileSet& set = *held;
    const Window t = layout.tile(i);
    const Ring ring = rings.get(i);
    readTile(elevations, directions, streams, rows, unit, layout, t, set.work);
    ringEnds(layout, t, [&](int64_t k) { return !std::isnan(ring.z[std::size_t(k)]); },
             [&](int64_t k) { return ring.length[std::size_t(k)]; }, set.ringKnown, set.ringLength);
    resolveTile(set.work, t, set.ringKnown, set.ringLength, &ring.z, unit, distance != nullptr, options, control,
                set.outcome);
    sums[std::size_t(i)] = set.outcome.sum;
    height.write(t, set.outcome.heights.data());
    if (distance)
      distance->write(t, set.outcome.distances.data());
  }, traffic);
  sets.clear();
  out.passes = 2;
  HandSummary total;
  for (const HandSummary& s : sums)
  {
    total.streamCells += s.streamCells;
    total.drained += s.drained;
    total.undrained += s.undrained;
  }
  return total;
}

DrainageHeights handOnThreads(const Grid& grid, const std::vector<uint8_t>& directions,
                              const std::vector<uint8_t>& streams, int threads, const RunControl& control)
{
  validateGrid(grid);
  const int64_t w = grid.width, h = grid.height;
  if (int64_t(directions.size()) != w * h || int64_t(streams.size()) != w * h)
    throw InvalidInput("height above drainage: the directions or the streams do not fill the grid");
  TiledOptions options;
  options.tileWidth = options.tileHeight = 1024;
  options.threads = std::max(1, threads);
  const MemoryRaster<float> z(w, h, std::vector<float>(grid.z, grid.z + w * h));
  const MemoryRaster<uint8_t> dirs(w, h, directions), marks(w, h, streams);
  MemoryRaster<float> heights(w, h), distances(w, h);
  const RowSizes rows{std::vector<double>(grid.cellWidth, grid.cellWidth + h),
                      std::vector<double>(grid.cellHeight, grid.cellHeight + h)};
  const HandSummary sum = handTiled(z, dirs, marks, rows, heights, &distances, options, control);
  DrainageHeights result;
  result.height = heights.cells();
  result.distance = distances.cells();
  result.streamCells = sum.streamCells;
  result.drained = sum.drained;
  result.undrained = sum.undrained;
  return result;
}

}  // namespace gpugeo::dem::tiled
