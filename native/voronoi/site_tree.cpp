#include "site_tree.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"

namespace gpugeo::voronoi {

using detail::Box;
using detail::Point;

namespace {

std::string siteText(int64_t index, double x, double y)
{
  return "site " + std::to_string(index + 1) + " (" + std::to_string(x) + ", " + std::to_string(y) + ")";
}

}  // namespace

void validate(const Grid& grid, const Sites& sites)
{
  if (!(grid.pixelSize > 0.0) || !std::isfinite(grid.pixelSize))
    throw InvalidInput("The pixel size must be a positive number (got " + std::to_string(grid.pixelSize) + ").");
  if (!std::isfinite(grid.originX) || !std::isfinite(grid.originY))
    throw InvalidInput("The grid origin is not a finite coordinate.");
  if (grid.width <= 0 || grid.height <= 0)
    throw InvalidInput("The grid is empty (" + std::to_string(grid.width) + " x " + std::to_string(grid.height) +
                       " pixels): the extent has no area at this pixel size.");
  if (grid.width > kMaxSide || grid.height > kMaxSide || grid.width * grid.height > kMaxPixels)
    throw InvalidInput("The grid would have " + std::to_string(grid.width) + " x " + std::to_string(grid.height) +
                       " pixels, more than the limits of 2^31 pixels and 2^24 pixels a side; use a larger pixel "
                       "size or a smaller extent.");
  if (sites.count <= 0)
    throw InvalidInput("There are no sites.");
  if (sites.count > kMaxSites)
    throw InvalidInput("There are " + std::to_string(sites.count) + " sites, more than the limit of " +
                       std::to_string(kMaxSites) + ".");
  for (int64_t i = 0; i < sites.count; ++i)
  {
    const double x = sites.x[i];
    const double y = sites.y[i];
    if (!std::isfinite(x) || !std::isfinite(y))
      throw InvalidInput(siteText(i, x, y) + " has a coordinate that is not a finite number.");
    const double u = (x - grid.originX) / grid.pixelSize;
    const double v = (grid.originY - y) / grid.pixelSize;
    if (!(std::fabs(u) <= kMaxSiteOffsetPixels) || !(std::fabs(v) <= kMaxSiteOffsetPixels))
      throw InvalidInput(siteText(i, x, y) + " lies more than 1e15 pixels from the grid; check the layer's CRS "
                                             "and the pixel size.");
  }
}

void toPixelFrame(const Grid& grid, const Sites& sites, Point* out, int threads)
{
  parallelFor(sites.count, 1 << 16, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      out[i] = Point{(sites.x[i] - grid.originX) / grid.pixelSize, (grid.originY - sites.y[i]) / grid.pixelSize};
  });
}

std::vector<Point> toPixelFrame(const Grid& grid, const Sites& sites)
{
  std::vector<Point> points(static_cast<size_t>(sites.count));
  toPixelFrame(grid, sites, points.data(), 1);
  return points;
}

Box boundsOf(const std::vector<Point>& points)
{
  return detail::boxOfPoints(points.data(), 0, static_cast<int32_t>(points.size()));
}

detail::TreeView HostTree::view() const
{
  detail::TreeView view;
  view.points = points.data();
  view.siteIndex = siteIndex.data();
  view.boxes = boxes.data();
  view.pointCount = static_cast<int32_t>(points.size());
  view.levelCount = levelCount;
  std::copy(levelStart, levelStart + detail::kMaxLevels + 1, view.levelStart);
  return view;
}

HostTree buildHostTree(const std::vector<Point>& input, int threads)
{
  const int32_t n = static_cast<int32_t>(input.size());
  const Box bounds = boundsOf(input);
  const double scaleX = detail::curveScale(bounds.x0, bounds.x1);
  const double scaleY = detail::curveScale(bounds.y0, bounds.y1);

  std::vector<std::pair<uint64_t, int32_t>> order(n);
  parallelFor(n, 1 << 16, threads, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      order[i] = {detail::curveKey(input[i], bounds, scaleX, scaleY), static_cast<int32_t>(i)};
  });
  std::sort(order.begin(), order.end());
  std::vector<uint64_t> keys(n);
  for (int32_t i = 0; i < n; ++i)
    keys[i] = order[i].first;
  const auto pointAt = [&](int32_t i) { return input[order[i].second]; };

  HostTree tree;
  tree.points.reserve(n);
  tree.siteIndex.reserve(n);
  for (int32_t i = 0; i < n; ++i)
  {
    if (detail::repeatsEarlier(keys.data(), pointAt, i))
      continue;
    tree.points.push_back(pointAt(i));
    tree.siteIndex.push_back(order[i].second);
  }

  const int32_t unique = static_cast<int32_t>(tree.points.size());
  tree.levelCount = detail::levelLayout(unique, tree.levelStart);
  tree.boxes.resize(tree.levelStart[tree.levelCount]);
  for (int32_t leaf = 0; leaf < tree.levelStart[1]; ++leaf)
    tree.boxes[leaf] = detail::boxOfPoints(tree.points.data(), leaf * detail::kLeafSize,
                                           std::min(unique, (leaf + 1) * detail::kLeafSize));
  for (int level = 1; level < tree.levelCount; ++level)
  {
    const int32_t childStart = tree.levelStart[level - 1];
    const int32_t childCount = tree.levelStart[level] - childStart;
    for (int32_t node = 0; node < tree.levelStart[level + 1] - tree.levelStart[level]; ++node)
      tree.boxes[tree.levelStart[level] + node] =
        detail::boxOfBoxes(tree.boxes.data() + childStart, node * detail::kFanout,
                           std::min(childCount, (node + 1) * detail::kFanout));
  }
  return tree;
}

}  // namespace gpugeo::voronoi
