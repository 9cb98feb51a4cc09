// The CPU backend of the mesh contours: line lengths and band areas against the brute-force
// reference (contours_reference.h) on random and degenerate meshes and fields, the layout of the
// output and the validity of its geometry (closed simple rings, shells counter-clockwise and holes
// clockwise inside their shell, disjoint polygons, lines merged through every two-segment node,
// higher values on the left), the topology on smooth fields, bad input, cancel and thread counts.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "mesh/contours_reference.h"
#include "mesh/mesh_contours.h"

using namespace gpugeo;
using namespace gpugeo::mesh;

namespace {

constexpr int kThreads = 2;
constexpr double kPi = 3.14159265358979323846;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Meshes and fields ------------------------------------------------------------------------

struct TestMesh
{
  std::string name;
  std::vector<double> x, y, z;  // z empty: none
  std::vector<int32_t> triangles;

  Mesh mesh() const
  {
    return Mesh{x.data(), y.data(), z.empty() ? nullptr : z.data(), static_cast<int64_t>(x.size()),
                triangles.data(), static_cast<int64_t>(triangles.size() / 3)};
  }
  int64_t triangleCount() const { return static_cast<int64_t>(triangles.size() / 3); }
  std::vector<double> sample(const std::function<double(double, double)>& f) const
  {
    std::vector<double> v(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      v[i] = f(x[i], y[i]);
    return v;
  }
};

struct GridOptions
{
  int nx = 30, ny = 30;
  double x0 = 0, y0 = 0, h = 1;
  double jitter = 0;            // of the interior vertices, in spacings
  bool randomDiagonals = true;  // else main diagonals (i, j)-(i + 1, j + 1)
  bool randomWinding = true;    // each triangle's corners rotated and maybe reversed
  bool shuffleVertices = false;  // vertex indices in random order
  std::function<int(int, int)> diagonal;  // per cell: 1 main, 0 anti, -1 the default rule
};

// A grid of (nx - 1) x (ny - 1) quads, each split into two triangles; the boundary vertices are not
// jittered (the boundary is the rectangle).
TestMesh grid(const std::string& name, uint64_t seed, const GridOptions& o)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  TestMesh m;
  m.name = name;
  const int n = o.nx * o.ny;
  std::vector<int32_t> index(n);
  std::iota(index.begin(), index.end(), 0);
  if (o.shuffleVertices)
    std::shuffle(index.begin(), index.end(), rng);
  m.x.resize(n);
  m.y.resize(n);
  for (int j = 0; j < o.ny; ++j)
    for (int i = 0; i < o.nx; ++i)
    {
      const bool interior = i > 0 && j > 0 && i < o.nx - 1 && j < o.ny - 1;
      const double jx = interior ? o.jitter * u(rng) : 0;
      const double jy = interior ? o.jitter * u(rng) : 0;
      const int32_t v = index[j * o.nx + i];
      m.x[v] = o.x0 + (i + jx) * o.h;
      m.y[v] = o.y0 + (j + jy) * o.h;
    }
  auto at = [&](int i, int j) { return index[j * o.nx + i]; };
  auto add = [&](int32_t a, int32_t b, int32_t c) {
    int32_t t[3] = {a, b, c};
    if (o.randomWinding)
    {
      std::rotate(t, t + rng() % 3, t + 3);
      if (rng() % 2)
        std::swap(t[1], t[2]);
    }
    m.triangles.insert(m.triangles.end(), t, t + 3);
  };
  for (int j = 0; j + 1 < o.ny; ++j)
    for (int i = 0; i + 1 < o.nx; ++i)
    {
      const int32_t a = at(i, j), b = at(i + 1, j), c = at(i + 1, j + 1), d = at(i, j + 1);
      int rule = o.diagonal ? o.diagonal(i, j) : -1;
      if (rule < 0)
        rule = o.randomDiagonals ? static_cast<int>(rng() % 2) : 1;
      if (rule == 1)
      {
        add(a, b, c);
        add(a, c, d);
      }
      else
      {
        add(a, b, d);
        add(b, c, d);
      }
    }
  return m;
}

TestMesh jitteredGrid(uint64_t seed, int n = 30)
{
  GridOptions o;
  o.nx = o.ny = n;
  o.jitter = 0.2;  // below 0.25: no triangle folds over
  o.shuffleVertices = true;
  return grid("jittered grid " + std::to_string(n) + "x" + std::to_string(n), seed, o);
}

// Random points triangulated as a fan from the lowest one: long thin triangles, far from Delaunay.
TestMesh fanMesh(uint64_t seed, int n = 300)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 20);
  TestMesh m;
  m.name = "fan";
  for (int i = 0; i < n; ++i)
  {
    m.x.push_back(u(rng));
    m.y.push_back(u(rng));
  }
  int32_t pivot = 0;
  for (int32_t i = 1; i < n; ++i)
    if (m.y[i] < m.y[pivot])
      pivot = i;
  std::vector<int32_t> others;
  for (int32_t i = 0; i < n; ++i)
    if (i != pivot)
      others.push_back(i);
  auto angle = [&](int32_t i) { return std::atan2(m.y[i] - m.y[pivot], m.x[i] - m.x[pivot]); };
  std::sort(others.begin(), others.end(), [&](int32_t a, int32_t b) { return angle(a) < angle(b); });
  for (size_t k = 0; k + 1 < others.size(); ++k)
  {
    if (rng() % 2)
      m.triangles.insert(m.triangles.end(), {pivot, others[k], others[k + 1]});
    else
      m.triangles.insert(m.triangles.end(), {others[k + 1], others[k], pivot});
  }
  return m;
}

// A jittered grid less the cells of an interior block and of a block on the boundary.
TestMesh gridWithHoles(uint64_t seed)
{
  const int n = 30;
  TestMesh g = jitteredGrid(seed, n);
  TestMesh m = g;
  m.name = "grid with holes";
  m.triangles.clear();
  for (size_t t = 0; t < g.triangles.size(); t += 3)
  {
    const int cell = static_cast<int>(t / 6);  // two triangles a cell, row by row
    const int i = cell % (n - 1), j = cell / (n - 1);
    const bool inner = i >= 8 && i < 14 && j >= 10 && j < 17;
    const bool onBoundary = i >= 20 && j < 5;
    if (!inner && !onBoundary)
      m.triangles.insert(m.triangles.end(), g.triangles.begin() + t, g.triangles.begin() + t + 3);
  }
  return m;
}

TestMesh singleTriangle()
{
  TestMesh m;
  m.name = "single triangle";
  m.x = {0, 3, 1};
  m.y = {0, 0.5, 2};
  m.triangles = {0, 2, 1};  // clockwise
  return m;
}

// An unjittered grid of unit quads, each split into two triangles along a random diagonal in a
// random winding (integer coordinates: many points exactly on the levels).
TestMesh quadGrid(uint64_t seed, int n, double x0 = 0, double y0 = 0)
{
  GridOptions o;
  o.nx = o.ny = n;
  o.x0 = x0;
  o.y0 = y0;
  return grid("quad grid", seed, o);
}

std::vector<double> randomValues(uint64_t seed, size_t n, double lo, double hi)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v)
    x = u(rng);
  return v;
}

std::vector<double> randomIntegers(uint64_t seed, size_t n, int lo, int hi)
{
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v)
    x = u(rng);
  return v;
}

// A smooth field: a few Gaussian bumps and dips of random size over [0, extent]^2.
std::function<double(double, double)> bumps(uint64_t seed, double extent)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  struct Bump
  {
    double x, y, s, a;
  };
  std::vector<Bump> list;
  for (int i = 0; i < 8; ++i)
    list.push_back({u(rng) * extent, u(rng) * extent, extent * (0.05 + 0.15 * u(rng)), 20 * u(rng) - 10});
  return [list](double x, double y) {
    double f = 0;
    for (const Bump& b : list)
      f += b.a * std::exp(-((x - b.x) * (x - b.x) + (y - b.y) * (y - b.y)) / (2 * b.s * b.s));
    return f;
  };
}

std::vector<double> steps(double from, double to, double step)
{
  std::vector<double> v;
  for (int i = 0; from + i * step <= to + 1e-12; ++i)
    v.push_back(from + i * step);
  return v;
}

// ---- Running --------------------------------------------------------------------------------

struct FieldData
{
  std::vector<double> values;
  std::vector<uint8_t> active;  // empty: all active
  Field field() const { return Field{values.data(), active.empty() ? nullptr : active.data()}; }
};

Contours contourCpu(const TestMesh& m, const FieldData& f, const std::vector<double>& levels, int threads = kThreads,
                    ContourOptions options = {})
{
  auto contourer = makeMeshContourer(Backend::Cpu, m.mesh(), threads, RunControl{});
  EXPECT_EQ(contourer->backend(), Backend::Cpu);
  return contourer->contour(f.field(), levels, options, RunControl{});
}

// ---- Geometry -------------------------------------------------------------------------------

struct Pt
{
  double x, y;
  bool operator==(const Pt& o) const { return x == o.x && y == o.y; }
  bool operator<(const Pt& o) const { return x < o.x || (x == o.x && y < o.y); }
};

