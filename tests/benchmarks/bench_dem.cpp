// Times the DEM chain of the native core (fill, flat resolution + D8, accumulation, travel time to the
// largest basin's outlet, the polygons of 20 isochrone bands) on a synthetic terrain with pits and
// flats, on the GPU or the CPU.
//
// usage: bench_dem --width W --height H [--backend gpu|cpu] [--reps R] [--threads T] [--chain]
//                  [--manning] [--interval MINUTES]
// --chain: the same work in one isochroneChain() call (on the GPU, every array stays on the device
// between stages and only the travel times and polygons come back), not stage by stage. With
// --chain, --manning takes the Manning model (SAGA's, with its defaults) and --interval the bands'
// width (what gpugeo:isochrones runs in bench_dem_cpu.py: --manning --interval 60).
// The terrain: waves and a slope in metres on 30 m cells, with random noise (pits) and elevations
// rounded to 0.5 m (flats); the DEM is 2,511 x 2,550 in the source paper. Prints one JSON object:
// the medians of each stage and of the whole chain (ms), and checksums to compare the backends.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dem/dem.h"
#include "dem/isochrone_chain.h"
#include "dem/regions.h"
#include "dem/travel_time.h"

using namespace gpugeo;

// The slope model with the coefficients of every published run (k 0.3 and 1.5 m/s, slopes from
// 1e-4), whatever gpugeo:isochrones' defaults are: the same bands, so the same work, from run to run.
static dem::VelocityModel benchModel()
{
  dem::VelocityModel m;
  m.kind = dem::VelocityModel::Kind::Slope;
  m.kOverland = 0.3;
  m.kChannel = 1.5;
  m.minSlope = 1e-4;
  return m;
}

static double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main(int argc, char** argv)
{
  int64_t w = 2511, h = 2550;
  int reps = 5, threads = 0;
  std::string backend = "gpu";
  bool chain = false, manning = false;
  double fixedInterval = 0;  // minutes; 0: the longest time / 20
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    auto next = [&] { return std::string(argv[++i]); };
    if (a == "--width") w = std::stoll(next());
    else if (a == "--height") h = std::stoll(next());
    else if (a == "--backend") backend = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--chain") chain = true;
    else if (a == "--manning") manning = true;
    else if (a == "--interval") fixedInterval = std::stod(next());
  }
  std::vector<float> z(static_cast<std::size_t>(w * h));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const double sx = 2511.0 / double(w), sy = 2550.0 / double(h);  // the same landscape at any size
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      const double fx = double(x) * sx, fy = double(y) * sy;
      const double v = 300 + 120 * std::sin(fx * 0.004) * std::cos(fy * 0.0031) + 40 * std::sin(fx * 0.021 + fy * 0.017) +
                       0.03 * fx + 2.5 * u(rng);
      z[std::size_t(y * w + x)] = float(std::round(v * 2) / 2);
    }
  std::vector<double> cw(static_cast<std::size_t>(h), 30.0), ch(static_cast<std::size_t>(h), 30.0);
  const Backend b = backend == "cpu" ? Backend::Cpu : Backend::Gpu;
  RunControl control;
  std::map<std::string, std::vector<double>> stages;
  std::vector<double> totals;
  int64_t noFlow = 0, maxCells = 0, polygons = 0, rings = 0;
  double filledSum = 0;
  double chainInterval = 1e300;  // one band in the warm-up run, which finds the longest time
  for (int r = -1; chain && r < reps; ++r)
  {
    StageTimes times;
    const auto start = std::chrono::steady_clock::now();
    const dem::Grid grid{z.data(), w, h, cw.data(), ch.data()};
    dem::ChainOptions o;
    o.interval = chainInterval;
    o.model = benchModel();
    if (manning)
      o.model.kind = dem::VelocityModel::Kind::Manning;
    const dem::ChainResult c = dem::isochroneChain(b, grid, o, threads, control, &times);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r < 0)
    {
      double travelSum = 0, longest = 0;
      for (double m : c.travel.minutes)
        if (m == m)
        {
          travelSum += m;
          longest = std::max(longest, m);
        }
      std::printf("{\"travel_minutes_sum\": %.12e}\n", travelSum);
      chainInterval = fixedInterval > 0 ? fixedInterval : longest / 20 * (1 + 1e-12);
      continue;
    }
    polygons = c.bandPolygons.bandPolygon.back();
    rings = int64_t(c.bandPolygons.ringPoint.size()) - 1;
    totals.push_back(ms);
    for (const auto& st : times.entries())
      stages[st.first].push_back(st.second);
  }
  for (int r = -1; !chain && r < reps; ++r)
  {
    StageTimes times;
    const auto start = std::chrono::steady_clock::now();
    const dem::Grid grid{z.data(), w, h, cw.data(), ch.data()};
    const std::vector<float> filled = dem::fillDepressions(b, grid, threads, control, &times);
    const dem::Grid fg{filled.data(), w, h, cw.data(), ch.data()};
    const std::vector<uint8_t> dirs = dem::flowDirections(b, fg, true, threads, control, &times);
    const dem::Accumulation acc = dem::flowAccumulation(b, fg, dirs, threads, control, &times);
    double travelSum = 0, longest = 0;
    dem::TravelTimes t;
    {
      ScopedStage stage(times, "travel time");
      const int64_t outlet = dem::largestBasinOutlet(fg, dirs, acc);
      t = dem::travelTime(b, fg, dirs, acc, outlet, benchModel(), threads, control);
    }
    for (double m : t.minutes)
      if (m == m)
      {
        travelSum += m;
        longest = std::max(longest, m);
      }
    BandPolygons bands;
    {
      // 20 bands of equal time: each cell's band, then the bands' polygons.
      ScopedStage stage(times, "bands");
      const double interval = longest / 20 * (1 + 1e-12);
      std::vector<int32_t> labels(t.minutes.size());
      for (std::size_t i = 0; i < labels.size(); ++i)
        labels[i] = t.minutes[i] == t.minutes[i] ? int32_t(t.minutes[i] / interval) : -1;
      bands = dem::traceRegions(b, labels.data(), w, h, 20, threads, control);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r < 0)
    {
      std::printf("{\"travel_minutes_sum\": %.12e}\n", travelSum);
      polygons = bands.bandPolygon.back();
      rings = int64_t(bands.ringPoint.size()) - 1;
      noFlow = std::count(dirs.begin(), dirs.end(), dem::kNoFlow);
      maxCells = *std::max_element(acc.cells.begin(), acc.cells.end());
      filledSum = 0;
      for (float v : filled)
        filledSum += v;
      continue;
    }
    totals.push_back(ms);
    for (const auto& s : times.entries())
      stages[s.first].push_back(s.second);
  }
  std::printf("{\"width\": %lld, \"height\": %lld, \"backend\": \"%s\", \"mode\": \"%s\", \"total_ms\": %.3f",
              (long long)w, (long long)h, backend.c_str(), chain ? "chain" : "stages", median(totals));
  for (const auto& s : stages)
    std::printf(", \"%s_ms\": %.3f", s.first.c_str(), median(s.second));
  std::printf(", \"no_flow\": %lld, \"max_cells\": %lld, \"filled_sum\": %.6e, \"band_polygons\": %lld, "
              "\"band_rings\": %lld}\n",
              (long long)noFlow, (long long)maxCells, filledSum, (long long)polygons, (long long)rings);
  return 0;
}
