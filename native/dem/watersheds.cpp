#include "dem/detail/watershed_labels.h"
#include "dem/watersheds.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "dem/dem.h"

namespace gpugeo::dem {

namespace detail {

void labelWatershedsCpu(const uint8_t* directions, int64_t width, int64_t height, int32_t* labels,
                        const RunControl& control)
{
  constexpr int32_t kUnknown = -1, kOnPath = -2;
  const int64_t n = width * height;
  std::vector<int64_t> path;
  for (int64_t start = 0; start < n; ++start)
  {
    if (labels[start] != kUnknown)
      continue;
    if ((start & 0xfffff) == 0 && control.isCanceled())
      throw Canceled();
    // Down the path to a labelled cell or a terminal; the cells passed are marked as on the path, so
    // that a loop ends where it meets itself.
    int32_t label = 0;
    int64_t c = start;
    for (;;)
    {
      const int32_t known = labels[c];
      if (known >= 0)
      {
        label = known;
        break;
      }
      if (known == kOnPath)  // a loop
        break;
      const uint8_t d = directions[c];
      if (d >= 8)  // a pit or nodata: no outlet
      {
        path.push_back(c);
        break;
      }
      labels[c] = kOnPath;
      path.push_back(c);
      const int64_t x = c % width + kDx[d], y = c / width + kDy[d];
      if (x < 0 || y < 0 || x >= width || y >= height)
        break;
      c = y * width + x;
    }
    for (const int64_t p : path)
      labels[p] = label;
    path.clear();
  }
}

std::vector<int32_t> sameCellAs(const std::vector<int64_t>& outlets)
{
  std::vector<int32_t> order(outlets.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    order[k] = int32_t(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return outlets[std::size_t(a)] < outlets[std::size_t(b)]; });
  std::vector<int32_t> same(outlets.size(), -1);
  for (std::size_t i = 1; i < order.size(); ++i)
    if (outlets[std::size_t(order[i])] == outlets[std::size_t(order[i - 1])])
      same[std::size_t(order[i])] = same[std::size_t(order[i - 1])] >= 0 ? same[std::size_t(order[i - 1])] : order[i - 1];
  return same;
}

void addNestedTotals(Watersheds& out)
{
  // Upstream first: an outlet whose upstream outlets are all counted adds its total to the one it drains
  // into (the outlets taken in index order, then in the order they become ready: the same sums in every
  // run). Outlets left over lie on a loop of outlets (directions that go round through their cells): every
  // cell that reaches one passes through all of them, so each takes the loop's whole sum.
  const std::size_t count = out.ownCells.size();
  out.totalCells = out.ownCells;
  out.totalArea = out.ownArea;
  std::vector<int32_t> waiting(count, 0);
  for (std::size_t k = 0; k < count; ++k)
    if (out.downstream[k] >= 0)
      ++waiting[std::size_t(out.downstream[k])];
  std::vector<int32_t> ready;
  ready.reserve(count);
  for (std::size_t k = 0; k < count; ++k)
    if (waiting[k] == 0)
      ready.push_back(int32_t(k));
  for (std::size_t i = 0; i < ready.size(); ++i)
  {
    const int32_t k = ready[i], j = out.downstream[std::size_t(k)];
    if (j < 0)
      continue;
    out.totalCells[std::size_t(j)] += out.totalCells[std::size_t(k)];
    out.totalArea[std::size_t(j)] += out.totalArea[std::size_t(k)];
    if (--waiting[std::size_t(j)] == 0)
      ready.push_back(j);
  }
  for (std::size_t k = 0; k < count; ++k)
  {
    if (waiting[k] == 0)
      continue;
    int64_t cells = 0;
    double area = 0;
    std::size_t j = k;
    do
    {
      cells += out.totalCells[j];
      area += out.totalArea[j];
      waiting[j] = 0;
      if (out.downstream[j] < 0)  // (only a loop is left over: a guard)
        return;
      j = std::size_t(out.downstream[j]);
    } while (j != k);
    do
    {
      out.totalCells[j] = cells;
      out.totalArea[j] = area;
      j = std::size_t(out.downstream[j]);
    } while (j != k);
  }
}

}  // namespace detail

namespace {

// Rows a chunk of the threads' passes over the grid.
constexpr int64_t kRowGrain = 16;

// Each outlet's own cells and area: its cells per row (the rows' runs of one label, sorted by label and
// merged, on the threads, a band of rows at a time), then row by row from the top, the row's count
// times its cell area added to the outlet's sums: the same additions in the same order as
// tiled_watersheds.cpp's, whatever the threads.
void ownCellsAndAreas(const std::vector<int32_t>& labels, int64_t width, int64_t height, const double* cellWidth,
                      const double* cellHeight, int32_t count, int threads, Watersheds& out,
                      const RunControl& control)
{
  out.ownCells.assign(std::size_t(count), 0);
  out.ownArea.assign(std::size_t(count), 0.0);
  // A band: four chunks of rows a thread, and at most kBandCells cells (a row's runs are at most its
  // cells: 16 bytes a cell at worst).
  constexpr int64_t kBandCells = int64_t(1) << 24;
  const int64_t workers = threads > 0 ? threads : defaultThreadCount();
  const int64_t band = std::clamp<int64_t>(workers * kRowGrain * 4, 1, std::max<int64_t>(1, kBandCells / width));
  std::vector<std::vector<std::pair<int32_t, int64_t>>> rowCounts(std::size_t(std::min(band, height)));
  for (int64_t b0 = 0; b0 < height; b0 += band)
  {
    const int64_t b1 = std::min(height, b0 + band);
    parallelFor(
      b1 - b0, kRowGrain, threads,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
        {
          auto& row = rowCounts[std::size_t(r)];
          row.clear();
          const int32_t* cell = labels.data() + (b0 + r) * width;
          for (int64_t x = 0; x < width;)
          {
            const int32_t label = cell[x];
            int64_t end = x + 1;
            while (end < width && cell[end] == label)
              ++end;
            if (label > 0)
              row.push_back({label - 1, end - x});
            x = end;
          }
          std::sort(row.begin(), row.end());
          std::size_t kept = 0;
          for (std::size_t i = 0; i < row.size(); ++i)
            if (kept > 0 && row[kept - 1].first == row[i].first)
              row[kept - 1].second += row[i].second;
            else
              row[kept++] = row[i];
          row.resize(kept);
        }
      },
      &control);
    for (int64_t y = b0; y < b1; ++y)
    {
      const double cellArea = cellWidth[y] * cellHeight[y];
      for (const auto& [k, cells] : rowCounts[std::size_t(y - b0)])
      {
        out.ownCells[std::size_t(k)] += cells;
        out.ownArea[std::size_t(k)] += double(cells) * cellArea;
      }
    }
  }
}

}  // namespace