std::ostream& operator<<(std::ostream& s, const Pt& p)
{
  std::ostringstream t;
  t.precision(17);
  t << "(" << p.x << ", " << p.y << ")";
  return s << t.str();
}

// The exact sign of a sum of doubles, by a floating-point expansion (Shewchuk's Grow-Expansion with
// zero elimination: components nonoverlapping, increasing in magnitude).
int exactSign(const std::vector<double>& terms)
{
  std::vector<double> h, next;
  for (double b : terms)
  {
    next.clear();
    double q = b;
    for (double hi : h)
    {
      const double s = q + hi;
      const double bv = s - q;
      const double e = (q - (s - bv)) + (hi - bv);
      if (e != 0)
        next.push_back(e);
      q = s;
    }
    if (q != 0)
      next.push_back(q);
    h.swap(next);
  }
  if (h.empty())
    return 0;
  return h.back() > 0 ? 1 : -1;
}

// The exact sign of the orientation of (a, b, c): positive counter-clockwise.
int orient(const Pt& a, const Pt& b, const Pt& c)
{
  // (bx - ax)(cy - ay) - (by - ay)(cx - ax) = bx cy - bx ay - ax cy - by cx + by ax + ay cx
  std::vector<double> terms;
  auto product = [&](double u, double v, double sign) {
    const double p = u * v;
    terms.push_back(sign * p);
    terms.push_back(sign * std::fma(u, v, -p));
  };
  product(b.x, c.y, 1);
  product(b.x, a.y, -1);
  product(a.x, c.y, -1);
  product(b.y, c.x, -1);
  product(b.y, a.x, 1);
  product(a.y, c.x, 1);
  return exactSign(terms);
}

// p collinear with a-b: whether it lies on the closed segment.
bool within(const Pt& a, const Pt& b, const Pt& p)
{
  return std::min(a.x, b.x) <= p.x && p.x <= std::max(a.x, b.x) && std::min(a.y, b.y) <= p.y &&
         p.y <= std::max(a.y, b.y);
}

// Whether the closed segments a-b and c-d have a point in common.
bool segmentsMeet(const Pt& a, const Pt& b, const Pt& c, const Pt& d)
{
  const int o1 = orient(a, b, c), o2 = orient(a, b, d), o3 = orient(c, d, a), o4 = orient(c, d, b);
  if (o1 * o2 < 0 && o3 * o4 < 0)
    return true;
  return (o1 == 0 && within(a, b, c)) || (o2 == 0 && within(a, b, d)) || (o3 == 0 && within(c, d, a)) ||
         (o4 == 0 && within(c, d, b));
}

double signedArea(const std::vector<Pt>& ring)  // closed: first == last; relative to the first point
{
  double twice = 0;
  const Pt& o = ring[0];
  for (size_t i = 1; i + 2 < ring.size(); ++i)
    twice += (ring[i].x - o.x) * (ring[i + 1].y - o.y) - (ring[i + 1].x - o.x) * (ring[i].y - o.y);
  return 0.5 * twice;
}

double length(const std::vector<Pt>& line)
{
  double l = 0;
  for (size_t i = 0; i + 1 < line.size(); ++i)
    l += std::hypot(line[i + 1].x - line[i].x, line[i + 1].y - line[i].y);
  return l;
}

// Crossing number (closed ring).
bool inside(const std::vector<Pt>& ring, const Pt& p)
{
  bool in = false;
  for (size_t i = 0; i + 1 < ring.size(); ++i)
  {
    const Pt& a = ring[i];
    const Pt& b = ring[i + 1];
    if ((a.y > p.y) != (b.y > p.y) && p.x < a.x + (b.x - a.x) * (p.y - a.y) / (b.y - a.y))
      in = !in;
  }
  return in;
}

Pt midpoint(const Pt& a, const Pt& b) { return {0.5 * (a.x + b.x), 0.5 * (a.y + b.y)}; }

// An empty string when the closed ring is simple: at least 4 points, no repeated point but the
// last, non-adjacent segments disjoint, adjacent segments meeting only at their common end.
std::string ringProblem(const std::vector<Pt>& ring)
{
  std::ostringstream why;
  if (ring.size() < 4)
    return "fewer than 4 points";
  if (!(ring.front() == ring.back()))
    return "not closed";
  const size_t m = ring.size() - 1;  // segments; segment i is ring[i]-ring[i + 1]
  std::vector<Pt> sorted(ring.begin(), ring.end() - 1);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i + 1 < sorted.size(); ++i)
    if (sorted[i] == sorted[i + 1])
    {
      why << "repeated point " << sorted[i];
      return why.str();
    }
  for (size_t i = 0; i < m; ++i)  // adjacent segments: no overlap
  {
    const Pt& a = ring[i];
    const Pt& b = ring[i + 1];
    const Pt& c = i + 1 == m ? ring[1] : ring[i + 2];
    if (orient(a, b, c) == 0 && (within(a, b, c) || within(b, c, a)))
    {
      why << "spike at " << b;
      return why.str();
    }
  }
  // Non-adjacent segments: a sweep in x.
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  auto minX = [&](size_t s) { return std::min(ring[s].x, ring[s + 1].x); };
  auto maxX = [&](size_t s) { return std::max(ring[s].x, ring[s + 1].x); };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return minX(a) < minX(b); });
  for (size_t k = 0; k < m; ++k)
  {
    const size_t s = order[k];
    for (size_t l = k + 1; l < m && minX(order[l]) <= maxX(s); ++l)
    {
      const size_t t = order[l];
      const size_t lo = std::min(s, t), hi = std::max(s, t);
      if (hi == lo + 1 || (lo == 0 && hi == m - 1))
        continue;
      if (std::max(std::min(ring[s].y, ring[s + 1].y), std::min(ring[t].y, ring[t + 1].y)) >
          std::min(std::max(ring[s].y, ring[s + 1].y), std::max(ring[t].y, ring[t + 1].y)))
        continue;
      if (segmentsMeet(ring[s], ring[s + 1], ring[t], ring[t + 1]))
      {
        why << "segments " << ring[s] << "-" << ring[s + 1] << " and " << ring[t] << "-" << ring[t + 1] << " meet";
        return why.str();
      }
    }
  }
  return {};
}

// The field at a point: linear in the participating triangle that holds it, NaN where none does.
class Locator
{
public:
  Locator(const TestMesh& m, const Field& f) : m_(m), f_(f)
  {
    for (int64_t t = 0; t < m.triangleCount(); ++t)
    {
      bool ok = !f.active || f.active[t] != 0;
      for (int c = 0; c < 3 && ok; ++c)
      {
        const int32_t v = m.triangles[3 * t + c];
        ok = std::isfinite(f.values[v]) && std::isfinite(m.x[v]) && std::isfinite(m.y[v]);
      }
      if (!ok)
        continue;
      used_.push_back(t);
      for (int c = 0; c < 3; ++c)
      {
        const int32_t v = m.triangles[3 * t + c];
        x0_ = std::min(x0_, m.x[v]);
        y0_ = std::min(y0_, m.y[v]);
        x1_ = std::max(x1_, m.x[v]);
        y1_ = std::max(y1_, m.y[v]);
      }
    }
    n_ = std::max(1, static_cast<int>(std::sqrt(double(used_.size()) / 2)));
    cells_.resize(size_t(n_) * n_);
    for (int64_t t : used_)
    {
      double bx0 = 1e300, by0 = 1e300, bx1 = -1e300, by1 = -1e300;
      for (int c = 0; c < 3; ++c)
      {
        const int32_t v = m.triangles[3 * t + c];
        bx0 = std::min(bx0, m.x[v]);
        by0 = std::min(by0, m.y[v]);
        bx1 = std::max(bx1, m.x[v]);
        by1 = std::max(by1, m.y[v]);
      }
      for (int j = cell(by0, y0_, y1_); j <= cell(by1, y0_, y1_); ++j)
        for (int i = cell(bx0, x0_, x1_); i <= cell(bx1, x0_, x1_); ++i)
          cells_[size_t(j) * n_ + i].push_back(t);
    }
  }

  // The field at p in the first participating triangle that holds it, NaN where none does.
  double value(const Pt& p) const
  {
    double f = kNaN;
    visit(p, -1e-12, [&](const int32_t* v, const double* l) {
      if (std::isnan(f))
        f = l[0] * f_.values[v[0]] + l[1] * f_.values[v[1]] + l[2] * f_.values[v[2]];
    });
    return f;
  }

