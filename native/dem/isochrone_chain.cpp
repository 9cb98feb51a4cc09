// The isochrone chain (isochrone_chain.h): its checks, the CPU path, and the dispatch.
#include "dem/isochrone_chain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/travel_math.h"
#include "dem/regions.h"

namespace gpugeo::dem {

namespace detail {

int32_t chainBandCount(double longest, const ChainOptions& options, double& interval)
{
  if (!std::isfinite(longest))
    throw TravelTimesOverflow("the travel times overflow: a speed or a velocity model's coefficient is too small");
  interval = options.interval > 0 ? options.interval : automaticInterval(longest);
  const double last = std::floor(longest / interval);
  if (!(last < double(options.maxBands)))
  {
    char text[256];
    std::snprintf(text, sizeof text,
                  "an interval of %.6g minutes cuts travel times of up to %.6g minutes into %.6g bands, more than "
                  "the limit of %d: choose a larger interval",
                  interval, longest, last + 1, int(options.maxBands));
    throw InvalidInput(text);
  }
  return int32_t(last) + 1;
}

}  // namespace detail

double automaticInterval(double longest)
{
  static const double kRound[] = {1,   2,   5,   10,  15,  20,   30,   60,   120,  180,
                                  240, 360, 480, 720, 1440, 2880, 4320, 10080};
  for (const double interval : kRound)
    if (std::floor(longest / interval) + 1 <= kAutomaticBands)
      return interval;
  const double week = 10080;
  return week * std::ceil(longest / (week * (kAutomaticBands - 1)) + 1e-12);
}

namespace {

ChainResult chainCpu(const Grid& dem, const ChainOptions& o, int threads, const RunControl& control,
                     StageTimes& times)
{
  const auto starting = [&](ChainStage s) {
    if (o.onStage)
      o.onStage(s);
  };
  ChainResult out;
  starting(ChainStage::Fill);
  std::vector<float> filled = fillDepressions(Backend::Cpu, dem, threads, control, &times);
  {
    std::vector<int64_t> raisedInRow(static_cast<std::size_t>(dem.height), 0);
    parallelFor(dem.height, 64, threads, [&](int64_t b, int64_t e) {
      for (int64_t y = b; y < e; ++y)
      {
        int64_t raised = 0;
        for (int64_t i = y * dem.width; i < (y + 1) * dem.width; ++i)
          raised += filled[std::size_t(i)] > dem.z[i];
        raisedInRow[std::size_t(y)] = raised;
      }
    }, &control);
    for (const int64_t raised : raisedInRow)
      out.raisedCells += raised;
  }
  const Grid grid{filled.data(), dem.width, dem.height, dem.cellWidth, dem.cellHeight};
  starting(ChainStage::Directions);
  std::vector<uint8_t> directions = flowDirections(Backend::Cpu, grid, true, threads, control, &times);
  starting(ChainStage::Accumulation);
  Accumulation accumulation = flowAccumulation(Backend::Cpu, grid, directions, threads, control, &times);
  starting(ChainStage::TravelTime);
  {
    ScopedStage stage(times, "travel time");
    out.outlet = o.automaticOutlet ? largestBasinOutlet(grid, directions, accumulation)
                                   : snapOutlet(grid, accumulation, o.outletColumn, o.outletRow, o.snapDistance);
    out.outletCells = accumulation.cells[std::size_t(out.outlet)];
    std::pair<double, double> speeds;
    out.travel = travelTime(grid, directions, accumulation, out.outlet, o.model, threads, control, o.keepSpeed, &speeds);
    out.minSpeed = speeds.first;
    out.maxSpeed = speeds.second;
  }
  starting(ChainStage::Bands);
  ScopedStage stage(times, "bands");
  const double* minutes = out.travel.minutes.data();
  std::vector<double> longestInRow(static_cast<std::size_t>(dem.height), 0.0);
  parallelFor(dem.height, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
    {
      double longest = 0;
      for (int64_t i = y * dem.width; i < (y + 1) * dem.width; ++i)
        longest = std::isnan(minutes[i]) ? longest : std::max(longest, minutes[i]);
      longestInRow[std::size_t(y)] = longest;
    }
  }, &control);
  out.bands = detail::chainBandCount(*std::max_element(longestInRow.begin(), longestInRow.end()), o, out.interval);
  // The cells' bands and the watershed (one set), then each traced on all threads.
  // (Uninitialised: the pass below writes every cell, on all threads.)
  const std::unique_ptr<int32_t[]> labels(new int32_t[out.travel.minutes.size()]),
    shed(new int32_t[out.travel.minutes.size()]);
  parallelFor(dem.height, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b * dem.width; i < e * dem.width; ++i)
    {
      const bool inside = !std::isnan(minutes[i]);
      labels[std::size_t(i)] = inside ? detail::bandOfTime(minutes[i], out.interval) : -1;
      shed[std::size_t(i)] = inside ? 0 : -1;
    }
  }, &control);
  out.bandPolygons = traceRegions(Backend::Cpu, labels.get(), dem.width, dem.height, out.bands, threads, control);
  out.watershed = traceRegions(Backend::Cpu, shed.get(), dem.width, dem.height, 1, threads, control);
  if (o.keepFilled)
    out.filled = std::move(filled);
  if (o.keepDirections)
    out.directions = std::move(directions);
  if (o.keepAccumulation)
    out.accumulation = std::move(accumulation);
  return out;
}

}  // namespace

ChainResult isochroneChain(Backend backend, const Grid& dem, const ChainOptions& options, int threads,
                           const RunControl& control, StageTimes* times)
{
  validateGrid(dem);
  if (!(options.interval >= 0) || !std::isfinite(options.interval))
    throw InvalidInput("the interval must be a positive number of minutes, or 0 for an automatic one");
  if (options.maxBands < 1)
    throw InvalidInput("at least one band must be allowed");
  if (!options.automaticOutlet && (options.outletColumn < 0 || options.outletRow < 0 ||
                                   options.outletColumn >= dem.width || options.outletRow >= dem.height))
    throw InvalidInput("the outlet lies outside the DEM");
  validateModel(options.model);
  StageTimes local;
  StageTimes& t = times ? *times : local;
  if (backend == Backend::Gpu)
    return detail::isochroneChainCuda(dem, options, control, t);
  return chainCpu(dem, options, threads, control, t);
}

}  // namespace gpugeo::dem
