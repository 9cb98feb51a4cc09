// DEM hydrology: exact depression filling, flat resolution, D8 flow directions and flow
// accumulation (the source paper's chain of fill, D8 and downstream sums, before travel times).
//
// The grid is row-major, row 0 at the top (north), with NaN for nodata. Cells are 8-connected. An
// edge cell is a valid cell on the raster's border or next to a nodata cell: water leaves the grid
// there (the practice of ArcGIS, SAGA and WhiteboxTools; RichDEM seeds the border only).
//
// Filling. The filled elevation of a valid cell is the lowest level at which water standing on it
// could leave the grid: the minimum, over the 8-connected paths of valid cells from it to an edge
// cell, of the highest elevation on the path (the cell and the edge cell included). It is what
// Priority-Flood (Barnes et al. 2014) computes when seeded from the edge cells, and as it takes only
// minima and maxima of the input values, every correct method gives it bit for bit (a zero is
// written as +0).
//
// Flats (Barnes et al. 2014, "An efficient assignment of drainage direction over flat surfaces"):
// a flat cell is a valid cell that is not an edge cell and has no lower neighbour. Each flat that
// touches a cell of its elevation that can drain (a low edge) gets a mask: 2 x (8-connected steps
// from the low edges through the flat) + (the flat's highest count of steps from higher ground - the
// cell's own count), so flow runs towards the outlet and away from higher ground. Flats without an
// outlet (pits of a DEM not filled) get no mask.
//
// D8. A valid cell drains to the neighbour of steepest positive drop (z - z_n) / distance, the
// distances being the cell's width (east, west), height (north, south) and diagonal; ties go to the
// first in the order E, SE, S, SW, W, NW, N, NE. Without a lower neighbour: a flat cell with a mask
// drains to the neighbour of its elevation with the steepest fall of the mask (same distances and
// order); an edge cell drains out of the grid (to its first neighbour off the grid or on nodata, in
// that order); any other cell (a pit) has no direction.
//
// Accumulation: every valid cell counts itself and every cell that drains through it; its area is
// the sum of those cells' areas (width x height), summed in fixed point (1e-6 m^2) so the order of
// the sums does not matter.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "core/hd.h"
#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::dem {

// The largest grid (cells) one call takes: int64 indices, int32 per-cell labels.
constexpr int64_t kMaxCells = (int64_t(1) << 31) - 1;

// The most device memory the GPU path holds at once, in bytes per cell of the DEM (its grid-sized
// buffers; dem_cuda.cu checks them before it starts): the fill, the directions (with the flat mask),
// the accumulation, and the isochrone chain (a Manning raster adds 4). And the most cells it takes
// (32-bit cell indices on the device).
constexpr int64_t kGpuFillBytesPerCell = 8;
constexpr int64_t kGpuDirectionBytesPerCell = 27;
constexpr int64_t kGpuAccumulationBytesPerCell = 45;
constexpr int64_t kGpuChainBytesPerCell = 85;
constexpr int64_t kGpuMostCells = 0x3ffffffe;

// The cell sizes (width and height, metres) the tools take: from a millimetre (a flume's DEM) to
// 1,000 km (a global DEM of 1 degree has 111 km). Beyond them the arithmetic breaks down: a cell's
// fixed-point area (1e-6 m²) leaves int64 past about 3,000 km, and the diagonal's square underflows
// for cells near 1e-160 m.
constexpr double kMinCellSize = 1e-3;
constexpr double kMaxCellSize = 1e6;

// Directions: index 0..7 in the order E, SE, S, SW, W, NW, N, NE (clockwise from east, row 0 at the
// top); kNoFlow for a pit, kNoData for a nodata cell.
constexpr uint8_t kNoFlow = 8;
constexpr uint8_t kNoData = 255;
constexpr int kDx[8] = {1, 1, 0, -1, -1, -1, 0, 1};
constexpr int kDy[8] = {0, 1, 1, 1, 0, -1, -1, -1};
// The same steps for code that also runs on the device.
GPUGEO_HD int stepX(int d)
{
  const int t[8] = {1, 1, 0, -1, -1, -1, 0, 1};
  return t[d];
}
GPUGEO_HD int stepY(int d)
{
  const int t[8] = {0, 1, 1, 1, 0, -1, -1, -1};
  return t[d];
}
// ESRI's codes for the eight directions (1 = E ... 128 = NE).
constexpr int kEsriCode[8] = {1, 2, 4, 8, 16, 32, 64, 128};