  // The smallest altitude of the participating triangles that hold p (infinity where none does).
  double altitudeAt(const Pt& p) const
  {
    double h = std::numeric_limits<double>::infinity();
    visit(p, -1e-9, [&](const int32_t* v, const double*) {
      const Pt a{m_.x[v[0]], m_.y[v[0]]}, b{m_.x[v[1]], m_.y[v[1]]}, c{m_.x[v[2]], m_.y[v[2]]};
      const double twiceArea = std::fabs((b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x));
      const double longest = std::max({std::hypot(b.x - a.x, b.y - a.y), std::hypot(c.x - b.x, c.y - b.y),
                                       std::hypot(a.x - c.x, a.y - c.y)});
      h = std::min(h, twiceArea / longest);
    });
    return h;
  }

private:
  // Calls f(corners, barycentric coordinates) for each participating triangle holding p, its
  // barycentric coordinates >= eps.
  template <typename F>
  void visit(const Pt& p, double eps, F&& f) const
  {
    if (used_.empty() || !(p.x >= x0_ && p.x <= x1_ && p.y >= y0_ && p.y <= y1_))
      return;
    for (int64_t t : cells_[size_t(cell(p.y, y0_, y1_)) * n_ + cell(p.x, x0_, x1_)])
    {
      const int32_t* v = &m_.triangles[3 * t];
      const Pt a{m_.x[v[0]], m_.y[v[0]]}, b{m_.x[v[1]], m_.y[v[1]]}, c{m_.x[v[2]], m_.y[v[2]]};
      auto cross = [](const Pt& o, const Pt& u, const Pt& w) { return (u.x - o.x) * (w.y - o.y) - (u.y - o.y) * (w.x - o.x); };
      const double d = cross(a, b, c);
      const double l[3] = {cross(p, b, c) / d, cross(a, p, c) / d, cross(a, b, p) / d};
      if (l[0] >= eps && l[1] >= eps && l[2] >= eps)
        f(v, l);
    }
  }

  int cell(double v, double lo, double hi) const
  {
    if (hi <= lo)
      return 0;
    return std::clamp(static_cast<int>((v - lo) / (hi - lo) * n_), 0, n_ - 1);
  }

  const TestMesh& m_;
  Field f_;
  std::vector<int64_t> used_;
  double x0_ = 1e300, y0_ = 1e300, x1_ = -1e300, y1_ = -1e300;
  int n_ = 1;
  std::vector<std::vector<int64_t>> cells_;
};

// The point at distance d to the left (sign +1) or right (-1) of the midpoint of a-b.
Pt beside(const Pt& a, const Pt& b, double d, double sign)
{
  const double l = std::hypot(b.x - a.x, b.y - a.y);
  const Pt mid = midpoint(a, b);
  return {mid.x - sign * d * (b.y - a.y) / l, mid.y + sign * d * (b.x - a.x) / l};
}

// The field just left and right of the midpoint of a-b, at distance `scale` times the smallest
// altitude of the triangles there (or the segment's length, if shorter): NaN where no participating
// triangle is. False when no participating triangle holds the midpoint. (Pieces of a band can be
// far thinner than their triangle: the callers try several scales.)
bool besideValues(const Locator& locator, const Pt& a, const Pt& b, double scale, double& left, double& right)
{
  const double len = std::hypot(b.x - a.x, b.y - a.y);
  const double h = locator.altitudeAt(midpoint(a, b));
  if (!(len > 0) || !std::isfinite(h))
    return false;
  const double d = scale * std::min(h, len);
  left = locator.value(beside(a, b, d, 1));
  right = locator.value(beside(a, b, d, -1));
  return true;
}

const double kScales[] = {1e-7, 1e-5, 1e-3};  // smallest first

// ---- Views of the output --------------------------------------------------------------------

std::vector<Pt> linePart(const ContourLines& l, int64_t p)
{
  std::vector<Pt> out;
  for (int64_t i = l.partPoint[p]; i < l.partPoint[p + 1]; ++i)
    out.push_back({l.x[i], l.y[i]});
  return out;
}

std::vector<Pt> bandRing(const ContourBands& b, int64_t r)
{
  std::vector<Pt> out;
  for (int64_t i = b.ringPoint[r]; i < b.ringPoint[r + 1]; ++i)
    out.push_back({b.x[i], b.y[i]});
  return out;
}

// Offsets: size count + 1, from 0 to total, non-decreasing (strictly increasing with `strict`, by at
// least `minStep`).
void expectOffsets(const std::vector<int64_t>& offsets, size_t count, size_t total, int64_t minStep, const std::string& what)
{
  ASSERT_EQ(offsets.size(), count + 1) << what;
  EXPECT_EQ(offsets.front(), 0) << what;
  EXPECT_EQ(offsets.back(), static_cast<int64_t>(total)) << what;
  for (size_t i = 0; i < count; ++i)
    ASSERT_GE(offsets[i + 1] - offsets[i], minStep) << what << " at " << i;
}

void expectLayout(const Contours& c, size_t levels, const ContourOptions& options, const std::string& what)
{
  if (options.lines)
  {
    const ContourLines& l = c.lines;
    ASSERT_EQ(l.levelPart.size(), levels + 1) << what;
    ASSERT_FALSE(l.partPoint.empty()) << what;
    expectOffsets(l.levelPart, levels, l.partPoint.size() - 1, 0, what + " levelPart");
    expectOffsets(l.partPoint, l.partPoint.size() - 1, l.x.size(), 2, what + " partPoint");
    EXPECT_EQ(l.y.size(), l.x.size()) << what;
    EXPECT_EQ(l.z.size(), l.x.size()) << what;
  }
  else
  {
    EXPECT_TRUE(c.lines.x.empty()) << what;
    EXPECT_LE(c.lines.levelPart.size(), 1u) << what;
  }
  if (options.bands)
  {
    const ContourBands& b = c.bands;
    const size_t bands = levels < 2 ? 0 : levels - 1;
    ASSERT_EQ(b.bandPolygon.size(), bands + 1) << what;
    ASSERT_FALSE(b.polygonRing.empty()) << what;
    ASSERT_FALSE(b.ringPoint.empty()) << what;
    expectOffsets(b.bandPolygon, bands, b.polygonRing.size() - 1, 0, what + " bandPolygon");
    expectOffsets(b.polygonRing, b.polygonRing.size() - 1, b.ringPoint.size() - 1, 1, what + " polygonRing");
    expectOffsets(b.ringPoint, b.ringPoint.size() - 1, b.x.size(), 4, what + " ringPoint");
    EXPECT_EQ(b.y.size(), b.x.size()) << what;
    EXPECT_EQ(b.z.size(), b.x.size()) << what;
  }
  else
  {
    EXPECT_TRUE(c.bands.x.empty()) << what;
    EXPECT_LE(c.bands.bandPolygon.size(), 1u) << what;
  }
}

int64_t partCount(const Contours& c, size_t level) { return c.lines.levelPart[level + 1] - c.lines.levelPart[level]; }
int64_t polygonCount(const Contours& c, size_t band) { return c.bands.bandPolygon[band + 1] - c.bands.bandPolygon[band]; }
int64_t ringCount(const Contours& c, int64_t polygon) { return c.bands.polygonRing[polygon + 1] - c.bands.polygonRing[polygon]; }

bool closedPart(const std::vector<Pt>& part) { return part.front() == part.back(); }

::testing::AssertionResult nearRelative(double got, double want)
{
  const double tol = 1e-9 * std::fabs(want) + 1e-12;
  if (std::fabs(got - want) <= tol)
    return ::testing::AssertionSuccess();
  std::ostringstream s;
  s.precision(17);
  s << "got " << got << ", want " << want << " (difference " << got - want << ")";
  return ::testing::AssertionFailure() << s.str();
}

// ---- The checks -----------------------------------------------------------------------------

// Lines: lengths against the reference; parts of at least 2 points with no zero-length segment,
// closed parts of at least 4; joined through every node where exactly two segments meet; higher
// values on the left.
void checkLines(const TestMesh& m, const FieldData& f, const std::vector<double>& levels, const Contours& c,
                const Locator* locator, const std::string& what)
{
  const std::vector<double> want = reference::lineLengths(m.mesh(), f.field(), levels);
  const ContourLines& l = c.lines;
  for (size_t k = 0; k < levels.size(); ++k)
  {
    const std::string at = what + " level " + std::to_string(levels[k]);
    double total = 0;
    struct Node
    {
      int ends = 0, interior = 0, closedStarts = 0;
    };
    std::map<Pt, Node> nodes;
    for (int64_t p = l.levelPart[k]; p < l.levelPart[k + 1]; ++p)
    {
      const std::vector<Pt> part = linePart(l, p);
      total += length(part);
      for (size_t i = 0; i + 1 < part.size(); ++i)
        ASSERT_FALSE(part[i] == part[i + 1]) << at << " part " << p << ": zero-length segment at " << part[i];
      if (closedPart(part))
      {
        EXPECT_GE(part.size(), 4u) << at << " part " << p;
        nodes[part.front()].ends += 2;
        nodes[part.front()].closedStarts += 1;
      }
      else
      {
        nodes[part.front()].ends += 1;
        nodes[part.back()].ends += 1;
      }
      for (size_t i = 1; i + 1 < part.size(); ++i)
        nodes[part[i]].interior += 1;
      if (locator)
      {
        // Each segment with higher values clearly on one side and lower on the other is forward
        // (higher on the left) or reversed. A part runs in the direction of its lowest-index segment,
        // so segments of no clear side (an edge at the level between two higher or two lower
        // triangles, or beside a flat one) may turn the rest of it round; but two clear segments
        // in a row agree, and a part of clear segments only is forward.
        std::vector<int> state(part.size() - 1, 0);  // 1 forward, -1 reversed, 0 no clear side
        const double tol = 1e-12 * (1 + std::fabs(levels[k]));
        for (size_t i = 0; i + 1 < part.size(); ++i)
        {
          for (double scale : kScales)  // the smallest scale with a clear answer
          {
            double left = kNaN, right = kNaN;
            if (!besideValues(*locator, part[i], part[i + 1], scale, left, right))
            {
              ADD_FAILURE() << at << " part " << p << ": segment " << part[i] << "-" << part[i + 1] << " is off the mesh";
              break;
            }
            if (left > levels[k] + tol && right < levels[k] - tol)
              state[i] = 1;
            else if (left < levels[k] - tol && right > levels[k] + tol)
              state[i] = -1;
            if (state[i] != 0)
              break;
          }
        }
        const bool allClear = std::find(state.begin(), state.end(), 0) == state.end();
        for (size_t i = 0; i < state.size(); ++i)
        {
          EXPECT_FALSE(allClear && state[i] == -1)
              << at << " part " << p << ": segment " << part[i] << "-" << part[i + 1] << " has the higher values on its right";
          EXPECT_FALSE(i > 0 && state[i] * state[i - 1] == -1)
              << at << " part " << p << ": segments turn round at " << part[i];
        }
      }
    }
    EXPECT_TRUE(nearRelative(total, want[k])) << at << ": total length";
    for (const auto& [pt, node] : nodes)
    {
      EXPECT_FALSE(node.interior > 0 && (node.interior != 1 || node.ends != 0))
          << at << ": a part passes through " << pt << " where " << node.ends + 2 * node.interior << " segments meet";
      EXPECT_FALSE(node.ends == 2 && node.interior == 0 && node.closedStarts != 1)
          << at << ": two parts end at " << pt << " where only they meet (not joined)";
    }
  }
}

