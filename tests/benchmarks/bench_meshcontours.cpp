// Times the mesh contours of the native core (lines and bands, joined) on the benchmark grid mesh
// (mesh_field.h), and with --paper the source paper's two kernels before any joining.
//
// usage: bench_meshcontours --grid N [--levels L] [--backend gpu|cpu] [--reps R] [--threads T]
//                           [--what both|lines|bands] [--paper] [--pageable]
// Each repetition makes the contourer (upload and preparation of the mesh) and contours the field
// (upload, compute, download, polygons); a warm-up run comes first. On the GPU the mesh and the
// field live in page-locked host memory, as a caller that streams them would keep them
// (--pageable: ordinary memory). Prints one JSON object: the
// medians of the total and of each stage (ms), the output's size and checksums (length per level
// summed, area per band summed) to compare the backends.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "mesh/mesh_contours.h"
#include "mesh_field.h"

#ifdef GPUGEO_WITH_CUDA
#include "core/device_buffer.h"
#endif

#ifdef GPUGEO_BENCH_PAPER
#include "paper_mesh_kernels.h"
#endif

using namespace gpugeo;

static double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main(int argc, char** argv)
{
  int grid = 1000, levelCount = 20, reps = 5, threads = 0;
  std::string backend = "gpu", what = "both";
  bool paper = false, pageable = false;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    auto next = [&] { return std::string(argv[++i]); };
    if (a == "--grid") grid = std::stoi(next());
    else if (a == "--levels") levelCount = std::stoi(next());
    else if (a == "--backend") backend = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--what") what = next();
    else if (a == "--paper") paper = true;
    else if (a == "--pageable") pageable = true;
  }
  const bench::GridMesh g = bench::gridMesh(grid);
  const std::vector<double> levels = bench::benchLevels(levelCount);
  mesh::Mesh m;
  m.x = g.x.data();
  m.y = g.y.data();
  m.z = g.z.data();
  m.vertexCount = int64_t(g.x.size());
  m.triangles = g.triangles.data();
  m.triangleCount = int64_t(g.triangles.size() / 3);
  mesh::Field field;
  field.values = g.z.data();
#ifdef GPUGEO_WITH_CUDA
  cuda::PinnedBuffer<double> px, py, pz, pv;
  cuda::PinnedBuffer<int32_t> pt;
  if (backend == "gpu" && !pageable)
  {
    auto pin = [](auto& buffer, const auto& v) {
      buffer.resize(v.size());
      std::copy(v.begin(), v.end(), buffer.data());
      return buffer.data();
    };
    m.x = pin(px, g.x);
    m.y = pin(py, g.y);
    m.z = pin(pz, g.z);
    field.values = pin(pv, g.z);
    m.triangles = pin(pt, g.triangles);
  }
#else
  (void)pageable;
#endif
  mesh::ContourOptions options;
  options.lines = what != "bands";
  options.bands = what != "lines";
  const Backend b = backend == "cpu" ? Backend::Cpu : Backend::Gpu;
  RunControl control;

  std::vector<double> totals;
  std::map<std::string, std::vector<double>> stages;
  mesh::Contours result;
  for (int r = -1; r < reps; ++r)
  {
    const auto start = std::chrono::steady_clock::now();
    auto contourer = mesh::makeMeshContourer(b, m, threads, control);
    const auto made = std::chrono::steady_clock::now();
    mesh::Contours c = contourer->contour(field, levels, options, control);
    const auto end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    if (r >= 0)
    {
      stages["make"].push_back(std::chrono::duration<double, std::milli>(made - start).count());
      stages["contour"].push_back(std::chrono::duration<double, std::milli>(end - made).count());
    }
    result = std::move(c);
    if (r < 0)
      continue;
    totals.push_back(ms);
    for (const auto& s : contourer->times().entries())
      stages[s.first].push_back(s.second);
  }
  double length = 0, area = 0;
  const auto& L = result.lines;
  for (std::size_t p = 0; p + 1 < L.partPoint.size(); ++p)
    for (int64_t i = L.partPoint[p]; i + 1 < L.partPoint[p + 1]; ++i)
      length += std::hypot(L.x[std::size_t(i + 1)] - L.x[std::size_t(i)], L.y[std::size_t(i + 1)] - L.y[std::size_t(i)]);
  const auto& B = result.bands;
  int64_t holes = 0;
  for (std::size_t q = 0; q + 1 < B.polygonRing.size(); ++q)
  {
    holes += B.polygonRing[q + 1] - B.polygonRing[q] - 1;
    for (int64_t r = B.polygonRing[q]; r < B.polygonRing[q + 1]; ++r)
    {
      double twice = 0;
      for (int64_t i = B.ringPoint[std::size_t(r)]; i + 1 < B.ringPoint[std::size_t(r + 1)]; ++i)
        twice += B.x[std::size_t(i)] * B.y[std::size_t(i + 1)] - B.x[std::size_t(i + 1)] * B.y[std::size_t(i)];
      area += twice / 2;
    }
  }
  std::printf("{\"grid\": %d, \"triangles\": %lld, \"levels\": %d, \"backend\": \"%s\", \"what\": \"%s\", "
              "\"total_ms\": %.3f",
              grid, (long long)m.triangleCount, levelCount, backend.c_str(), what.c_str(), median(totals));
  for (const auto& s : stages)
    std::printf(", \"%s_ms\": %.3f", s.first.c_str(), median(s.second));
  std::printf(", \"line_parts\": %lld, \"line_points\": %lld, \"polygons\": %lld, \"holes\": %lld, "
              "\"ring_points\": %lld, \"length\": %.9e, \"area\": %.9e",
              (long long)(L.partPoint.empty() ? 0 : L.partPoint.size() - 1), (long long)L.x.size(),
              (long long)(B.polygonRing.empty() ? 0 : B.polygonRing.size() - 1), (long long)holes,
              (long long)B.x.size(), length, area);
#ifdef GPUGEO_BENCH_PAPER
  if (paper && b == Backend::Gpu)
  {
    const bench::PaperTimes p = bench::runPaperKernels(g, levels, reps);
    std::printf(", \"paper_kernel1_ms\": %.3f, \"paper_kernel2_ms\": %.3f, \"paper_segments\": %lld, "
                "\"paper_pieces\": %lld",
                p.kernel1Ms, p.kernel2Ms, (long long)p.segments, (long long)p.pieces);
  }
#else
  (void)paper;
#endif
  std::printf("}\n");
  return 0;
}
