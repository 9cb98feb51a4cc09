// The pieces of Barnes's (2016) tiled Priority-Flood that the in-memory fill (dem_cpu.cpp) and the
// tiled fill past memory (tiled/tiled_fill.cpp) share: the queue of open cells, the table of the
// lowest spill between two labels, and the graph of labels solved from the ocean.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/hd.h"

namespace gpugeo::dem::detail {

constexpr int32_t kOcean = 0;
constexpr int32_t kUnlabelled = -1;

inline uint64_t pairKey(int32_t a, int32_t b)
{
  return (uint64_t(uint32_t(std::min(a, b))) << 32) | uint32_t(std::max(a, b));
}

struct Spill
{
  int32_t a, b;
  float level;
};

// A level's bits made to order as unsigned integers (negatives flipped, positives above them).
// (The CPU's queue and the GPU's tiled flood, tiled/tiled_cuda.cu, order levels by it alike.)
GPUGEO_HD uint32_t levelKey(float level)
{
#ifdef __CUDA_ARCH__
  const uint32_t bits = __float_as_uint(level);
#else
  uint32_t bits;
  std::memcpy(&bits, &level, sizeof bits);
#endif
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The level whose levelKey is `key`.
inline float levelOfKey(uint32_t key)
{
  const uint32_t bits = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
  float level;
  std::memcpy(&level, &bits, sizeof level);
  return level;
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

// The level of every label (0 = the ocean, at -inf): the lowest level at which water from it
// reaches the ocean over the spills (minimax paths, found in Kruskal's order: the spills from the
// lowest up, joined by a union-find); +inf for a label that never reaches it. `labels`: how many
// labels; `spills`: lists of edges (dem_cpu.cpp).
std::vector<float> labelLevels(int32_t labels, const std::vector<std::vector<Spill>>& spills);

}  // namespace gpugeo::dem::detail
