#include "dem/travel_time.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/travel_math.h"

namespace gpugeo::dem {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

void requirePositive(double v, const char* what)
{
  if (!(v > 0) || !std::isfinite(v))
    throw InvalidInput(std::string(what) + " must be a positive number");
}

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

}  // namespace

double manningSpeed(const VelocityModel& m, double slopeTangent, double area, double cellN)
{
  return detail::manningCellSpeed(m, slopeTangent, area, cellN);
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
  TravelTimes out = detail::travelTimeCuda(g, directions, acc, outlet, model, control);
  for (int64_t c = 0; c < g.width * g.height; ++c)
    if (!std::isnan(out.minutes[std::size_t(c)]))
    {
      ++out.watershedCells;
      out.watershedArea += g.cellWidth[c / g.width] * g.cellHeight[c / g.width];
    }
  return out;
}

TravelTimes travelTime(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc, int64_t outlet,
                       const VelocityModel& model, int threads, const RunControl& control)
{
  validateTravel(g, directions, acc, outlet, model);
  const int64_t w = g.width, h = g.height, n = w * h;
  auto downstream = [&](int64_t c) { return detail::receiverOf(directions.data(), w, h, c); };
  TravelTimes out;
  out.minutes.assign(std::size_t(n), kNan);
  out.speed.assign(std::size_t(n), kNan);
  // Watershed membership and times: from each cell down to a cell already known (or the outlet),
  // then back up the path.
  std::vector<int8_t> state(static_cast<std::size_t>(n), 0);  // 0 unknown, 1 in, -1 out
  state[std::size_t(outlet)] = 1;
  std::vector<int64_t> path;
  for (int64_t c = 0; c < n; ++c)
  {
    if (state[std::size_t(c)] != 0 || directions[std::size_t(c)] == kNoData)
      continue;
    if ((c & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    path.clear();
    int64_t at = c;
    while (at >= 0 && state[std::size_t(at)] == 0)
    {
      path.push_back(at);
      state[std::size_t(at)] = 2;  // on the current path
      at = downstream(at);
    }
    const int8_t verdict = (at >= 0 && state[std::size_t(at)] == 1) ? 1 : -1;
    for (const int64_t p : path)
      state[std::size_t(p)] = verdict;
  }
  // Step times of the watershed's cells.
  std::vector<double> step(static_cast<std::size_t>(n), 0.0);
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
      for (int64_t x = 0; x < w; ++x)
      {
        const int64_t c = y * w + x;
        if (state[std::size_t(c)] != 1)
          continue;
        const uint8_t d = directions[std::size_t(c)];
        const double length = detail::flowLength(g.cellWidth[y], g.cellHeight[y], d);
        const double v = detail::cellSpeed(model, g.z, model.manning, w, h, x, y, downstream(c), acc.area[std::size_t(c)],
                                           g.cellWidth[y], g.cellHeight[y], d);
        out.speed[std::size_t(c)] = v;
        step[std::size_t(c)] = length / v / 60.0;
      }
  }, &control);
  // Times: the outlet's own step, then each cell's step plus its receiver's time.
  out.minutes[std::size_t(outlet)] = step[std::size_t(outlet)];
  for (int64_t c = 0; c < n; ++c)
  {
    if (state[std::size_t(c)] != 1 || !std::isnan(out.minutes[std::size_t(c)]))
      continue;
    path.clear();
    int64_t at = c;
    while (std::isnan(out.minutes[std::size_t(at)]))
    {
      path.push_back(at);
      at = downstream(at);
    }
    double t = out.minutes[std::size_t(at)];
    for (auto it = path.rbegin(); it != path.rend(); ++it)
    {
      t += step[std::size_t(*it)];
      out.minutes[std::size_t(*it)] = t;
    }
  }
  for (int64_t c = 0; c < n; ++c)
    if (state[std::size_t(c)] == 1)
    {
      ++out.watershedCells;
      out.watershedArea += g.cellWidth[c / w] * g.cellHeight[c / w];
    }
  return out;
}

int64_t snapOutlet(const Grid& g, const Accumulation& acc, int64_t x, int64_t y, double radius)
{
  const int64_t w = g.width, h = g.height;
  if (x < 0 || y < 0 || x >= w || y >= h)
    throw InvalidInput("the outlet lies outside the DEM");
  if (!(radius >= 0) || !std::isfinite(radius))
    throw InvalidInput("the snap distance must be zero or more");
  const double minSize = std::min(g.cellWidth[y], g.cellHeight[y]);
  const int64_t reach = int64_t(std::floor(radius / minSize));
  int64_t best = -1;
  for (int64_t yy = std::max<int64_t>(0, y - reach); yy <= std::min(h - 1, y + reach); ++yy)
    for (int64_t xx = std::max<int64_t>(0, x - reach); xx <= std::min(w - 1, x + reach); ++xx)
    {
      const int64_t c = yy * w + xx;
      if (std::isnan(g.z[c]))
        continue;
      const double dx = double(xx - x) * g.cellWidth[y], dy = double(yy - y) * g.cellHeight[y];
      if (dx * dx + dy * dy > radius * radius)
        continue;
      if (best < 0 || acc.cells[std::size_t(c)] > acc.cells[std::size_t(best)])
        best = c;
    }
  if (best < 0)
    throw InvalidInput("no valid DEM cell lies within the snap distance of the outlet");
  return best;
}

int64_t largestBasinOutlet(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc)
{
  const int64_t w = g.width, h = g.height;
  int64_t best = -1;
  for (int64_t c = 0; c < w * h; ++c)
  {
    if (directions[std::size_t(c)] == kNoData)
      continue;
    const bool leaves = detail::receiverOf(directions.data(), w, h, c) < 0;
    if (leaves && (best < 0 || acc.cells[std::size_t(c)] > acc.cells[std::size_t(best)]))
      best = c;
  }
  if (best < 0)
    throw InvalidInput("the DEM has no valid cell");
  return best;
}

}  // namespace gpugeo::dem
