// The CUDA backend of the DEM tools (dem_cuda.cu; dem_nocuda.cpp where there is no CUDA). Each call
// uploads its input and downloads its result.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/polygon_rings.h"
#include "core/run_control.h"
#include "dem/dem.h"
#include "dem/isochrone_chain.h"
#include "dem/travel_time.h"

namespace gpugeo::dem::detail {

std::vector<float> fillCuda(const Grid& grid, const RunControl& control);
// The same into `out` (resized), whose room a caller reuses from call to call (the tiled tools).
void fillCuda(const Grid& grid, const RunControl& control, std::vector<float>& out);
std::vector<int32_t> flatMaskCuda(const Grid& grid, bool towardsOnly, const RunControl& control);
// dem.h's fillAndRaiseFlats, every step on the device (raise_cuda.cu).
RaisedFlats fillAndRaiseCuda(const Grid& grid, bool towardsOnly, const RunControl& control);
// With resolveFlats, the flat mask is made on the device too.
std::vector<uint8_t> directionsCuda(const Grid& grid, bool resolveFlats, const RunControl& control);
// The directions with a given flat mask (null: none) on a tile of the tiled directions given with its
// one-cell halo (`grid`, (width + 2) x (height + 2)): the tile's own cells into `tile` (resized; the
// halo's directions, which see the padded grid's border as the raster's, are dropped).
void directionsWithMaskCuda(const Grid& grid, const int32_t* mask, const RunControl& control, std::vector<uint8_t>& tile);
// The watershed's cells and area from its cells per row (each row's count times its cell area,
// summed from the top row down: the same bits on both backends; travel_time.cpp).
void watershedFromRows(const Grid& grid, const std::vector<int64_t>& rowCells, TravelTimes& out);
// Whether the fixed-point upstream areas (1e-6 m^2 in 64 bits, both backends) could overflow on this
// grid at all: its cells times its largest cell area pass 2^63 - 1 (more than 9.2 million km²).
bool upstreamAreaCanOverflow(const Grid& grid);
// Throws InvalidInput where a catchment of mostCells cells could pass that range (dem.cpp).
void checkUpstreamArea(const Grid& grid, int64_t mostCells);
// Minutes and speeds (NaN outside the watershed), and the watershed's cells and area.
TravelTimes travelTimeCuda(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation,
                           int64_t outlet, const VelocityModel& model, const RunControl& control);
// The travel times of one tile of the tiled tools (tiled_travel.cpp), given with a one-cell halo:
// `padded` the tile's elevations and its rows' cell sizes with the halo's, `directions` and `area` on
// the same cells (the halo's areas unused), `outlet` a cell of the padded grid or -1. A path that
// enters a halo cell ends there with that cell's time to the outlet (haloTimes, per place on the
// padded grid's border, tiled/perimeter.h's order; NaN: it never gets there; null: 0 for each). With
// perimeterOnly, `minutes` and `end` (the padded cell its path ends at) per perimeter place of the
// tile; else `minutes` per tile cell (NaN outside the watershed) and the speeds' range over the cells
// with a time (NaN where none has one).
struct TileTravel
{
  std::vector<double> minutes;
  std::vector<int32_t> end;
  double minSpeed = std::numeric_limits<double>::quiet_NaN(), maxSpeed = std::numeric_limits<double>::quiet_NaN();
};
void travelTileCuda(const Grid& padded, const uint8_t* directions, const int64_t* area, const VelocityModel& model,
                    int64_t outlet, const double* haloTimes, bool perimeterOnly, const RunControl& control,
                    TileTravel& out);
Accumulation accumulationCuda(const Grid& grid, const std::vector<uint8_t>& directions, const RunControl& control);
// One tile of the tiled accumulation: `grid` the tile (its rows' cell sizes), `paddedDirections` its
// directions with a one-cell halo (the halo unused), and the inflows from other tiles per perimeter
// place (tiled/perimeter.h's order; null: none) added to its perimeter cells' own. Into out.cells and
// out.area (resized): every cell's sums, or with perimeterOnly only the perimeter cells', per place.
void accumulationTileCuda(const Grid& grid, const uint8_t* paddedDirections, const int64_t* borderCells,
                          const int64_t* borderArea, bool perimeterOnly, const RunControl& control, Accumulation& out);

// The rings of a label grid's regions (regions.h), keys only (regions_cuda.cu); and the CPU's, for
// the same arrays (regions.cpp).
RawRings regionRingsCuda(const int32_t* labels, int64_t w, int64_t h, int32_t count, const RunControl& control);
// The same from labels already in device memory.
RawRings regionRingsOnDevice(const int32_t* deviceLabels, int64_t w, int64_t h, int32_t count,
                             const RunControl& control);
// Either backend's rings as polygons (host; regions.cpp).
BandPolygons polygonsFromRings(RawRings raw, int64_t width, const RunControl& control, int threads);

// How many bands the times up to `longest` make, in options.interval or the automatic interval
// (written to `interval`); throws InvalidInput past options.maxBands (isochrone_chain.cpp, for both
// backends).
int32_t chainBandCount(double longest, const ChainOptions& options, double& interval);

// The isochrone chain with every stage's arrays left on the device (isochrone_chain.h); the
// options are checked by the caller.
ChainResult isochroneChainCuda(const Grid& dem, const ChainOptions& options, const RunControl& control,
                               StageTimes& times);
RawRings regionRingsCpu(const int32_t* labels, int64_t w, int64_t h, int32_t count, int threads,
                        const RunControl& control);

}  // namespace gpugeo::dem::detail
