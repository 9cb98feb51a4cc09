// The stream network tile by tile (dem/streams.h's segments, orders and sums; the segment raster).
// Every tile is read with a one-cell halo, so that each of its cells knows whether it is a stream
// cell, how many stream cells flow into it (the halo's directions included) and whether it starts a
// segment. Within a tile each stream cell belongs to the segment of the top of its chain: a start, or
// an entry cell whose one inflow comes from the halo (a neighbour tile's perimeter cell). Pass 1
// sends back the tile's starts and, for its perimeter cells, that top: the coordinator numbers the
// starts in row order and follows the entries' links from perimeter to perimeter to each perimeter
// cell's segment. Pass 2 holds the ring at those segments, labels every cell (written to the raster)
// and sends back per segment its cells and length in the tile, and, where they lie in the tile, its
// first cell's elevation and its last cell (what it flows into, its upstream cells and area). The
// coordinator adds them up and orders the segments (detail::addStreamOrders). Not yet distributable.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/down_paths.h"
#include "dem/detail/stream_orders.h"
#include "dem/streams.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

using detail::perimeterCount;
using detail::perimeterPlace;
using detail::TileLayout;

// A tile read with its halo: which padded cells are streams, and for the tile's own cells the number
// of stream cells flowing in (0, 1, 2 for more), the one upstream stream cell where there is one, and
// the top of each stream cell's chain.
struct TileStreams
{
  std::vector<uint8_t> directions, stream, inflow;
  std::vector<int64_t> cells, area, upstream, top;
  std::vector<float> z;
};

int64_t paddedSuccessor(const std::vector<uint8_t>& directions, int64_t pw, int64_t ph, int64_t c)
{
  const uint8_t d = directions[std::size_t(c)];
  if (d >= 8)
    return -1;
  const int64_t x = c % pw + kDx[d], y = c / pw + kDy[d];
  return x < 0 || y < 0 || x >= pw || y >= ph ? -1 : y * pw + x;
}

bool inside(int64_t c, int64_t pw, int64_t ph)
{
  const int64_t x = c % pw, y = c / pw;
  return x > 0 && y > 0 && x < pw - 1 && y < ph - 1;
}

void readStreams(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                 const RasterSource<int64_t>& cells, const RasterSource<int64_t>& area, const StreamThreshold& threshold,
                 const Window& t, TileStreams& s)
{
  const int64_t pw = t.width + 2, ph = t.height + 2, n = pw * ph;
  detail::readWithHalo(directions, t, kNoData, s.directions);
  detail::readWithHalo(cells, t, int64_t(0), s.cells);
  detail::readWithHalo(area, t, int64_t(0), s.area);
  detail::readWithHalo(elevations, t, std::numeric_limits<float>::quiet_NaN(), s.z);
  s.stream.assign(std::size_t(n), 0);
  for (int64_t c = 0; c < n; ++c)
    s.stream[std::size_t(c)] = isStreamCell(s.directions[std::size_t(c)], s.cells[std::size_t(c)],
                                            s.area[std::size_t(c)], threshold);
  s.inflow.assign(std::size_t(n), 0);
  s.upstream.assign(std::size_t(n), -1);
  for (int64_t c = 0; c < n; ++c)
  {
    if (!s.stream[std::size_t(c)])
      continue;
    const int64_t d = paddedSuccessor(s.directions, pw, ph, c);
    if (d >= 0 && inside(d, pw, ph) && s.stream[std::size_t(d)] && s.inflow[std::size_t(d)] < 2)
    {
      ++s.inflow[std::size_t(d)];
      s.upstream[std::size_t(d)] = c;
    }
  }
  // The chains' tops: from each start and each entry (one inflow, from the halo) down the cells of
  // one inflow within the tile.
  s.top.assign(std::size_t(n), -1);
  for (int64_t y = 1; y < ph - 1; ++y)
    for (int64_t x = 1; x < pw - 1; ++x)
    {
      const int64_t root = y * pw + x;
      if (!s.stream[std::size_t(root)] ||
          (s.inflow[std::size_t(root)] == 1 && inside(s.upstream[std::size_t(root)], pw, ph)))
        continue;
      for (int64_t c = root;;)
      {
        s.top[std::size_t(c)] = root;
        const int64_t d = paddedSuccessor(s.directions, pw, ph, c);
        if (d < 0 || !inside(d, pw, ph) || !s.stream[std::size_t(d)] || s.inflow[std::size_t(d)] != 1)
          break;
        c = d;
      }
    }
}