// Bands: areas against the reference; rings simple, shells counter-clockwise, holes clockwise and
// inside their shell, holes of a polygon disjoint, polygons of a band disjoint; the band's values
// on the left of every ring segment and not on the right.
void checkBands(const TestMesh& m, const FieldData& f, const std::vector<double>& levels, const Contours& c,
                const Locator* locator, const std::string& what)
{
  const std::vector<double> want = reference::bandAreas(m.mesh(), f.field(), levels);
  const ContourBands& b = c.bands;
  for (size_t k = 0; k + 1 < levels.size(); ++k)
  {
    const double lo = levels[k], hi = levels[k + 1];
    const std::string at = what + " band [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    double total = 0;
    std::vector<std::vector<std::vector<Pt>>> polygons;
    for (int64_t q = b.bandPolygon[k]; q < b.bandPolygon[k + 1]; ++q)
    {
      std::vector<std::vector<Pt>> rings;
      for (int64_t r = b.polygonRing[q]; r < b.polygonRing[q + 1]; ++r)
      {
        rings.push_back(bandRing(b, r));
        const std::vector<Pt>& ring = rings.back();
        const std::string ringWhat = at + " polygon " + std::to_string(q) + " ring " + std::to_string(r - b.polygonRing[q]);
        const std::string problem = ringProblem(ring);
        EXPECT_TRUE(problem.empty()) << ringWhat << ": " << problem;
        if (!problem.empty())
          continue;
        const double area = signedArea(ring);
        total += area;
        if (r == b.polygonRing[q])
        {
          EXPECT_GT(area, 0) << ringWhat << ": shell not counter-clockwise";
        }
        else
        {
          EXPECT_LT(area, 0) << ringWhat << ": hole not clockwise";
          for (size_t i = 0; i + 1 < ring.size(); ++i)
            if (!inside(rings.front(), midpoint(ring[i], ring[i + 1])))
            {
              ADD_FAILURE() << ringWhat << ": hole segment " << ring[i] << "-" << ring[i + 1] << " outside the shell";
              break;
            }
        }
        if (locator)
          for (size_t i = 0; i + 1 < ring.size(); ++i)
          {
            // In the band on the left and not on the right, at one scale at least.
            const double tol = 1e-12 * (1 + std::fabs(lo) + std::fabs(hi));
            double left = kNaN, right = kNaN;
            bool ok = false, onMesh = true;
            for (double scale : kScales)
            {
              onMesh = besideValues(*locator, ring[i], ring[i + 1], scale, left, right);
              ok = onMesh && left >= lo - tol && left <= hi + tol && !(right > lo + tol && right < hi - tol);
              if (ok || !onMesh)
                break;
            }
            EXPECT_TRUE(ok) << ringWhat << ": segment " << ring[i] << "-" << ring[i + 1]
                            << (onMesh ? "" : " is off the mesh") << " has " << left << " on its left and " << right
                            << " on its right";
          }
      }
      for (size_t h = 1; h < rings.size(); ++h)
        for (size_t g = 1; g < rings.size(); ++g)
          if (g != h && rings[h].size() >= 2 && inside(rings[g], midpoint(rings[h][0], rings[h][1])))
            ADD_FAILURE() << at << " polygon " << q << ": hole " << h << " inside hole " << g;
      polygons.push_back(std::move(rings));
    }
    EXPECT_TRUE(nearRelative(total, want[k])) << at << ": total area";
    if (polygons.size() > 400)
      continue;
    for (size_t p = 0; p < polygons.size(); ++p)
      for (size_t q = 0; q < polygons.size(); ++q)
      {
        if (p == q || polygons[p].front().size() < 2)
          continue;
        const Pt probe = midpoint(polygons[p].front()[0], polygons[p].front()[1]);
        if (!inside(polygons[q].front(), probe))
          continue;
        bool inHole = false;
        for (size_t h = 1; h < polygons[q].size() && !inHole; ++h)
          inHole = inside(polygons[q][h], probe);
        EXPECT_TRUE(inHole) << at << ": polygon " << p << " overlaps polygon " << q;
      }
  }
}

// z interpolated like x and y: with z a linear function of x and y, every output point has that z.
void checkZ(const TestMesh& m, const Contours& c, const std::function<double(double, double)>& zOf, const std::string& what)
{
  auto check = [&](const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& z) {
    for (size_t i = 0; i < z.size(); ++i)
    {
      const double want = m.z.empty() ? 0.0 : zOf(x[i], y[i]);
      ASSERT_NEAR(z[i], want, 1e-9 * (1 + std::fabs(want))) << what << " point " << i;
    }
  };
  check(c.lines.x, c.lines.y, c.lines.z);
  check(c.bands.x, c.bands.y, c.bands.z);
}

// Everything against the reference and the geometry's rules.
void checkAll(const TestMesh& m, const FieldData& f, const std::vector<double>& levels, const Contours& c,
              const std::string& what, bool locate = true)
{
  const ContourOptions both;
  expectLayout(c, levels.size(), both, what);
  if (::testing::Test::HasFatalFailure())
    return;
  EXPECT_EQ(c.trianglesUsed, reference::trianglesUsed(m.mesh(), f.field())) << what;
  EXPECT_EQ(c.droppedRings, 0) << what;
  std::unique_ptr<Locator> locator;
  if (locate)
    locator = std::make_unique<Locator>(m, f.field());
  checkLines(m, f, levels, c, locator.get(), what);
  checkBands(m, f, levels, c, locator.get(), what);
}

void runAndCheck(const TestMesh& m, const FieldData& f, const std::vector<double>& levels, const std::string& what)
{
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, what + " (" + m.name + ")");
}

template <typename T>
bool bitwiseEqual(const std::vector<T>& a, const std::vector<T>& b)
{
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void expectBitwiseEqual(const Contours& a, const Contours& b, const std::string& what)
{
  EXPECT_TRUE(bitwiseEqual(a.lines.levelPart, b.lines.levelPart)) << what << ": lines.levelPart";
  EXPECT_TRUE(bitwiseEqual(a.lines.partPoint, b.lines.partPoint)) << what << ": lines.partPoint";
  EXPECT_TRUE(bitwiseEqual(a.lines.x, b.lines.x)) << what << ": lines.x";
  EXPECT_TRUE(bitwiseEqual(a.lines.y, b.lines.y)) << what << ": lines.y";
  EXPECT_TRUE(bitwiseEqual(a.lines.z, b.lines.z)) << what << ": lines.z";
  EXPECT_TRUE(bitwiseEqual(a.bands.bandPolygon, b.bands.bandPolygon)) << what << ": bands.bandPolygon";
  EXPECT_TRUE(bitwiseEqual(a.bands.polygonRing, b.bands.polygonRing)) << what << ": bands.polygonRing";
  EXPECT_TRUE(bitwiseEqual(a.bands.ringPoint, b.bands.ringPoint)) << what << ": bands.ringPoint";
  EXPECT_TRUE(bitwiseEqual(a.bands.x, b.bands.x)) << what << ": bands.x";
  EXPECT_TRUE(bitwiseEqual(a.bands.y, b.bands.y)) << what << ": bands.y";
  EXPECT_TRUE(bitwiseEqual(a.bands.z, b.bands.z)) << what << ": bands.z";
  EXPECT_EQ(a.trianglesUsed, b.trianglesUsed) << what;
  EXPECT_EQ(a.droppedRings, b.droppedRings) << what;
}

// ---- Random meshes and fields -----------------------------------------------------------------

TEST(MeshContoursCpu, RandomFieldsOnAJitteredGrid)
{
  for (uint64_t seed : {1, 2, 3})
  {
    TestMesh m = jitteredGrid(seed);
    const std::string what = "seed " + std::to_string(seed);
    runAndCheck(m, {randomValues(seed + 10, m.x.size(), 0, 10), {}}, steps(0.5, 9.5, 1), what + " uniform values");
    runAndCheck(m, {randomValues(seed + 20, m.x.size(), -3, 7), {}}, {-2.7, -0.1, 0.3, 2.2, 2.25, 6.9}, what + " uneven levels");
    runAndCheck(m, {m.sample(bumps(seed, 29)), {}}, steps(-9, 9, 1.5), what + " smooth bumps");
  }
}

TEST(MeshContoursCpu, FarFromTheOrigin)
{
  GridOptions o;
  o.nx = o.ny = 30;
  o.x0 = 500000;
  o.y0 = 4000000;
  o.h = 10;
  o.jitter = 0.2;  // below 0.25: no triangle folds over
  o.shuffleVertices = true;
  TestMesh m = grid("UTM-sized", 30, o);
  runAndCheck(m, {randomValues(30, m.x.size(), 0, 10), {}}, steps(0.5, 9.5, 1), "random values");
  runAndCheck(m, {randomIntegers(30, m.x.size(), 0, 4), {}}, steps(0, 4, 1), "integer values");
  auto f = bumps(30, 290);
  runAndCheck(m, {m.sample([&](double x, double y) { return f(x - o.x0, y - o.y0); }), {}}, steps(-9, 9, 1.5), "smooth bumps");
}

TEST(MeshContoursCpu, ZIsInterpolatedLikeXAndY)
{
  TestMesh m = jitteredGrid(7);
  auto zOf = [](double x, double y) { return 100 + 2 * x - 0.5 * y; };
  const FieldData f{m.sample(bumps(7, 29)), {}};
  const std::vector<double> levels = steps(-9, 9, 2);
  checkZ(m, contourCpu(m, f, levels), zOf, "without z");
  m.z = m.sample(zOf);
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "with z");
  checkZ(m, c, zOf, "with z");
}

