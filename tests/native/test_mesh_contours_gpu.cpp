// The mesh contours on the GPU against the CPU: every array bitwise the same, on random, integer-
// valued (levels on the vertex values), plateau, no-data, inactive, holed and far-from-the-origin
// meshes and fields. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "gpu_test_size.h"
#include "mesh/mesh_contours.h"

using namespace gpugeo;
using namespace gpugeo::mesh;

#define REQUIRE_GPU()                                     \
  if (!probeGpu().usable)                                 \
  GTEST_SKIP() << "no usable GPU: " << probeGpu().reason

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Case
{
  std::string name;
  std::vector<double> x, y, z;
  std::vector<int32_t> triangles;
  std::vector<double> values;
  std::vector<uint8_t> active;  // empty: all active
  std::vector<double> levels;

  Mesh mesh() const
  {
    return Mesh{x.data(), y.data(), z.empty() ? nullptr : z.data(), static_cast<int64_t>(x.size()), triangles.data(),
                static_cast<int64_t>(triangles.size() / 3)};
  }
  Field field() const { return Field{values.data(), active.empty() ? nullptr : active.data()}; }
  void sample(const std::function<double(double, double)>& f)
  {
    values.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      values[i] = f(x[i], y[i]);
  }
};

// An n x n grid of vertices (interior ones jittered by up to `jitter` spacings, indices shuffled),
// each quad split along a random diagonal, each triangle in a random winding.
Case grid(const std::string& name, uint64_t seed, int n, double h, double jitter, double x0 = 0, double y0 = 0)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Case c;
  c.name = name;
  std::vector<int32_t> index(size_t(n) * n);
  std::iota(index.begin(), index.end(), 0);
  std::shuffle(index.begin(), index.end(), rng);
  c.x.resize(index.size());
  c.y.resize(index.size());
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
    {
      const bool interior = i > 0 && j > 0 && i < n - 1 && j < n - 1;
      const int32_t v = index[size_t(j) * n + i];
      c.x[v] = x0 + (i + (interior ? jitter * u(rng) : 0)) * h;
      c.y[v] = y0 + (j + (interior ? jitter * u(rng) : 0)) * h;
    }
  auto at = [&](int i, int j) { return index[size_t(j) * n + i]; };
  auto add = [&](int32_t a, int32_t b, int32_t d) {
    int32_t t[3] = {a, b, d};
    std::rotate(t, t + rng() % 3, t + 3);
    if (rng() % 2)
      std::swap(t[1], t[2]);
    c.triangles.insert(c.triangles.end(), t, t + 3);
  };
  for (int j = 0; j + 1 < n; ++j)
    for (int i = 0; i + 1 < n; ++i)
    {
      const int32_t a = at(i, j), b = at(i + 1, j), cc = at(i + 1, j + 1), d = at(i, j + 1);
      if (rng() % 2)
      {
        add(a, b, cc);
        add(a, cc, d);
      }
      else
      {
        add(a, b, d);
        add(b, cc, d);
      }
    }
  return c;
}

std::vector<double> steps(double from, double to, double step)
{
  std::vector<double> v;
  for (int i = 0; from + i * step <= to + 1e-12; ++i)
    v.push_back(from + i * step);
  return v;
}

std::function<double(double, double)> bumps(uint64_t seed, double extent, double x0 = 0, double y0 = 0)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::array<double, 4>> list;
  for (int i = 0; i < 8; ++i)
    list.push_back({u(rng) * extent, u(rng) * extent, extent * (0.05 + 0.15 * u(rng)), 20 * u(rng) - 10});
  return [list, x0, y0](double x, double y) {
    double f = 0;
    for (const auto& b : list)
    {
      const double dx = x - x0 - b[0], dy = y - y0 - b[1];
      f += b[3] * std::exp(-(dx * dx + dy * dy) / (2 * b[2] * b[2]));
    }
    return f;
  };
}

