// Benchmark of the plane Voronoi raster's native core (not a test: it asserts nothing, it times).
//
//   bench_voronoi --width W --height H --sites FILE|N [--backend cpu|gpu|both] [--reps R] [--threads T]
//                 [--labels-out FILE]
//
// FILE holds the sites as float64 (column, row) pairs in pixel units, rows counted downward (a site
// at the centre of pixel (c, r) is (c + 0.5, r + 0.5)); N draws N uniform sites with a fixed seed.
// The grid has 1-unit pixels and its top-left corner at (0, H). Prints one JSON object per backend with the median of R timed repetitions after one
// warm-up: on the GPU, CUDA events around the index build, the labelling kernels (compute) and the
// copy of labels and distances to pinned host memory (download), separately and together.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "voronoi/voronoi_raster.h"

#ifdef GPUGEO_WITH_CUDA
#include "core/device_buffer.h"
#include "voronoi/voronoi_cuda.h"
#endif

using namespace gpugeo;
using namespace gpugeo::voronoi;

namespace {

struct Options
{
  int64_t width = 4096;
  int64_t height = 4096;
  std::string sites = "1000";
  std::string backend = "both";
  int reps = 5;
  int threads = 0;
  std::string labelsOut;
};

double median(std::vector<double> values)
{
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double nowMs()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void loadSites(const Options& options, std::vector<double>& x, std::vector<double>& y)
{
  std::ifstream file(options.sites, std::ios::binary);
  if (file)
  {
    std::vector<double> xy;
    double v;
    while (file.read(reinterpret_cast<char*>(&v), sizeof v))
      xy.push_back(v);
    for (size_t i = 0; i + 1 < xy.size(); i += 2)
    {
      x.push_back(xy[i]);
      y.push_back(xy[i + 1]);
    }
    return;
  }
  const long n = std::stol(options.sites);
  std::mt19937_64 rng(20261121);
  std::uniform_real_distribution<double> ux(0.0, double(options.width)), uy(0.0, double(options.height));
  for (long i = 0; i < n; ++i)
  {
    x.push_back(ux(rng));
    y.push_back(uy(rng));
  }
}

// The counters of one labelling (a labeller's counters add up over its labellings).
void printStats(const LabelStats& s)
{
  std::printf("\"unique_sites\": %lld, \"tiles\": %lld, \"split_tiles\": %lld, \"dense_tiles\": %lld, "
              "\"candidates\": %lld, \"refined_pixels\": %lld, \"site_bands\": %lld, \"label_pieces\": %lld, "
              "\"crowded_roots\": %lld",
              (long long)s.uniqueSites, (long long)s.tiles, (long long)s.splitTiles, (long long)s.denseTiles,
              (long long)s.candidates, (long long)s.refinedPixels, (long long)s.siteBands, (long long)s.labelPieces,
              (long long)s.crowdedRoots);
}

void benchCpu(const Options& o, const Grid& grid, const Sites& sites)
{
  std::vector<int32_t> label(static_cast<size_t>(grid.pixelCount()));
  std::vector<float> distance(label.size());
  std::vector<double> build, compute;
  std::unique_ptr<Labeller> labeller;
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    const double t0 = nowMs();
    labeller = makeLabeller(Backend::Cpu, grid, sites, LabellerOptions{o.threads, 0}, RunControl{});
    const double t1 = nowMs();
    labeller->labelRows(0, grid.height, label.data(), distance.data(), RunControl{});
    const double t2 = nowMs();
    if (rep > 0)
    {
      build.push_back(t1 - t0);
      compute.push_back(t2 - t1);
    }
  }
  std::printf("{\"backend\": \"cpu\", \"device\": \"%s\", \"width\": %lld, \"height\": %lld, \"sites\": %lld, "
              "\"index_ms\": %.3f, \"compute_ms\": %.3f, \"total_ms\": %.3f, ",
              labeller->deviceName().c_str(), (long long)grid.width, (long long)grid.height, (long long)sites.count,
              median(build), median(compute), median(build) + median(compute));
  printStats(labeller->stats());
  std::printf("}\n");
  if (!o.labelsOut.empty())
  {
    std::ofstream out(o.labelsOut, std::ios::binary);
    out.write(reinterpret_cast<const char*>(label.data()), label.size() * sizeof(int32_t));
    out.write(reinterpret_cast<const char*>(distance.data()), distance.size() * sizeof(float));
  }
}

#ifdef GPUGEO_WITH_CUDA
void benchGpu(const Options& o, const Grid& grid, const Sites& sites)
{
  const size_t pixels = static_cast<size_t>(grid.pixelCount());
  cuda::DeviceBuffer<int32_t> deviceLabel(pixels);
  cuda::DeviceBuffer<float> deviceDistance(pixels);
  cuda::PinnedBuffer<int32_t> hostLabel;
  cuda::PinnedBuffer<float> hostDistance;
  hostLabel.resize(pixels);
  hostDistance.resize(pixels);

  // The index build and the first labelling, on a fresh labeller each time: the device time from
  // the upload's start to the labels (an overlapped start labels bands while others upload).
  std::vector<double> prepare, upload, index, compute, download, whole, hostStart, hostEnqueue;
  std::unique_ptr<CudaLabeller> labeller;
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    labeller.reset();
    const double t0 = nowMs();
    labeller = makeCudaLabeller(grid, sites, LabellerOptions{}, RunControl{});
    const double t1 = nowMs();
    cudaEvent_t labelled;
    GPUGEO_CUDA_CHECK(cudaEventCreate(&labelled));
    labeller->labelRowsOnDevice(0, grid.height, deviceLabel.data(), deviceDistance.data());
    const double t2 = nowMs();
    GPUGEO_CUDA_CHECK(cudaEventRecord(labelled, labeller->stream()));
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(labelled));
    float ms = 0.f;
    GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&ms, labeller->startEvent(), labelled));
    cudaEventDestroy(labelled);
    if (rep > 0)
    {
      prepare.push_back(labeller->times().get("prepare"));
      upload.push_back(labeller->times().get("upload"));
      index.push_back(labeller->times().get("index"));
      whole.push_back(ms);
      // Host time the start and the first labelling take to enqueue (beyond the prepare stage).
      hostStart.push_back(t1 - t0 - labeller->times().get("prepare"));
      hostEnqueue.push_back(t2 - t1);
    }
  }
  const LabelStats oneLabelling = labeller->stats();  // a fresh labeller's one labelling
  // The first labelling's result, to compare with the later ones'.
  std::vector<int32_t> firstLabel(pixels);
  std::vector<float> firstDistance(pixels);
  GPUGEO_CUDA_CHECK(cudaMemcpy(firstLabel.data(), deviceLabel.data(), pixels * sizeof(int32_t), cudaMemcpyDeviceToHost));
  GPUGEO_CUDA_CHECK(
    cudaMemcpy(firstDistance.data(), deviceDistance.data(), pixels * sizeof(float), cudaMemcpyDeviceToHost));
  // Labelling and download on the last one; the first call (warm-up) allocates its work buffers.
  cudaStream_t stream = labeller->stream();
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    cuda::EventTimer computeTimer, downloadTimer;
    computeTimer.start(stream);
    labeller->labelRowsOnDevice(0, grid.height, deviceLabel.data(), deviceDistance.data());
    computeTimer.stop(stream);
    downloadTimer.start(stream);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(hostLabel.data(), deviceLabel.data(), pixels * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(hostDistance.data(), deviceDistance.data(), pixels * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
    downloadTimer.stop(stream);
    const double computeMs = computeTimer.milliseconds();
    const double downloadMs = downloadTimer.milliseconds();
    if (rep > 0)
    {
      compute.push_back(computeMs);
      download.push_back(downloadMs);
    }
  }
  // One more labelling with each phase timed (the events add a little).
  labeller->setProfiling(true);
  labeller->labelRowsOnDevice(0, grid.height, deviceLabel.data(), deviceDistance.data());
  const StageTimes phases = labeller->phaseTimes();
  labeller->setProfiling(false);
  // The plugin's path: labelRows into pageable buffers reused from call to call (its bands'), the
  // download through the staged copies (core/staged_copy.h); the labeller's "download" stage.
  std::vector<int32_t> pageLabel(pixels);
  std::vector<float> pageDistance(pixels);
  std::vector<double> pageable;
  for (int rep = 0; rep <= o.reps; ++rep)
  {
    const double before = labeller->times().get("download");
    labeller->labelRows(0, grid.height, pageLabel.data(), pageDistance.data(), RunControl{});
    if (rep > 0)
      pageable.push_back(labeller->times().get("download") - before);
  }
  if (std::memcmp(pageLabel.data(), hostLabel.data(), pixels * sizeof(int32_t)) != 0 ||
      std::memcmp(pageDistance.data(), hostDistance.data(), pixels * sizeof(float)) != 0)
  {
    std::fprintf(stderr, "labelRows into pageable buffers differs from the pinned download\n");
    std::exit(1);
  }
  if (std::memcmp(firstLabel.data(), hostLabel.data(), pixels * sizeof(int32_t)) != 0 ||
      std::memcmp(firstDistance.data(), hostDistance.data(), pixels * sizeof(float)) != 0)
  {
    std::fprintf(stderr, "the labelling made with the start differs from a later one\n");
    std::exit(1);
  }
  // The device time: from the upload's start to the labels, as measured (the parts may overlap).
  const double devTotal = median(whole);
  std::printf("{\"backend\": \"gpu\", \"device\": \"%s\", \"width\": %lld, \"height\": %lld, \"sites\": %lld, "
              "\"prepare_ms\": %.3f, \"upload_ms\": %.3f, \"index_ms\": %.3f, \"compute_ms\": %.3f, "
              "\"download_ms\": %.3f, \"device_total_ms\": %.3f, \"parts_ms\": %.3f, \"total_ms\": %.3f, ",
              labeller->deviceName().c_str(), (long long)grid.width, (long long)grid.height, (long long)sites.count,
              median(prepare), median(upload), median(index), median(compute), median(download), devTotal,
              median(upload) + median(index) + median(compute),
              median(prepare) + devTotal + median(download));
  printStats(oneLabelling);
  std::printf(", \"host_start_ms\": %.3f, \"host_label_enqueue_ms\": %.3f", median(hostStart), median(hostEnqueue));
  std::printf(", \"pageable_download_ms\": %.3f, \"pageable_download_GBps\": %.1f", median(pageable),
              double(pixels) * 8.0 / median(pageable) / 1e6);
  std::printf(", \"phases_ms\": {");
  for (size_t i = 0; i < phases.entries().size(); ++i)
    std::printf("%s\"%s\": %.3f", i ? ", " : "", phases.entries()[i].first.c_str(), phases.entries()[i].second);
  std::printf("}}\n");
  if (!o.labelsOut.empty())
  {
    std::ofstream out(o.labelsOut, std::ios::binary);
    out.write(reinterpret_cast<const char*>(hostLabel.data()), pixels * sizeof(int32_t));
    out.write(reinterpret_cast<const char*>(hostDistance.data()), pixels * sizeof(float));
  }
}
#endif

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
    else if (key == "--sites")
      o.sites = value;
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
  std::vector<double> x, y;
  loadSites(o, x, y);
  const Grid grid{0.0, double(o.height), 1.0, o.width, o.height};
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = double(o.height) - y[i];  // input rows run down; the grid's y runs up
  const Sites sites{x.data(), y.data(), static_cast<int64_t>(x.size())};
  try
  {
    if (o.backend == "cpu" || o.backend == "both")
      benchCpu(o, grid, sites);
    if (o.backend == "gpu" || o.backend == "both")
    {
#ifdef GPUGEO_WITH_CUDA
      if (probeGpu().usable)
        benchGpu(o, grid, sites);
      else
        std::printf("{\"backend\": \"gpu\", \"skipped\": \"%s\"}\n", probeGpu().reason.c_str());
#else
      std::printf("{\"backend\": \"gpu\", \"skipped\": \"built without CUDA\"}\n");
#endif
    }
  }
  catch (const std::exception& e)
  {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
