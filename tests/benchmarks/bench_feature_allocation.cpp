// Benchmark of the allocation to lines and polygons (voronoi/feature_allocation.h): it times, it
// asserts nothing.
//
//   bench_feature_allocation --width W --height H (--lines FILE | --random N,S) [--backend cpu|gpu|both]
//                            [--reps R] [--threads T] [--labels-out FILE]
//
// FILE holds the lines as float64 (column, row) pairs in pixel units, rows counted downward, a NaN
// pair between two lines; --random N,S draws N random-walk lines of S segments (steps of up to 8
// pixels a side, fixed seed). The grid has 1-unit pixels, its top-left corner at (0, H). Prints
// one JSON object per backend: medians of R runs after a warm-up of the labeller's stages
// (prepare on the host; upload, index, compute and download on the GPU, CUDA events).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "voronoi/feature_allocation.h"

using namespace gpugeo;
using namespace gpugeo::voronoi;

namespace {

struct Options
{
  int64_t width = 4096, height = 4096;
  std::string lines, random = "1000,100";
  std::string backend = "both";
  int reps = 5;
  int threads = 0;
  std::string labelsOut;
};

struct Lines
{
  std::vector<double> x, y;
  std::vector<int64_t> start{0};
  std::vector<int32_t> feature;
};

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

double nowMs()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void endLine(Lines& l)
{
  if (int64_t(l.x.size()) > l.start.back())
  {
    l.start.push_back(int64_t(l.x.size()));
    l.feature.push_back(int32_t(l.feature.size()));
  }
}

Lines loadLines(const Options& o)
{
  Lines l;
  if (!o.lines.empty())
  {
    std::ifstream file(o.lines, std::ios::binary);
    double xy[2];
    while (file.read(reinterpret_cast<char*>(xy), sizeof xy))
    {
      if (std::isnan(xy[0]))
        endLine(l);
      else
      {
        l.x.push_back(xy[0]);
        l.y.push_back(double(o.height) - xy[1]);
      }
    }
    endLine(l);
    return l;
  }
  const size_t comma = o.random.find(',');
  const long n = std::stol(o.random.substr(0, comma)), s = std::stol(o.random.substr(comma + 1));
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> ux(0.0, double(o.width)), uy(0.0, double(o.height)), step(-8.0, 8.0);
  for (long i = 0; i < n; ++i)
  {
    double px = ux(rng), py = uy(rng);
    for (long k = 0; k <= s; ++k)
    {
      l.x.push_back(px);
      l.y.push_back(double(o.height) - py);
      px = std::min(std::max(px + step(rng), 0.0), double(o.width));
      py = std::min(std::max(py + step(rng), 0.0), double(o.height));
    }
    endLine(l);
  }
  return l;
}

void bench(const Options& o, Backend backend, const Grid& grid, const FeatureSites& sites)
{
  std::vector<int32_t> label(static_cast<size_t>(grid.pixelCount()));
  std::vector<float> distance(label.size());
  FeatureLabellerOptions options;
  options.threads = o.threads;
  std::vector<double> build, prepare, upload, index, compute, download;
  std::unique_ptr<Labeller> labeller;
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    const double t0 = nowMs();
    labeller = makeFeatureLabeller(backend, grid, sites, options, RunControl{});
    const double t1 = nowMs();
    if (rep > 0)
    {
      build.push_back(t1 - t0);
      prepare.push_back(labeller->times().get("prepare"));
      upload.push_back(labeller->times().get("upload"));
      index.push_back(labeller->times().get("index"));
    }
  }
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    const double c0 = labeller->times().get("compute"), d0 = labeller->times().get("download");
    labeller->labelRows(0, grid.height, label.data(), distance.data(), RunControl{});
    if (rep > 0)
    {
      compute.push_back(labeller->times().get("compute") - c0);
      download.push_back(labeller->times().get("download") - d0);
    }
  }
  const LabelStats& s = labeller->stats();
  std::printf("{\"backend\": \"%s\", \"device\": \"%s\", \"width\": %lld, \"height\": %lld, \"lines\": %lld, "
              "\"segments\": %lld, \"build_ms\": %.3f, \"prepare_ms\": %.3f, \"upload_ms\": %.3f, \"index_ms\": %.3f, "
              "\"compute_ms\": %.3f, \"download_ms\": %.3f, \"device_total_ms\": %.3f, \"blocks\": %lld, "
              "\"widened\": %lld, \"evaluated\": %lld, \"left_blocks\": %lld}\n",
              backend == Backend::Gpu ? "gpu" : "cpu", labeller->deviceName().c_str(), (long long)grid.width,
              (long long)grid.height, (long long)sites.featureCount, (long long)(sites.pathStart[sites.pathCount] - sites.pathCount),
              median(build), median(prepare), median(upload), median(index), median(compute), median(download),
              median(upload) + median(index) + median(compute), (long long)s.tiles, (long long)s.splitTiles,
              (long long)s.candidates, (long long)s.denseTiles);
  std::fflush(stdout);
  if (!o.labelsOut.empty())
  {
    std::ofstream out(o.labelsOut + (backend == Backend::Gpu ? ".gpu" : ".cpu"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(label.data()), label.size() * sizeof(int32_t));
    out.write(reinterpret_cast<const char*>(distance.data()), distance.size() * sizeof(float));
  }
}

}  // namespace

int main(int argc, char** argv)
{
  Options o;
  for (int i = 1; i + 1 < argc; i += 2)
  {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--width")
      o.width = std::stoll(value);
    else if (key == "--height")
      o.height = std::stoll(value);
    else if (key == "--lines")
      o.lines = value;
    else if (key == "--random")
      o.random = value;
    else if (key == "--backend")
      o.backend = value;
    else if (key == "--reps")
      o.reps = std::stoi(value);
    else if (key == "--threads")
      o.threads = std::stoi(value);
    else if (key == "--labels-out")
      o.labelsOut = value;
    else
    {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  const Lines lines = loadLines(o);
  const Grid grid{0.0, double(o.height), 1.0, o.width, o.height};
  FeatureSites sites;
  sites.x = lines.x.data();
  sites.y = lines.y.data();
  sites.pathStart = lines.start.data();
  sites.pathFeature = lines.feature.data();
  sites.pathCount = int64_t(lines.feature.size());
  sites.featureCount = int64_t(lines.feature.size());
  try
  {
    if (o.backend == "cpu" || o.backend == "both")
      bench(o, Backend::Cpu, grid, sites);
    if (o.backend == "gpu" || o.backend == "both")
    {
      if (probeGpu().usable)
        bench(o, Backend::Gpu, grid, sites);
      else
        std::printf("{\"backend\": \"gpu\", \"skipped\": \"%s\"}\n", probeGpu().reason.c_str());
    }
  }
  catch (const std::exception& e)
  {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
