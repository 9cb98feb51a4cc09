#include "dem/travel_time.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_math.h"

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

// The D8 flow length of a cell in direction d (or the cell's width when it has none).
double flowLength(const Grid& g, int64_t y, uint8_t d)
{
  const double w = g.cellWidth[y], h = g.cellHeight[y];
  if (d >= 8)
    return w;
  return (d & 1) ? std::sqrt(w * w + h * h) : ((d & 2) ? h : w);
}

// The Zevenbergen & Thorne slope's tangent; a missing neighbour is extrapolated as 2 z - z_opposite
// (as SAGA does), both missing: no gradient on that axis.
double slopeTangent(const Grid& g, int64_t x, int64_t y)
{
  const int64_t w = g.width, h = g.height;
  const float zc = g.z[y * w + x];
  auto at = [&](int64_t xx, int64_t yy) -> double {
    if (xx < 0 || yy < 0 || xx >= w || yy >= h)
      return kNan;
    return double(g.z[yy * w + xx]);
  };
  auto pair = [&](double a, double b) {
    if (std::isnan(a) && std::isnan(b))
      return 0.0;
    if (std::isnan(a))
      a = 2.0 * zc - b;
    if (std::isnan(b))
      b = 2.0 * zc - a;
    return a - b;
  };
  const double G = pair(at(x + 1, y), at(x - 1, y)) / (2 * g.cellWidth[y]);
  const double H = pair(at(x, y - 1), at(x, y + 1)) / (2 * g.cellHeight[y]);
  return std::sqrt(G * G + H * H);
}

}  // namespace

double manningSpeed(const VelocityModel& m, double slopeTangent, double area, double cellN)
{
  const double S = 25400.0 / m.curveNumber - 254.0;
  const double runoff = m.rainfall < 0.2 * S ? 0.1 : (m.rainfall - 0.2 * S) * (m.rainfall - 0.2 * S) / (m.rainfall + 0.8 * S);
  const double I = runoff / 3600.0 / 1000.0;
  const double s = std::max(0.001, std::fabs(slopeTangent));
  if (area < m.mixedArea)
  {
    const double D = std::sqrt(2 * area / 3.14159);
    return std::max(m.minSpeed, std::pow(I * D, 0.4) * std::pow(s, 0.3) / std::pow(cellN, 0.6));
  }
  const double n = area < m.channelAreaManning ? m.mixedN : m.channelN;
  const double Q = I * area, z = m.sideSlope;
  auto wet = [&](double h) { return h * h / z; };
  auto flowError = [&](double h) {
    const double perimeter = 2 * (h / z + std::sqrt(h * h + (h / z) * (h / z)));
    return std::sqrt(s) * std::pow(wet(h), 5.0 / 3.0) / std::pow(perimeter, 2.0 / 3.0) / n - Q;
  };
  double lo = 0, hi = 60, h = 2, f = flowError(h);
  int steps = 0;
  do
  {
    if (f > 0)
    {
      hi = h;
      h = (lo + h) / 2;
    }
    else if (f < 0)
    {
      lo = h;
      h = (hi + h) / 2;
    }
    f = flowError(h);
  } while (std::fabs(f) > 0.1 && ++steps < m.maxIterations);
  return std::max(m.minSpeed, Q / wet(h));
}

TravelTimes travelTime(const Grid& g, const std::vector<uint8_t>& directions, const Accumulation& acc, int64_t outlet,
                       const VelocityModel& model, int threads, const RunControl& control)
{
  validateGrid(g);
  validateModel(model);
  const int64_t w = g.width, h = g.height, n = w * h;
  if (int64_t(directions.size()) != n || int64_t(acc.area.size()) != n)
    throw InvalidInput("the flow directions and accumulation do not match the DEM's size");
  if (outlet < 0 || outlet >= n)
    throw InvalidInput("the outlet lies outside the DEM");
  if (directions[std::size_t(outlet)] == kNoData)
    throw InvalidInput("the outlet lies on a nodata cell");
  auto downstream = [&](int64_t c) -> int64_t {
    const uint8_t d = directions[std::size_t(c)];
    if (d >= 8)
      return -1;
    const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
    if (nx < 0 || ny < 0 || nx >= w || ny >= h || directions[std::size_t(ny * w + nx)] == kNoData)
      return -1;
    return ny * w + nx;
  };
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
        const double length = flowLength(g, y, d);
        double v = 0;
        switch (model.kind)
        {
          case VelocityModel::Kind::Constant:
            v = model.speed;
            break;
          case VelocityModel::Kind::Slope:
          {
            const int64_t r = downstream(c);
            const double drop = r >= 0 ? double(g.z[c]) - double(g.z[r]) : 0.0;
            const double s = std::max(model.minSlope, drop / length);
            const double k = double(acc.area[std::size_t(c)]) * 1e-6 >= model.channelArea ? model.kChannel : model.kOverland;
            v = std::max(model.minSpeed, k * std::sqrt(s) * model.b / model.n);
            break;
          }
          case VelocityModel::Kind::Manning:
          {
            double cellN = model.overlandN;
            if (model.manning && std::isfinite(model.manning[c]) && model.manning[c] > 0)
              cellN = model.manning[c];
            v = manningSpeed(model, slopeTangent(g, x, y), double(acc.area[std::size_t(c)]) * 1e-6, cellN);
            break;
          }
        }
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
    const uint8_t d = directions[std::size_t(c)];
    if (d == kNoData)
      continue;
    bool leaves = d >= 8;
    if (!leaves)
    {
      const int64_t nx = c % w + kDx[d], ny = c / w + kDy[d];
      leaves = nx < 0 || ny < 0 || nx >= w || ny >= h || directions[std::size_t(ny * w + nx)] == kNoData;
    }
    if (leaves && (best < 0 || acc.cells[std::size_t(c)] > acc.cells[std::size_t(best)]))
      best = c;
  }
  if (best < 0)
    throw InvalidInput("the DEM has no valid cell");
  return best;
}

}  // namespace gpugeo::dem
