// Inputs for the watershed tests (test_watersheds.cpp, test_watersheds_gpu.cpp): D8 directions of
// random DEMs and hand-made loops, outlets that nest along paths, share a cell or sit in pits; and the
// reference, one walk per cell down its whole path with no shared state.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "dem/dem.h"
#include "dem_cases.h"

namespace gpugeo::dem {

// `loops` two-cell loops (a cell east, its east neighbour west) written into the directions at random
// valid pairs.
inline void writeLoops(std::vector<uint8_t>& directions, int64_t w, int64_t h, int loops, std::mt19937_64& random)
{
  for (int k = 0; k < loops; ++k)
  {
    const int64_t x = int64_t(random() % uint64_t(w - 1)), y = int64_t(random() % uint64_t(h));
    if (directions[std::size_t(y * w + x)] != kNoData && directions[std::size_t(y * w + x + 1)] != kNoData)
    {
      directions[std::size_t(y * w + x)] = 0;      // east
      directions[std::size_t(y * w + x + 1)] = 4;  // west
    }
  }
}

struct WatershedCase
{
  TestDem dem;
  std::vector<uint8_t> directions;
  std::vector<int64_t> outlets;
};

// Directions of a random DEM (flats resolved or not), with `loops` two-cell loops written in, and
// `count` outlets: random valid cells, the next cells down some of their paths (nested), repeats.
inline WatershedCase watershedCase(uint64_t seed, int64_t w, int64_t h, bool resolveFlats, int loops, int count)
{
  WatershedCase c;
  c.dem = randomDem(seed, w, h, seed % 2 ? 1.0 : 0.0, 3 + int(seed % 5), 30, 30, true);
  RunControl none;
  c.directions = flowDirections(Backend::Cpu, c.dem.grid(), resolveFlats, 2, none);
  std::mt19937_64 random(seed * 7 + 1);
  writeLoops(c.directions, w, h, loops, random);
  while (int64_t(c.outlets.size()) < count)
  {
    const int64_t cell = int64_t(random() % uint64_t(w * h));
    if (c.directions[std::size_t(cell)] == kNoData)
      continue;
    c.outlets.push_back(cell);
    const uint64_t what = random() % 4;
    if (what == 0 && int64_t(c.outlets.size()) < count)  // the same cell again
      c.outlets.push_back(cell);
    else if (what == 1)  // a few steps down the path: nested
    {
      int64_t p = cell;
      for (int s = 0; s < 6; ++s)
      {
        const uint8_t d = c.directions[std::size_t(p)];
        if (d >= 8)
          break;
        const int64_t x = p % w + kDx[d], y = p / w + kDy[d];
        if (x < 0 || y < 0 || x >= w || y >= h || c.directions[std::size_t(y * w + x)] == kNoData)
          break;
        p = y * w + x;
      }
      if (int64_t(c.outlets.size()) < count)
        c.outlets.push_back(p);
    }
  }
  return c;
}

// Per cell, the first outlet its path meets (k + 1; the lowest k where outlets share a cell), else 0.
// And per outlet, every cell whose path passes through its cell (r.water.outlet's watershed).
struct WatershedReference
{
  std::vector<int32_t> labels;
  std::vector<int64_t> throughCells;
};

inline WatershedReference watershedReference(const WatershedCase& c)
{
  const int64_t w = c.dem.width, h = c.dem.height, n = w * h;
  std::vector<int32_t> outletAt(std::size_t(n), 0);
  for (std::size_t k = c.outlets.size(); k-- > 0;)
    outletAt[std::size_t(c.outlets[k])] = int32_t(k + 1);
  WatershedReference r;
  r.labels.assign(std::size_t(n), 0);
  r.throughCells.assign(c.outlets.size(), 0);
  std::vector<uint8_t> through(c.outlets.size());
  for (int64_t start = 0; start < n; ++start)
  {
    std::fill(through.begin(), through.end(), 0);
    int32_t first = 0;
    int64_t p = start;
    for (int64_t steps = 0; steps <= n; ++steps)  // a loop ends after n steps
    {
      const uint8_t d = c.directions[std::size_t(p)];
      if (d == kNoData)
        break;
      if (outletAt[std::size_t(p)] > 0)
      {
        if (first == 0)
          first = outletAt[std::size_t(p)];
        for (std::size_t k = 0; k < c.outlets.size(); ++k)
          if (c.outlets[k] == p)
            through[k] = 1;
      }
      if (d >= 8)
        break;
      const int64_t x = p % w + kDx[d], y = p / w + kDy[d];
      if (x < 0 || y < 0 || x >= w || y >= h)
        break;
      p = y * w + x;
    }
    r.labels[std::size_t(start)] = first;
    for (std::size_t k = 0; k < c.outlets.size(); ++k)
      r.throughCells[k] += through[k];
  }
  return r;
}

}  // namespace gpugeo::dem
