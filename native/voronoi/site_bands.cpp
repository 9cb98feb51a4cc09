#include "detail/site_bands.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/parallel.h"

namespace gpugeo::voronoi::detail {

namespace {

// What labelling a site costs beside a pixel's 1 (the GPU's labelling of 8192^2 pixels with
// 4,000,000 sites against 100, H200): the bands are cut and ordered by this work.
constexpr double kSiteWork = 15.0;
constexpr int kSubCell = kReachCell / 4;
static_assert(kReachCell / kSubCell * (kReachCell / kSubCell) == 16, "a cell's sub-cells are the bits of 16");

int partsFor(int64_t n, int threads)
{
  const int t = threads > 0 ? threads : defaultThreadCount();
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(t, n / 65536 + 1)));
}

// The Chebyshev distance, in cells, from each cell to the nearest held one (two raster passes over
// the 8 neighbours, exact for this metric); every cell far when none is held.
std::vector<int32_t> cellDistance(const std::vector<uint8_t>& held, int cw, int ch)
{
  constexpr int32_t kFar = std::numeric_limits<int32_t>::max() / 2;
  std::vector<int32_t> d(held.size());
  for (std::size_t i = 0; i < held.size(); ++i)
    d[i] = held[i] ? 0 : kFar;
  const auto at = [&](int x, int y) -> int32_t& { return d[std::size_t(y) * std::size_t(cw) + std::size_t(x)]; };
  for (int y = 0; y < ch; ++y)
    for (int x = 0; x < cw; ++x)
    {
      int32_t v = at(x, y);
      if (x > 0)
        v = std::min(v, at(x - 1, y) + 1);
      if (y > 0)
        for (int dx = -1; dx <= 1; ++dx)
          if (x + dx >= 0 && x + dx < cw)
            v = std::min(v, at(x + dx, y - 1) + 1);
      at(x, y) = v;
    }
  for (int y = ch - 1; y >= 0; --y)
    for (int x = cw - 1; x >= 0; --x)
    {
      int32_t v = at(x, y);
      if (x + 1 < cw)
        v = std::min(v, at(x + 1, y) + 1);
      if (y + 1 < ch)
        for (int dx = -1; dx <= 1; ++dx)
          if (x + dx >= 0 && x + dx < cw)
            v = std::min(v, at(x + dx, y + 1) + 1);
      at(x, y) = v;
    }
  return d;
}

// The band of each bucket row.
std::vector<int> bandsOfRows(const SiteBands& bands)
{
  std::vector<int> band(std::size_t(bands.by));
  for (int b = 0; b < bands.count(); ++b)
    std::fill(band.begin() + bands.row0[std::size_t(b)], band.begin() + bands.row0[std::size_t(b) + 1], b);
  return band;
}

// Pixels for the labelling (a root, or the roots with the same needs): the bands they wait for and
// their work.
struct LabelUnit
{
  int first = 0, last = 0;  // bands [first, last]
  double work = 0.0;        // its pixels, and kSiteWork a site among them
};

// The order the bands go up in: each next band the one whose arrival lets the most labelling start
// (the pixels whose bands are then all up) for the sites it brings. Where no band lets anything
// start, the one with the fewest sites.
std::vector<int> uploadOrder(const std::vector<double>& bandSites, const std::vector<LabelUnit>& units)
{
  const int count = static_cast<int>(bandSites.size());
  std::vector<char> up(static_cast<std::size_t>(count), 0), started(units.size(), 0);
  std::vector<int> order;
  const auto ready = [&](const LabelUnit& u) {
    for (int k = u.first; k <= u.last; ++k)
      if (!up[std::size_t(k)])
        return false;
    return true;
  };
  while (int(order.size()) < count)
  {
    int pick = -1, bestTier = -1;
    double best = -1.0;
    for (int j = 0; j < count; ++j)
    {
      if (up[std::size_t(j)])
        continue;
      up[std::size_t(j)] = 1;
      double unlocked = 0.0;
      for (std::size_t u = 0; u < units.size(); ++u)
        if (!started[u] && ready(units[u]))
          unlocked += units[u].work;
      up[std::size_t(j)] = 0;
      // Work let start per site sent; nothing let start: the fewest sites first.
      const int tier = unlocked > 0 ? 1 : 0;
      const double score = (tier ? unlocked : 1.0) / (bandSites[std::size_t(j)] + 1.0);
      if (tier > bestTier || (tier == bestTier && score > best))
      {
        bestTier = tier;
        best = score;
        pick = j;
      }
    }
    up[std::size_t(pick)] = 1;
    order.push_back(pick);
    for (std::size_t u = 0; u < units.size(); ++u)
      if (!started[u] && ready(units[u]))
        started[u] = 1;
  }
  return order;
}

}  // namespace

