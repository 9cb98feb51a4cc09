// Benchmark of the spherical Voronoi polygons' native core (it times; it asserts nothing).
//
//   bench_spherical_voronoi (--sites N [--seed S] | --input FILE) [--reps R] [--threads T]
//                           [--densify DEG] [--backend cpu|gpu]
//
// N sites uniform on the sphere (fixed seed), or FILE: lon, lat pairs as float64 (the sites
// bench_spherical_voronoi.py gives SciPy). Prints one JSON line: the median and the fastest of R
// runs of sphericalVoronoi (unit vectors, hull, regions, areas and the densified lon/lat polygons),
// the sum of the areas minus 4 pi and the number of polygon points; with --backend gpu whether the
// mesh came from the GPU's cells (or why not); the stage times of the median run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sphere/spherical_voronoi.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

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
  double densify = 1.0;
  std::string input;
  std::string backend = "cpu";
  for (int i = 1; i + 1 < argc; i += 2)
  {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--sites") n = std::stoll(value);
    else if (key == "--seed") seed = uint32_t(std::stoul(value));
    else if (key == "--reps") reps = std::stoi(value);
    else if (key == "--threads") threads = std::stoi(value);
    else if (key == "--densify") densify = std::stod(value);
    else if (key == "--input") input = value;
    else if (key == "--backend") backend = value;
    else
    {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  std::vector<double> lon, lat;
  if (!input.empty())
  {
    std::ifstream f(input, std::ios::binary | std::ios::ate);
    const auto bytes = static_cast<size_t>(f.tellg());
    std::vector<double> pairs(bytes / sizeof(double));
    f.seekg(0);
    f.read(reinterpret_cast<char*>(pairs.data()), std::streamsize(pairs.size() * sizeof(double)));
    n = int64_t(pairs.size() / 2);
    for (int64_t i = 0; i < n; ++i)
    {
      lon.push_back(pairs[size_t(2 * i)]);
      lat.push_back(pairs[size_t(2 * i + 1)]);
    }
  }
  else
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> z(-1.0, 1.0), l(-180.0, 180.0);
    for (int64_t i = 0; i < n; ++i)
    {
      lon.push_back(l(rng));
      lat.push_back(std::asin(z(rng)) * 180.0 / 3.14159265358979323846);
    }
  }
  SphericalVoronoiOptions options;
  options.densifyStepDeg = densify;
  options.threads = threads;
  options.backend = backend == "gpu" ? Backend::Gpu : Backend::Cpu;
  std::vector<double> ms;
  std::vector<SphericalVoronoiReport> reports;
  double areaError = 0;
  int64_t points = 0;
  for (int r = 0; r < reps; ++r)
  {
    const double t0 = nowMs();
    SphericalVoronoiReport report;
    const std::vector<SphericalRegion> regions =
      sphericalVoronoi(lon.data(), lat.data(), n, options, RunControl{}, &report);
    ms.push_back(nowMs() - t0);
    reports.push_back(report);
    double area = 0;
    points = 0;
    for (const SphericalRegion& region : regions)
    {
      area += region.areaSteradians;
      for (const LonLatPolygon& part : region.parts)
        points += int64_t(part.outer.lon.size());
    }
    areaError = area - 4.0 * 3.14159265358979323846;
  }
  std::vector<size_t> order(ms.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] < ms[b]; });
  const size_t mid = order[order.size() / 2];
  const SphericalVoronoiReport& report = reports[mid];
  std::string stages;
  for (const auto& [stage, stageMs] : report.times.entries())
    stages += (stages.empty() ? "" : ", ") + std::string("\"") + stage + "\": " + std::to_string(stageMs);
  std::printf("{\"sites\": %lld, \"backend\": \"%s\", \"threads\": %d, \"densify_deg\": %g, \"reps\": %d, "
              "\"median_ms\": %.1f, \"min_ms\": %.1f, \"area_minus_4pi\": %.3g, \"polygon_points\": %lld, "
              "\"gpu_mesh\": %s, \"gpu_mesh_refused\": \"%s\", \"stages_ms\": {%s}}\n",
              static_cast<long long>(n), backend.c_str(), threads, densify, reps, ms[mid], ms[order.front()],
              areaError, static_cast<long long>(points), report.gpuMesh ? "true" : "false",
              report.gpuMeshRefused.c_str(), stages.c_str());
  return 0;
}
