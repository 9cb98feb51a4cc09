// The stream network tile by tile (dem/streams.h's segments, orders and sums; the segment raster).
// Every tile is read with a one-cell halo, so that each of its cells knows whether it is a stream
// cell, how many stream cells flow into it (the halo's directions included) and whether it starts a
// segment. Within a tile each stream cell belongs to the chain of its top: a start, or an entry cell
// whose one inflow comes from the halo (a neighbour tile's perimeter cell). Pass 1 sends back how many
// starts each tile row holds and, for the tile's perimeter cells, their chain's top: the coordinator
// numbers the starts in row order from the counts and follows the entries' links from perimeter to
// perimeter to each perimeter cell's segment. Pass 2 holds the ring at those segments, labels every
// cell (written to the raster) and walks each chain: a segment whole in one chain goes straight into
// the network, the chains of segments across tiles come back as parts that the coordinator adds up;
// then it orders the segments (detail::addStreamOrders). Not yet distributable.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
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

// Whether a chain goes on to padded cell d (paddedSuccessor's, -1 for none) within the tile: d is a
// stream cell of the tile with one stream cell flowing in. Else it ends: off the tile, a pit, no stream
// below, or the next segment's start (two or more flowing in).
bool chainGoesOn(const TileStreams& s, int64_t pw, int64_t ph, int64_t d)
{
  return d >= 0 && inside(d, pw, ph) && s.stream[std::size_t(d)] && s.inflow[std::size_t(d)] == 1;
}

// The elevations are read only where given (pass 2: the segments' drops).
void readStreams(const RasterSource<float>* elevations, const RasterSource<uint8_t>& directions,
                 const RasterSource<int64_t>& cells, const RasterSource<int64_t>& area, const StreamThreshold& threshold,
                 const Window& t, TileStreams& s)
{
  const int64_t pw = t.width + 2, ph = t.height + 2, n = pw * ph;
  detail::readWithHalo(directions, t, kNoData, s.directions);
  detail::readWithHalo(cells, t, int64_t(0), s.cells);
  detail::readWithHalo(area, t, int64_t(0), s.area);
  if (elevations)
    detail::readWithHalo(*elevations, t, std::numeric_limits<float>::quiet_NaN(), s.z);
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
        if (!chainGoesOn(s, pw, ph, d))
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

// What pass 2 keeps apart of a chain (the stream cells of one inflow down from a start or an entry
// within a tile) whose segment does not begin and end in it: its cells and length in units, and the
// elevations of the segment's first cell and of the cell its line ends at where the chain holds them.
// The coordinator adds a segment's parts up; a segment whole in one chain is written straight into the
// network (no other tile writes it).
struct ChainPart
{
  int32_t segment;
  bool start, end;
  float startZ, endZ;
  int64_t cells, units;
};

}  // namespace

