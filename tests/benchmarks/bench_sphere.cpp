// Benchmark of the spherical nearest-site labelling's native core (it times; it asserts nothing).
//
//   bench_sphere --level L --sites N [--seed S] [--backend cpu|gpu] [--method M[,M...]] [--reps R]
//                [--threads T] [--out pinned|pageable] [--dump DIR]
//
// N sites uniform on the sphere (fixed seed). M: indexed, global, shared, constant, register, auto.
// Labels every cell of QTM level L. Prints one JSON line per method: the median of R repetitions
// after a warm-up of the compute (CUDA events around the kernels on the GPU) and of the download of
// the labels, and the one-off prepare (unit vectors; on the CPU also the site tree), upload and
// tree times; with_tree_ms is a warm make (vectors, upload, tree) plus the median compute and download. --dump writes
// DIR/centres.f64 (the cell centres as x, y, z), DIR/sites.f64 and DIR/labels.i32 (ours, indexed) for
// the peers in bench_sphere_gpu.py.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#ifdef GPUGEO_WITH_CUDA
#include "core/device_buffer.h"
#endif
#include "sphere/detail/site_prep.h"
#include "sphere/qtm.h"
#include "sphere/sphere_nearest.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

namespace {

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double nowMs()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NearestMethod parseMethod(const std::string& m)
{
  if (m == "indexed") return NearestMethod::Indexed;
  if (m == "global") return NearestMethod::BruteGlobal;
  if (m == "shared") return NearestMethod::BruteShared;
  if (m == "constant") return NearestMethod::BruteConstant;
  if (m == "register") return NearestMethod::BruteRegister;
  return NearestMethod::Auto;
}

template <typename T>
void writeFile(const std::string& path, const std::vector<T>& data)
{
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * sizeof(T)));
}

}  // namespace

int main(int argc, char** argv)
{
  int level = 9, reps = 5, threads = 0;
  int64_t n = 1000;
  uint32_t seed = 1;
  std::string backendName = "gpu", methods = "indexed", dump, outName = "pinned";
  for (int i = 1; i + 1 < argc; i += 2)
  {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--level") level = std::stoi(value);
    else if (key == "--sites") n = std::stoll(value);
    else if (key == "--seed") seed = uint32_t(std::stoul(value));
    else if (key == "--backend") backendName = value;
    else if (key == "--method") methods = value;
    else if (key == "--reps") reps = std::stoi(value);
    else if (key == "--threads") threads = std::stoi(value);
    else if (key == "--dump") dump = value;
    else if (key == "--out") outName = value;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0), lonDist(-180.0, 180.0);
  std::vector<double> lon(static_cast<std::size_t>(n)), lat(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
  {
    lon[std::size_t(i)] = lonDist(rng);
    lat[std::size_t(i)] = std::asin(u(rng)) * 180.0 / M_PI;
  }
  const SiteSet sites{lon.data(), lat.data(), n};
  const Backend backend = backendName == "cpu" ? Backend::Cpu : Backend::Gpu;
  const int64_t cells = int64_t(qtmCellCount(level));
  // The labels go to pinned memory on the GPU, as a caller that streams results would use, or with
  // --out pageable to ordinary memory (touched before the first run, as a reused band is).
  const bool usePinned = backend == Backend::Gpu && outName == "pinned";
  if (!usePinned)
    outName = "pageable";
#ifdef GPUGEO_WITH_CUDA
  cuda::PinnedBuffer<int32_t> pinned;
  if (usePinned)
    pinned.resize(std::size_t(cells));
#endif
  std::vector<int32_t> pageable(usePinned ? 0 : std::size_t(cells));
#ifdef GPUGEO_WITH_CUDA
  int32_t* labelOut = usePinned ? pinned.data() : pageable.data();
#else
  int32_t* labelOut = pageable.data();
#endif

  std::size_t start = 0;
  while (start <= methods.size())
  {
    const std::size_t comma = std::min(methods.find(',', start), methods.size());
    const std::string methodText = methods.substr(start, comma - start);
    start = comma + 1;
    SphereOptions options;
    options.method = parseMethod(methodText);
    options.threads = threads;
    double t0 = nowMs();
    auto labeller = makeSphereLabeller(backend, sites, options, RunControl{});
    const double makeMs = nowMs() - t0;
    // Made again, warm (the first make loads the kernels and the copy pool): the labeller a run uses.
    t0 = nowMs();
    labeller = makeSphereLabeller(backend, sites, options, RunControl{});
    const double makeAgainMs = nowMs() - t0;
    labeller->labelQtm(level, 0, cells, labelOut, nullptr, RunControl{});
    std::vector<double> compute, download, wall;
    for (int r = 0; r < reps; ++r)
    {
      const double c0 = labeller->times().get("compute"), d0 = labeller->times().get("download");
      const double w0 = nowMs();
      labeller->labelQtm(level, 0, cells, labelOut, nullptr, RunControl{});
      wall.push_back(nowMs() - w0);
      compute.push_back(labeller->times().get("compute") - c0);
      download.push_back(labeller->times().get("download") - d0);
    }
    const SphereStats& s = labeller->stats();
    std::printf("{\"level\": %d, \"cells\": %lld, \"sites\": %lld, \"backend\": \"%s\", \"method\": \"%s\", "
                "\"device\": \"%s\", \"out\": \"%s\", \"prepare_ms\": %.3f, \"upload_ms\": %.3f, \"tree_ms\": %.3f, "
                "\"make_ms\": %.3f, \"make_again_ms\": %.3f, \"with_tree_ms\": %.3f, "
                "\"compute_ms\": %.4f, \"download_ms\": %.4f, \"kernel_plus_transfer_ms\": %.4f, \"wall_ms\": %.4f, "
                "\"candidates_per_block\": %.2f, \"overflow_blocks\": %lld}\n",
                level, (long long)cells, (long long)n, backendName.c_str(), methodName(labeller->method()),
                labeller->deviceName().c_str(), outName.c_str(), labeller->times().get("prepare"),
                labeller->times().get("upload"), labeller->times().get("tree"), makeMs, makeAgainMs,
                makeAgainMs + median(compute) + median(download), median(compute), median(download), median(compute) + median(download) +
                labeller->times().get("upload"), median(wall),
                s.blocks ? double(s.candidates) / double(s.blocks) : 0.0, (long long)s.overflowBlocks);
    std::fflush(stdout);
  }

  if (!dump.empty())
  {
    const std::vector<double> table = detail::qtmSineTable(level);
    const detail::QtmTrig trig{table.data(), int32_t(1) << level};
    std::vector<double> centres(std::size_t(cells) * 3);
    parallelFor(cells, 1 << 16, 0, [&](int64_t b, int64_t e) {
      for (int64_t id = b; id < e; ++id)
      {
        const detail::Vec3 c = detail::qtmCellCentre(trig, uint64_t(id), level);
        centres[std::size_t(3 * id)] = c.x;
        centres[std::size_t(3 * id + 1)] = c.y;
        centres[std::size_t(3 * id + 2)] = c.z;
      }
    });
    writeFile(dump + "/centres.f64", centres);
    const detail::PreparedSites prep = detail::prepareSites(sites, 0, RunControl{});
    std::vector<double> v;
    for (const auto& s : prep.vectors)
      v.insert(v.end(), {s.x, s.y, s.z});
    writeFile(dump + "/sites.f64", v);
    writeFile(dump + "/labels.i32", std::vector<int32_t>(labelOut, labelOut + cells));
  }
  return 0;
}
