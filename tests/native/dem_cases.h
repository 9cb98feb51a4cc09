// DEMs for the native DEM tests (test_dem.cpp, test_dem_tiled.cpp): random terrains with pits,
// flats and nodata blobs, and a bitwise comparison of float rasters.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dem/dem.h"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::dem {

struct TestDem
{
  int64_t width = 0, height = 0;
  std::vector<float> z;
  std::vector<double> cellWidth, cellHeight;

  Grid grid() const { return gridOf(z); }
  // Other elevations on this DEM's grid.
  Grid gridOf(const std::vector<float>& elevations) const
  {
    Grid g;
    g.z = elevations.data();
    g.width = width;
    g.height = height;
    g.cellWidth = cellWidth.data();
    g.cellHeight = cellHeight.data();
    return g;
  }
  Grid gridWith(const std::vector<float>& values) const
  {
    Grid g = grid();
    g.z = values.data();
    return g;
  }
};

// A random terrain: a tilted surface with noise (pits), values rounded to `step` (plateaus and
// flats), nodata blobs, and cells `width` x `height` metres (different per row when `perRow`).
inline TestDem randomDem(uint64_t seed, int64_t w, int64_t h, double step, int holes, double cw = 30, double ch = 30,
                  bool perRow = false)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  TestDem d;
  d.width = w;
  d.height = h;
  d.z.resize(std::size_t(w * h));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
    {
      double v = 0.3 * x + 0.2 * y + 10 * std::sin(x * 0.05) * std::cos(y * 0.07) + 8 * u(rng);
      if (step > 0)
        v = std::round(v / step) * step;
      d.z[std::size_t(y * w + x)] = float(v);
    }
  for (int k = 0; k < holes; ++k)
  {
    const int64_t cx = int64_t(u(rng) * w), cy = int64_t(u(rng) * h), r = 1 + int64_t(u(rng) * 4);
    for (int64_t y = std::max<int64_t>(0, cy - r); y < std::min(h, cy + r); ++y)
      for (int64_t x = std::max<int64_t>(0, cx - r); x < std::min(w, cx + r); ++x)
        d.z[std::size_t(y * w + x)] = std::nanf("");
  }
  for (int64_t y = 0; y < h; ++y)
  {
    d.cellWidth.push_back(perRow ? cw * std::cos(0.6 + 0.2 * double(y) / double(h)) : cw);
    d.cellHeight.push_back(ch);
  }
  return d;
}