int reachRows(double nearest, int bucket, int maxTile)
{
  // A tile: widening by doubling stops at most at max(bucket, 2 nearest); the bound of the site it
  // finds reaches sqrt(2) (tile + widening + bucket + 1) beyond the tile, read in whole buckets.
  const double widen = std::max(double(bucket), 2.0 * nearest);
  const double tile = 1.5 * (double(maxTile) + widen + double(bucket) + 1.0) + double(bucket) + 1.0;
  // The direct scan: its rectangle stops a bucket beyond the nearest distance; two staged rings
  // and one bucket row more where a root does not start on a bucket row.
  const double direct = nearest + 4.0 * double(bucket) + 1.0;
  return static_cast<int>(std::ceil(std::max(tile, direct))) + 1;
}

SiteBands planSiteBands(const Point* points, int64_t n, int width, int height, int shift, int maxTile, int bands,
                        int threads)
{
  SiteBands plan;
  plan.shift = shift;
  const int bucket = 1 << shift;
  plan.bx = (width + bucket - 1) / bucket;
  plan.by = (height + bucket - 1) / bucket;
  if (n <= 0 || bands < 3 || bucket > kRootSide)
    return plan;

  // Sites a bucket row, the sites a cell (those outside in the nearest edge cell, as the buckets
  // hold them), and which of a cell's 4 x 4 sub-cells (kSubCell pixels a side) hold a site inside
  // the grid: a cell holds one where any does, and a pixel of a cell whose sub-cells all do has a
  // site within kSubCell * sqrt(2), a tighter bound than the cell's where sites crowd.
  const int cw = (width + kReachCell - 1) / kReachCell, ch = (height + kReachCell - 1) / kReachCell;
  const std::size_t cells = std::size_t(cw) * std::size_t(ch);
  // Each part counts into cells of its own (16-bit, saturating, and 16 bits of sub-cells): at most
  // 64 MiB of them in all.
  const int parts = static_cast<int>(std::max<std::size_t>(
    1, std::min<std::size_t>(std::size_t(partsFor(n, threads)), (std::size_t(64) << 20) / (4 * cells))));
  std::vector<std::vector<int64_t>> perPart(static_cast<std::size_t>(parts));
  std::vector<std::vector<uint16_t>> cellsPerPart(static_cast<std::size_t>(parts));
  std::vector<std::vector<uint16_t>> subcellsPerPart(static_cast<std::size_t>(parts));
  parallelFor(parts, 1, parts, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
    {
      std::vector<int64_t>& rows = perPart[std::size_t(part)];
      rows.assign(std::size_t(plan.by), 0);
      std::vector<uint16_t>& inCell = cellsPerPart[std::size_t(part)];
      inCell.assign(cells, 0);
      std::vector<uint16_t>& held = subcellsPerPart[std::size_t(part)];
      held.assign(cells, 0);
      for (int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
      {
        const Point& p = points[i];
        ++rows[std::size_t(bucketRow(p, shift, plan.by))];
        const int cx = bucketOf(p.x, kReachShift, cw), cy = bucketOf(p.y, kReachShift, ch);
        const std::size_t cell = std::size_t(cy) * std::size_t(cw) + std::size_t(cx);
        if (inCell[cell] < 65535)
          ++inCell[cell];
        if (p.x >= 0 && p.x < width && p.y >= 0 && p.y < height)
        {
          const int sx = (int(p.x) % kReachCell) / kSubCell, sy = (int(p.y) % kReachCell) / kSubCell;
          held[cell] = uint16_t(held[cell] | (1u << (sy * (kReachCell / kSubCell) + sx)));
        }
      }
    }
  });
  std::vector<uint16_t> subcells(cells, 0);
  std::vector<uint8_t> held(cells, 0);
  for (std::size_t cell = 0; cell < cells; ++cell)
  {
    for (const std::vector<uint16_t>& part : subcellsPerPart)
      subcells[cell] = uint16_t(subcells[cell] | part[cell]);
    held[cell] = subcells[cell] != 0 ? 1 : 0;
  }
  if (std::find(held.begin(), held.end(), uint8_t(1)) == held.end())
    return plan;
  std::vector<int32_t> cellSites(held.size(), 0);  // saturating per part: a lower bound where that matters
  for (std::size_t cell = 0; cell < held.size(); ++cell)
  {
    int32_t sum = 0;
    for (const std::vector<uint16_t>& inCell : cellsPerPart)
      sum += inCell[cell];
    cellSites[cell] = sum;
    plan.fullestCell = std::max(plan.fullestCell, sum);
  }
  std::vector<int64_t> rowCount(std::size_t(plan.by), 0);
  for (const std::vector<int64_t>& rows : perPart)
    for (int r = 0; r < plan.by; ++r)
      rowCount[std::size_t(r)] += rows[std::size_t(r)];

  // Bands of whole root rows, cut where the running work (a pixel 1, a site kSiteWork) passes the
  // next share of the whole (never an empty band but the last). Where the sites are spread evenly
  // this cuts at equal counts; where they crowd into a few rows, the rows of few sites make bands of
  // their own, whose labelling need not wait for the crowded rows' sites.
  const auto rowWork = [&](int r) {
    const double pixelRows = double(std::min<int64_t>(bucket, int64_t(height) - int64_t(r) * bucket));
    return pixelRows * double(width) + kSiteWork * double(rowCount[std::size_t(r)]);
  };
  double totalWork = 0.0;
  for (int r = 0; r < plan.by; ++r)
    totalWork += rowWork(r);
  const int unit = kRootSide >> shift;  // bucket rows a root row (bands are whole root rows)
  plan.row0.push_back(0);
  plan.offset.push_back(0);
  int64_t running = 0;
  double runningWork = 0.0;
  for (int r = 0; r < plan.by; r += unit)
  {
    const int end = std::min(plan.by, r + unit);
    for (int k = r; k < end; ++k)
    {
      running += rowCount[std::size_t(k)];
      runningWork += rowWork(k);
    }
    const int made = plan.count();
    if (end < plan.by && made + 1 < bands && running > plan.offset.back() &&
        runningWork * bands >= totalWork * double(made + 1))
    {
      plan.row0.push_back(end);
      plan.offset.push_back(static_cast<int32_t>(running));
    }
  }
  plan.row0.push_back(plan.by);
  plan.offset.push_back(static_cast<int32_t>(n));
  if (plan.count() < 3)
  {
    plan.row0.clear();
    plan.offset.clear();
    return plan;
  }

  // What a block of pixels' labelling reads: the rows within reach of its pixels, from the farthest
  // any of them can be from a site; as the bands that hold them.
  const std::vector<int32_t> distance = cellDistance(held, cw, ch);
  const std::vector<int> bandOfRow = bandsOfRows(plan);
  const auto needs = [&](int64_t pixel0, int64_t pixel1, int cx0, int cx1) {
    double nearest = 0.0;
    for (int64_t cy = pixel0 / kReachCell; cy <= (pixel1 - 1) / kReachCell; ++cy)
      for (int cx = cx0; cx < cx1; ++cx)
      {
        const std::size_t cell = std::size_t(cy) * std::size_t(cw) + std::size_t(cx);
        nearest = std::max(nearest, subcells[cell] == 0xffff ? kSubCell * std::sqrt(2.0)
                                                             : kReachCell * std::sqrt(2.0) * (double(distance[cell]) + 1.0));
      }
    const int64_t reach = reachRows(nearest, bucket, maxTile);
    const int64_t first = std::max<int64_t>(0, (pixel0 - reach) >> shift);
    const int64_t last = std::min<int64_t>(plan.by - 1, (pixel1 - 1 + reach) >> shift);
    return std::make_pair(bandOfRow[std::size_t(first)], bandOfRow[std::size_t(last)]);
  };
  for (int b = 0; b < plan.count(); ++b)
  {
    const auto [first, last] = needs(int64_t(plan.row0[std::size_t(b)]) * bucket,
                                     std::min<int64_t>(height, int64_t(plan.row0[std::size_t(b) + 1]) * bucket), 0, cw);
    plan.needFirst.push_back(first);
    plan.needLast.push_back(last);
  }

  // Each root's needs and work (a pixel 1, a site kSiteWork); the upload order from them (the roots
  // with the same needs taken together), then the pieces: the roots whose last band arrives at the
  // same point of that order.
  plan.rootsX = (width + kRootSide - 1) / kRootSide;
  const int rootsY = (height + kRootSide - 1) / kRootSide;
  constexpr int cellsPerRoot = kRootSide / kReachCell;
  std::vector<LabelUnit> roots(std::size_t(plan.rootsX) * std::size_t(rootsY));
  parallelFor(rootsY, 1, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t ry = lo; ry < hi; ++ry)
    {
      const int64_t pixel0 = ry * kRootSide, pixel1 = std::min<int64_t>(height, pixel0 + kRootSide);
      for (int rx = 0; rx < plan.rootsX; ++rx)
      {
        const int cx0 = rx * cellsPerRoot, cx1 = std::min(cw, cx0 + cellsPerRoot);
        LabelUnit& u = roots[std::size_t(ry) * std::size_t(plan.rootsX) + std::size_t(rx)];
        std::tie(u.first, u.last) = needs(pixel0, pixel1, cx0, cx1);
        double sites = 0.0;
        for (int64_t cy = pixel0 / kReachCell; cy <= (pixel1 - 1) / kReachCell; ++cy)
          for (int cx = cx0; cx < cx1; ++cx)
            sites += cellSites[std::size_t(cy) * std::size_t(cw) + std::size_t(cx)];
        const int64_t columns = std::min<int64_t>(width, int64_t(cx1) * kReachCell) - int64_t(cx0) * kReachCell;
        u.work = double(pixel1 - pixel0) * double(columns) + kSiteWork * sites;
      }
    }
  });
  std::vector<LabelUnit> units;  // one a pair of needs
  {
    std::vector<double> workOf(std::size_t(plan.count()) * std::size_t(plan.count()), 0.0);
    for (const LabelUnit& u : roots)
      workOf[std::size_t(u.first) * std::size_t(plan.count()) + std::size_t(u.last)] += u.work;
    for (int first = 0; first < plan.count(); ++first)
      for (int last = first; last < plan.count(); ++last)
        if (const double work = workOf[std::size_t(first) * std::size_t(plan.count()) + std::size_t(last)]; work > 0)
          units.push_back(LabelUnit{first, last, work});
  }
  std::vector<double> bandSites(std::size_t(plan.count()));
  for (int b = 0; b < plan.count(); ++b)
    bandSites[std::size_t(b)] = double(plan.offset[std::size_t(b) + 1] - plan.offset[std::size_t(b)]);
  plan.order = uploadOrder(bandSites, units);
  std::vector<int> arrival(std::size_t(plan.count()));
  for (int k = 0; k < plan.count(); ++k)
    arrival[std::size_t(plan.order[std::size_t(k)])] = k;
  // The roots by the point of the order where their last band arrives (a counting sort: increasing
  // within a piece).
  std::vector<int32_t> at(std::size_t(plan.count()) + 1, 0);
  std::vector<int> readyAt(roots.size());
  for (std::size_t r = 0; r < roots.size(); ++r)
  {
    int ready = 0;
    for (int k = roots[r].first; k <= roots[r].last; ++k)
      ready = std::max(ready, arrival[std::size_t(k)]);
    readyAt[r] = ready;
    ++at[std::size_t(ready) + 1];
  }
  for (int k = 0; k < plan.count(); ++k)
    at[std::size_t(k) + 1] += at[std::size_t(k)];
  plan.pieceRoots.assign(roots.size(), 0);
  {
    std::vector<int32_t> next(at.begin(), at.end() - 1);
    for (std::size_t r = 0; r < roots.size(); ++r)
      plan.pieceRoots[std::size_t(next[std::size_t(readyAt[r])]++)] = static_cast<int32_t>(r);
  }
  for (int k = 0; k < plan.count(); ++k)
    if (at[std::size_t(k) + 1] > at[std::size_t(k)])
    {
      plan.pieceAt.push_back(at[std::size_t(k)]);
      plan.pieceReady.push_back(k);
    }
  plan.pieceAt.push_back(at.back());
  return plan;
}