Watersheds watersheds(Backend backend, const std::vector<uint8_t>& directions, int64_t width, int64_t height,
                      const double* cellWidth, const double* cellHeight, const std::vector<int64_t>& outlets,
                      int threads, const RunControl& control)
{
  if (width <= 0 || height <= 0 || int64_t(directions.size()) != width * height || !cellWidth || !cellHeight)
    throw InvalidInput("watersheds: the directions do not fill the grid");
  if (outlets.size() > std::size_t(std::numeric_limits<int32_t>::max() - 1))
    throw InvalidInput("watersheds: more than 2147483646 outlets");
  const int32_t count = int32_t(outlets.size());
  for (int32_t k = 0; k < count; ++k)
  {
    const int64_t c = outlets[std::size_t(k)];
    if (c < 0 || c >= width * height)
      throw InvalidInput("outlet " + std::to_string(k + 1) + " lies outside the grid");
    if (directions[std::size_t(c)] == kNoData)
      throw InvalidInput("outlet " + std::to_string(k + 1) + " lies on a nodata cell (column " +
                         std::to_string(c % width) + ", row " + std::to_string(c / width) + ")");
  }
  Watersheds out;
  out.sameCellAs = detail::sameCellAs(outlets);
  if (backend == Backend::Gpu)
  {
    // The device starts its own labels from the outlets: no grid of labels goes up, only the result down.
    std::vector<int64_t> seedCells;
    std::vector<int32_t> seedLabels;
    for (int32_t k = 0; k < count; ++k)
      if (out.sameCellAs[std::size_t(k)] < 0)
      {
        seedCells.push_back(outlets[std::size_t(k)]);
        seedLabels.push_back(k + 1);
      }
    out.labels = hugeVector<int32_t>(directions.size());
    detail::labelWatershedsCuda(directions.data(), width, height, seedCells, seedLabels, out.labels.data(), control);
  }
  else
  {
    assignHuge(out.labels, directions.size(), -1);
    for (int32_t k = 0; k < count; ++k)
      if (out.sameCellAs[std::size_t(k)] < 0)
        out.labels[std::size_t(outlets[std::size_t(k)])] = k + 1;
    detail::labelWatershedsCpu(directions.data(), width, height, out.labels.data(), control);
  }
  ownCellsAndAreas(out.labels, width, height, cellWidth, cellHeight, count, threads, out, control);

  // Each outlet's downstream outlet: the label of the cell its outlet cell drains into.
  out.downstream.assign(std::size_t(count), -1);
  for (int32_t k = 0; k < count; ++k)
  {
    if (out.sameCellAs[std::size_t(k)] >= 0)
      continue;
    const int64_t c = outlets[std::size_t(k)];
    const uint8_t d = directions[std::size_t(c)];
    if (d >= 8)
      continue;
    const int64_t x = c % width + kDx[d], y = c / width + kDy[d];
    if (x < 0 || y < 0 || x >= width || y >= height)
      continue;
    const int32_t below = out.labels[std::size_t(y * width + x)];
    if (below > 0 && below - 1 != k)
      out.downstream[std::size_t(k)] = below - 1;
  }
  detail::addNestedTotals(out);
  return out;
}

}  // namespace gpugeo::dem
