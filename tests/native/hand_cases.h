// Inputs for the height-above-drainage tests (test_hand.cpp, test_hand_gpu.cpp): D8 directions of
// random DEMs with pits, flats and hand-made loops, scattered stream cells (some on nodata, to be
// ignored), elevations made nodata under valid directions; and the reference, one walk per cell down
// its whole path in float64 with no shared state.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "dem/dem.h"
#include "dem_cases.h"
#include "watershed_cases.h"

namespace gpugeo::dem {

struct HandCase
{
  TestDem dem;
  std::vector<uint8_t> directions, streams;
};

inline HandCase handCase(uint64_t seed, int64_t w, int64_t h, bool resolveFlats, int loops, int streamOneIn)
{
  HandCase c;
  c.dem = randomDem(seed, w, h, seed % 2 ? 1.0 : 0.0, 3 + int(seed % 5), 30, 30, true);
  RunControl none;
  c.directions = flowDirections(Backend::Cpu, c.dem.grid(), resolveFlats, 2, none);
  std::mt19937_64 random(seed * 11 + 3);
  writeLoops(c.directions, w, h, loops, random);
  c.streams.assign(std::size_t(w * h), 0);
  for (std::size_t i = 0; i < c.streams.size(); ++i)
    c.streams[i] = random() % uint64_t(streamOneIn) == 0 ? uint8_t(1 + random() % 200) : 0;
  // Nodata elevations under valid directions: such cells are nodata, and paths through them end.
  for (int k = 0; k < int(w * h / 200) + 1; ++k)
    c.dem.z[std::size_t(random() % uint64_t(w * h))] = std::nanf("");
  return c;
}

struct HandReference
{
  std::vector<double> height, distance;  // NaN where no stream is reached
};

inline HandReference handReference(const HandCase& c)
{
  const int64_t w = c.dem.width, h = c.dem.height, n = w * h;
  const auto valid = [&](int64_t i) {
    return std::isfinite(c.dem.z[std::size_t(i)]) && c.directions[std::size_t(i)] != kNoData;
  };
  HandReference r;
  r.height.assign(std::size_t(n), std::nan(""));
  r.distance.assign(std::size_t(n), std::nan(""));
  for (int64_t start = 0; start < n; ++start)
  {
    if (!valid(start))
      continue;
    double length = 0;
    int64_t p = start;
    for (int64_t steps = 0; steps <= n; ++steps)
    {
      if (c.streams[std::size_t(p)] != 0)
      {
        r.height[std::size_t(start)] = double(c.dem.z[std::size_t(start)]) - double(c.dem.z[std::size_t(p)]);
        r.distance[std::size_t(start)] = length;
        break;
      }
      const uint8_t d = c.directions[std::size_t(p)];
      if (d >= 8)
        break;
      const int64_t x = p % w + kDx[d], y = p / w + kDy[d];
      if (x < 0 || y < 0 || x >= w || y >= h || !valid(y * w + x))
        break;
      const double cw = c.dem.cellWidth[std::size_t(p / w)], ch = c.dem.cellHeight[std::size_t(p / w)];
      length += (d & 1) ? std::sqrt(cw * cw + ch * ch) : ((d & 2) ? ch : cw);
      p = y * w + x;
    }
  }
  return r;
}

}  // namespace gpugeo::dem
