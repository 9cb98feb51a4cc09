// The CPU backend of the DEM tools.
//
// Filling after Barnes (2016), "Parallel priority-flood depression filling for trillion cell
// digital elevation models": the grid is cut into tiles; each tile, on its own thread, runs
// Priority-Flood (the improved variant with a queue for pits) from its perimeter and its edge
// cells, labelling every cell with the seed it was reached from (the edge cells all with the
// "ocean" label) and keeping, for each pair of labels that meet, the lowest level at which they
// spill into each other; the labels, the spills and the facing perimeter cells of neighbouring
// tiles make a small graph on which a last Priority-Flood from the ocean gives each label its
// level; each cell ends at max(its tile's filled value, its label's level). Only minima and maxima
// of input values are taken, so the result is the one surface dem.h defines, whatever the tiling.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/priority_flood.h"

namespace gpugeo::dem::detail {

namespace {

constexpr int64_t kTile = 256;

struct Tile
{
  int64_t x0, y0, x1, y1;  // [x0, x1) x [y0, y1)
  int32_t firstLabel;      // its perimeter cells' labels start here
};

// The perimeter cells of a tile in a fixed order: top row, bottom row, left column, right column.
template <typename Visit>
void forPerimeter(const Tile& t, Visit visit)
{
  int32_t k = 0;
  for (int64_t x = t.x0; x < t.x1; ++x)
    visit(x, t.y0, k++);
  if (t.y1 - 1 > t.y0)
    for (int64_t x = t.x0; x < t.x1; ++x)
      visit(x, t.y1 - 1, k++);
  for (int64_t y = t.y0 + 1; y < t.y1 - 1; ++y)
    visit(t.x0, y, k++);
  if (t.x1 - 1 > t.x0)
    for (int64_t y = t.y0 + 1; y < t.y1 - 1; ++y)
      visit(t.x1 - 1, y, k++);
}

int32_t perimeterSize(const Tile& t)
{
  const int64_t w = t.x1 - t.x0, h = t.y1 - t.y0;
  return int32_t(w == 1 || h == 1 ? w * h : 2 * w + 2 * h - 4);
}

}  // namespace

std::vector<float> labelLevels(int32_t labels, const std::vector<std::vector<Spill>>& spills)
{
  // The graph as arrays of each label's neighbours.
  std::vector<int64_t> firstEdge(static_cast<std::size_t>(labels) + 1, 0);
  for (const auto& list : spills)
    for (const Spill& e : list)
    {
      ++firstEdge[std::size_t(e.a) + 1];
      ++firstEdge[std::size_t(e.b) + 1];
    }
  for (std::size_t a = 0; a < std::size_t(labels); ++a)
    firstEdge[a + 1] += firstEdge[a];
  std::vector<std::pair<int32_t, float>> edges(static_cast<std::size_t>(firstEdge.back()));
  {
    std::vector<int64_t> next(firstEdge.begin(), firstEdge.end() - 1);
    for (const auto& list : spills)
      for (const Spill& e : list)
      {
        edges[std::size_t(next[std::size_t(e.a)]++)] = {e.b, e.level};
        edges[std::size_t(next[std::size_t(e.b)]++)] = {e.a, e.level};
      }
  }
  std::vector<float> level(static_cast<std::size_t>(labels), std::numeric_limits<float>::infinity());
  using Item = std::pair<float, int32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> open;
  level[kOcean] = -std::numeric_limits<float>::infinity();
  open.emplace(level[kOcean], kOcean);
  while (!open.empty())
  {
    const auto [lv, a] = open.top();
    open.pop();
    if (lv > level[std::size_t(a)])
      continue;
    for (int64_t i = firstEdge[std::size_t(a)]; i < firstEdge[std::size_t(a) + 1]; ++i)
    {
      const auto [b, weight] = edges[std::size_t(i)];
      const float reach = std::max(lv, weight);
      if (reach < level[std::size_t(b)])
      {
        level[std::size_t(b)] = reach;
        open.emplace(reach, b);
      }
    }
  }
  return level;
}

std::vector<float> fillCpu(const Grid& grid, int threads, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<float> out(grid.z, grid.z + w * h);
  // Unlabelled until each tile's job marks its own cells (on all threads: the first touches of the
  // pages cost as much as the flood).
  std::unique_ptr<int32_t[]> label(new int32_t[std::size_t(w * h)]);
  std::vector<Tile> tiles;
  int32_t labels = 1;  // 0 is the ocean
  for (int64_t y0 = 0; y0 < h; y0 += kTile)
    for (int64_t x0 = 0; x0 < w; x0 += kTile)
    {
      Tile t{x0, y0, std::min(w, x0 + kTile), std::min(h, y0 + kTile), labels};
      labels += perimeterSize(t);
      tiles.push_back(t);
    }
  const float* z = grid.z;
  std::vector<std::vector<Spill>> spills(tiles.size());
  int64_t offset[8];
  for (int d = 0; d < 8; ++d)
    offset[d] = kDy[d] * w + kDx[d];

  // Each tile flooded from its perimeter and its edge cells. The flood keeps a cell as its place in
  // the tile, row << 8 | column (tiles are at most 256 wide), so its row and column come from shifts.
  static_assert(kTile <= 256, "a tile's columns fit 8 bits");
  parallelFor(int64_t(tiles.size()), 1, threads, [&](int64_t b, int64_t e) {
    float* level = out.data();
    int32_t* lab = label.get();
    for (int64_t ti = b; ti < e; ++ti)
    {
      const Tile& t = tiles[std::size_t(ti)];
      const int64_t tw = t.x1 - t.x0, th = t.y1 - t.y0;
      bool nodataNear = false;  // a nodata cell in the tile or around it: edge cells inside
      for (int64_t y = t.y0; y < t.y1; ++y)
        std::fill(lab + y * w + t.x0, lab + y * w + t.x1, kUnlabelled);
      for (int64_t y = std::max<int64_t>(0, t.y0 - 1); y < std::min(h, t.y1 + 1); ++y)
      {
        int64_t nan = 0;
        for (int64_t x = std::max<int64_t>(0, t.x0 - 1); x < std::min(w, t.x1 + 1); ++x)
          nan += z[y * w + x] != z[y * w + x];
        nodataNear = nodataNear || nan > 0;
      }
      OpenCells open;
      std::vector<uint32_t> pit;  // cells raised to the level being flooded, in any order (a stack)
      auto seed = [&](int64_t x, int64_t y, int32_t own) {
        const int64_t c = y * w + x;
        if (isNoData(z[c]) || lab[c] != kUnlabelled)
          return;
        lab[c] = isEdgeCell(z, w, h, x, y) ? kOcean : own;
        open.push(level[c], (y - t.y0) << 8 | (x - t.x0));
      };
      forPerimeter(t, [&](int64_t x, int64_t y, int32_t k) { seed(x, y, t.firstLabel + k); });
      if (nodataNear)
        for (int64_t y = t.y0 + 1; y < t.y1 - 1; ++y)
          for (int64_t x = t.x0 + 1; x < t.x1 - 1; ++x)
            if (!isNoData(z[y * w + x]) && isEdgeCell(z, w, h, x, y))
              seed(x, y, kOcean);
      SpillTable lowest;
      while (!open.empty() || !pit.empty())
      {
        uint32_t local;
        if (!pit.empty())
        {
          local = pit.back();
          pit.pop_back();
        }
        else
          local = uint32_t(open.pop());
        const int64_t x = local & 0xff, y = local >> 8;
        const int64_t c = (t.y0 + y) * w + t.x0 + x;
        const float wc = level[c];
        const int32_t lc = lab[c];
        for (int d = 0; d < 8; ++d)
        {
          if (uint64_t(x + kDx[d]) >= uint64_t(tw) || uint64_t(y + kDy[d]) >= uint64_t(th))
            continue;
          const int64_t n = c + offset[d];
          const float ln = level[n];
          if (isNoData(ln))  // nodata (levels start as the elevations, and a valid cell's stays valid)
            continue;
          const int32_t labelN = lab[n];
          if (labelN != kUnlabelled)
          {
            if (labelN != lc)
              lowest.lower(pairKey(lc, labelN), std::max(wc, ln));
            continue;
          }
          lab[n] = lc;
          const uint32_t localN = uint32_t(int64_t(local) + kDy[d] * 256 + kDx[d]);
          if (ln <= wc)
          {
            level[n] = wc;
            pit.push_back(localN);
          }
          else
            open.push(ln, localN);
        }
      }
      auto& mine = spills[std::size_t(ti)];
      lowest.forEach([&](uint64_t key, float spill) {
        mine.push_back(Spill{int32_t(key >> 32), int32_t(key & 0xffffffffu), spill});
      });
    }
  }, &control);

  // The graph of labels: spills inside tiles, and facing cells of neighbouring tiles (found tile by
  // tile on all threads, each pair once, from its lower cell), solved from the ocean.
  parallelFor(int64_t(tiles.size()), 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t ti = b; ti < e; ++ti)
    {
      const Tile& t = tiles[std::size_t(ti)];
      auto& mine = spills[std::size_t(ti)];
      forPerimeter(t, [&](int64_t x, int64_t y, int32_t) {
        const int64_t c = y * w + x;
        if (isNoData(z[c]))
          return;
        for (int d = 0; d < 8; ++d)
        {
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (nx < 0 || ny < 0 || nx >= w || ny >= h || (nx >= t.x0 && ny >= t.y0 && nx < t.x1 && ny < t.y1))
            continue;
          const int64_t n = ny * w + nx;
          if (n < c || isNoData(z[n]) || label[std::size_t(c)] == label[std::size_t(n)])
            continue;
          mine.push_back(Spill{label[std::size_t(c)], label[std::size_t(n)],
                               std::max(out[std::size_t(c)], out[std::size_t(n)])});
        }
      });
    }
  }, &control);
  if (control.isCanceled())
    throw Canceled();
  const std::vector<float> level = labelLevels(labels, spills);
  parallelFor(h, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t c = b * w; c < e * w; ++c)
    {
      if (label[std::size_t(c)] > kOcean)
        out[std::size_t(c)] = std::max(out[std::size_t(c)], level[std::size_t(label[std::size_t(c)])]);
      if (!isNoData(out[std::size_t(c)]))
        out[std::size_t(c)] += 0.0f;  // -0 as +0: max() of equal zeros may return either
    }
  }, &control);
  return out;
}

}  // namespace gpugeo::dem::detail