TEST(MeshContoursCpu, FanMeshOfThinTriangles)
{
  for (uint64_t seed : {4, 5})
  {
    TestMesh m = fanMesh(seed);
    runAndCheck(m, {randomValues(seed, m.x.size(), 0, 10), {}}, steps(0.5, 9.5, 1), "random values");
    runAndCheck(m, {m.sample(bumps(seed, 20)), {}}, steps(-9, 9, 1), "smooth bumps");
    runAndCheck(m, {randomIntegers(seed, m.x.size(), 0, 4), {}}, steps(0, 4, 1), "integer values");
  }
}

TEST(MeshContoursCpu, MeshWithHoles)
{
  TestMesh m = gridWithHoles(6);
  runAndCheck(m, {randomValues(6, m.x.size(), 0, 10), {}}, steps(0.5, 9.5, 1), "random values");
  runAndCheck(m, {m.sample(bumps(6, 29)), {}}, steps(-9, 9, 1.5), "smooth bumps");
  runAndCheck(m, {randomIntegers(6, m.x.size(), 0, 3), {}}, steps(0, 3, 1), "integer values");
  // One band over all the values: the whole mesh, one polygon whose hole is the interior block (the
  // block on the boundary is a notch in the shell).
  const FieldData all{randomValues(7, m.x.size(), 0, 10), {}};
  const std::vector<double> levels{-1, 11};
  const Contours c = contourCpu(m, all, levels);
  checkAll(m, all, levels, c, "one band over all");
  ASSERT_EQ(polygonCount(c, 0), 1);
  EXPECT_EQ(ringCount(c, 0), 2);
  EXPECT_EQ(partCount(c, 0), 0);
  EXPECT_EQ(partCount(c, 1), 0);
}

TEST(MeshContoursCpu, SingleTriangle)
{
  const TestMesh m = singleTriangle();
  const FieldData f{{0, 1, 2}, {}};
  const std::vector<double> levels{0.5, 1.5};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "single triangle");
  EXPECT_EQ(c.trianglesUsed, 1);
  EXPECT_EQ(partCount(c, 0), 1);
  EXPECT_EQ(partCount(c, 1), 1);
  ASSERT_EQ(polygonCount(c, 0), 1);
  EXPECT_EQ(ringCount(c, 0), 1);
  // Levels on the vertices: 0 and 2 touch the triangle in one point (nothing); 1 crosses it.
  const std::vector<double> onVertices{0, 1, 2};
  const Contours d = contourCpu(m, f, onVertices);
  checkAll(m, f, onVertices, d, "single triangle, levels on the vertices");
  EXPECT_EQ(partCount(d, 0), 0);
  EXPECT_EQ(partCount(d, 1), 1);
  EXPECT_EQ(partCount(d, 2), 0);
  EXPECT_EQ(polygonCount(d, 0), 1);
  EXPECT_EQ(polygonCount(d, 1), 1);
}

TEST(MeshContoursCpu, QuadsSplitInArbitraryWinding)
{
  for (uint64_t seed : {8, 9})
  {
    const TestMesh m = quadGrid(seed, 25);
    runAndCheck(m, {randomValues(seed, m.x.size(), 0, 5), {}}, steps(0.25, 4.75, 0.5), "random values");
    runAndCheck(m, {m.sample(bumps(seed, 24)), {}}, steps(-9, 9, 1), "smooth bumps");
  }
}

// ---- Degenerate cases -------------------------------------------------------------------------

TEST(MeshContoursCpu, IntegerValuesWithLevelsOnTheValues)
{
  for (uint64_t seed : {10, 11, 12})
  {
    const TestMesh q = quadGrid(seed, 20);
    const TestMesh j = jitteredGrid(seed, 20);
    for (const TestMesh* m : {&q, &j})
    {
      const FieldData f{randomIntegers(seed, m->x.size(), 0, 4), {}};
      runAndCheck(*m, f, steps(0, 4, 1), "integers 0..4, levels 0..4 seed " + std::to_string(seed));
      runAndCheck(*m, f, {1, 2, 3}, "integers 0..4, levels 1..3 seed " + std::to_string(seed));
      runAndCheck(*m, f, {-1, 1, 2.5, 5}, "integers 0..4, levels -1, 1, 2.5, 5 seed " + std::to_string(seed));
      const FieldData few{randomIntegers(seed + 100, m->x.size(), 0, 1), {}};
      runAndCheck(*m, few, {0, 1}, "integers 0..1, levels 0, 1 seed " + std::to_string(seed));
      runAndCheck(*m, few, {0, 0.5, 1}, "integers 0..1, levels 0, 0.5, 1 seed " + std::to_string(seed));
    }
  }
}

TEST(MeshContoursCpu, PlateauExactlyAtALevel)
{
  GridOptions o;
  o.nx = o.ny = 13;
  o.x0 = o.y0 = -6;
  const TestMesh m = grid("plateau", 13, o);
  const FieldData f{m.sample([](double x, double y) { return std::min(25 - (x * x + y * y), 16.0); }), {}};
  const std::vector<double> levels = steps(-40, 20, 4);  // ..., 8, 12, 16, 20
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "plateau at 16");
  const size_t at16 = 14;
  ASSERT_EQ(levels[at16], 16);
  // The flat top belongs to the bands on both sides of 16: [16, 20] is the top alone, [12, 16] the
  // disk around it; [8, 12] is an annulus.
  ASSERT_EQ(polygonCount(c, at16), 1);
  EXPECT_EQ(ringCount(c, c.bands.bandPolygon[at16]), 1);
  ASSERT_EQ(polygonCount(c, at16 - 1), 1);
  EXPECT_EQ(ringCount(c, c.bands.bandPolygon[at16 - 1]), 1);
  ASSERT_EQ(polygonCount(c, at16 - 2), 1);
  EXPECT_EQ(ringCount(c, c.bands.bandPolygon[at16 - 2]), 2);
  EXPECT_GT(partCount(c, at16), 0);
  EXPECT_EQ(partCount(c, at16 + 1), 0);  // 20: above everything
  // Flat triangles at other levels too: a field that is a few terraces.
  const FieldData terraces{m.sample([](double x, double y) { return std::floor(std::hypot(x, y) / 2); }), {}};
  runAndCheck(m, terraces, {0, 1, 2, 3, 4}, "terraces");
  runAndCheck(m, terraces, {0.5, 1, 1.5, 2, 3}, "terraces, other levels");
}

TEST(MeshContoursCpu, SaddleVertexAtTheLevel)
{
  // f = x^2 - y^2 on integer points, the diagonals following the two zero lines: four lines leave
  // the saddle vertex (0, 0) along y = x and y = -x.
  GridOptions o;
  o.nx = o.ny = 11;
  o.x0 = o.y0 = -5;
  o.diagonal = [](int i, int j) {
    const int a = i - 5, b = j - 5;
    if (a == b)  // main diagonal on y = x
      return 1;
    if (a + 1 == -b)  // anti-diagonal (a + 1, b)-(a, b + 1) on y = -x
      return 0;
    return -1;
  };
  const TestMesh m = grid("saddle", 14, o);
  const FieldData f{m.sample([](double x, double y) { return x * x - y * y; }), {}};
  const std::vector<double> levels{-3, -1, 0, 1, 3};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "saddle");
  EXPECT_TRUE(nearRelative(reference::lineLengths(m.mesh(), f.field(), {0})[0], 4 * 5 * std::sqrt(2.0)));
  ASSERT_EQ(partCount(c, 2), 4);
  for (int64_t p = c.lines.levelPart[2]; p < c.lines.levelPart[3]; ++p)
  {
    const std::vector<Pt> part = linePart(c.lines, p);
    EXPECT_FALSE(closedPart(part));
    EXPECT_TRUE(part.front() == (Pt{0, 0}) || part.back() == (Pt{0, 0})) << "part " << p << " misses the saddle";
    EXPECT_EQ(part.size(), 6u);
  }
  // The saddle off the level: a level through a vertex of the fan around it.
  const FieldData shifted{m.sample([](double x, double y) { return x * x - y * y + 0.25; }), {}};
  runAndCheck(m, shifted, {-3, 0, 0.25, 1, 3}, "saddle shifted");
}

