// The per-cell rules of the DEM tools, shared by the backends and the reference: what an edge cell
// is, a cell's area in fixed point, the eight neighbours' distances.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/exact_math.h"
#include "core/hd.h"
#include "dem/dem.h"

namespace gpugeo::dem::detail {

// The Combined flat mask of a drained flat cell (Barnes et al. 2014), for every path that computes it:
// twice its steps towards the outlet, plus its steps from higher ground (0: none) turned round by the
// greatest of its flat's.
GPUGEO_HD int32_t combinedFlatMask(int32_t towards, int32_t away, int32_t highest)
{
  return 2 * towards + (away > 0 ? highest - away : 0);
}

GPUGEO_HD bool isNoData(float v)
{
  return v != v;
}

// dem.h's raiseBySteps, on either side: x raised by `steps` float32 steps (-0 counts as +0; stops at
// the largest finite float; NaN and steps <= 0 leave x).
GPUGEO_HD float floatStepsUp(float x, int64_t steps)
{
  if (steps <= 0 || x != x)
    return x;
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if (bits & 0x80000000u)  // negative (or -0): towards zero first
  {
    const int64_t magnitude = bits & 0x7fffffffu;
    if (steps < magnitude)
    {
      bits = 0x80000000u | uint32_t(magnitude - steps);
      memcpy(&x, &bits, sizeof x);
      return x;
    }
    steps -= magnitude;
    bits = 0;  // +0
  }
  const int64_t largest = 0x7f7fffff;  // the largest finite float
  const int64_t up = int64_t(bits) + steps;
  bits = uint32_t(up < largest ? up : largest);
  memcpy(&x, &bits, sizeof x);
  return x;
}

// A valid cell on the border or with a nodata neighbour (callers check that the cell is valid).
GPUGEO_HD bool isEdgeCell(const float* z, int64_t w, int64_t h, int64_t x, int64_t y)
{
  if (x == 0 || y == 0 || x == w - 1 || y == h - 1)
    return true;
  for (int d = 0; d < 8; ++d)
    if (isNoData(z[(y + stepY(d)) * w + x + stepX(d)]))
      return true;
  return false;
}

// The cell that cell (x, y) drains to by its direction, or -1 (no direction, off the grid, onto
// nodata).
GPUGEO_HD int64_t receiverAt(const uint8_t* directions, int64_t w, int64_t h, int64_t x, int64_t y)
{
  const uint8_t d = directions[y * w + x];
  if (d >= 8)
    return -1;
  const int64_t nx = x + stepX(d), ny = y + stepY(d);
  if (nx < 0 || ny < 0 || nx >= w || ny >= h || directions[ny * w + nx] == kNoData)
    return -1;
  return ny * w + nx;
}

// The same for cell c.
GPUGEO_HD int64_t receiverOf(const uint8_t* directions, int64_t w, int64_t h, int64_t c)
{
  return receiverAt(directions, w, h, c % w, c / w);
}

// Distances to the eight neighbours from a cell of the given width and height.
GPUGEO_HD double neighbourDistance(int d, double width, double height, double diagonal)
{
  return (d & 1) ? diagonal : ((d & 2) ? height : width);
}

// A cell's area in units of 1e-6 m^2, rounded.
inline int64_t cellArea(const Grid& grid, int64_t row)
{
  return std::llround(grid.cellWidth[row] * grid.cellHeight[row] * 1e6);
}

}  // namespace gpugeo::dem::detail

namespace gpugeo::dem::detail {

// The D8 direction of a cell (dem.h's rule) from its 3 x 3 neighbourhood: zc and maskC are the
// cell's own elevation and flat mask, around.at(d) neighbour d's elevation (NaN off the grid and on
// nodata alike: the rule treats both the same), around.maskAt(d) neighbour d's mask (asked only of
// neighbours of the cell's elevation, and only with a mask). The backends give the neighbourhood from
// the grid (d8Direction) or from a tile in shared memory.
template <typename Around>
GPUGEO_HD uint8_t d8DirectionAround(float zc, const Around& around, bool withMask, int32_t maskC, double width,
                                    double height)
{
  if (isNoData(zc))
    return kNoData;
  const double diagonal = exact::sqrt(exact::add(exact::mul(width, width), exact::mul(height, height)));
  // Every neighbour's drop is computed and compared, with no branch to skip one: a drop of 0 or less
  // never wins, and a NaN (a neighbour on nodata or off the grid) never compares greater. (Skipping
  // the divisions that cannot win cost more in mispredicted branches than the divisions.)
  int best = -1;
  double bestDrop = 0;
  for (int d = 0; d < 8; ++d)
  {
    const double drop =
      exact::div(exact::sub(double(zc), double(around.at(d))), neighbourDistance(d, width, height, diagonal));
    if (drop > bestDrop)
    {
      bestDrop = drop;
      best = d;
    }
  }
  if (best < 0 && withMask && maskC > 0)
  {
    double bestFall = 0;
    for (int d = 0; d < 8; ++d)
    {
      if (around.at(d) != zc)
        continue;
      const double fall = exact::div(double(maskC - around.maskAt(d)), neighbourDistance(d, width, height, diagonal));
      if (fall > bestFall)
      {
        bestFall = fall;
        best = d;
      }
    }
  }
  // An edge cell (a neighbour off the grid or on nodata) with nowhere to go drains out to the first.
  for (int d = 0; d < 8 && best < 0; ++d)
    if (isNoData(around.at(d)))
      best = d;
  return best < 0 ? kNoFlow : uint8_t(best);
}

// Cell (x, y)'s neighbourhood on the grid.
struct GridAround
{
  const float* z;
  const int32_t* mask;
  int64_t w, h, x, y;
  GPUGEO_HD float at(int d) const
  {
    const int64_t nx = x + stepX(d), ny = y + stepY(d);
    return nx < 0 || ny < 0 || nx >= w || ny >= h ? std::numeric_limits<float>::quiet_NaN() : z[ny * w + nx];
  }
  GPUGEO_HD int32_t maskAt(int d) const { return mask[(y + stepY(d)) * w + x + stepX(d)]; }
};

// An inner cell's neighbourhood (one that is off the grid's border): its neighbours at fixed offsets
// from it, with no bounds checks.
struct InnerAround
{
  const float* zc;
  const int32_t* maskC;  // null without a mask
  int64_t w;
  GPUGEO_HD float at(int d) const { return zc[stepY(d) * w + stepX(d)]; }
  GPUGEO_HD int32_t maskAt(int d) const { return maskC[stepY(d) * w + stepX(d)]; }
};

// The D8 direction of cell (x, y) (dem.h's rule); mask may be null (no flat resolution).
GPUGEO_HD uint8_t d8Direction(const float* z, const int32_t* mask, int64_t w, int64_t h, int64_t x, int64_t y,
                              double width, double height)
{
  const int64_t c = y * w + x;
  return d8DirectionAround(z[c], GridAround{z, mask, w, h, x, y}, mask != nullptr, mask ? mask[c] : 0, width, height);
}

}  // namespace gpugeo::dem::detail
