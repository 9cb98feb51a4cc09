// The per-edge rules of region tracing (regions.h), shared by both backends. An edge is a cell and
// one of its sides: 0 top, 1 right, 2 bottom, 3 left, walked clockwise around the cell in row-down
// coordinates (top from left to right, right from top to bottom, ...), so the cell is on its right.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace gpugeo::dem::detail {

// The outward normal of a side, which is also the direction in which the previous side is walked.
GPUGEO_HD int sideDx(int side)
{
  return side == 1 ? 1 : (side == 3 ? -1 : 0);
}

GPUGEO_HD int sideDy(int side)
{
  return side == 0 ? -1 : (side == 2 ? 1 : 0);
}

// The label of a cell, -1 off the grid.
GPUGEO_HD int32_t labelAt(const int32_t* labels, int64_t w, int64_t h, int64_t x, int64_t y)
{
  return (x < 0 || y < 0 || x >= w || y >= h) ? -1 : labels[y * w + x];
}

// The sides of cell (x, y) that are boundary edges (bit s for side s): none for background cells.
GPUGEO_HD unsigned boundarySides(const int32_t* labels, int64_t w, int64_t h, int64_t x, int64_t y, int32_t count)
{
  const int32_t own = labels[y * w + x];
  if (own < 0 || own >= count)
    return 0;
  unsigned sides = 0;
  for (int s = 0; s < 4; ++s)
    if (labelAt(labels, w, h, x + sideDx(s), y + sideDy(s)) != own)
      sides |= 1u << s;
  return sides;
}

// The boundary edge that follows edge (x, y, side) of a region: at the edge's end the walk turns
// around its own cell when it can (the next side of the cell), else goes straight on along the cell
// ahead, else turns the other way onto the cell ahead and outside.
GPUGEO_HD void nextEdge(const int32_t* labels, int64_t w, int64_t h, int64_t x, int64_t y, int side, int64_t& nx,
                        int64_t& ny, int& nside)
{
  const int32_t own = labels[y * w + x];
  const int turn = (side + 1) & 3;  // the direction the edge is walked in is this side's normal
  const int64_t ax = x + sideDx(turn), ay = y + sideDy(turn);
  if (labelAt(labels, w, h, ax, ay) != own)
  {
    nx = x, ny = y, nside = turn;
    return;
  }
  const int64_t bx = ax + sideDx(side), by = ay + sideDy(side);
  if (labelAt(labels, w, h, bx, by) != own)
  {
    nx = ax, ny = ay, nside = side;
    return;
  }
  nx = bx, ny = by, nside = (side + 3) & 3;
}

// The corner an edge starts from, as a key (row * (w + 1) + column) and as coordinates.
GPUGEO_HD int64_t edgeStartColumn(int64_t x, int side)
{
  return x + ((side == 1 || side == 2) ? 1 : 0);
}

GPUGEO_HD int64_t edgeStartRow(int64_t y, int side)
{
  return y + ((side == 2 || side == 3) ? 1 : 0);
}

}  // namespace gpugeo::dem::detail
