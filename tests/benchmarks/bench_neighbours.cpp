// Times the neighbour index (build + one query) on uniform or skewed random points, and writes the
// points and the per-point counts for the peer comparison (bench_neighbours_gpu.py).
//
// usage: bench_neighbours --points N [--neighbours M] [--skewed] [--dims 2|3] [--backend gpu|cpu]
//                         [--mode counts|summary|pairs|dbscan] [--reps R] [--pageable] [--no-distance]
//                         [--dump PREFIX]
// counts: the neighbour counts alone; summary: counts, nearest, its distance and the mean distance;
// pairs: counted, then written (with their distances unless --no-distance).
// On the GPU the points and the per-point results live in page-locked host memory, as a caller that
// streams them would keep them (--pageable: ordinary memory).
// Prints one JSON object: the radius, medians of the stage times (ms) and a checksum.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#ifdef GPUGEO_WITH_CUDA
#include "core/device_buffer.h"
#endif
#include "neighbours/neighbours.h"

using namespace gpugeo;
using namespace gpugeo::neighbours;

int main(int argc, char** argv)
{
  int64_t n = 1000000;
  double neighbours = 32;
  bool skewed = false, pageable = false, pairDistances = true;
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
    else if (a == "--pageable") pageable = true;
    else if (a == "--no-distance") pairDistances = false;
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
  const Backend b = backend == "cpu" ? Backend::Cpu : Backend::Gpu;
  // Where the points and the per-point results live.
  const std::size_t un = static_cast<std::size_t>(n);
  double *px = x.data(), *py = y.data(), *pz = z.data();
  std::vector<int32_t> counts(un);
  std::vector<int64_t> nearest(mode == "summary" ? un : 0);
  std::vector<double> nearestDistance(nearest.size()), mean(nearest.size());
  SummaryOutput out{counts.data(), nearest.data(), nearestDistance.data(), mean.data()};
#ifdef GPUGEO_WITH_CUDA
  cuda::PinnedBuffer<double> pinnedPoints;
  cuda::PinnedBuffer<int32_t> pinnedCount;
  cuda::PinnedBuffer<int64_t> pinnedNearest;
  cuda::PinnedBuffer<double> pinnedDistances;
  if (b == Backend::Gpu && !pageable)
  {
    pinnedPoints.resize(3 * un);
    px = pinnedPoints.data();
    py = px + un;
    pz = py + un;
    std::copy(x.begin(), x.end(), px);
    std::copy(y.begin(), y.end(), py);
    std::copy(z.begin(), z.end(), pz);
    pinnedCount.resize(un);
    out.count = pinnedCount.data();
    if (mode == "summary")
    {
      pinnedNearest.resize(un);
      pinnedDistances.resize(2 * un);
      out.nearest = pinnedNearest.data();
      out.nearestDistance = pinnedDistances.data();
      out.meanDistance = pinnedDistances.data() + un;
    }
  }
#endif
  if (mode == "counts")
    out.nearest = nullptr, out.nearestDistance = nullptr, out.meanDistance = nullptr;
  const Points points{px, py, dims == 3 ? pz : nullptr, n};
  // The pairs' arrays, sized at the warm-up run.
  std::vector<int32_t> pairA, pairB;
  std::vector<double> pairDistance;
#ifdef GPUGEO_WITH_CUDA
  cuda::PinnedBuffer<int32_t> pinnedPairs;
  cuda::PinnedBuffer<double> pinnedPairDistance;
#endif
  PairsOutput pairsOut;
  std::vector<double> index, compute, pairsMs, upload, download, allocate;
  double checksum = 0;
  for (int r = 0; r < reps + 1; ++r)  // the first run warms up
  {
    auto idx = makeNeighbourIndex(b, points, 0, RunControl{});
    double sum = 0;
    if (mode == "counts" || mode == "summary")
    {
      idx->summarizeInto(Query{radius, 0}, out, RunControl{});
      for (int64_t i = 0; i < n; ++i)
        sum += out.count[i];
      if (out.count != counts.data())
        std::copy(out.count, out.count + n, counts.begin());
    }
    else if (mode == "pairs")
    {
      const int64_t total = idx->countPairs(Query{radius, 0}, RunControl{});
      if (r == 0)
      {
        const std::size_t size = static_cast<std::size_t>(total);
#ifdef GPUGEO_WITH_CUDA
        if (b == Backend::Gpu && !pageable)
        {
          pinnedPairs.resize(2 * size);
          pinnedPairDistance.resize(size);
          pairsOut = PairsOutput{pinnedPairs.data(), pinnedPairs.data() + size, pinnedPairDistance.data()};
        }
#endif
        if (!pairsOut.a)
        {
          pairA.resize(size);
          pairB.resize(size);
          pairDistance.resize(size);
          pairsOut = PairsOutput{pairA.data(), pairB.data(), pairDistance.data()};
        }
        if (!pairDistances)
          pairsOut.distance = nullptr;
      }
      sum = double(idx->pairsInto(Query{radius, 0}, pairsOut, total, RunControl{}));
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
    upload.push_back(idx->times().get("upload"));
    download.push_back(idx->times().get("download"));
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
              "\"pinned\": %s, \"upload_ms\": %.3f, \"index_ms\": %.3f, \"compute_ms\": %.3f, \"pairs_ms\": %.3f, \"allocate_ms\": %.3f, "
              "\"download_ms\": %.3f, \"result\": %.17g}\n",
              (long long)n, dims, skewed ? "true" : "false", backend.c_str(), mode.c_str(), radius,
              b == Backend::Gpu && !pageable ? "true" : "false", median(upload), median(index), median(compute),
              median(pairsMs), median(allocate), median(download), checksum);
}
