// The order of a tile's perimeter cells (tiling.h), for code that also runs on the device: the top
// row, the bottom row, the left column, the right column, each cell once (tiles one cell wide or high
// too).
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace gpugeo::dem::tiled::detail {

GPUGEO_HD int64_t perimeterCount(int64_t width, int64_t height)
{
  return width == 1 || height == 1 ? width * height : 2 * width + 2 * height - 4;
}

// The place of perimeter cell (x, y) of a width x height tile in that order.
GPUGEO_HD int64_t perimeterPlace(int64_t width, int64_t height, int64_t x, int64_t y)
{
  if (y == 0)
    return x;
  if (y == height - 1)
    return width + x;
  if (x == 0)
    return 2 * width + (y - 1);
  return 2 * width + (height - 2) + (y - 1);
}

// The cell (x, y) at place k of that order (perimeterPlace's inverse).
GPUGEO_HD void perimeterCell(int64_t width, int64_t height, int64_t k, int64_t& x, int64_t& y)
{
  if (k < width)
  {
    x = k;
    y = 0;
  }
  else if (k < 2 * width)
  {
    x = k - width;
    y = height - 1;
  }
  else if (k < 2 * width + (height - 2))
  {
    x = 0;
    y = k - 2 * width + 1;
  }
  else
  {
    x = width - 1;
    y = k - 2 * width - (height - 2) + 1;
  }
}

}  // namespace gpugeo::dem::tiled::detail
