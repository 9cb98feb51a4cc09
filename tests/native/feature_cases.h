// Inputs and the brute-force reference of the allocation to lines and polygons
// (voronoi/feature_allocation.h), shared by the CPU and GPU tests.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "voronoi/detail/segment_grid.h"
#include "voronoi/feature_allocation.h"

namespace gpugeo::testing {

// Features as plain arrays, built path by path.
struct FeatureCase
{
  std::string name;
  voronoi::Grid grid;
  bool polygons = false;
  std::vector<double> x, y;
  std::vector<int64_t> pathStart{0};
  std::vector<int32_t> pathFeature, pathPart;
  int64_t featureCount = 0;

  // A path of `feature` (a ring of polygon part `part` when polygons), in CRS units.
  void addPath(int32_t feature, const std::vector<std::pair<double, double>>& points, int32_t part = 0)
  {
    for (const auto& p : points)
    {
      x.push_back(p.first);
      y.push_back(p.second);
    }
    pathStart.push_back(static_cast<int64_t>(x.size()));
    pathFeature.push_back(feature);
    pathPart.push_back(part);
    featureCount = std::max<int64_t>(featureCount, feature + 1);
  }

  voronoi::FeatureSites sites() const
  {
    voronoi::FeatureSites s;
    s.x = x.data();
    s.y = y.data();
    s.pathStart = pathStart.data();
    s.pathFeature = pathFeature.data();
    s.pathCount = static_cast<int64_t>(pathFeature.size());
    s.featureCount = featureCount;
    s.pathPart = polygons ? pathPart.data() : nullptr;
    return s;
  }

  // Path p's vertices in the pixel frame (the contract's conversion).
  std::vector<std::pair<double, double>> pixelPath(int64_t p) const
  {
    std::vector<std::pair<double, double>> out;
    for (int64_t i = pathStart[p]; i < pathStart[p + 1]; ++i)
      out.emplace_back((x[i] - grid.originX) / grid.pixelSize, (grid.originY - y[i]) / grid.pixelSize);
    return out;
  }
};

struct Reference
{
  std::vector<int32_t> site;
  std::vector<float> distance;
  std::vector<double> squared;
};

// Every pixel against every segment by the contract's formula, and the polygon interiors by an
// even-odd count of the row's crossings left of each centre (per part; inside any part).
inline Reference bruteForce(const FeatureCase& c, voronoi::PolygonInterior interior)
{
  namespace sg = voronoi::detail::segments;
  const int64_t w = c.grid.width, h = c.grid.height;
  std::vector<sg::Segment> segs;
  std::vector<std::vector<std::pair<double, double>>> rings;
  std::vector<int32_t> ringPart, ringFeature;
  for (size_t p = 0; p < c.pathFeature.size(); ++p)
  {
    auto v = c.pixelPath(static_cast<int64_t>(p));
    if (v.empty())
      continue;
    if (v.size() == 1)
      v.push_back(v[0]);
    else if (c.polygons && v.front() != v.back())
      v.push_back(v.front());
    for (size_t i = 0; i + 1 < v.size(); ++i)
      segs.push_back(sg::makeSegment(v[i].first, v[i].second, v[i + 1].first, v[i + 1].second, c.pathFeature[p]));
    rings.push_back(v);
    ringPart.push_back(c.pathPart[p]);
    ringFeature.push_back(c.pathFeature[p]);
  }
  Reference ref;
  ref.site.assign(static_cast<size_t>(w * h), INT32_MAX);
  ref.squared.assign(ref.site.size(), HUGE_VAL);
  ref.distance.resize(ref.site.size());
  for (int64_t r = 0; r < h; ++r)
    for (int64_t col = 0; col < w; ++col)
    {
      const double px = double(col) + 0.5, py = double(r) + 0.5;
      double best = HUGE_VAL;
      int32_t label = INT32_MAX;
      if (c.polygons && interior == voronoi::PolygonInterior::Zero)
      {
        // Rings of one part are consecutive paths with the same part number.
        size_t k = 0;
        while (k < rings.size())
        {
          size_t end = k + 1;
          while (end < rings.size() && ringPart[end] == ringPart[k])
            ++end;
          int crossings = 0;
          for (size_t q = k; q < end; ++q)
            for (size_t i = 0; i + 1 < rings[q].size(); ++i)
            {
              const auto a = rings[q][i], b = rings[q][i + 1];
              if (a.second == b.second || !(std::min(a.second, b.second) <= py && py < std::max(a.second, b.second)))
                continue;
              const double xc = a.first + (py - a.second) * (b.first - a.first) / (b.second - a.second);
              crossings += xc < px;
            }
          if (crossings % 2 == 1)
          {
            best = 0.0;
            label = std::min(label, ringFeature[k]);
          }
          k = end;
        }
      }
      for (const sg::Segment& s : segs)
      {
        const double e = sg::segmentSquared(px, py, s);
        if (sg::better(e, s.feature, best, label))
        {
          best = e;
          label = s.feature;
        }
      }
      const size_t at = static_cast<size_t>(r * w + col);
      ref.site[at] = label;
      ref.squared[at] = best;
      ref.distance[at] = static_cast<float>(std::sqrt(best) * c.grid.pixelSize);
    }
  return ref;
}

// Random polylines: `count` features of 1 to maxVertices vertices (some outside the grid, some
// repeated: zero-length segments), within the grid's extent widened by a tenth.
inline FeatureCase randomLines(const std::string& name, int64_t width, int64_t height, int count, int maxVertices,
                               unsigned seed, double originX = 500000.0, double originY = 4200000.0,
                               double pixelSize = 2.5)
{
  FeatureCase c;
  c.name = name;
  c.grid = voronoi::Grid{originX, originY, pixelSize, width, height};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.1, 1.1), step(-12.0, 12.0), unit(0.0, 1.0);
  std::uniform_int_distribution<int> vertices(1, maxVertices);
  for (int f = 0; f < count; ++f)
  {
    std::vector<std::pair<double, double>> path;
    double px = u(rng) * double(width), py = u(rng) * double(height);
    const int n = vertices(rng);
    for (int i = 0; i < n; ++i)
    {
      path.emplace_back(originX + px * pixelSize, originY - py * pixelSize);
      if (unit(rng) < 0.9)
      {
        px += step(rng);
        py += step(rng);
      }
    }
    c.addPath(f, path);
  }
  return c;
}

}  // namespace gpugeo::testing