std::vector<Case> cases()
{
  std::vector<Case> out;
  std::mt19937_64 rng(31);
  {
    Case c = grid("random values", 1, 60, 1, 0.2);
    std::uniform_real_distribution<double> u(0, 10);
    c.values.resize(c.x.size());
    for (double& v : c.values)
      v = u(rng);
    c.levels = steps(0.5, 9.5, 1);
    out.push_back(c);
  }
  {
    Case c = grid("smooth bumps with z", 2, 120, 1, 0.2);
    c.sample(bumps(2, 119));
    c.z.resize(c.x.size());
    for (size_t i = 0; i < c.x.size(); ++i)
      c.z[i] = 100 + 0.5 * c.x[i] - c.y[i];
    c.levels = steps(-9, 9, 0.75);
    out.push_back(c);
  }
  for (int n : {0, 1})
  {
    Case c = grid(n == 0 ? "integer values, unit grid" : "integer values, jittered grid", 3 + n, 60, 1, n == 0 ? 0 : 0.2);
    std::uniform_int_distribution<int> u(0, 4);
    c.values.resize(c.x.size());
    for (double& v : c.values)
      v = u(rng);
    c.levels = steps(0, 4, 1);
    out.push_back(c);
    c.name += ", levels between";
    c.levels = {-1, 0.5, 1, 2.5, 3, 5};
    out.push_back(c);
  }
  {
    Case c = grid("plateau and terraces", 5, 41, 0.5, 0, -10, -10);
    c.sample([](double x, double y) { return std::min(100 - (x * x + y * y), 64.0) + std::floor(x / 4); });
    c.levels = steps(-60, 70, 4);
    out.push_back(c);
  }
  {
    Case c = grid("no data", 6, 80, 1, 0.2);
    c.sample(bumps(6, 79));
    for (double& v : c.values)
      if (rng() % 20 == 0)
        v = kNaN;
    c.x[17] = kNaN;
    c.levels = steps(-9, 9, 1);
    out.push_back(c);
  }
  {
    Case c = grid("inactive triangles, integer values", 7, 60, 1, 0.2);
    std::uniform_int_distribution<int> u(0, 3);
    c.values.resize(c.x.size());
    for (double& v : c.values)
      v = u(rng);
    c.active.resize(c.triangles.size() / 3);
    for (uint8_t& a : c.active)
      a = rng() % 7 == 0 ? 0 : 1;
    c.levels = steps(0, 3, 1);
    out.push_back(c);
  }
  {
    // Whole cells removed: an interior block and a block on the boundary.
    Case c = grid("holes", 8, 40, 1, 0.2);
    std::vector<int32_t> kept;
    for (size_t t = 0; t < c.triangles.size(); t += 3)
    {
      const int cell = static_cast<int>(t / 6), i = cell % 39, j = cell / 39;
      if ((i >= 10 && i < 20 && j >= 12 && j < 22) || (i >= 30 && j < 6))
        continue;
      kept.insert(kept.end(), c.triangles.begin() + t, c.triangles.begin() + t + 3);
    }
    c.triangles = kept;
    c.sample(bumps(8, 39));
    c.levels = steps(-9, 9, 1);
    out.push_back(c);
    c.name = "holes, one band over all";
    c.levels = {-100, 100};
    out.push_back(c);
  }
  {
    Case c = grid("UTM-sized", 9, 100, 10, 0.2, 500000, 4000000);
    c.sample(bumps(9, 990, 500000, 4000000));
    c.levels = steps(-9, 9, 1);
    out.push_back(c);
  }
  {
    const int n = int(gpugeo::testing::gpuSide(700));
    Case c = grid("large", 10, n, 1, 0.2);
    c.sample(bumps(10, n - 1));
    c.levels = steps(-9.5, 9.5, 0.5);
    out.push_back(c);
  }
  {
    Case c = grid("single level", 11, 50, 1, 0.2);
    c.sample(bumps(11, 49));
    c.levels = {0.25};
    out.push_back(c);
  }
  {
    Case c;
    c.name = "single triangle";
    c.x = {0, 3, 1};
    c.y = {0, 0.5, 2};
    c.triangles = {0, 2, 1};
    c.values = {0, 1, 2};
    c.levels = {0, 0.5, 1, 1.5, 2};
    out.push_back(c);
  }
  return out;
}

template <typename T>
void expectSameBits(const std::vector<T>& cpu, const std::vector<T>& gpu, const std::string& what)
{
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  if (cpu.empty() || std::memcmp(cpu.data(), gpu.data(), cpu.size() * sizeof(T)) == 0)
    return;
  for (size_t i = 0; i < cpu.size(); ++i)
    if (std::memcmp(&cpu[i], &gpu[i], sizeof(T)) != 0)
    {
      ADD_FAILURE() << what << ": first difference at " << i << ", cpu " << cpu[i] << ", gpu " << gpu[i];
      return;
    }
}

void expectSame(const Contours& cpu, const Contours& gpu, const std::string& what)
{
  expectSameBits(cpu.lines.levelPart, gpu.lines.levelPart, what + ": lines.levelPart");
  expectSameBits(cpu.lines.partPoint, gpu.lines.partPoint, what + ": lines.partPoint");
  expectSameBits(cpu.lines.x, gpu.lines.x, what + ": lines.x");
  expectSameBits(cpu.lines.y, gpu.lines.y, what + ": lines.y");
  expectSameBits(cpu.lines.z, gpu.lines.z, what + ": lines.z");
  expectSameBits(cpu.bands.bandPolygon, gpu.bands.bandPolygon, what + ": bands.bandPolygon");
  expectSameBits(cpu.bands.polygonRing, gpu.bands.polygonRing, what + ": bands.polygonRing");
  expectSameBits(cpu.bands.ringPoint, gpu.bands.ringPoint, what + ": bands.ringPoint");
  expectSameBits(cpu.bands.x, gpu.bands.x, what + ": bands.x");
  expectSameBits(cpu.bands.y, gpu.bands.y, what + ": bands.y");
  expectSameBits(cpu.bands.z, gpu.bands.z, what + ": bands.z");
  EXPECT_EQ(cpu.trianglesUsed, gpu.trianglesUsed) << what;
  EXPECT_EQ(cpu.droppedRings, gpu.droppedRings) << what;
}

}  // namespace

