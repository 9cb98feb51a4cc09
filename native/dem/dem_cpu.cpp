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
#include <queue>
#include <vector>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

namespace {

constexpr int64_t kTile = 256;
constexpr int32_t kOcean = 0;
constexpr int32_t kUnlabelled = -1;

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

uint64_t pairKey(int32_t a, int32_t b)
{
  return (uint64_t(uint32_t(std::min(a, b))) << 32) | uint32_t(std::max(a, b));
}

struct Spill
{
  int32_t a, b;
  float level;
};

// A level's bits made to order as unsigned integers (negatives flipped, positives above them).
uint32_t levelKey(float level)
{
  uint32_t bits;
  std::memcpy(&bits, &level, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The open cells of a tile's Priority-Flood, lowest level first: a radix heap (Ahuja et al. 1990),
// which needs every key pushed to be at least the last one popped. Priority-Flood keeps that (a cell
// is pushed only when it is above the level being flooded), and it costs a few shifts per cell
// where a binary heap's sift-down was a third of the fill. Cells of one level come out in any order:
// the filled surface does not depend on it (dem.h), only which seed's label a cell takes.
class OpenCells
{
public:
  bool empty() const { return mSize == 0; }

  void push(float level, int64_t cell)
  {
    const uint32_t key = levelKey(level);
    mBuckets[bucketOf(key)].push_back(uint64_t(key) << 32 | uint32_t(cell));
    ++mSize;
  }

  int64_t pop()
  {
    if (mBuckets[0].empty())
    {
      std::size_t i = 1;
      while (mBuckets[i].empty())
        ++i;
      std::vector<uint64_t>& from = mBuckets[i];
      uint64_t lowest = from[0];
      for (const uint64_t item : from)
        lowest = std::min(lowest, item);
      mLast = uint32_t(lowest >> 32);
      for (const uint64_t item : from)
        mBuckets[bucketOf(uint32_t(item >> 32))].push_back(item);
      from.clear();
    }
    const uint64_t item = mBuckets[0].back();
    mBuckets[0].pop_back();
    --mSize;
    return int64_t(uint32_t(item));
  }

private:
  // 0 for the last key popped; else 1 + the highest bit in which the key differs from it.
  std::size_t bucketOf(uint32_t key) const { return key == mLast ? 0 : std::size_t(32 - __builtin_clz(key ^ mLast)); }

  std::vector<uint64_t> mBuckets[33];
  uint32_t mLast = 0;
  std::size_t mSize = 0;
};

// The lowest level at which each pair of labels met in a tile spills, by the pair's key: an
// open-addressing table (a tile meets its labels' pairs at most cells, and std::unordered_map's
// node per pair made the hash most of the fill's time).
class SpillTable
{
public:
  void lower(uint64_t key, float level)
  {
    if (2 * (mUsed + 1) > mKeys.size())
      grow();
    std::size_t slot = slotOf(key);
    if (mKeys[slot] == kEmpty)
    {
      mKeys[slot] = key;
      mLevels[slot] = level;
      ++mUsed;
    }
    else if (level < mLevels[slot])
      mLevels[slot] = level;
  }

  template <typename Visit>
  void forEach(Visit visit) const
  {
    for (std::size_t i = 0; i < mKeys.size(); ++i)
      if (mKeys[i] != kEmpty)
        visit(mKeys[i], mLevels[i]);
  }

private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // no pair of labels below 2^31 has this key

  std::size_t slotOf(uint64_t key) const
  {
    std::size_t slot = std::size_t((key * 0x9E3779B97F4A7C15ull) >> (64 - mBits));
    const std::size_t mask = mKeys.size() - 1;
    while (mKeys[slot] != kEmpty && mKeys[slot] != key)
      slot = (slot + 1) & mask;
    return slot;
  }

  void grow()
  {
    std::vector<uint64_t> keys(std::size_t(1) << (mBits + 1), kEmpty);
    std::vector<float> levels(keys.size());
    keys.swap(mKeys);
    levels.swap(mLevels);
    ++mBits;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty)
      {
        const std::size_t slot = slotOf(keys[i]);
        mKeys[slot] = keys[i];
        mLevels[slot] = levels[i];
      }
  }

  std::vector<uint64_t> mKeys = std::vector<uint64_t>(std::size_t(1) << 12, kEmpty);
  std::vector<float> mLevels = std::vector<float>(std::size_t(1) << 12);
  int mBits = 12;
  std::size_t mUsed = 0;
};

}  // namespace

std::vector<float> fillCpu(const Grid& grid, int threads, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<float> out(grid.z, grid.z + w * h);
  std::vector<int32_t> label(static_cast<std::size_t>(w * h), kUnlabelled);
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

  // Each tile flooded from its perimeter and its edge cells.
  parallelFor(int64_t(tiles.size()), 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t ti = b; ti < e; ++ti)
    {
      const Tile& t = tiles[std::size_t(ti)];
      OpenCells open;
      std::vector<int64_t> pit;  // cells raised to the level being flooded, in any order (a stack)
      auto seed = [&](int64_t x, int64_t y, int32_t own) {
        const int64_t c = y * w + x;
        if (isNoData(z[c]) || label[std::size_t(c)] != kUnlabelled)
          return;
        label[std::size_t(c)] = isEdgeCell(z, w, h, x, y) ? kOcean : own;
        open.push(out[std::size_t(c)], c);
      };
      forPerimeter(t, [&](int64_t x, int64_t y, int32_t k) { seed(x, y, t.firstLabel + k); });
      for (int64_t y = t.y0 + 1; y < t.y1 - 1; ++y)
        for (int64_t x = t.x0 + 1; x < t.x1 - 1; ++x)
          if (!isNoData(z[y * w + x]) && isEdgeCell(z, w, h, x, y))
            seed(x, y, kOcean);
      SpillTable lowest;
      while (!open.empty() || !pit.empty())
      {
        int64_t c;
        if (!pit.empty())
        {
          c = pit.back();
          pit.pop_back();
        }
        else
          c = open.pop();
        const float wc = out[std::size_t(c)];
        const int32_t lc = label[std::size_t(c)];
        const int64_t x = c % w, y = c / w;
        for (int d = 0; d < 8; ++d)
        {
          const int64_t nx = x + kDx[d], ny = y + kDy[d];
          if (nx < t.x0 || ny < t.y0 || nx >= t.x1 || ny >= t.y1)
            continue;
          const int64_t n = ny * w + nx;
          if (isNoData(z[n]))
            continue;
          const int32_t ln = label[std::size_t(n)];
          if (ln != kUnlabelled)
          {
            if (ln != lc)
            {
              lowest.lower(pairKey(lc, ln), std::max(wc, out[std::size_t(n)]));
            }
            continue;
          }
          label[std::size_t(n)] = lc;
          if (out[std::size_t(n)] <= wc)
          {
            out[std::size_t(n)] = wc;
            pit.push_back(n);
          }
          else
            open.push(out[std::size_t(n)], n);
        }
      }
      auto& mine = spills[std::size_t(ti)];
      lowest.forEach([&](uint64_t key, float level) {
        mine.push_back(Spill{int32_t(key >> 32), int32_t(key & 0xffffffffu), level});
      });
    }
  }, &control);

  // The graph of labels: spills inside tiles, and facing cells of neighbouring tiles.
  std::vector<std::vector<std::pair<int32_t, float>>> edges(static_cast<std::size_t>(labels));
  auto connect = [&](int32_t a, int32_t b, float level) {
    if (a == b)
      return;
    edges[std::size_t(a)].emplace_back(b, level);
    edges[std::size_t(b)].emplace_back(a, level);
  };
  for (const auto& list : spills)
    for (const Spill& s : list)
      connect(s.a, s.b, s.level);
  for (const Tile& t : tiles)
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
        if (n < c || isNoData(z[n]))  // each facing pair once
          continue;
        connect(label[std::size_t(c)], label[std::size_t(n)], std::max(out[std::size_t(c)], out[std::size_t(n)]));
      }
    });
  if (control.isCanceled())
    throw Canceled();
  std::vector<float> level(static_cast<std::size_t>(labels), std::numeric_limits<float>::infinity());
  {
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
      for (const auto& [b, weight] : edges[std::size_t(a)])
      {
        const float reach = std::max(lv, weight);
        if (reach < level[std::size_t(b)])
        {
          level[std::size_t(b)] = reach;
          open.emplace(reach, b);
        }
      }
    }
  }
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
