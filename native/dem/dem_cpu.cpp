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
  // A label's level is its minimax path's to the ocean: the level of the spill at which its part of
  // the graph first joins the ocean's when the spills are taken from the lowest up (Kruskal's order;
  // the minimum spanning forest holds every minimax path). The spills are ordered by a radix sort of
  // their levels' keys (two passes of 16 bits), the parts joined by a union-find, and each part's
  // labels, kept as a list, take the level of the spill that joins it to the ocean's.
  int64_t count = 0;
  for (const auto& list : spills)
    count += int64_t(list.size());
  std::vector<const Spill*> edge;
  edge.reserve(std::size_t(count));
  for (const auto& list : spills)
    for (const Spill& e : list)
      edge.push_back(&e);
  {
    std::vector<const Spill*> sorted(edge.size());
    for (const int shift : {0, 16})
    {
      std::vector<int64_t> start(std::size_t(1) << 16, 0);
      for (const Spill* e : edge)
        ++start[(levelKey(e->level) >> shift) & 0xffffu];
      int64_t at = 0;
      for (int64_t& s : start)
      {
        const int64_t n = s;
        s = at;
        at += n;
      }
      for (const Spill* e : edge)
        sorted[std::size_t(start[(levelKey(e->level) >> shift) & 0xffffu]++)] = e;
      edge.swap(sorted);
    }
  }
  std::vector<int32_t> parent(static_cast<std::size_t>(labels)), next(static_cast<std::size_t>(labels), -1),
    last(static_cast<std::size_t>(labels));
  for (int32_t a = 0; a < labels; ++a)
    parent[std::size_t(a)] = last[std::size_t(a)] = a;
  const auto find = [&](int32_t v) {
    while (parent[std::size_t(v)] != v)
      v = parent[std::size_t(v)] = parent[std::size_t(parent[std::size_t(v)])];
    return v;
  };
  std::vector<float> level(static_cast<std::size_t>(labels), std::numeric_limits<float>::infinity());
  level[kOcean] = -std::numeric_limits<float>::infinity();
  for (const Spill* e : edge)
  {
    int32_t a = find(e->a), b = find(e->b);
    if (a == b)
      continue;
    const int32_t ocean = find(kOcean);
    if (b == ocean)
      std::swap(a, b);
    if (a == ocean)  // b's part reaches the ocean at this spill
      for (int32_t v = b; v >= 0; v = next[std::size_t(v)])
        level[std::size_t(v)] = e->level + 0.0f;  // -0 as +0
    // b's list after a's, b under a.
    next[std::size_t(last[std::size_t(a)])] = b;
    last[std::size_t(a)] = last[std::size_t(b)];
    parent[std::size_t(b)] = a;
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
