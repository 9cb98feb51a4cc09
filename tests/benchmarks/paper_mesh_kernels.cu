#include "paper_mesh_kernels.h"

#include <cub/cub.cuh>

#include <algorithm>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "mesh/detail/contour_math.h"

namespace gpugeo::bench {

namespace {

using cuda::DeviceBuffer;
using namespace gpugeo::mesh::detail;

struct Segment
{
  double x0, y0, x1, y1;
};

__device__ void cross(const double* x, const double* y, const double* v, int32_t a, int32_t b, double L, double& px,
                      double& py)
{
  const double t = (L - v[a]) / (v[b] - v[a]);
  px = x[a] + t * (x[b] - x[a]);
  py = y[a] + t * (y[b] - y[a]);
}

// Kernel 1: one thread per (triangle, level), its segment into slot t * levels + k.
__global__ void kernel1(const double* x, const double* y, const double* v, const int32_t* tri, int64_t nt,
                        const double* levels, int nl, Segment* slot, uint8_t* flag)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nt * nl)
    return;
  const int64_t t = i / nl;
  const double L = levels[i % nl];
  const int32_t c[3] = {tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]};
  double p[4];
  int found = 0;
  for (int e = 0; e < 3 && found < 2; ++e)
  {
    const int32_t a = c[e], b = c[(e + 1) % 3];
    if ((v[a] < L) != (v[b] < L))
    {
      cross(x, y, v, a, b, L, p[2 * found], p[2 * found + 1]);
      ++found;
    }
  }
  flag[i] = found == 2;
  if (found == 2)
    slot[i] = Segment{p[0], p[1], p[2], p[3]};
}

// Kernel 2: one thread per triangle, its band pieces counted, then written at the triangle's start.
__global__ void kernel2(const double* x, const double* y, const double* v, const int32_t* tri, int64_t nt,
                        const double* levels, int nl, const int64_t* start, int64_t* count, double2* points)
{
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= nt)
    return;
  const int32_t c[3] = {tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]};
  const double w[3] = {v[c[0]], v[c[1]], v[c[2]]};
  int64_t at = start ? start[t] : 0, pieces = 0;
  for (int k = 0; k + 1 < nl; ++k)
  {
    uint8_t nodes[kMaxPieceNodes + 1];
    const int n = pieceNodes(w, levels[k], levels[k + 1], nodes);
    if (n < 3)
      continue;
    ++pieces;
    if (!start)
      continue;
    for (int j = 0; j < n; ++j)
    {
      const uint8_t node = nodes[j];
      double px, py;
      if (node < 3)
      {
        px = x[c[node]];
        py = y[c[node]];
      }
      else
      {
        const int e = (node - 3) >> 1, s = (node - 3) & 1;
        cross(x, y, v, c[e], c[(e + 1) % 3], levels[k + s], px, py);
      }
      points[at++] = double2{px, py};
    }
    points[at++] = double2{nan(""), double(n)};  // the piece's end
  }
  if (!start)
    count[t] = pieces * (kMaxPieceNodes + 1);
}

}  // namespace

PaperTimes runPaperKernels(const GridMesh& mesh, const std::vector<double>& levels, int reps)
{
  const int64_t nv = int64_t(mesh.x.size()), nt = int64_t(mesh.triangles.size() / 3);
  const int nl = int(levels.size());
  DeviceBuffer<double> x(static_cast<std::size_t>(nv)), y(static_cast<std::size_t>(nv)), v(static_cast<std::size_t>(nv)), lv(levels.size());
  DeviceBuffer<int32_t> tri(mesh.triangles.size());
  GPUGEO_CUDA_CHECK(cudaMemcpy(x.data(), mesh.x.data(), x.bytes(), cudaMemcpyHostToDevice));
  GPUGEO_CUDA_CHECK(cudaMemcpy(y.data(), mesh.y.data(), y.bytes(), cudaMemcpyHostToDevice));
  GPUGEO_CUDA_CHECK(cudaMemcpy(v.data(), mesh.z.data(), v.bytes(), cudaMemcpyHostToDevice));
  GPUGEO_CUDA_CHECK(cudaMemcpy(lv.data(), levels.data(), lv.bytes(), cudaMemcpyHostToDevice));
  GPUGEO_CUDA_CHECK(cudaMemcpy(tri.data(), mesh.triangles.data(), tri.bytes(), cudaMemcpyHostToDevice));
  const int64_t pairs = nt * nl;
  DeviceBuffer<Segment> slot(static_cast<std::size_t>(pairs)), compact(static_cast<std::size_t>(pairs));
  DeviceBuffer<uint8_t> flag(static_cast<std::size_t>(pairs));
  DeviceBuffer<int64_t> selected(1), count(static_cast<std::size_t>(nt + 1)), start(static_cast<std::size_t>(nt + 1));
  std::size_t need1 = 0, need2 = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, need1, slot.data(), flag.data(), compact.data(), selected.data(), pairs));
  GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, need2, count.data(), start.data(), nt + 1));
  DeviceBuffer<unsigned char> temp(std::max(need1, need2));
  cuda::EventTimer timer;
  std::vector<double> t1, t2;
  PaperTimes out;
  DeviceBuffer<double2> points;
  for (int r = -1; r < reps; ++r)
  {
    timer.start(nullptr);
    kernel1<<<unsigned((pairs + 255) / 256), 256>>>(x.data(), y.data(), v.data(), tri.data(), nt, lv.data(), nl,
                                                   slot.data(), flag.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), need1, slot.data(), flag.data(), compact.data(),
                                                 selected.data(), pairs));
    timer.stop(nullptr);
    const double ms1 = timer.milliseconds();
    GPUGEO_CUDA_CHECK(cudaMemcpy(&out.segments, selected.data(), sizeof(int64_t), cudaMemcpyDeviceToHost));
    timer.start(nullptr);
    GPUGEO_CUDA_CHECK(cudaMemset(count.data(), 0, count.bytes()));
    kernel2<<<unsigned((nt + 255) / 256), 256>>>(x.data(), y.data(), v.data(), tri.data(), nt, lv.data(), nl,
                                                nullptr, count.data(), nullptr);
    GPUGEO_CUDA_CHECK_LAUNCH();
    GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), need2, count.data(), start.data(), nt + 1));
    timer.stop(nullptr);
    double ms2 = timer.milliseconds();
    int64_t total = 0;
    GPUGEO_CUDA_CHECK(cudaMemcpy(&total, start.data() + nt, sizeof(int64_t), cudaMemcpyDeviceToHost));
    points.resize(static_cast<std::size_t>(std::max<int64_t>(total, 1)));
    timer.start(nullptr);
    kernel2<<<unsigned((nt + 255) / 256), 256>>>(x.data(), y.data(), v.data(), tri.data(), nt, lv.data(), nl,
                                                start.data(), nullptr, points.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    timer.stop(nullptr);
    ms2 += timer.milliseconds();
    out.pieces = total / (kMaxPieceNodes + 1);
    if (r >= 0)
    {
      t1.push_back(ms1);
      t2.push_back(ms2);
    }
  }
  std::sort(t1.begin(), t1.end());
  std::sort(t2.begin(), t2.end());
  out.kernel1Ms = t1[t1.size() / 2];
  out.kernel2Ms = t2[t2.size() / 2];
  return out;
}

}  // namespace gpugeo::bench