StreamNetwork streamNetworkTiled(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                                 const RasterSource<int64_t>& cells, const RasterSource<int64_t>& area,
                                 const RowSizes& rows, const StreamThreshold& threshold, RasterSink<int32_t>& segments,
                                 const TiledOptions& options, const RunControl& control, TiledReport* report,
                                 StreamFields fields)
{
  const bool full = fields == StreamFields::Full;
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

  // Pass 1: how many starts each of the tile's rows holds, and each perimeter cell's chain top: a start
  // (its place, tile row r and rank j among the row's starts, as r * tile width + j, >= 0), or the
  // node of the neighbour tile's perimeter cell its entry's inflow comes from (-2 - node); -1 off the
  // streams.
  std::vector<int64_t> firstNode(std::size_t(layout.count()) + 1, 0);
  for (int64_t i = 0; i < layout.count(); ++i)
    firstNode[std::size_t(i) + 1] = firstNode[std::size_t(i)] + detail::perimeterSize(layout.tile(i));
  const int64_t nodes = firstNode.back();
  std::vector<int64_t> link(std::size_t(nodes), -1);
  std::vector<std::vector<int64_t>> rowStarts(std::size_t(layout.count()));  // per tile, per tile row
  out.graphBytes = nodes * int64_t(sizeof(int64_t) + sizeof(int32_t));
  detail::Reused<TileStreams> sets;
  detail::forEachTile(layout, 1, "stream network pass 1 (starts, perimeter chains)", options, control, out,
                      [&](int64_t i) {
    const auto held = sets.take();
    TileStreams& s = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2, ph = t.height + 2;
    readStreams(nullptr, directions, cells, area, threshold, t, s);
    std::vector<int64_t>& onRow = rowStarts[std::size_t(i)];
    onRow.assign(std::size_t(t.height), 0);
    std::vector<int32_t> startX;                        // the starts' columns, row after row
    std::vector<int64_t> rowBegin(std::size_t(ph), 0);  // where each row's are in startX
    for (int64_t y = 1; y < ph - 1; ++y)
    {
      rowBegin[std::size_t(y)] = int64_t(startX.size());
      for (int64_t x = 1; x < pw - 1; ++x)
        if (s.stream[std::size_t(y * pw + x)] && s.inflow[std::size_t(y * pw + x)] != 1)
          startX.push_back(int32_t(x));
      onRow[std::size_t(y - 1)] = int64_t(startX.size()) - rowBegin[std::size_t(y)];
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
      {
        const int64_t ry = root / pw;
        const auto row = startX.begin() + rowBegin[std::size_t(ry)];
        const int64_t rank = std::lower_bound(row, row + onRow[std::size_t(ry - 1)], int32_t(root % pw)) - row;
        link[std::size_t(node)] = (ry - 1) * t.width + rank;
      }
      else
      {
        const int64_t u = s.upstream[std::size_t(root)];
        link[std::size_t(node)] = -2 - ringNode[std::size_t(perimeterPlace(pw, ph, u % pw, u / pw))];
      }
    });
  });

  // The coordinator: the starts numbered in row order (the raster's rows, each tile by tile along it):
  // rowStarts[i][r] becomes the ids' offset on tile i's row r (the id of its first start less one).
  int64_t count = 0;
  for (int64_t ty = 0; ty < layout.tilesY; ++ty)
    for (int64_t r = 0; r < layout.tile(ty * layout.tilesX).height; ++r)
      for (int64_t tx = 0; tx < layout.tilesX; ++tx)
      {
        int64_t& onRow = rowStarts[std::size_t(ty * layout.tilesX + tx)][std::size_t(r)];
        const int64_t starts = onRow;
        onRow = count;
        count += starts;
      }
  if (count >= int64_t(std::numeric_limits<int32_t>::max()))
    throw InvalidInput("stream network: more than 2147483647 segments");
  const int64_t held = count * kStreamsBytesPerSegment(fields);
  if (options.heldBytesLimit > 0 && held > options.heldBytesLimit)
    throw InvalidInput("stream network: its " + std::to_string(count) + " segments need about " +
                       std::to_string(held >> 20) + " MiB (" + std::to_string(kStreamsBytesPerSegment(fields)) +
                       " bytes each" + (full ? ", with what the lines need" : "") + "), more than the " +
                       std::to_string(options.heldBytesLimit >> 20) +
                       " MiB this run may hold: raise the threshold" + (full ? " or leave the lines out" : ""));
  std::vector<int32_t> nodeSegment(std::size_t(nodes), 0);
  {
    ScopedStage timing(out.times, "stream network graph");
    // The segment of a start found in pass 1 at node's tile, from its place there.
    const auto segmentOfStart = [&](int64_t node, int64_t place) {
      const auto after = std::upper_bound(firstNode.begin(), firstNode.end(), node);
      const std::size_t i = std::size_t(after - firstNode.begin() - 1);
      const int64_t tw = layout.tile(int64_t(i)).width;
      return int32_t(rowStarts[i][std::size_t(place / tw)] + place % tw + 1);
    };
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
        segment = segmentOfStart(node, link[std::size_t(node)]);
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

  // Pass 2: every cell's segment (the ring held at its nodes'), written. Each chain walked from its top
  // (a start or an entry) down the tile; where it ends the segment (its last cell), that cell, what it
  // flows into and the elevation its line ends at (the next segment's first cell, in the tile or its
  // halo, else its own). A chain from a start that ends its segment gives the segment's cells, length
  // and drop; every other chain is kept apart. Every segment has one start and one last cell, so no
  // two tiles write the same entry.
  StreamNetwork net;
  if (full)
  {
    resizeOnThreads(std::size_t(count), options.threads, net.first, net.last, net.down, net.cells, net.area,
                    net.upstreamCells, net.length, net.drop);
    parallelFor(
      count, 1 << 16, options.threads,
      [&](int64_t k0, int64_t k1) { std::fill(net.last.begin() + k0, net.last.begin() + k1, int64_t(-1)); }, &control);
  }
  else
    resizeOnThreads(std::size_t(count), options.threads, net.first, net.down);
  std::vector<std::vector<ChainPart>> parts(std::size_t(layout.count()));
  std::atomic<int64_t> streamCells{0};  // without the per-segment cells (Orders), counted as the tiles finish
  detail::forEachTile(layout, 2, "stream network pass 2 (segments; write)", options, control, out, [&](int64_t i) {
    const auto held = sets.take();
    TileStreams& s = *held;
    const Window t = layout.tile(i);
    const int64_t pw = t.width + 2, ph = t.height + 2;
    readStreams(full ? &elevations : nullptr, directions, cells, area, threshold, t, s);
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
    // The starts' ids first (a chain may end at a start further up the tile).
    for (int64_t y = 1; y < ph - 1; ++y)
    {
      int64_t id = rowStarts[std::size_t(i)][std::size_t(y - 1)];
      for (int64_t c = y * pw + 1; c < y * pw + pw - 1; ++c)
        if (s.stream[std::size_t(c)] && s.inflow[std::size_t(c)] != 1)
        {
          label[std::size_t(c)] = int32_t(++id);
          net.first[std::size_t(id - 1)] = globalCell(layout, t, pw, c);
        }
    }
    for (int64_t y = 1; y < ph - 1; ++y)
      for (int64_t root = y * pw + 1; root < y * pw + pw - 1; ++root)
      {
        if (s.top[std::size_t(root)] != root)
          continue;
        const bool start = s.inflow[std::size_t(root)] != 1;
        const int32_t segment = start ? label[std::size_t(root)] : label[std::size_t(s.upstream[std::size_t(root)])];
        ChainPart part{segment, start, false, full ? s.z[std::size_t(root)] : 0.f, 0.f, 0, 0};
        for (int64_t c = root;;)
        {
          label[std::size_t(c)] = segment;
          ++part.cells;
          const int64_t d = paddedSuccessor(s.directions, pw, ph, c);
          const bool onward = d >= 0 && s.stream[std::size_t(d)];
          if (onward)
            part.units += dem::detail::stepUnits(steps.data() + 3 * (t.y0 + c / pw - 1), s.directions[std::size_t(c)]);
          if (chainGoesOn(s, pw, ph, d))
          {
            c = d;
            continue;
          }
          const int32_t below = onward ? label[std::size_t(d)] : 0;
          if (segment > 0 && below != segment)  // the segment's last cell
          {
            const std::size_t k = std::size_t(segment - 1);
            net.down[k] = below;
            part.end = true;
            if (full)
            {
              net.last[k] = globalCell(layout, t, pw, c);
              net.upstreamCells[k] = s.cells[std::size_t(c)];
              net.area[k] = s.area[std::size_t(c)];
              part.endZ = s.z[std::size_t(below > 0 ? d : c)];
            }
          }
          break;
        }
        if (segment <= 0 || !full)
          continue;
        if (part.start && part.end)
        {
          const std::size_t k = std::size_t(segment - 1);
          net.cells[k] = part.cells;
          net.length[k] = double(part.units) * unit;
          net.drop[k] = double(part.startZ) - double(part.endZ);
        }
        else
          parts[std::size_t(i)].push_back(part);
      }
    std::vector<int32_t> own(std::size_t(t.cells()), 0);
    for (int64_t y = 1; y < ph - 1; ++y)
      std::copy(label.begin() + y * pw + 1, label.begin() + y * pw + pw - 1, own.begin() + (y - 1) * t.width);
    if (!full)
      streamCells += std::count_if(own.begin(), own.end(), [](int32_t id) { return id > 0; });
    segments.write(t, own.data());
  });
  sets.clear();
  out.passes = 2;

  // The segments across tiles from their parts (the elevations from the start's part and the end's; a
  // segment on a loop has no end, its line's end taken at 0), then the orders.
  ScopedStage timing(out.times, "stream network sums and orders");
  std::vector<ChainPart> across;
  for (std::vector<ChainPart>& tileParts : parts)
  {
    across.insert(across.end(), tileParts.begin(), tileParts.end());
    std::vector<ChainPart>().swap(tileParts);
  }
  std::sort(across.begin(), across.end(), [](const ChainPart& a, const ChainPart& b) { return a.segment < b.segment; });
  for (std::size_t e = 0; e < across.size();)
  {
    const int32_t segment = across[e].segment;
    ChainPart whole{segment, false, false, 0.f, 0.f, 0, 0};
    for (; e < across.size() && across[e].segment == segment; ++e)
    {
      whole.cells += across[e].cells;
      whole.units += across[e].units;
      if (across[e].start)
        whole.startZ = across[e].startZ;
      if (across[e].end)
        whole.endZ = across[e].endZ;
    }
    const std::size_t k = std::size_t(segment - 1);
    net.cells[k] = whole.cells;
    net.length[k] = double(whole.units) * unit;
    net.drop[k] = double(whole.startZ) - double(whole.endZ);
  }
  if (!full)
  {
    net.streamCells = streamCells.load();
    dem::detail::addStreamOrders(net, options.threads, control, false);
    return net;
  }
  for (const int64_t cells : net.cells)
    net.streamCells += cells;
  dem::detail::addStreamOrders(net, options.threads, control);
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
