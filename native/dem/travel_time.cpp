#include "dem/travel_time.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/travel_math.h"


namespace gpugeo::dem {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
// How many cells ahead the downstream sums fetch their cell's time and direction.
constexpr std::size_t kSumPrefetch = 24;

void requirePositive(double v, const char* what)
{
  if (!(v > 0) || !std::isfinite(v))
    throw InvalidInput(std::string(what) + " must be a positive number");
}

}  // namespace

void validateModel(const VelocityModel& m)
{
  switch (m.kind)
  {
    case VelocityModel::Kind::Constant:
      requirePositive(m.speed, "the speed");
      break;
    case VelocityModel::Kind::Slope:
      requirePositive(m.minSpeed, "the minimum speed");
      requirePositive(m.kOverland, "the overland velocity coefficient");
      requirePositive(m.kChannel, "the channel velocity coefficient");
      requirePositive(m.n, "n");
      requirePositive(m.b, "b");
      requirePositive(m.minSlope, "the minimum slope");
      if (!(m.channelArea >= 0))
        throw InvalidInput("the channel threshold must be zero or more");
      break;
    case VelocityModel::Kind::Manning:
      requirePositive(m.minSpeed, "the minimum speed");
      requirePositive(m.rainfall, "the rainfall intensity");
      if (!(m.curveNumber > 0 && m.curveNumber <= 100))
        throw InvalidInput("the curve number must be above 0 and at most 100");
      requirePositive(m.overlandN, "Manning's n for overland flow");
      requirePositive(m.mixedN, "Manning's n for mixed flow");
      requirePositive(m.channelN, "Manning's n for channel flow");
      requirePositive(m.sideSlope, "the channel side slope");
      if (!(m.mixedArea >= 0) || !(m.channelAreaManning >= m.mixedArea))
        throw InvalidInput("the mixed-flow threshold must be zero or more and at most the channel threshold");
      if (m.maxIterations < 1)
        throw InvalidInput("the iteration cap must be at least 1");
      break;
  }
}

double manningSpeed(const VelocityModel& m, double slopeTangent, double area, double cellN)
{
  return detail::manningCellSpeed(m, slopeTangent, area, detail::manningNPower(cellN));
}

namespace {

void validateTravel(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc, int64_t outlet,
                    const VelocityModel& model)
{
  validateGrid(g);
  validateModel(model);
  const int64_t n = g.width * g.height;
  if (int64_t(directions.size()) != n || int64_t(acc.area.size()) != n)
    throw InvalidInput("the flow directions and accumulation do not match the DEM's size");
  if (outlet < 0 || outlet >= n)
    throw InvalidInput("the outlet lies outside the DEM");
  if (directions[std::size_t(outlet)] == kNoData)
    throw InvalidInput("the outlet lies on a nodata cell");
}

}  // namespace

TravelTimes travelTime(Backend backend, const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc,
                       int64_t outlet, const VelocityModel& model, int threads, const RunControl& control)
{
  if (backend != Backend::Gpu)
    return travelTime(g, directions, acc, outlet, model, threads, control);
  validateTravel(g, directions, acc, outlet, model);
  return detail::travelTimeCuda(g, directions, acc, outlet, model, control);
}

void detail::watershedFromRows(const Grid& grid, const std::vector<int64_t>& rowCells, TravelTimes& out)
{
  out.watershedCells = 0;
  out.watershedArea = 0;
  for (int64_t y = 0; y < grid.height; ++y)
  {
    out.watershedCells += rowCells[std::size_t(y)];
    out.watershedArea += double(rowCells[std::size_t(y)]) * (grid.cellWidth[y] * grid.cellHeight[y]);
  }
}

