// Benchmark of the Voronoi polygons' native core (it times; it asserts nothing).
//
//   bench_voronoi_polygons (--points N [--seed S] | --input FILE) [--reps R] [--threads T] [--buffer PERCENT]
//
// N points uniform in a 100 km square at UTM-sized coordinates (fixed seed), or FILE: x, y pairs as
// float64. The rectangle is the points' extent grown by PERCENT of its width and height on each side
// (qgis:voronoipolygons' BUFFER; default 0). Prints one JSON line: the median and the fastest of R
// runs of voronoiPolygons, the polygons and their vertices, the areas' sum against the rectangle's,
// and the stage times of the median run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "voronoi/voronoi_polygons.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;

namespace {

double nowMs()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv)
{
  int64_t n = 100000;
  uint32_t seed = 1;
  int reps = 5;
  int threads = 0;
  double buffer = 0.0;
  std::string input;
  for (int i = 1; i + 1 < argc; i += 2)
  {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--points") n = std::stoll(value);
    else if (key == "--seed") seed = uint32_t(std::stoul(value));
    else if (key == "--reps") reps = std::stoi(value);
    else if (key == "--threads") threads = std::stoi(value);
    else if (key == "--buffer") buffer = std::stod(value);
    else if (key == "--input") input = value;
    else
    {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  std::vector<double> x, y;
  if (!input.empty())
  {
    std::ifstream f(input, std::ios::binary | std::ios::ate);
    std::vector<double> pairs(static_cast<size_t>(f.tellg()) / sizeof(double));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(pairs.data()), std::streamsize(pairs.size() * sizeof(double)));
    n = int64_t(pairs.size() / 2);
    for (int64_t i = 0; i < n; ++i)
    {
      x.push_back(pairs[size_t(2 * i)]);
      y.push_back(pairs[size_t(2 * i + 1)]);
    }
  }
  else
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 100000.0);
    for (int64_t i = 0; i < n; ++i)
    {
      x.push_back(400000.0 + u(rng));
      y.push_back(5000000.0 + u(rng));
    }
  }
  const auto [x0, x1] = std::minmax_element(x.begin(), x.end());
  const auto [y0, y1] = std::minmax_element(y.begin(), y.end());
  const double bx = (*x1 - *x0) * buffer / 100.0, by = (*y1 - *y0) * buffer / 100.0;
  const ClipRectangle rect{*x0 - bx, *y0 - by, *x1 + bx, *y1 + by};
  std::vector<double> ms;
  std::vector<StageTimes> times;
  int64_t polygons = 0, vertices = 0;
  double areaError = 0.0;
  for (int r = 0; r < reps; ++r)
  {
    const double t0 = nowMs();
    const VoronoiPolygons v = voronoiPolygons(PlanePoints{x.data(), y.data(), n}, rect, VoronoiPolygonsOptions{threads, 0.0}, RunControl{});
    ms.push_back(nowMs() - t0);
    times.push_back(v.times);
    polygons = int64_t(v.pointOfCell.size());
    vertices = int64_t(v.x.size());
    double area = 0.0;
    for (size_t c = 0; c + 1 < v.ringStart.size(); ++c)
      for (int64_t k = v.ringStart[c]; k < v.ringStart[c + 1]; ++k)
      {
        const int64_t k1 = k + 1 < v.ringStart[c + 1] ? k + 1 : v.ringStart[c];
        // Relative to the rectangle's corner, so that the products keep their precision.
        area += 0.5 * ((v.x[k] - rect.xMin) * (v.y[k1] - rect.yMin) - (v.x[k1] - rect.xMin) * (v.y[k] - rect.yMin));
      }
    const double want = (rect.xMax - rect.xMin) * (rect.yMax - rect.yMin);
    areaError = (area - want) / want;
  }
  std::vector<size_t> order(ms.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] < ms[b]; });
  const size_t mid = order[order.size() / 2];
  std::string stages;
  for (const auto& [stage, stageMs] : times[mid].entries())
    stages += (stages.empty() ? "" : ", ") + std::string("\"") + stage + "\": " + std::to_string(stageMs);
  std::printf("{\"points\": %lld, \"threads\": %d, \"reps\": %d, \"median_ms\": %.1f, \"min_ms\": %.1f, "
              "\"polygons\": %lld, \"vertices\": %lld, \"area_relative_error\": %.3g, \"stages_ms\": {%s}}\n",
              static_cast<long long>(n), threads, reps, ms[mid], ms[order.front()], static_cast<long long>(polygons),
              static_cast<long long>(vertices), areaError, stages.c_str());
  return 0;
}