void partitionSites(const SiteBands& bands, const Point* points, int64_t n, Point* banded, int32_t* original,
                    int threads)
{
  const int count = bands.count();
  const std::vector<int> bandOfRow = bandsOfRows(bands);
  const int parts = partsFor(n, threads);
  // Each part's count per band, then each part's first position in each band (parts in order:
  // the partition is stable).
  std::vector<int64_t> at(std::size_t(parts) * std::size_t(count), 0);
  parallelFor(parts, 1, parts, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
      for (int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
        ++at[std::size_t(part) * std::size_t(count) +
             std::size_t(bandOfRow[std::size_t(bucketRow(points[i], bands.shift, bands.by))])];
  });
  for (int b = 0; b < count; ++b)
  {
    int64_t position = bands.offset[std::size_t(b)];
    for (int part = 0; part < parts; ++part)
    {
      const int64_t c = at[std::size_t(part) * std::size_t(count) + std::size_t(b)];
      at[std::size_t(part) * std::size_t(count) + std::size_t(b)] = position;
      position += c;
    }
  }
  parallelFor(parts, 1, parts, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
    {
      int64_t* next = at.data() + std::size_t(part) * std::size_t(count);
      for (int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
      {
        const int b = bandOfRow[std::size_t(bucketRow(points[i], bands.shift, bands.by))];
        const int64_t to = next[b]++;
        banded[to] = points[i];
        original[to] = static_cast<int32_t>(i);
      }
    }
  });
}