inline bool sameBits(const std::vector<float>& a, const std::vector<float>& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A terrain whose flats (after filling) are rimmed by cells a few float32 steps above them: a coarse
// surface rounded to `step`, each cell then nudged up by 0 to `maxUlps` steps (none on some cells).
inline TestDem nearlyFlatDem(uint64_t seed, int64_t w, int64_t h, double base, double step, int maxUlps, int holes)
{
  TestDem d = randomDem(seed, w, h, step, holes);
  std::mt19937_64 rng(seed * 7 + 1);
  std::uniform_int_distribution<int> ulps(-maxUlps, maxUlps);
  for (float& v : d.z)
  {
    if (std::isnan(v))
      continue;
    v = float(base + std::round(double(v) / 8.0) * step * 0.25);
    for (int k = std::max(0, ulps(rng)); k > 0; --k)
      v = std::nextafter(v, std::numeric_limits<float>::infinity());
  }
  return d;
}

// A random DEM with flat-bottomed basins: rectangles of one elevation 3 m below the lowest cell around
// them, two of them wider than the tiled run's large-bottom extent (S = max(maxLength, 32): the first,
// 52 cells, up to a maxLength of 51) and crossing many tiles; one basin ringed by a wall 50 m high,
// which no channel within 2 m of depth crosses.
inline TestDem basinsDem(uint64_t seed, int64_t w, int64_t h)
{
  TestDem d = randomDem(seed, w, h, seed % 2 ? 0.5 : 0.0, 1);
  const auto basin = [&](int64_t x0, int64_t y0, int64_t x1, int64_t y1, float wall) {
    float lowest = std::numeric_limits<float>::infinity();
    for (int64_t y = y0 - 1; y <= y1; ++y)
      for (int64_t x = x0 - 1; x <= x1; ++x)
        if (!std::isnan(d.z[std::size_t(y * w + x)]))
          lowest = std::min(lowest, d.z[std::size_t(y * w + x)]);
    for (int64_t y = y0 - 1; y <= y1; ++y)
      for (int64_t x = x0 - 1; x <= x1; ++x)
      {
        float& z = d.z[std::size_t(y * w + x)];
        const bool inside = x >= x0 && y >= y0 && x < x1 && y < y1;
        if (inside)
          z = lowest - 3.f;
        else if (wall > 0 || std::isnan(z))
          z = lowest + wall;
      }
  };
  basin(4, 5, 56, 11, 0.f);    // 52 x 6: a large bottom across tiles, 5 cells below the top edge
  basin(48, 30, 54, 33, 0.f);  // small
  basin(8, 20, 44, 24, 50.f);  // 36 x 4 behind a wall
  basin(20, 36, 23, 39, 50.f);  // small behind a wall
  return d;
}

// A valley spiralling in from the DEM's border to its centre, through every tile: its floor rises
// along the spiral from an outlet on the border, with a pit every 37 cells and a flat run of six
// cells every 50; walls one cell thick between the turns.
inline TestDem spiralValley(int64_t size)
{
  TestDem d;
  d.width = d.height = size;
  d.z.assign(std::size_t(size * size), 500.f);
  int64_t x = 0, y = 1, dx = 1, dy = 0, steps = 0, turns = 0;
  int64_t left = 1, right = size - 2, top = 1, bottom = size - 2;
  float level = 1.f;
  d.z[std::size_t(y * size + x)] = 0.f;  // the outlet, on the border
  while (turns < 2)
  {
    const int64_t nx = x + dx, ny = y + dy;
    if ((dx == 1 && nx > right) || (dy == 1 && ny > bottom) || (dx == -1 && nx < left) || (dy == -1 && ny < top))
    {
      // Turn clockwise; the leg just walked bounds the spiral two cells further in.
      if (dx == 1) { top += 2; dx = 0; dy = 1; }
      else if (dy == 1) { right -= 2; dx = -1; dy = 0; }
      else if (dx == -1) { bottom -= 2; dx = 0; dy = -1; }
      else { left += 2; dx = 1; dy = 0; }
      ++turns;
      continue;
    }
    turns = 0;
    x = nx;
    y = ny;
    ++steps;
    if (steps % 50 >= 5)
      level += 0.25f;
    d.z[std::size_t(y * size + x)] = steps % 37 == 0 ? level - 3.f : level;
  }
  d.cellWidth.assign(std::size_t(size), 10.0);
  d.cellHeight.assign(std::size_t(size), 10.0);
  return d;
}

// Tiles of width x height cells on `threads` threads (the tiled tests).
// 8 x 8 directions, east everywhere (off the grid at the right) but for four cells that go round in a
// loop across the corner of four 4 x 4 tiles: (3,3) east, (4,3) south, (4,4) west, (3,4) north.
inline std::vector<uint8_t> loopAcrossTileCorners()
{
  std::vector<uint8_t> dirs(std::size_t(8 * 8), 0);
  dirs[std::size_t(3 * 8 + 3)] = 0;
  dirs[std::size_t(3 * 8 + 4)] = 2;
  dirs[std::size_t(4 * 8 + 4)] = 4;
  dirs[std::size_t(4 * 8 + 3)] = 6;
  return dirs;
}

// A Manning coefficient per cell: 0.02 to 0.2, NaN (the model's overland n) in a band of columns.
inline std::vector<float> manningOf(const TestDem& d)
{
  std::vector<float> n(d.z.size());
  for (int64_t y = 0; y < d.height; ++y)
    for (int64_t x = 0; x < d.width; ++x)
      n[std::size_t(y * d.width + x)] = x % 11 == 3 ? std::nanf("") : float(0.02 + 0.18 * double((x * 7 + y * 3) % 13) / 12.0);
  return n;
}

inline tiled::TiledOptions tiles(int64_t width, int64_t height, int threads = 2)
{
  tiled::TiledOptions options;
  options.tileWidth = width;
  options.tileHeight = height;
  options.threads = threads;
  return options;
}

}  // namespace gpugeo::dem
