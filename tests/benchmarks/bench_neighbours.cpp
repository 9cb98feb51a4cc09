// Times the neighbour index (build + one query) on uniform or skewed random points, and writes the
// points and the per-point counts for the peer comparison (bench_neighbours_gpu.py).
//
// usage: bench_neighbours --points N [--neighbours M] [--skewed] [--dims 2|3] [--backend gpu|cpu]
//                         [--mode counts|pairs|dbscan] [--reps R] [--dump PREFIX]
// Prints one JSON object: the radius, medians of the stage times (ms) and a checksum.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "neighbours/neighbours.h"

using namespace gpugeo;
using namespace gpugeo::neighbours;

int main(int argc, char** argv)
{
  int64_t n = 1000000;
  double neighbours = 32;
  bool skewed = false;
  int dims = 2, reps = 5;
  std::string backend = "gpu", mode = "counts", dump;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    auto next = [&] { return std::string(argv[++i]); };
    if (a == "--points") n = std::stoll(next());
    else if (a == "--neighbours") neighbours = std::stod(next());
    else if (a == "--skewed") skewed = true;
    else if (a == "--dims") dims = std::stoi(next());
    else if (a == "--backend") backend = next();
    else if (a == "--mode") mode = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--dump") dump = next();
  }
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(static_cast<size_t>(n)), y(x), z(x);
  for (int64_t i = 0; i < n; ++i)
  {
    x[size_t(i)] = u(rng);
    y[size_t(i)] = u(rng);
    z[size_t(i)] = u(rng);
    if (skewed && i % 10 != 0)  // 90% of the points in 1% of the area (0.1 x 0.1)
    {
      x[size_t(i)] = 0.45 + 0.1 * x[size_t(i)];
      y[size_t(i)] = 0.45 + 0.1 * y[size_t(i)];
      z[size_t(i)] = 0.45 + 0.1 * z[size_t(i)];
    }
  }
  // The radius giving the wanted mean count: uniform density n (2D: n pi r^2 = m); skewed: the mean
  // over the dense part (90% at 90 times the density) and the rest.
  const double effective = skewed ? (dims == 2 ? 0.9 * 90.0 + 0.1 * 0.1 : 0.9 * 900.0 + 0.1 * 0.1) : 1.0;
  const double radius = dims == 2 ? std::sqrt(neighbours / (double(n) * effective * M_PI))
                                  : std::cbrt(neighbours / (double(n) * effective * 4.0 / 3.0 * M_PI));
  const Points points{x.data(), y.data(), dims == 3 ? z.data() : nullptr, n};
  const Backend b = backend == "cpu" ? Backend::Cpu : Backend::Gpu;
  std::vector<double> index, compute, pairsMs, download, allocate;
  double checksum = 0;
  std::vector<int32_t> counts;
  for (int r = 0; r < reps + 1; ++r)  // the first run warms up
  {
    auto idx = makeNeighbourIndex(b, points, 0, RunControl{});
    double sum = 0;
    if (mode == "counts")
    {
      const Summary s = idx->summarize(Query{radius, 0}, RunControl{});
      for (int32_t c : s.count)
        sum += c;
      counts = s.count;
    }
    else if (mode == "pairs")
    {
      const Pairs p = idx->pairs(Query{radius, 0}, int64_t(1) << 34, RunControl{});
      sum = double(p.a.size());
    }
    else
    {
      const Clusters c = idx->dbscan(DbscanOptions{radius, 5, false}, RunControl{});
      sum = double(c.size.size());
    }
    checksum = sum;
    if (r == 0)
      continue;
    index.push_back(idx->times().get("index"));
    compute.push_back(idx->times().get("compute"));
    pairsMs.push_back(idx->times().get("pairs"));
    allocate.push_back(idx->times().get("allocate"));
    download.push_back(idx->times().get("download") + idx->times().get("upload"));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  if (!dump.empty())
  {
    std::ofstream pts(dump + ".points", std::ios::binary);
    for (int64_t i = 0; i < n; ++i)
    {
      pts.write(reinterpret_cast<const char*>(&x[size_t(i)]), 8);
      pts.write(reinterpret_cast<const char*>(&y[size_t(i)]), 8);
      if (dims == 3)
        pts.write(reinterpret_cast<const char*>(&z[size_t(i)]), 8);
    }
    std::ofstream cnt(dump + ".counts", std::ios::binary);
    cnt.write(reinterpret_cast<const char*>(counts.data()), std::streamsize(counts.size() * 4));
  }
  std::printf("{\"points\": %lld, \"dims\": %d, \"skewed\": %s, \"backend\": \"%s\", \"mode\": \"%s\", \"radius\": %.17g, "
              "\"index_ms\": %.3f, \"compute_ms\": %.3f, \"pairs_ms\": %.3f, \"allocate_ms\": %.3f, \"transfer_ms\": %.3f, \"result\": %.17g}\n",
              (long long)n, dims, skewed ? "true" : "false", backend.c_str(), mode.c_str(), radius, median(index),
              median(compute), median(pairsMs), median(allocate), median(download), checksum);
}
