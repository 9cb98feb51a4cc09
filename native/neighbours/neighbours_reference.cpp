#include "neighbours_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/errors.h"

namespace gpugeo::neighbours::reference {

namespace {

// The coordinates relative to the centre of their bounding box.
struct Shifted
{
  std::vector<double> x, y, z;
  bool threeD = false;
  int64_t n = 0;
};

double shiftAxis(const double* in, int64_t n, std::vector<double>& out)
{
  double lo = in[0], hi = in[0];
  for (int64_t i = 1; i < n; ++i)
  {
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const double origin = 0.5 * (lo + hi);
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = in[i] - origin;
  return origin;
}

Shifted shift(const Points& points)
{
  if (points.count < 1 || !points.x || !points.y)
    throw InvalidInput("neighbours reference: no points");
  for (int64_t i = 0; i < points.count; ++i)
    if (!std::isfinite(points.x[i]) || !std::isfinite(points.y[i]) || (points.z && !std::isfinite(points.z[i])))
      throw InvalidInput("neighbours reference: point " + std::to_string(i) + " has a coordinate that is not finite");
  Shifted s;
  s.n = points.count;
  s.threeD = points.z != nullptr;
  shiftAxis(points.x, s.n, s.x);
  shiftAxis(points.y, s.n, s.y);
  if (s.threeD)
    shiftAxis(points.z, s.n, s.z);
  return s;
}

// Symmetric: s.x[i] - s.x[j] and s.x[j] - s.x[i] differ only in sign.
inline double squaredDistance(const Shifted& s, int64_t i, int64_t j)
{
  const double dx = s.x[static_cast<size_t>(i)] - s.x[static_cast<size_t>(j)];
  const double dy = s.y[static_cast<size_t>(i)] - s.y[static_cast<size_t>(j)];
  double d2 = dx * dx;
  d2 = d2 + dy * dy;
  if (s.threeD)
  {
    const double dz = s.z[static_cast<size_t>(i)] - s.z[static_cast<size_t>(j)];
    d2 = d2 + dz * dz;
  }
  return d2;
}

void checkQuery(const Query& query)
{
  if (!std::isfinite(query.radius) || query.radius < 0)
    throw InvalidInput("neighbours reference: the radius must be finite and >= 0");
  if (query.k < 0 || query.k > kMaxK)
    throw InvalidInput("neighbours reference: k must be in 0.." + std::to_string(kMaxK));
}

using Candidate = std::pair<double, int64_t>;  // (d2, index): the pair's ordering is the tie rule

// The neighbours of point i in increasing (d2, index) order; also the nearest other point at any
// distance (-1 when none) and its d2.
void neighboursOf(const Shifted& s, int64_t i, const Query& query, std::vector<Candidate>& out, int64_t& nearest,
                  double& nearestD2)
{
  const double r2 = query.radius * query.radius;
  const bool bounded = query.k == 0 || query.radius > 0;
  out.clear();
  nearest = -1;
  nearestD2 = 0;
  for (int64_t j = 0; j < s.n; ++j)
  {
    if (j == i)
      continue;
    const double d2 = squaredDistance(s, i, j);
    if (nearest < 0 || d2 < nearestD2)  // j increases: an equal d2 keeps the lower index
    {
      nearest = j;
      nearestD2 = d2;
    }
    if (!bounded || d2 <= r2)
      out.emplace_back(d2, j);
  }
  if (query.k > 0 && out.size() > static_cast<size_t>(query.k))
  {
    std::nth_element(out.begin(), out.begin() + query.k, out.end());
    out.resize(static_cast<size_t>(query.k));
  }
  std::sort(out.begin(), out.end());
}

struct UnionFind
{
  std::vector<int64_t> parent;
  explicit UnionFind(int64_t n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int64_t find(int64_t a)
  {
    while (parent[static_cast<size_t>(a)] != a)
    {
      parent[static_cast<size_t>(a)] = parent[static_cast<size_t>(parent[static_cast<size_t>(a)])];
      a = parent[static_cast<size_t>(a)];
    }
    return a;
  }
  void unite(int64_t a, int64_t b)
  {
    a = find(a);
    b = find(b);
    if (a != b)
      parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

}  // namespace

Summary summarize(const Points& points, const Query& query)
{
  checkQuery(query);
  const Shifted s = shift(points);
  const size_t n = static_cast<size_t>(s.n);
  Summary out;
  out.count.resize(n);
  out.nearest.resize(n);
  out.nearestDistance.resize(n);
  out.meanDistance.resize(n);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Candidate> found;
  found.reserve(n);
  for (int64_t i = 0; i < s.n; ++i)
  {
    int64_t nearest;
    double nearestD2;
    neighboursOf(s, i, query, found, nearest, nearestD2);
    double sum = 0;
    for (const Candidate& c : found)
      sum += std::sqrt(c.first);
    const size_t at = static_cast<size_t>(i);
    out.count[at] = static_cast<int32_t>(found.size());
    out.meanDistance[at] = found.empty() ? nan : sum / static_cast<double>(found.size());
    out.nearest[at] = nearest;
    out.nearestDistance[at] = nearest < 0 ? nan : std::sqrt(nearestD2);
  }
  return out;
}

Pairs pairs(const Points& points, const Query& query)
{
  checkQuery(query);
  const Shifted s = shift(points);
  std::vector<std::pair<int64_t, int64_t>> found;
  if (query.k == 0)
  {
    const double r2 = query.radius * query.radius;
    for (int64_t a = 0; a < s.n; ++a)
      for (int64_t b = a + 1; b < s.n; ++b)
        if (squaredDistance(s, a, b) <= r2)
          found.emplace_back(a, b);
  }
  else
  {
    std::vector<Candidate> nearestOnes;
    for (int64_t a = 0; a < s.n; ++a)
    {
      int64_t nearest;
      double nearestD2;
      neighboursOf(s, a, query, nearestOnes, nearest, nearestD2);
      for (const Candidate& c : nearestOnes)
        found.emplace_back(std::min(a, c.second), std::max(a, c.second));
    }
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
  }
  Pairs out;
  out.a.reserve(found.size());
  out.b.reserve(found.size());
  out.distance.reserve(found.size());
  for (const auto& [a, b] : found)
  {
    out.a.push_back(int32_t(a));
    out.b.push_back(int32_t(b));
    out.distance.push_back(std::sqrt(squaredDistance(s, a, b)));
  }
  return out;
}

Clusters dbscan(const Points& points, const DbscanOptions& options)
{
  if (!std::isfinite(options.eps) || options.eps < 0)
    throw InvalidInput("neighbours reference: eps must be finite and >= 0");
  if (options.minPoints < 1)
    throw InvalidInput("neighbours reference: minPoints must be >= 1");
  const Shifted s = shift(points);
  const int64_t n = s.n;
  const double eps2 = options.eps * options.eps;

  // The eps-neighbourhood sizes, the point itself included.
  std::vector<int64_t> within(static_cast<size_t>(n), 1);
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b)
      if (squaredDistance(s, a, b) <= eps2)
      {
        ++within[static_cast<size_t>(a)];
        ++within[static_cast<size_t>(b)];
      }
  Clusters out;
  out.core.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out.core[static_cast<size_t>(i)] = within[static_cast<size_t>(i)] >= options.minPoints ? 1 : 0;

  UnionFind sets(n);
  for (int64_t a = 0; a < n; ++a)
    if (out.core[static_cast<size_t>(a)])
      for (int64_t b = a + 1; b < n; ++b)
        if (out.core[static_cast<size_t>(b)] && squaredDistance(s, a, b) <= eps2)
          sets.unite(a, b);

  // The set each point belongs to (a core point's own; a border point's lowest-index core neighbour's),
  // -1 for noise.
  std::vector<int64_t> root(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i)
  {
    if (out.core[static_cast<size_t>(i)])
    {
      root[static_cast<size_t>(i)] = sets.find(i);
      continue;
    }
    if (options.borderPointsAreNoise)
      continue;
    for (int64_t j = 0; j < n; ++j)
      if (j != i && out.core[static_cast<size_t>(j)] && squaredDistance(s, i, j) <= eps2)
      {
        root[static_cast<size_t>(i)] = sets.find(j);
        break;
      }
  }

  // Ids in order of each set's first core point in input order (as QGIS numbers its clusters).
  std::vector<int64_t> id(static_cast<size_t>(n), 0);  // per set root
  for (int64_t i = 0; i < n; ++i)
  {
    if (!out.core[static_cast<size_t>(i)])
      continue;
    int64_t& c = id[static_cast<size_t>(root[static_cast<size_t>(i)])];
    if (c == 0)
    {
      out.size.push_back(0);
      c = static_cast<int64_t>(out.size.size());
    }
  }
  out.cluster.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i)
  {
    const int64_t r = root[static_cast<size_t>(i)];
    if (r < 0)
      continue;
    const int64_t c = id[static_cast<size_t>(r)];
    out.cluster[static_cast<size_t>(i)] = c;
    ++out.size[static_cast<size_t>(c - 1)];
  }
  return out;
}

}  // namespace gpugeo::neighbours::reference