IndexGaps planIndexGaps(const SiteBands& bands, const int32_t* original, int threads)
{
  const int count = bands.count();
  IndexGaps gaps;
  gaps.bytes.assign(std::size_t(count), 1);
  gaps.first.assign(std::size_t(count), 0);
  parallelFor(count, 1, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b)
    {
      const int32_t first = bands.offset[std::size_t(b)], end = bands.offset[std::size_t(b) + 1];
      int32_t widest = 0;
      for (int32_t i = first + 1; i < end; ++i)
        widest = std::max(widest, original[i] - original[i - 1]);
      gaps.bytes[std::size_t(b)] = widest < (1 << 8) ? 1 : widest < (1 << 16) ? 2 : 4;
      gaps.first[std::size_t(b)] = end > first ? original[first] : 0;
    }
  });
  int64_t at = 0;
  for (int b = 0; b < count; ++b)
  {
    gaps.at.push_back(at);
    const int64_t sites = bands.offset[std::size_t(b) + 1] - bands.offset[std::size_t(b)];
    at += (sites * gaps.bytes[std::size_t(b)] + 15) / 16 * 16;
  }
  gaps.at.push_back(at);
  return gaps;
}

void writeIndexGaps(const SiteBands& bands, const IndexGaps& gaps, const int32_t* original, uint8_t* out, int threads)
{
  parallelFor(bands.count(), 1, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b)
    {
      const int32_t first = bands.offset[std::size_t(b)], end = bands.offset[std::size_t(b) + 1];
      uint8_t* to = out + gaps.at[std::size_t(b)];
      const auto put = [&](auto* typed) {
        using T = std::remove_pointer_t<decltype(typed)>;
        for (int32_t i = first; i < end; ++i)
          typed[i - first] = static_cast<T>(i + 1 < end ? original[i + 1] - original[i] : 0);
      };
      switch (gaps.bytes[std::size_t(b)])
      {
      case 1:
        put(to);
        break;
      case 2:
        put(reinterpret_cast<uint16_t*>(to));
        break;
      default:
        put(reinterpret_cast<int32_t*>(to));
      }
      // The padding to the next band's 16-byte boundary goes up too: zeros, never read.
      std::fill(to + int64_t(end - first) * gaps.bytes[std::size_t(b)], out + gaps.at[std::size_t(b) + 1], uint8_t(0));
    }
  });
}

