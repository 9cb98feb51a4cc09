// What a cell finds at the end of its D8 path, with the path's length in fixed point: the backends'
// part of hand.h, shared by its in-memory and tiled runs (hand.cpp, hand_cuda.cu,
// tiled/tiled_hand.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/hd.h"
#include "core/run_control.h"

namespace gpugeo::dem::detail {

// end[] values besides a known end (>= 0, the caller's id of it).
constexpr int64_t kPathUnknown = -1;  // to resolve
constexpr int64_t kPathNone = -2;     // reaches no end

// The length unit (metres, a power of two): the finest in which a path through every one of `cells`
// cells, each step the grid's longest, stays below 2⁶² units.
double pathUnit(const double* cellWidth, const double* cellHeight, int64_t rows, int64_t cells);

// Per row, its steps in units: east-west, north-south, diagonal (three entries a row).
std::vector<int64_t> rowSteps(const double* cellWidth, const double* cellHeight, int64_t rows, double unit);

// The step of direction d (0..7) from a row's three entries.
GPUGEO_HD int64_t stepUnits(const int64_t* row, int d)
{
  return (d & 1) ? row[2] : ((d & 2) ? row[1] : row[0]);
}

// On entry end[c] is a known end (>= 0, with length[c] the cell's length to it), kPathUnknown or
// kPathNone; `steps` holds rowSteps()' three entries per row of this grid. On return each unknown
// cell holds the end its path meets first and its length to it (its own step plus its successor's
// length), or kPathNone where the path leaves the grid, meets kNoFlow or kNoData, or loops.
void resolvePathsCpu(const uint8_t* directions, int64_t width, int64_t height, const int64_t* steps, int64_t* end,
                     int64_t* length, const RunControl& control);

// hand.h's in-memory heights and distances, the whole run on the device (its cells fewer than 2³¹):
// stream cells (streams nonzero on valid cells) end their own paths, the paths resolved, each cell's
// height above its end and its length times `unit` into `heights` and `distances` (NaN where none).
struct DrainageCounts
{
  int64_t streamCells = 0, drained = 0, undrained = 0;
};
DrainageCounts drainageHeightsCuda(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t width,
                                   int64_t height, const int64_t* steps, double unit, float* heights,
                                   float* distances, const RunControl& control);

// One tile of tiled/tiled_hand.cpp on the device: `z`, `directions` and `streams` are the tile with its
// one-cell ring (pw x ph); ring cell k (in perimeterPlace's order of the pw x ph window) ends its own
// path at ringLength[k] where ringKnown[k], else reaches none. Pass 1 (ringZ null): each perimeter cell
// of the tile (tiling.h's order) gets its end (a padded index, < 0 none) and length into
// perimeterEnd and perimeterLength. Pass 2: the tile's (pw - 2) x (ph - 2) heights above their ends
// (a ring end's elevation from ringZ) and, when `distances` is given, lengths times `unit`; the counts.
DrainageCounts resolveTileCuda(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t pw,
                               int64_t ph, const int64_t* steps, const uint8_t* ringKnown, const int64_t* ringLength,
                               const float* ringZ, double unit, int64_t* perimeterEnd, int64_t* perimeterLength,
                               float* heights, float* distances, const RunControl& control);

}  // namespace gpugeo::dem::detail