TEST(MeshContoursCpu, NoDataVerticesAreLeftOut)
{
  TestMesh m = jitteredGrid(15);
  std::vector<double> v = randomValues(15, m.x.size(), 0, 10);
  std::mt19937_64 rng(15);
  for (double& x : v)
    if (rng() % 20 == 0)
      x = kNaN;
  runAndCheck(m, {v, {}}, steps(0.5, 9.5, 1), "NaN values");
  std::vector<double> w = m.sample(bumps(15, 29));
  for (size_t i = 0; i < w.size(); i += 37)
    w[i] = kNaN;
  runAndCheck(m, {w, {}}, steps(-9, 9, 1.5), "smooth with NaN values");
  std::vector<double> ints = randomIntegers(16, m.x.size(), 0, 3);
  for (size_t i = 0; i < ints.size(); i += 23)
    ints[i] = kNaN;
  runAndCheck(m, {ints, {}}, steps(0, 3, 1), "integers with NaN values");
  // A vertex with no finite coordinates: its triangles are left out too.
  TestMesh bad = m;
  bad.x[100] = kNaN;
  bad.y[200] = std::numeric_limits<double>::infinity();
  const FieldData smooth{bad.sample(bumps(15, 29)), {}};
  const Contours c = contourCpu(bad, smooth, steps(-9, 9, 1.5));
  checkAll(bad, smooth, steps(-9, 9, 1.5), c, "non-finite coordinates");
  EXPECT_LT(c.trianglesUsed, bad.triangleCount());
}

TEST(MeshContoursCpu, InactiveTrianglesAreLeftOut)
{
  TestMesh m = jitteredGrid(17);
  std::mt19937_64 rng(17);
  std::vector<uint8_t> active(m.triangleCount());
  for (uint8_t& a : active)
    a = rng() % 7 == 0 ? 0 : static_cast<uint8_t>(1 + rng() % 200);
  runAndCheck(m, {randomValues(17, m.x.size(), 0, 10), active}, steps(0.5, 9.5, 1), "inactive, random values");
  runAndCheck(m, {m.sample(bumps(17, 29)), active}, steps(-9, 9, 1.5), "inactive, smooth");
  runAndCheck(m, {randomIntegers(17, m.x.size(), 0, 3), active}, steps(0, 3, 1), "inactive, integers");
  std::vector<uint8_t> none(m.triangleCount(), 0);
  const FieldData f{randomValues(17, m.x.size(), 0, 10), none};
  const Contours c = contourCpu(m, f, {1, 2, 3});
  checkAll(m, f, {1, 2, 3}, c, "all inactive");
  EXPECT_EQ(c.trianglesUsed, 0);
  EXPECT_TRUE(c.lines.x.empty());
  EXPECT_TRUE(c.bands.x.empty());
}

TEST(MeshContoursCpu, LevelsAboveEveryValueGiveEmptyOutputs)
{
  const TestMesh m = jitteredGrid(18, 10);
  const FieldData f{randomValues(18, m.x.size(), 0, 10), {}};
  const std::vector<double> levels{20, 30, 40};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "above");
  EXPECT_EQ(c.lines.levelPart, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(c.lines.partPoint, (std::vector<int64_t>{0}));
  EXPECT_TRUE(c.lines.x.empty());
  EXPECT_EQ(c.bands.bandPolygon, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(c.bands.polygonRing, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.bands.ringPoint, (std::vector<int64_t>{0}));
  EXPECT_TRUE(c.bands.x.empty());
  EXPECT_EQ(c.trianglesUsed, m.triangleCount());
  // Below every value, and one band around all of them (the whole mesh, no line).
  const Contours below = contourCpu(m, f, {-5, -4});
  checkAll(m, f, {-5, -4}, below, "below");
  EXPECT_EQ(below.bands.x.size(), 0u);
  const Contours around = contourCpu(m, f, {-1, 11});
  checkAll(m, f, {-1, 11}, around, "around");
  EXPECT_EQ(polygonCount(around, 0), 1);
  EXPECT_EQ(around.bands.polygonRing.size(), 2u);
  EXPECT_TRUE(around.lines.x.empty());
}

TEST(MeshContoursCpu, SingleLevelGivesLinesAndNoBand)
{
  const TestMesh m = jitteredGrid(19, 15);
  const FieldData f{m.sample(bumps(19, 14)), {}};
  const Contours c = contourCpu(m, f, {0.5});
  checkAll(m, f, {0.5}, c, "single level");
  EXPECT_EQ(c.lines.levelPart.size(), 2u);
  EXPECT_EQ(c.bands.bandPolygon, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.bands.polygonRing, (std::vector<int64_t>{0}));
  EXPECT_EQ(c.bands.ringPoint, (std::vector<int64_t>{0}));
}

// ---- Topology on smooth fields -----------------------------------------------------------------

TEST(MeshContoursCpu, CirclesOfABowlAreClosedAndClockwise)
{
  GridOptions o;
  o.nx = o.ny = 41;
  o.x0 = o.y0 = -10;
  o.h = 0.5;
  o.jitter = 0.2;
  const TestMesh m = grid("bowl", 20, o);
  const FieldData f{m.sample([](double x, double y) { return x * x + y * y; }), {}};
  const std::vector<double> levels{2.5, 10.5, 30.5, 60.5, 90.5};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "bowl");
  for (size_t k = 0; k < levels.size(); ++k)
  {
    ASSERT_EQ(partCount(c, k), 1) << "level " << levels[k];
    const std::vector<Pt> part = linePart(c.lines, c.lines.levelPart[k]);
    EXPECT_TRUE(closedPart(part)) << "level " << levels[k];
    EXPECT_TRUE(ringProblem(part).empty()) << "level " << levels[k] << ": " << ringProblem(part);
    // Higher values outside, on the left: clockwise.
    EXPECT_LT(signedArea(part), 0) << "level " << levels[k];
    EXPECT_NEAR(length(part), 2 * kPi * std::sqrt(levels[k]), 0.05 * 2 * kPi * std::sqrt(levels[k]));
  }
}

TEST(MeshContoursCpu, LinearFieldGivesOneOpenLinePerLevel)
{
  GridOptions o;
  o.nx = o.ny = 30;
  o.jitter = 0.2;  // below 0.25: no triangle folds over
  o.shuffleVertices = true;
  const TestMesh m = grid("linear", 21, o);
  const FieldData f{m.sample([](double x, double) { return x; }), {}};
  const std::vector<double> levels{2.5, 7.25, 14, 20.1, 26.9};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "f = x");
  for (size_t k = 0; k < levels.size(); ++k)
  {
    ASSERT_EQ(partCount(c, k), 1) << "level " << levels[k];
    const std::vector<Pt> part = linePart(c.lines, c.lines.levelPart[k]);
    EXPECT_FALSE(closedPart(part));
    // From the top of the mesh to its bottom: the higher values (east) on the left.
    EXPECT_EQ(part.front().y, 29) << "level " << levels[k];
    EXPECT_EQ(part.back().y, 0) << "level " << levels[k];
    for (size_t i = 0; i < part.size(); ++i)
    {
      EXPECT_NEAR(part[i].x, levels[k], 1e-12) << "level " << levels[k] << " point " << i;
      if (i > 0)
      {
        EXPECT_LT(part[i].y, part[i - 1].y) << "level " << levels[k] << " point " << i;
      }
    }
    EXPECT_NEAR(length(part), 29, 1e-9);
  }
  // The bands are strips: one rectangle each, the values of the band only.
  for (size_t k = 0; k + 1 < levels.size(); ++k)
  {
    ASSERT_EQ(polygonCount(c, k), 1);
    EXPECT_EQ(ringCount(c, c.bands.bandPolygon[k]), 1);
    for (int64_t i = c.bands.ringPoint[c.bands.polygonRing[c.bands.bandPolygon[k]]];
         i < c.bands.ringPoint[c.bands.polygonRing[c.bands.bandPolygon[k]] + 1]; ++i)
    {
      EXPECT_GE(c.bands.x[i], levels[k] - 1e-12);
      EXPECT_LE(c.bands.x[i], levels[k + 1] + 1e-12);
    }
  }
}