TEST(MeshContoursGpu, SameArraysAsTheCpu)
{
  REQUIRE_GPU();
  for (const Case& c : cases())
  {
    auto cpu = makeMeshContourer(Backend::Cpu, c.mesh(), 4, RunControl{});
    auto gpu = makeMeshContourer(Backend::Gpu, c.mesh(), 4, RunControl{});
    EXPECT_EQ(gpu->backend(), Backend::Gpu);
    ContourOptions linesOnly, bandsOnly;
    linesOnly.bands = false;
    bandsOnly.lines = false;
    for (const ContourOptions& o : {ContourOptions{}, linesOnly, bandsOnly})
    {
      const std::string what = c.name + (o.lines && o.bands ? "" : o.lines ? " (lines only)" : " (bands only)");
      const Contours a = cpu->contour(c.field(), c.levels, o, RunControl{});
      const Contours b = gpu->contour(c.field(), c.levels, o, RunControl{});
      expectSame(a, b, what);
      if (o.lines && o.bands)
      {
        EXPECT_FALSE(a.lines.x.empty() && a.bands.x.empty()) << what << ": nothing to compare";
      }
    }
  }
}

TEST(MeshContoursGpu, OneContourerManyFields)
{
  REQUIRE_GPU();
  std::vector<Case> all = cases();
  const Case& a = all[0];  // random values on a 60 x 60 grid
  Case b = a;
  b.sample(bumps(12, 59));
  b.levels = steps(-9, 9, 1);
  auto cpu = makeMeshContourer(Backend::Cpu, a.mesh(), 4, RunControl{});
  auto gpu = makeMeshContourer(Backend::Gpu, a.mesh(), 4, RunControl{});
  for (int round = 0; round < 2; ++round)
  {
    expectSame(cpu->contour(a.field(), a.levels, {}, RunControl{}), gpu->contour(a.field(), a.levels, {}, RunControl{}),
               "field a, round " + std::to_string(round));
    expectSame(cpu->contour(b.field(), b.levels, {}, RunControl{}), gpu->contour(b.field(), b.levels, {}, RunControl{}),
               "field b, round " + std::to_string(round));
  }
}

TEST(MeshContoursGpu, BadInputAndCancel)
{
  REQUIRE_GPU();
  Case c;
  c.x = {0, 3, 1};
  c.y = {0, 0.5, 2};
  c.triangles = {0, 2, 3};
  c.values = {0, 1, 2};
  EXPECT_THROW(makeMeshContourer(Backend::Gpu, c.mesh(), 4, RunControl{}), InvalidInput);
  Mesh none = c.mesh();
  none.triangleCount = 0;
  EXPECT_THROW(makeMeshContourer(Backend::Gpu, none, 4, RunControl{}), InvalidInput);
  c.triangles = {0, 2, 1};
  auto gpu = makeMeshContourer(Backend::Gpu, c.mesh(), 4, RunControl{});
  EXPECT_THROW(gpu->contour(c.field(), {1, 1}, {}, RunControl{}), InvalidInput);
  EXPECT_THROW(gpu->contour(c.field(), {0, kNaN}, {}, RunControl{}), InvalidInput);
  EXPECT_THROW(gpu->contour(Field{nullptr, nullptr}, {1}, {}, RunControl{}), InvalidInput);
  std::vector<double> tooMany;
  for (int i = 0; i <= kMaxLevels; ++i)
    tooMany.push_back(i);
  EXPECT_THROW(gpu->contour(c.field(), tooMany, {}, RunControl{}), InvalidInput);
  RunControl stop;
  stop.canceled = [] { return true; };
  Case big = grid("cancel", 13, 200, 1, 0.2);
  big.sample(bumps(13, 199));
  auto gpuBig = makeMeshContourer(Backend::Gpu, big.mesh(), 4, RunControl{});
  EXPECT_THROW(gpuBig->contour(big.field(), steps(-9, 9, 1), {}, stop), Canceled);
  // Still usable afterwards.
  auto cpuBig = makeMeshContourer(Backend::Cpu, big.mesh(), 4, RunControl{});
  expectSame(cpuBig->contour(big.field(), steps(-9, 9, 1), {}, RunControl{}),
             gpuBig->contour(big.field(), steps(-9, 9, 1), {}, RunControl{}), "after a canceled call");
}

TEST(MeshContoursGpu, NoGpuIsDeviceUnavailable)
{
  if (probeGpu().usable)
    GTEST_SKIP() << "a GPU is usable";
  const std::vector<double> x = {0, 1, 0}, y = {0, 0, 1};
  const std::vector<int32_t> t = {0, 1, 2};
  EXPECT_THROW(makeMeshContourer(Backend::Gpu, Mesh{x.data(), y.data(), nullptr, 3, t.data(), 1}, 1, RunControl{}),
               DeviceUnavailable);
}