struct Grid
{
  const float* z = nullptr;  // width x height, NaN = nodata
  int64_t width = 0;
  int64_t height = 0;
  // One entry per row: the cells' width (east-west) and height (north-south) in metres (for a
  // geographic CRS, from the ellipsoid at the row's latitude).
  const double* cellWidth = nullptr;
  const double* cellHeight = nullptr;
};

// Throws InvalidInput for an empty grid, more than kMaxCells cells, null arrays, or cell sizes
// outside kMinCellSize .. kMaxCellSize.
void validateGrid(const Grid& grid);
// Throws InvalidInput naming the first row whose cell sizes lie outside kMinCellSize .. kMaxCellSize.
void validateCellSizes(const double* cellWidth, const double* cellHeight, int64_t rows);

// The filled DEM (nodata stays NaN).
std::vector<float> fillDepressions(Backend backend, const Grid& grid, int threads, const RunControl& control,
                                   StageTimes* times = nullptr);

// Which gradient a flat mask holds: Barnes et al.'s combined one (towards the outlet and away from
// higher ground), or the steps towards the outlet alone (an epsilon gradient).
enum class FlatGradient
{
  Combined,
  TowardsOutlet,
};

// Per cell: the flat mask (0 where the cell is not on a drained flat).
std::vector<int32_t> flatMask(Backend backend, const Grid& grid, int threads, const RunControl& control,
                              StageTimes* times = nullptr, FlatGradient gradient = FlatGradient::Combined);

// The DEM with every flat cell raised by its mask in float32 steps (ULPs, upwards), so that plain D8
// drains every cell. Where a flat is many steps across and its rim only a few steps higher, a raised
// cell can reach a rim cell's elevation and leave that cell with no lower neighbour: such overtaken
// cells (and any they overtake in turn) are raised too, each to one step above its lowest neighbour.
// The result is the lowest DEM, at or above the mask-raised one, in which every valid cell that is not
// an edge cell has a strictly lower neighbour: unique, whatever the order of the work (what
// Priority-Flood+epsilon would give when run on the mask-raised DEM).
struct RaisedFlats
{
  std::vector<float> z;
  int64_t raised = 0;         // cells raised by their mask
  int64_t raisedInTurn = 0;   // cells raised because raised neighbours overtook them
};
RaisedFlats raiseFlats(const Grid& grid, const std::vector<int32_t>& mask);
// x raised by `steps` float32 steps (−0 counts as +0; stops at the largest finite float).
float raiseBySteps(float x, int64_t steps);

// fillDepressions, then flatMask (`gradient`) and raiseFlats of the filled DEM, on `backend` (on the GPU
// in one call, the arrays kept on the device): the same bits and counts on both.
RaisedFlats fillAndRaiseFlats(Backend backend, const Grid& grid, FlatGradient gradient, int threads,
                              const RunControl& control, StageTimes* times = nullptr);

// D8 directions (0..7, kNoFlow, kNoData). With resolveFlats, flats drain by their mask.
std::vector<uint8_t> flowDirections(Backend backend, const Grid& grid, bool resolveFlats, int threads,
                                    const RunControl& control, StageTimes* times = nullptr);

// Directions that go round in a loop (they may come from elsewhere than flowDirections()): what
// flowAccumulation() and the travel times throw for them.
struct LoopedDirections : InvalidInput
{
  using InvalidInput::InvalidInput;
};

struct Accumulation
{
  std::vector<int64_t> cells;  // 0 on nodata
  std::vector<int64_t> area;   // in 1e-6 m^2; 0 on nodata
};

// Accumulation along D8 directions (as flowDirections gives them) over the grid. Throws
// LoopedDirections when the directions go round in a loop, InvalidInput when a catchment's area
// could pass the fixed-point range.
Accumulation flowAccumulation(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions, int threads,
                              const RunControl& control, StageTimes* times = nullptr);

}  // namespace gpugeo::dem