// The global cell of padded cell c of tile t.
int64_t globalCell(const TileLayout& layout, const Window& t, int64_t pw, int64_t c)
{
  return (t.y0 + c / pw - 1) * layout.width + t.x0 + c % pw - 1;
}

// What pass 2 sends back of a tile.
struct TileSums
{
  std::map<int32_t, std::pair<int64_t, int64_t>> cellsAndUnits;  // per segment
  std::vector<int32_t> startSegment;
  std::vector<float> startZ;
  std::vector<int32_t> lastSegment, lastDown;
  std::vector<int64_t> lastCell, lastCells, lastArea;
  std::vector<float> lastZ;
};

}  // namespace

StreamNetwork streamNetworkTiled(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                                 const RasterSource<int64_t>& cells, const RasterSource<int64_t>& area,
                                 const RowSizes& rows, const StreamThreshold& threshold, RasterSink<int32_t>& segments,
                                 const TiledOptions& options, const RunControl& control, TiledReport* report)
{
  TiledReport local;
  TiledReport& out = report ? *report : local;
  if (detail::distributedRun(options))
    throw InvalidInput("stream network: a distributed run is not supported yet");
  const int64_t w = directions.width(), h = directions.height();
  for (const int64_t size : {elevations.width(), cells.width(), area.width()})
    if (size != w)
      throw InvalidInput("stream network: the rasters differ in size");
  for (const int64_t size : {elevations.height(), cells.height(), area.height()})
    if (size != h)
      throw InvalidInput("stream network: the rasters differ in size");
  const TileLayout layout = detail::beginTiledRun(w, h, rows, options, kStreamsBytesPerTileCell, 1, out);
  const double unit = dem::detail::pathUnit(rows.cellWidth.data(), rows.cellHeight.data(), h, w * h);
  const std::vector<int64_t> steps = dem::detail::rowSteps(rows.cellWidth.data(), rows.cellHeight.data(), h, unit);

  // Pass 1: the starts, and each perimeter cell's chain top: a start (its cell, >= 0), or the node of
  // the neighbour tile's perimeter cell its entry's inflow comes from (-2 - node); -1 off the streams.
  std::vector<int64_t> firstNode(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    firstNode[std::size_t(i) + 1] = firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = firstNode.back();
  std::vector<int64_t> link(std::size_t(nodes), -1);
  std::vector<std::vector<int64_t>> starts(std::size_t(layout.count()));
  out.graphBytes = nodes * int64_t(sizeof(int64_t) + sizeof(int32_t));
  detail::Reused<TileStreams> sets;
  detail::forEachTile(layout, 1, "stream network pass 1 (starts, perimeter chains)", options, control, out,
                      [&](int64_t i) {
    const auto held = sets.take();
    TileStreams& s = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2, ph = t.height + 2;
    readStreams(elevations, directions, cells, area, threshold, t, s);
    for (int64_t y = 1; y < ph - 1; ++y)
      for (int64_t x = 1; x < pw - 1; ++x)
      {
        const int64_t c = y * pw + x;
        if (s.stream[std::size_t(c)] && s.inflow[std::size_t(c)] != 1)
          starts[std::size_t(i)].push_back(globalCell(layout, t, pw, c));
      }
    std::vector<int64_t> ringNode(std::size_t(perimeterCount(pw, ph)), -1);
    detail::forHaloRing(layout, t, [&](int64_t x, int64_t y, int64_t j, int64_t k) {
      ringNode[std::size_t(perimeterPlace(pw, ph, x + 1, y + 1))] = firstNode[std::size_t(j)] + k;
    });
    detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
      const int64_t c = (y + 1) * pw + x + 1, root = s.top[std::size_t(c)];
      if (root < 0)
        return;
      const int64_t node = firstNode[std::size_t(i)] + k;
      if (s.inflow[std::size_t(root)] != 1)
        link[std::size_t(node)] = globalCell(layout, t, pw, root);
      else
      {
        const int64_t u = s.upstream[std::size_t(root)];
        link[std::size_t(node)] = -2 - ringNode[std::size_t(perimeterPlace(pw, ph, u % pw, u / pw))];
      }
    });
  });

  // The coordinator: the starts numbered in row order, each node's segment.
  StreamNetwork net;
  for (const auto& tileStarts : starts)
    net.first.insert(net.first.end(), tileStarts.begin(), tileStarts.end());
  std::sort(net.first.begin(), net.first.end());
  if (net.first.size() >= std::size_t(std::numeric_limits<int32_t>::max()))
    throw InvalidInput("stream network: more than 2147483647 segments");
  const auto segmentOf = [&](int64_t start) {
    return int32_t(std::lower_bound(net.first.begin(), net.first.end(), start) - net.first.begin()) + 1;
  };
  std::vector<int32_t> nodeSegment(std::size_t(nodes), 0);
  {
    ScopedStage timing(out.times, "stream network graph");
    std::vector<uint8_t> done(std::size_t(nodes), 0);
    std::vector<int64_t> chain;
    for (int64_t start = 0; start < nodes; ++start)
    {
      int64_t node = start;
      while (!done[std::size_t(node)] && link[std::size_t(node)] <= -2)
      {
        done[std::size_t(node)] = 2;  // on the chain
        chain.push_back(node);
        node = -2 - link[std::size_t(node)];
      }
      int32_t segment = 0;
      if (done[std::size_t(node)] == 1)
        segment = nodeSegment[std::size_t(node)];
      else if (done[std::size_t(node)] == 0 && link[std::size_t(node)] >= 0)
        segment = segmentOf(link[std::size_t(node)]);
      done[std::size_t(node)] = 1;
      if (link[std::size_t(node)] != -1 || segment > 0)
        nodeSegment[std::size_t(node)] = segment;
      for (const int64_t c : chain)
      {
        nodeSegment[std::size_t(c)] = segment;
        done[std::size_t(c)] = 1;
      }
      chain.clear();
    }
  }

  // Pass 2: every cell's segment (the ring held at its nodes'), written; each segment's sums.
  std::vector<TileSums> sums(std::size_t(layout.count()));
  detail::forEachTile(layout, 2, "stream network pass 2 (segments; write)", options, control, out, [&](int64_t i) {
    const auto held = sets.take();
    TileStreams& s = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2, ph = t.height + 2;
    readStreams(elevations, directions, cells, area, threshold, t, s);
    const std::vector<int32_t> ring = detail::ringOf(layout, t, int32_t(0), [&](int64_t j, int64_t k) {
      return nodeSegment[std::size_t(firstNode[std::size_t(j)] + k)];
    });
    std::vector<int32_t> label(std::size_t(pw * ph), 0);
    for (int64_t k = 0; k < int64_t(ring.size()); ++k)
    {
      int64_t x = 0, y = 0;
      detail::perimeterCell(pw, ph, k, x, y);
      label[std::size_t(y * pw + x)] = ring[std::size_t(k)];
    }
    for (int64_t y = 1; y < ph - 1; ++y)
      for (int64_t x = 1; x < pw - 1; ++x)
      {
        const int64_t c = y * pw + x, root = s.top[std::size_t(c)];
        if (root < 0)
          continue;
        label[std::size_t(c)] = s.inflow[std::size_t(root)] != 1
                                  ? segmentOf(globalCell(layout, t, pw, root))
                                  : label[std::size_t(s.upstream[std::size_t(root)])];
      }
    TileSums& sum = sums[std::size_t(i)];
    std::vector<int32_t> own(std::size_t(t.cells()), 0);
    for (int64_t y = 1; y < ph - 1; ++y)
      for (int64_t x = 1; x < pw - 1; ++x)
      {
        const int64_t c = y * pw + x;
        const int32_t segment = label[std::size_t(c)];
        own[std::size_t((y - 1) * t.width + x - 1)] = segment;
        if (segment <= 0)
          continue;
        auto& cellsAndUnits = sum.cellsAndUnits[segment];
        ++cellsAndUnits.first;
        if (s.inflow[std::size_t(c)] != 1)
        {
          sum.startSegment.push_back(segment);
          sum.startZ.push_back(s.z[std::size_t(c)]);
        }
        const int64_t d = paddedSuccessor(s.directions, pw, ph, c);
        const bool onward = d >= 0 && s.stream[std::size_t(d)];
        if (onward)
          cellsAndUnits.second +=
            dem::detail::stepUnits(steps.data() + 3 * (t.y0 + y - 1), s.directions[std::size_t(c)]);
        if (!onward || label[std::size_t(d)] != segment)  // the segment's last cell
        {
          sum.lastSegment.push_back(segment);
          sum.lastDown.push_back(onward ? label[std::size_t(d)] : 0);
          sum.lastCell.push_back(globalCell(layout, t, pw, c));
          sum.lastCells.push_back(s.cells[std::size_t(c)]);
          sum.lastArea.push_back(s.area[std::size_t(c)]);
          sum.lastZ.push_back(s.z[std::size_t(c)]);
        }
      }
    segments.write(t, own.data());
  });
  sets.clear();
  out.passes = 2;

  // The segments' sums and ends, then their orders.
  const std::size_t count = net.first.size();
  net.last.assign(count, -1);
  net.down.assign(count, 0);
  net.cells.assign(count, 0);
  net.length.assign(count, 0.0);
  net.drop.assign(count, 0.0);
  net.area.assign(count, 0);
  net.upstreamCells.assign(count, 0);
  std::vector<int64_t> units(count, 0);
  std::vector<float> startZ(count, 0.f), lastZ(count, 0.f);
  for (const TileSums& sum : sums)
  {
    for (const auto& [segment, cellsAndUnits] : sum.cellsAndUnits)
    {
      net.cells[std::size_t(segment - 1)] += cellsAndUnits.first;
      units[std::size_t(segment - 1)] += cellsAndUnits.second;
    }
    for (std::size_t e = 0; e < sum.startSegment.size(); ++e)
      startZ[std::size_t(sum.startSegment[e] - 1)] = sum.startZ[e];
    for (std::size_t e = 0; e < sum.lastSegment.size(); ++e)
    {
      const std::size_t k = std::size_t(sum.lastSegment[e] - 1);
      net.last[k] = sum.lastCell[e];
      net.down[k] = sum.lastDown[e];
      net.upstreamCells[k] = sum.lastCells[e];
      net.area[k] = sum.lastArea[e];
      lastZ[k] = sum.lastZ[e];
    }
  }
  for (std::size_t k = 0; k < count; ++k)
  {
    net.length[k] = double(units[k]) * unit;
    const float endZ = net.down[k] > 0 ? startZ[std::size_t(net.down[k] - 1)] : lastZ[k];
    net.drop[k] = double(startZ[k]) - double(endZ);
  }
  dem::detail::addStreamOrders(net);
  return net;
}

