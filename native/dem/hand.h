// Height above the nearest drainage (HAND, Nobre et al. 2011) on D8 directions: for every cell, the
// first stream cell its flow path meets (itself for a stream cell), the cell's height above that
// stream cell and the length of the path to it. A path that ends off the grid, on nodata, in a pit
// that is not a stream cell or goes round a loop reaches no stream: no height, no distance.
//
// The path's length is the sum of its steps' D8 flow lengths (each step the width, height or diagonal
// of the cell it leaves, at that cell's row), summed in a fixed-point unit (a power of two of a metre,
// the finest that no path of the grid can overflow): the sums are exact integers, so the CPU's walk,
// the GPU's pointer jumping and the tile-by-tile run (detail/down_paths.h) give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "dem/dem.h"

namespace gpugeo::dem {

struct DrainageHeights
{
  std::vector<float> height;    // m above the stream cell the path reaches; NaN where none
  std::vector<float> distance;  // m along the path to it; NaN where none
  int64_t streamCells = 0;      // valid cells marked as stream
  int64_t drained = 0;          // valid cells that reach a stream (stream cells included)
  int64_t undrained = 0;        // valid cells that reach none
};

// `grid`: the elevations (NaN nodata) and cell sizes; `directions`: dem.h's codes for the same grid
// (a cell is valid where its elevation is finite and its direction is not kNoData); `streams`: per
// cell, nonzero for a stream cell (ignored on invalid cells). The elevations need not be the DEM the
// directions came from: a height is negative where the path climbs. Throws InvalidInput for arrays
// of the wrong size and for grids dem.h refuses.
DrainageHeights heightAboveDrainage(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions,
                                    const std::vector<uint8_t>& streams, const RunControl& control);

}  // namespace gpugeo::dem