namespace {

// The watershed of `outlet` in an order where every cell comes after its receiver: breadth-first
// up the flow paths from the outlet, a cell's donors being the neighbours whose direction points
// back at it (so no list of donors is built, and the work is in proportion to the watershed, not
// the grid). Each cell but the outlet has one receiver and so is reached once. A path ends at the
// outlet, so the outlet is never taken as a donor: that only matters for directions that loop
// through it, and keeps the walk finite there. Marks the watershed in `inside` (zeroed here) and
// counts its cells per row in `rowCells`. Cells are int32: validateGrid caps grids at kMaxCells.
std::vector<int32_t> upstreamOrder(const uint8_t* directions, int64_t w, int64_t h, int64_t outlet, int64_t sizeHint,
                                   std::vector<uint8_t>& inside, std::vector<int64_t>& rowCells,
                                   const RunControl& control)
{
  const int64_t n = w * h;
  inside.assign(static_cast<std::size_t>(n), 0);
  int64_t offset[8];
  uint8_t backTo[8];  // the direction of the neighbour in direction d when it drains to the cell
  for (int d = 0; d < 8; ++d)
  {
    offset[d] = kDy[d] * w + kDx[d];
    backTo[d] = uint8_t((d + 4) & 7);
  }
  // The accumulation's count at the outlet is the watershed's size when it matches the directions;
  // a wrong hint only costs a reallocation. Eight spare slots let a cell's neighbours be written
  // before knowing which of them drain to it: no branch per neighbour for the processor to guess.
  std::vector<int32_t> order(static_cast<std::size_t>(std::min(n, std::max<int64_t>(1, sizeHint)) + 8));
  order[0] = int32_t(outlet);
  int64_t tail = 1;
  for (int64_t head = 0; head < tail; ++head)
  {
    if ((head & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    if (int64_t(order.size()) < tail + 8)
      order.resize(static_cast<std::size_t>(std::min(n, 2 * tail) + 8));
    const int64_t c = order[std::size_t(head)];
    const int64_t y = int64_t(uint32_t(c) / uint32_t(w)), x = c - y * w;
    inside[std::size_t(c)] = 1;
    ++rowCells[std::size_t(y)];
    if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nb = c + offset[d];
        order[std::size_t(tail)] = int32_t(nb);
        tail += int64_t(directions[nb] == backTo[d]) & int64_t(nb != outlet);
      }
    else
      for (int d = 0; d < 8; ++d)
      {
        const int64_t nx = x + kDx[d], ny = y + kDy[d];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h)
          continue;
        const int64_t nb = ny * w + nx;
        if (directions[nb] == backTo[d] && nb != outlet)
          order[std::size_t(tail++)] = int32_t(nb);
      }
  }
  order.resize(static_cast<std::size_t>(tail));
  return order;
}

}  // namespace

TravelTimes travelTime(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc, int64_t outlet,
                       const VelocityModel& model, int threads, const RunControl& control, bool keepSpeed,
                       std::pair<double, double>* speedRange)
{
  validateTravel(g, directions, acc, outlet, model);
  const int64_t w = g.width, h = g.height, n = w * h;
  const uint8_t* dir = directions.data();
  TravelTimes out;
  // The watershed (one thread) while the others fill the outputs with NaN: filling 2 x 8 bytes a
  // cell of fresh memory costs about as much as the walk, and only the cells inside get a value.
  std::vector<int32_t> order;
  std::vector<uint8_t> inside;
  std::vector<int64_t> rowCells(static_cast<std::size_t>(h), 0);
  parallelFor(3, 1, threads, [&](int64_t item, int64_t) {
    if (item == 0)
    {
      const int64_t hint = int64_t(acc.cells.size()) == n ? acc.cells[std::size_t(outlet)] : 0;
      order = upstreamOrder(dir, w, h, outlet, hint, inside, rowCells, control);
      detail::watershedFromRows(g, rowCells, out);  // as the GPU path sums it
    }
    else if (item == 1)
      out.minutes.assign(static_cast<std::size_t>(n), kNan);
    else if (keepSpeed)
      out.speed.assign(static_cast<std::size_t>(n), kNan);
  }, &control);
  const double overlandNPower = detail::manningNPower(model.overlandN);
  // Each row's least and greatest speed (NaN for a row outside the watershed), for speedRange.
  std::vector<double> rowMin(static_cast<std::size_t>(speedRange ? h : 0), kNan), rowMax(rowMin.size(), kNan);
  // Speeds and step times of the watershed's cells, row by row (in the order of memory, which is
  // faster than the order of the walk); the step waits in `minutes` for the sums below.
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
    {
      if (rowCells[std::size_t(y)] == 0)
        continue;
      double least = std::numeric_limits<double>::infinity(), greatest = -least;
      for (int64_t x = 0; x < w; ++x)
      {
        const int64_t c = y * w + x;
        if (!inside[std::size_t(c)])
          continue;
        const uint8_t d = dir[c];
        const double length = detail::flowLength(g.cellWidth[y], g.cellHeight[y], d);
        const double v = detail::cellSpeed(model, overlandNPower, g.z, model.manning, w, h, x, y,
                                           detail::receiverAt(dir, w, h, x, y), acc.area[std::size_t(c)],
                                           g.cellWidth[y], g.cellHeight[y], d);
        if (keepSpeed)
          out.speed[std::size_t(c)] = v;
        least = std::min(least, v);
        greatest = std::max(greatest, v);
        out.minutes[std::size_t(c)] = length / v / 60.0;
      }
      if (speedRange)
      {
        rowMin[std::size_t(y)] = least;
        rowMax[std::size_t(y)] = greatest;
      }
    }
  }, &control);
  // Times: the outlet's is its own step; every other cell's, its receiver's time (finished earlier
  // in the order) plus its step. That is the sum along the path taken from the outlet up, one
  // addition per cell, so the times do not depend on the order or the thread count.
  int64_t offset[8];
  for (int d = 0; d < 8; ++d)
    offset[d] = kDy[d] * w + kDx[d];
  double* minutes = out.minutes.data();
  const std::size_t m = order.size();
  for (std::size_t i = 1; i < m; ++i)
  {
    if ((i & 0xfffff) == 0 && control.isCanceled())
      throw Canceled();
#if defined(__GNUC__)
    // The cells come in no order of memory: fetching ahead takes about a third off this loop, which
    // is the one part that cannot be shared among threads.
    if (i + kSumPrefetch < m)
    {
      const int32_t ahead = order[i + kSumPrefetch];
      __builtin_prefetch(minutes + ahead, 1);
      __builtin_prefetch(dir + ahead);
    }
#endif
    const int64_t c = order[i];
    minutes[c] += minutes[c + offset[dir[c]]];
  }
  if (speedRange)
  {
    *speedRange = {kNan, kNan};
    for (int64_t y = 0; y < h; ++y)
      if (!std::isnan(rowMin[std::size_t(y)]))
      {
        speedRange->first = std::isnan(speedRange->first) ? rowMin[std::size_t(y)]
                                                          : std::min(speedRange->first, rowMin[std::size_t(y)]);
        speedRange->second = std::isnan(speedRange->second) ? rowMax[std::size_t(y)]
                                                            : std::max(speedRange->second, rowMax[std::size_t(y)]);
      }
  }
  return out;
}