StreamCellSink::StreamCellSink(const RasterSource<uint8_t>& directions) : mDirections(directions) {}

void StreamCellSink::write(const Window& window, const int32_t* segments)
{
  std::vector<uint8_t> directions(std::size_t(window.cells()));
  mDirections.read(window, directions.data());
  std::vector<int64_t> keys;
  for (int64_t y = 0; y < window.height; ++y)
    for (int64_t x = 0; x < window.width; ++x)
    {
      const std::size_t i = std::size_t(y * window.width + x);
      if (segments[i] > 0 && directions[i] <= kNoFlow)
        keys.push_back(((window.y0 + y) * mDirections.width() + window.x0 + x) * 16 + directions[i]);
    }
  const std::lock_guard<std::mutex> lock(mMutex);
  mKeys.insert(mKeys.end(), keys.begin(), keys.end());
}

void StreamCellSink::lines(const StreamNetwork& network,
                           const std::function<void(int32_t, const std::vector<int64_t>&)>& onLine,
                           const RunControl& control)
{
  std::sort(mKeys.begin(), mKeys.end());
  const int64_t w = mDirections.width(), h = mDirections.height();
  const auto direction = [&](int64_t c) {
    const auto at = std::lower_bound(mKeys.begin(), mKeys.end(), c * 16);
    if (at == mKeys.end() || *at / 16 != c)
      throw InvalidInput("stream network: cell " + std::to_string(c) + " of a segment is not a stream cell");
    return uint8_t(*at % 16);
  };
  std::vector<int64_t> line;
  for (std::size_t k = 0; k < network.first.size(); ++k)
  {
    if ((k & 0xfff) == 0 && control.isCanceled())
      throw Canceled();
    line.clear();
    for (int64_t c = network.first[k];;)
    {
      line.push_back(c);
      if (c == network.last[k] || int64_t(line.size()) > network.cells[k])
        break;
      const uint8_t d = direction(c);
      const int64_t x = c % w + (d < 8 ? kDx[d] : 0), y = c / w + (d < 8 ? kDy[d] : 0);
      if (d >= 8 || x < 0 || y < 0 || x >= w || y >= h)
        throw InvalidInput("stream network: segment " + std::to_string(k + 1) + " ends before its last cell");
      c = y * w + x;
    }
    if (int64_t(line.size()) != network.cells[k])
      throw InvalidInput("stream network: segment " + std::to_string(k + 1) + " does not reach its last cell");
    if (network.down[k] > 0)
      line.push_back(network.first[std::size_t(network.down[k] - 1)]);
    onLine(int32_t(k + 1), line);
  }
}