TEST(MeshContoursCpu, BandsOfABumpAreAnnuli)
{
  GridOptions o;
  o.nx = o.ny = 41;
  o.x0 = o.y0 = -10;
  o.h = 0.5;
  o.jitter = 0.2;
  const TestMesh m = grid("bump", 22, o);
  const FieldData f{m.sample([](double x, double y) { return 100 - (x * x + y * y); }), {}};
  const std::vector<double> levels{-50, 5, 25, 45, 65, 85, 101};
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "bump");
  for (size_t k = 0; k + 1 < levels.size(); ++k)
  {
    ASSERT_EQ(polygonCount(c, k), 1) << "band " << k;
    EXPECT_EQ(ringCount(c, c.bands.bandPolygon[k]), k + 2 < levels.size() ? 2 : 1) << "band " << k;
  }
  EXPECT_EQ(partCount(c, 0), 4);  // -50: the corners
  for (size_t k = 1; k + 1 < levels.size(); ++k)
  {
    ASSERT_EQ(partCount(c, k), 1);
    const std::vector<Pt> part = linePart(c.lines, c.lines.levelPart[k]);
    EXPECT_TRUE(closedPart(part));
    EXPECT_GT(signedArea(part), 0);  // higher values inside, on the left: counter-clockwise
  }
  EXPECT_EQ(partCount(c, levels.size() - 1), 0);
}

// ---- The checks themselves ----------------------------------------------------------------------

// The messages of the failures `f` reports (kept from the test's own record).
std::vector<std::string> failuresOf(const std::function<void()>& f)
{
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::vector<std::string> out;
  for (int i = 0; i < results.size(); ++i)
    out.push_back(results.GetTestPartResult(i).message());
  return out;
}

::testing::AssertionResult reports(const std::vector<std::string>& failures, const std::string& words)
{
  for (const std::string& f : failures)
    if (f.find(words) != std::string::npos)
      return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure() << "no failure says \"" << words << "\"; " << failures.size() << " failures";
  if (!failures.empty())
    r << ", the first: " << failures.front();
  return r;
}

template <typename T>
void reverseRange(std::vector<T>& v, int64_t from, int64_t to)
{
  std::reverse(v.begin() + from, v.begin() + to);
}

TEST(MeshContoursCpu, TheChecksCatchBrokenOutput)
{
  GridOptions o;
  o.nx = o.ny = 41;
  o.x0 = o.y0 = -10;
  o.h = 0.5;
  o.jitter = 0.2;
  const TestMesh m = grid("bump", 22, o);
  const FieldData f{m.sample([](double x, double y) { return 100 - (x * x + y * y); }), {}};
  const std::vector<double> levels{-50, 5, 25, 45, 65, 85, 101};
  const Contours good = contourCpu(m, f, levels);
  EXPECT_TRUE(failuresOf([&] { checkAll(m, f, levels, good, "good"); }).empty());
  ASSERT_EQ(polygonCount(good, 1), 1);
  ASSERT_EQ(ringCount(good, good.bands.bandPolygon[1]), 2);
  const int64_t shell = good.bands.polygonRing[good.bands.bandPolygon[1]], hole = shell + 1;
  const int64_t s0 = good.bands.ringPoint[shell], s1 = good.bands.ringPoint[shell + 1];
  const int64_t h0 = good.bands.ringPoint[hole], h1 = good.bands.ringPoint[hole + 1];
  auto check = [&](const Contours& c) { return failuresOf([&] { checkAll(m, f, levels, c, "broken"); }); };
  {
    Contours c = good;  // the shell clockwise
    reverseRange(c.bands.x, s0, s1);
    reverseRange(c.bands.y, s0, s1);
    const auto failures = check(c);
    EXPECT_TRUE(reports(failures, "shell not counter-clockwise"));
    EXPECT_TRUE(reports(failures, "on its left"));
  }
  {
    Contours c = good;  // the hole counter-clockwise
    reverseRange(c.bands.x, h0, h1);
    reverseRange(c.bands.y, h0, h1);
    EXPECT_TRUE(reports(check(c), "hole not clockwise"));
  }
  {
    Contours c = good;  // a point of the circle moved just outside its far side: the ring crosses itself
    c.bands.x[s0 + 3] *= -1.05;
    c.bands.y[s0 + 3] *= -1.05;
    EXPECT_TRUE(reports(check(c), "meet"));
  }
  {
    Contours c = good;  // a point repeated
    c.bands.x[s0 + 3] = c.bands.x[s0 + 5];
    c.bands.y[s0 + 3] = c.bands.y[s0 + 5];
    EXPECT_TRUE(reports(check(c), "repeated point"));
  }
  {
    Contours c = good;  // the hole moved out of its shell
    for (int64_t i = h0; i < h1; ++i)
      c.bands.x[i] += 100;
    EXPECT_TRUE(reports(check(c), "outside the shell"));
  }
  {
    Contours c = good;  // a little more area
    for (double& x : c.bands.x)
      x *= 1 + 1e-7;
    EXPECT_TRUE(reports(check(c), "total area"));
  }
  {
    Contours c = good;  // a circle run the wrong way
    const int64_t p0 = good.lines.partPoint[good.lines.levelPart[2]], p1 = good.lines.partPoint[good.lines.levelPart[2] + 1];
    reverseRange(c.lines.x, p0, p1);
    reverseRange(c.lines.y, p0, p1);
    EXPECT_TRUE(reports(check(c), "higher values on its right"));
  }
  {
    Contours c = good;  // a circle cut in two at a point where only two segments meet
    const int64_t part = good.lines.levelPart[2];
    const int64_t cut = (good.lines.partPoint[part] + good.lines.partPoint[part + 1]) / 2;
    for (std::vector<double>* v : {&c.lines.x, &c.lines.y, &c.lines.z})
      v->insert(v->begin() + cut, (*v)[cut]);
    c.lines.partPoint.insert(c.lines.partPoint.begin() + part + 1, cut + 1);
    for (size_t p = part + 2; p < c.lines.partPoint.size(); ++p)
      ++c.lines.partPoint[p];
    for (size_t k = 3; k < c.lines.levelPart.size(); ++k)
      ++c.lines.levelPart[k];
    EXPECT_TRUE(reports(check(c), "not joined"));
  }
  {
    Contours c = good;  // a little more length
    for (double& y : c.lines.y)
      y *= 1 + 1e-7;
    EXPECT_TRUE(reports(check(c), "total length"));
  }
}

// ---- Options, reuse, threads --------------------------------------------------------------------

TEST(MeshContoursCpu, LinesOrBandsAlone)
{
  const TestMesh m = jitteredGrid(23, 20);
  const FieldData f{randomIntegers(23, m.x.size(), 0, 4), {}};
  const std::vector<double> levels = steps(0, 4, 1);
  const Contours both = contourCpu(m, f, levels);
  ContourOptions linesOnly;
  linesOnly.bands = false;
  ContourOptions bandsOnly;
  bandsOnly.lines = false;
  const Contours l = contourCpu(m, f, levels, kThreads, linesOnly);
  const Contours b = contourCpu(m, f, levels, kThreads, bandsOnly);
  expectLayout(l, levels.size(), linesOnly, "lines only");
  expectLayout(b, levels.size(), bandsOnly, "bands only");
  EXPECT_TRUE(bitwiseEqual(l.lines.levelPart, both.lines.levelPart));
  EXPECT_TRUE(bitwiseEqual(l.lines.partPoint, both.lines.partPoint));
  EXPECT_TRUE(bitwiseEqual(l.lines.x, both.lines.x));
  EXPECT_TRUE(bitwiseEqual(l.lines.y, both.lines.y));
  EXPECT_TRUE(bitwiseEqual(b.bands.bandPolygon, both.bands.bandPolygon));
  EXPECT_TRUE(bitwiseEqual(b.bands.polygonRing, both.bands.polygonRing));
  EXPECT_TRUE(bitwiseEqual(b.bands.ringPoint, both.bands.ringPoint));
  EXPECT_TRUE(bitwiseEqual(b.bands.x, both.bands.x));
  EXPECT_TRUE(bitwiseEqual(b.bands.y, both.bands.y));
}

TEST(MeshContoursCpu, OneContourerManyFields)
{
  const TestMesh m = jitteredGrid(24, 20);
  auto contourer = makeMeshContourer(Backend::Cpu, m.mesh(), kThreads, RunControl{});
  const FieldData a{randomValues(24, m.x.size(), 0, 10), {}};
  const FieldData b{randomIntegers(25, m.x.size(), 0, 4), {}};
  const std::vector<double> la = steps(0.5, 9.5, 1), lb = steps(0, 4, 1);
  const Contours a1 = contourer->contour(a.field(), la, {}, RunControl{});
  const Contours b1 = contourer->contour(b.field(), lb, {}, RunControl{});
  const Contours a2 = contourer->contour(a.field(), la, {}, RunControl{});
  expectBitwiseEqual(a1, contourCpu(m, a, la), "a, first call");
  expectBitwiseEqual(b1, contourCpu(m, b, lb), "b after a");
  expectBitwiseEqual(a2, a1, "a again");
}

