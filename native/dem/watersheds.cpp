#include "dem/detail/watershed_labels.h"
#include "dem/watersheds.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/errors.h"
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
  // Each outlet's own, added down its chain of downstream outlets (a forest: a chain ends where an
  // outlet drains into no outlet's watershed), in outlet order: the same sums in every run.
  const int32_t count = int32_t(out.ownCells.size());
  out.totalCells = out.ownCells;
  out.totalArea = out.ownArea;
  for (int32_t k = 0; k < count; ++k)
    for (int32_t j = out.downstream[std::size_t(k)], steps = 0; j >= 0 && steps < count;
         j = out.downstream[std::size_t(j)], ++steps)
    {
      out.totalCells[std::size_t(j)] += out.ownCells[std::size_t(k)];
      out.totalArea[std::size_t(j)] += out.ownArea[std::size_t(k)];
    }
}

}  // namespace detail

Watersheds watersheds(Backend backend, const std::vector<uint8_t>& directions, int64_t width, int64_t height,
                      const double* cellWidth, const double* cellHeight, const std::vector<int64_t>& outlets,
                      const RunControl& control)
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
  out.labels.assign(directions.size(), -1);
  out.sameCellAs = detail::sameCellAs(outlets);
  for (int32_t k = 0; k < count; ++k)
    if (out.sameCellAs[std::size_t(k)] < 0)
      out.labels[std::size_t(outlets[std::size_t(k)])] = k + 1;
  if (backend == Backend::Gpu)
    detail::labelWatershedsCuda(directions.data(), width, height, out.labels.data(), control);
  else
    detail::labelWatershedsCpu(directions.data(), width, height, out.labels.data(), control);

  // Own cells and areas: per row, then the row's count times its cell area, summed top down.
  out.ownCells.assign(std::size_t(count), 0);
  out.ownArea.assign(std::size_t(count), 0.0);
  std::vector<int64_t> inRow(std::size_t(count), 0);
  std::vector<int32_t> touched;
  for (int64_t y = 0; y < height; ++y)
  {
    for (int64_t x = 0; x < width; ++x)
    {
      const int32_t label = out.labels[std::size_t(y * width + x)];
      if (label > 0 && inRow[std::size_t(label - 1)]++ == 0)
        touched.push_back(label - 1);
    }
    const double cellArea = cellWidth[y] * cellHeight[y];
    for (const int32_t k : touched)
    {
      out.ownCells[std::size_t(k)] += inRow[std::size_t(k)];
      out.ownArea[std::size_t(k)] += double(inRow[std::size_t(k)]) * cellArea;
      inRow[std::size_t(k)] = 0;
    }
    touched.clear();
  }

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