int32_t fullestBucket(const SiteBands& bands, const Point* banded, int threads)
{
  std::vector<int32_t> fullest(std::size_t(bands.count()), 0);
  parallelFor(bands.count(), 1, threads, [&](int64_t first, int64_t last) {
    std::vector<uint16_t> count;  // saturating: a fuller bucket than 65,535 reads as that
    for (int64_t b = first; b < last; ++b)
    {
      const int row0 = bands.row0[std::size_t(b)];
      count.assign(std::size_t(bands.row0[std::size_t(b) + 1] - row0) * std::size_t(bands.bx), 0);
      int32_t most = 0;
      for (int32_t i = bands.offset[std::size_t(b)]; i < bands.offset[std::size_t(b) + 1]; ++i)
      {
        const Point& p = banded[i];
        const int column = bucketOf(p.x, bands.shift, bands.bx);
        const std::size_t k =
          std::size_t(bucketRow(p, bands.shift, bands.by) - row0) * std::size_t(bands.bx) + std::size_t(column);
        if (count[k] < 65535)
          ++count[k];
        most = std::max<int32_t>(most, count[k]);
      }
      fullest[std::size_t(b)] = most;
    }
  });
  return fullest.empty() ? 0 : *std::max_element(fullest.begin(), fullest.end());
}

}  // namespace gpugeo::voronoi::detail