TEST(MeshContoursCpu, ThreadCountsDoNotChangeTheResult)
{
  GridOptions o;
  o.nx = o.ny = 200;
  o.jitter = 0.2;  // below 0.25: no triangle folds over
  o.shuffleVertices = true;
  const TestMesh m = grid("200x200", 26, o);
  const std::vector<FieldData> fields{{m.sample(bumps(26, 199)), {}},
                                      {randomIntegers(27, m.x.size(), 0, 4), {}},
                                      {randomValues(28, m.x.size(), 0, 10), {}}};
  const std::vector<std::vector<double>> levels{steps(-9, 9, 0.5), steps(0, 4, 1), steps(0.5, 9.5, 1)};
  for (size_t i = 0; i < fields.size(); ++i)
  {
    const Contours one = contourCpu(m, fields[i], levels[i], 1);
    const Contours four = contourCpu(m, fields[i], levels[i], 4);
    expectBitwiseEqual(one, four, "field " + std::to_string(i) + ", 1 and 4 threads");
    if (i == 0)
      checkAll(m, fields[i], levels[i], four, "200x200 smooth");
  }
}

TEST(MeshContoursCpu, MostLevelsAllowed)
{
  const TestMesh m = singleTriangle();
  const FieldData f{{0, 1, 2}, {}};
  std::vector<double> levels;
  for (int i = 0; i < kMaxLevels; ++i)
    levels.push_back(-0.5 + 3.0 * i / kMaxLevels);
  const Contours c = contourCpu(m, f, levels);
  checkAll(m, f, levels, c, "kMaxLevels levels", false);
}

// ---- Bad input and cancel -------------------------------------------------------------------

TEST(MeshContoursCpu, BadMeshesAreInvalidInput)
{
  const TestMesh good = singleTriangle();
  auto make = [](const Mesh& mesh) { return makeMeshContourer(Backend::Cpu, mesh, kThreads, RunControl{}); };
  Mesh none = good.mesh();
  none.triangleCount = 0;
  EXPECT_THROW(make(none), InvalidInput);
  TestMesh out = good;
  out.triangles = {0, 1, 3};
  EXPECT_THROW(make(out.mesh()), InvalidInput);
  out.triangles = {0, -1, 2};
  EXPECT_THROW(make(out.mesh()), InvalidInput);
  Mesh nullX = good.mesh();
  nullX.x = nullptr;
  EXPECT_THROW(make(nullX), InvalidInput);
  Mesh nullY = good.mesh();
  nullY.y = nullptr;
  EXPECT_THROW(make(nullY), InvalidInput);
  Mesh nullTriangles = good.mesh();
  nullTriangles.triangles = nullptr;
  EXPECT_THROW(make(nullTriangles), InvalidInput);
  EXPECT_NO_THROW(make(good.mesh()));
}

TEST(MeshContoursCpu, BadLevelsAreInvalidInput)
{
  const TestMesh m = singleTriangle();
  const FieldData f{{0, 1, 2}, {}};
  auto contourer = makeMeshContourer(Backend::Cpu, m.mesh(), kThreads, RunControl{});
  auto run = [&](const std::vector<double>& levels) { return contourer->contour(f.field(), levels, {}, RunControl{}); };
  EXPECT_THROW(run({1, 1}), InvalidInput);
  EXPECT_THROW(run({2, 1}), InvalidInput);
  EXPECT_THROW(run({0, 1, 0.5}), InvalidInput);
  EXPECT_THROW(run({0, kNaN}), InvalidInput);
  EXPECT_THROW(run({kNaN}), InvalidInput);
  EXPECT_THROW(run({0, std::numeric_limits<double>::infinity()}), InvalidInput);
  EXPECT_THROW(run({-std::numeric_limits<double>::infinity(), 0}), InvalidInput);
  std::vector<double> tooMany;
  for (int i = 0; i <= kMaxLevels; ++i)
    tooMany.push_back(i);
  EXPECT_THROW(run(tooMany), InvalidInput);
  EXPECT_THROW(contourer->contour(Field{nullptr, nullptr}, {1}, {}, RunControl{}), InvalidInput);
  EXPECT_NO_THROW(run({0.5, 1.5}));
}

TEST(MeshContoursCpu, LevelsFromRange)
{
  EXPECT_EQ(levelsFromRange(0, 4, 1), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(levelsFromRange(0, 4.5, 1), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(levelsFromRange(-1, 1, 0.5), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(levelsFromRange(0, 1, 1), (std::vector<double>{0, 1}));
  const std::vector<double> tenths = levelsFromRange(0, 0.3, 0.1);
  ASSERT_EQ(tenths.size(), 4u);
  for (size_t i = 0; i < tenths.size(); ++i)
    EXPECT_NEAR(tenths[i], 0.1 * i, 1e-15) << i;
  const std::vector<double> fine = levelsFromRange(10, 11, 0.01);
  ASSERT_EQ(fine.size(), 101u);
  for (size_t i = 0; i < fine.size(); ++i)
    EXPECT_NEAR(fine[i], 10 + 0.01 * i, 1e-12) << i;
  EXPECT_THROW(levelsFromRange(0, 4, 0), InvalidInput);
  EXPECT_THROW(levelsFromRange(0, 4, -1), InvalidInput);
  EXPECT_THROW(levelsFromRange(4, 4, 1), InvalidInput);
  EXPECT_THROW(levelsFromRange(5, 4, 1), InvalidInput);
  EXPECT_THROW(levelsFromRange(0, 1, 2), InvalidInput);
  EXPECT_THROW(levelsFromRange(kNaN, 1, 0.1), InvalidInput);
  EXPECT_THROW(levelsFromRange(0, std::numeric_limits<double>::infinity(), 1), InvalidInput);
  EXPECT_THROW(levelsFromRange(0, 1, kNaN), InvalidInput);
  EXPECT_THROW(levelsFromRange(0, 1e9, 1), InvalidInput);  // more than kMaxLevels
  EXPECT_NO_THROW(levelsFromRange(0, kMaxLevels - 1, 1));
  EXPECT_EQ(levelsFromRange(0, kMaxLevels - 1, 1).size(), static_cast<size_t>(kMaxLevels));
}

TEST(MeshContoursCpu, CancelStopsContour)
{
  const TestMesh m = jitteredGrid(29, 50);
  const FieldData f{m.sample(bumps(29, 49)), {}};
  auto contourer = makeMeshContourer(Backend::Cpu, m.mesh(), kThreads, RunControl{});
  RunControl cancel;
  cancel.canceled = [] { return true; };
  EXPECT_THROW(contourer->contour(f.field(), steps(-9, 9, 1), {}, cancel), Canceled);
  ContourOptions linesOnly;
  linesOnly.bands = false;
  EXPECT_THROW(contourer->contour(f.field(), steps(-9, 9, 1), linesOnly, cancel), Canceled);
  // Still usable afterwards.
  const Contours c = contourer->contour(f.field(), steps(-9, 9, 1), {}, RunControl{});
  expectBitwiseEqual(c, contourCpu(m, f, steps(-9, 9, 1)), "after a canceled call");
}

}  // namespace

// bandPieces(): each participating triangle's piece of a band, one counter-clockwise ring each,
// closed; their areas add up to the band's area of the brute-force reference; inactive triangles
// and those without values give none; a band outside the levels is refused.
TEST(MeshContoursCpu, BandPiecesCoverTheBandTriangleByTriangle)
{
  const TestMesh m = jitteredGrid(5, 20);
  FieldData f{randomValues(55, m.x.size(), 0, 10), std::vector<uint8_t>(m.triangles.size() / 3, 1)};
  f.active[3] = 0;
  f.values[7] = std::nan("");
  const std::vector<double> levels{1.0, 2.5, 4.0, 7.5, 9.0};
  const std::vector<double> want = reference::bandAreas(m.mesh(), f.field(), levels);
  for (int32_t band = 0; band + 1 < int32_t(levels.size()); ++band)
  {
    const ContourBands pieces = bandPieces(m.mesh(), f.field(), levels, band, RunControl{});
    ASSERT_EQ(pieces.bandPolygon.size(), 2u);
    double area = 0;
    for (int64_t q = 0; q < pieces.bandPolygon[1]; ++q)
    {
      ASSERT_EQ(pieces.polygonRing[std::size_t(q) + 1] - pieces.polygonRing[std::size_t(q)], 1);
      const int64_t first = pieces.ringPoint[std::size_t(pieces.polygonRing[std::size_t(q)])];
      const int64_t last = pieces.ringPoint[std::size_t(pieces.polygonRing[std::size_t(q)]) + 1];
      ASSERT_GE(last - first, 4);  // three corners at least, the first repeated
      EXPECT_EQ(pieces.x[std::size_t(first)], pieces.x[std::size_t(last - 1)]);
      EXPECT_EQ(pieces.y[std::size_t(first)], pieces.y[std::size_t(last - 1)]);
      double ring = 0;
      for (int64_t i = first; i + 1 < last; ++i)
        ring += pieces.x[std::size_t(i)] * pieces.y[std::size_t(i + 1)] - pieces.x[std::size_t(i + 1)] * pieces.y[std::size_t(i)];
      EXPECT_GE(ring, 0.0) << "band " << band << " piece " << q << " is clockwise";
      area += ring / 2;
    }
    EXPECT_NEAR(area, want[std::size_t(band)], 1e-9 * std::max(1.0, want[std::size_t(band)])) << "band " << band;
  }
  EXPECT_THROW(bandPieces(m.mesh(), f.field(), levels, 4, RunControl{}), InvalidInput);
  EXPECT_THROW(bandPieces(m.mesh(), f.field(), levels, -1, RunControl{}), InvalidInput);
}
