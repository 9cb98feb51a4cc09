#include "detail/site_bands.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"

namespace gpugeo::voronoi::detail {

namespace {

constexpr int kRootRows = 64;  // bands are whole root rows of the labelling kernels

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
  if (n <= 0 || bands < 3 || bucket > kRootRows)
    return plan;

  // Sites a bucket row, the cells that hold a site inside the grid, and the sites a cell (those
  // outside in the nearest edge cell, as the buckets hold them).
  const int cw = (width + kReachCell - 1) / kReachCell, ch = (height + kReachCell - 1) / kReachCell;
  std::vector<uint8_t> held(std::size_t(cw) * std::size_t(ch), 0);
  // Each part counts into cells of its own (16-bit, saturating): at most 64 MiB of them in all.
  const int parts = static_cast<int>(std::max<std::size_t>(
    1, std::min<std::size_t>(std::size_t(partsFor(n, threads)), (std::size_t(64) << 20) / (2 * held.size()))));
  std::vector<std::vector<int64_t>> perPart(static_cast<std::size_t>(parts));
  std::vector<std::vector<uint16_t>> cellsPerPart(static_cast<std::size_t>(parts));
  parallelFor(parts, 1, parts, [&](int64_t first, int64_t last) {
    for (int64_t part = first; part < last; ++part)
    {
      std::vector<int64_t>& rows = perPart[std::size_t(part)];
      rows.assign(std::size_t(plan.by), 0);
      std::vector<uint16_t>& inCell = cellsPerPart[std::size_t(part)];
      inCell.assign(held.size(), 0);
      for (int64_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
      {
        const Point& p = points[i];
        ++rows[std::size_t(bucketRow(p, shift, plan.by))];
        const int cx = bucketOf(p.x, kReachShift, cw), cy = bucketOf(p.y, kReachShift, ch);
        const std::size_t cell = std::size_t(cy) * std::size_t(cw) + std::size_t(cx);
        if (inCell[cell] < 65535)
          ++inCell[cell];
        if (p.x >= 0 && p.x < width && p.y >= 0 && p.y < height)
          __atomic_store_n(&held[cell], uint8_t(1), __ATOMIC_RELAXED);  // the same value from any thread
      }
    }
  });
  if (std::find(held.begin(), held.end(), uint8_t(1)) == held.end())
    return plan;
  for (std::size_t cell = 0; cell < held.size(); ++cell)
  {
    int32_t sum = 0;
    for (const std::vector<uint16_t>& inCell : cellsPerPart)
      sum += inCell[cell];
    plan.fullestCell = std::max(plan.fullestCell, sum);
  }
  std::vector<int64_t> rowCount(std::size_t(plan.by), 0);
  for (const std::vector<int64_t>& rows : perPart)
    for (int r = 0; r < plan.by; ++r)
      rowCount[std::size_t(r)] += rows[std::size_t(r)];

  // Bands of whole root rows, cut where the running count passes the next share of n (never an
  // empty band but the last).
  const int unit = kRootRows >> shift;  // bucket rows a root row
  plan.row0.push_back(0);
  plan.offset.push_back(0);
  int64_t running = 0;
  for (int r = 0; r < plan.by; r += unit)
  {
    const int end = std::min(plan.by, r + unit);
    for (int k = r; k < end; ++k)
      running += rowCount[std::size_t(k)];
    const int made = plan.count();
    if (end < plan.by && made + 1 < bands && running > plan.offset.back() && running * bands >= n * int64_t(made + 1))
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

  // What each band's labelling reads: the rows within reach of its pixels, from the farthest any of
  // its pixels can be from a site.
  const std::vector<int32_t> distance = cellDistance(held, cw, ch);
  const std::vector<int> bandOfRow = bandsOfRows(plan);
  for (int b = 0; b < plan.count(); ++b)
  {
    const int64_t pixel0 = int64_t(plan.row0[std::size_t(b)]) * bucket;
    const int64_t pixel1 = std::min<int64_t>(height, int64_t(plan.row0[std::size_t(b) + 1]) * bucket);
    int32_t far = 0;
    for (int64_t cy = pixel0 / kReachCell; cy <= (pixel1 - 1) / kReachCell; ++cy)
      for (int cx = 0; cx < cw; ++cx)
        far = std::max(far, distance[std::size_t(cy) * std::size_t(cw) + std::size_t(cx)]);
    const double nearest = kReachCell * std::sqrt(2.0) * (double(far) + 1.0);
    const int64_t reach = reachRows(nearest, bucket, maxTile);
    const int64_t first = std::max<int64_t>(0, (pixel0 - reach) >> shift);
    const int64_t last = std::min<int64_t>(plan.by - 1, (pixel1 - 1 + reach) >> shift);
    plan.needFirst.push_back(bandOfRow[std::size_t(first)]);
    plan.needLast.push_back(bandOfRow[std::size_t(last)]);
  }
  plan.order = uploadOrder(plan, width, height);
  return plan;
}

std::vector<int> uploadOrder(const SiteBands& bands, int width, int height)
{
  const int count = bands.count();
  const auto sites = [&](int b) { return double(bands.offset[std::size_t(b) + 1] - bands.offset[std::size_t(b)]); };
  std::vector<double> work(static_cast<std::size_t>(count));
  for (int b = 0; b < count; ++b)
  {
    const int64_t rows = std::min<int64_t>(height, int64_t(bands.row0[std::size_t(b) + 1]) << bands.shift) -
                         (int64_t(bands.row0[std::size_t(b)]) << bands.shift);
    work[std::size_t(b)] = double(rows) * double(width) + 15.0 * sites(b);
  }
  std::vector<char> up(static_cast<std::size_t>(count), 0), started(static_cast<std::size_t>(count), 0);
  std::vector<int> order;
  const auto ready = [&](int b) {
    for (int k = bands.needFirst[std::size_t(b)]; k <= bands.needLast[std::size_t(b)]; ++k)
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
      for (int b = 0; b < count; ++b)
        if (!started[std::size_t(b)] && ready(b))
          unlocked += work[std::size_t(b)];
      up[std::size_t(j)] = 0;
      // Work let start per site sent; nothing let start: the fewest sites first.
      const int tier = unlocked > 0 ? 1 : 0;
      const double score = (tier ? unlocked : 1.0) / (sites(j) + 1.0);
      if (tier > bestTier || (tier == bestTier && score > best))
      {
        bestTier = tier;
        best = score;
        pick = j;
      }
    }
    up[std::size_t(pick)] = 1;
    order.push_back(pick);
    for (int b = 0; b < count; ++b)
      if (!started[std::size_t(b)] && ready(b))
        started[std::size_t(b)] = 1;
  }
  return order;
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