SegmentExits segmentExits(const RasterSource<int32_t>& segments, const RasterSource<uint8_t>& directions,
                          int64_t tileSide, int threads, const RunControl& control)
{
  const int64_t w = segments.width(), h = segments.height();
  if (directions.width() != w || directions.height() != h)
    throw InvalidInput("subbasins: the segments and the directions differ in size");
  tileSide = std::max<int64_t>(1, tileSide);
  struct Exit
  {
    int32_t id, down;
    int64_t cell;
  };
  // Each window on its own (with its halo, clipped to the raster), its exits and ids gathered apart.
  const int64_t across = (w + tileSide - 1) / tileSide, windows = across * ((h + tileSide - 1) / tileSide);
  std::vector<std::vector<Exit>> found(static_cast<std::size_t>(windows));
  std::vector<std::vector<int32_t>> seen(static_cast<std::size_t>(windows));
  parallelFor(
    windows, 1, threads,
    [&](int64_t begin, int64_t end) {
      std::vector<int32_t> padded;
      std::vector<uint8_t> codes;
      for (int64_t i = begin; i < end; ++i)
      {
        const int64_t x0 = (i % across) * tileSide, y0 = (i / across) * tileSide;
        const Window t{x0, y0, std::min(tileSide, w - x0), std::min(tileSide, h - y0)};
        const int64_t hx = std::max<int64_t>(0, x0 - 1), hy = std::max<int64_t>(0, y0 - 1);
        const Window halo{hx, hy, std::min(w, x0 + t.width + 1) - hx, std::min(h, y0 + t.height + 1) - hy};
        padded.resize(std::size_t(halo.cells()));
        codes.resize(std::size_t(halo.cells()));
        segments.read(halo, padded.data());
        directions.read(halo, codes.data());
        for (std::size_t k = 0; k < padded.size(); ++k)  // a cell without a direction is no stream
          if (codes[k] == kNoData)
            padded[k] = 0;
        std::vector<Exit>& exits = found[std::size_t(i)];
        std::vector<int32_t>& ids = seen[std::size_t(i)];
        for (int64_t y = t.y0; y < t.y0 + t.height; ++y)
          for (int64_t x = t.x0; x < t.x0 + t.width; ++x)
          {
            const std::size_t at = std::size_t((y - halo.y0) * halo.width + x - halo.x0);
            const int32_t id = padded[at];
            if (id <= 0)
              continue;
            if (ids.empty() || ids.back() != id)
              ids.push_back(id);
            const uint8_t d = codes[at];
            const int64_t nx = x + (d < 8 ? kDx[d] : 0), ny = y + (d < 8 ? kDy[d] : 0);
            const bool onGrid = d < 8 && nx >= 0 && ny >= 0 && nx < w && ny < h;
            const int32_t next = onGrid ? padded[std::size_t((ny - halo.y0) * halo.width + nx - halo.x0)] : 0;
            if (next != id)
              exits.push_back(Exit{id, std::max(next, 0), y * w + x});
          }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      }
    },
    &control);
  std::vector<Exit> exits;
  std::vector<int32_t> allIds;
  for (int64_t i = 0; i < windows; ++i)
  {
    exits.insert(exits.end(), found[std::size_t(i)].begin(), found[std::size_t(i)].end());
    allIds.insert(allIds.end(), seen[std::size_t(i)].begin(), seen[std::size_t(i)].end());
    std::vector<Exit>().swap(found[std::size_t(i)]);
    std::vector<int32_t>().swap(seen[std::size_t(i)]);
  }
  std::sort(allIds.begin(), allIds.end());
  allIds.erase(std::unique(allIds.begin(), allIds.end()), allIds.end());
  std::sort(exits.begin(), exits.end(),
            [](const Exit& a, const Exit& b) { return a.id < b.id || (a.id == b.id && a.cell < b.cell); });
  SegmentExits out;
  for (std::size_t i = 0; i < exits.size(); ++i)
  {
    if (i > 0 && exits[i].id == exits[i - 1].id)
      throw InvalidInput("subbasins: segment " + std::to_string(exits[i].id) +
                         " leaves its cells at two places (cells " + std::to_string(exits[i - 1].cell) + " and " +
                         std::to_string(exits[i].cell) + "): each segment must be one chain down the directions");
    out.id.push_back(exits[i].id);
    out.down.push_back(exits[i].down);
    out.cell.push_back(exits[i].cell);
  }
  if (out.id.size() != allIds.size())
    for (const int32_t id : allIds)
      if (!std::binary_search(out.id.begin(), out.id.end(), id))
        throw InvalidInput("subbasins: the cells of segment " + std::to_string(id) +
                           " never leave it (its path loops): each segment must be one chain down the directions");
  return out;
}

}  // namespace gpugeo::dem::tiled