namespace {

// Calls visit(c) for each valid cell within `radius` metres of (x, y), row by row (snapOutlet's window).
template <typename Visit>
void forEachWithin(const Grid& g, int64_t x, int64_t y, double radius, Visit visit)
{
  const int64_t w = g.width, h = g.height;
  if (x < 0 || y < 0 || x >= w || y >= h)
    throw InvalidInput("the outlet lies outside the DEM");
  if (!(radius >= 0) || !std::isfinite(radius))
    throw InvalidInput("the snap distance must be zero or more");
  const double minSize = std::min(g.cellWidth[y], g.cellHeight[y]);
  // In cells, at most the grid's size (a radius of 1e308 m would pass any integer).
  const int64_t reach = int64_t(std::min(std::floor(radius / minSize), double(std::max(w, h))));
  for (int64_t yy = std::max<int64_t>(0, y - reach); yy <= std::min(h - 1, y + reach); ++yy)
    for (int64_t xx = std::max<int64_t>(0, x - reach); xx <= std::min(w - 1, x + reach); ++xx)
    {
      const int64_t c = yy * w + xx;
      if (std::isnan(g.z[c]))
        continue;
      const double dx = double(xx - x) * g.cellWidth[y], dy = double(yy - y) * g.cellHeight[y];
      if (dx * dx + dy * dy <= radius * radius)
        visit(c);
    }
}

}  // namespace

int64_t snapOutlet(const Grid& g, const Accumulation& acc, int64_t x, int64_t y, double radius)
{
  int64_t best = -1;
  forEachWithin(g, x, y, radius, [&](int64_t c) {
    if (best < 0 || acc.cells[std::size_t(c)] > acc.cells[std::size_t(best)])
      best = c;
  });
  if (best < 0)
    throw InvalidInput("no valid DEM cell lies within the snap distance of the outlet");
  return best;
}

bool validCellWithin(const Grid& g, int64_t x, int64_t y, double radius)
{
  bool found = false;
  forEachWithin(g, x, y, radius, [&](int64_t) { found = true; });
  return found;
}

int64_t largestBasinOutlet(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc)
{
  const int64_t w = g.width, h = g.height;
  int64_t best = -1;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0, c = y * w; x < w; ++x, ++c)
    {
      if (directions[std::size_t(c)] == kNoData)
        continue;
      const bool leaves = detail::receiverAt(directions.data(), w, h, x, y) < 0;
      if (leaves && (best < 0 || acc.cells[std::size_t(c)] > acc.cells[std::size_t(best)]))
        best = c;
    }
  if (best < 0)
    throw InvalidInput("the DEM has no valid cell");
  return best;
}

}  // namespace gpugeo::dem
