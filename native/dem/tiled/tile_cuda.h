// The GPU's share of the tiled tools' work on one tile (tiled_cuda.cu; tiled_nocuda.cpp where the
// build has no CUDA). The rest of their GPU work uses dem_cuda.h's entry points on the tile: the fill
// of pass 2 (the tile with its perimeter held at its levels), the directions and the accumulation.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/run_control.h"
#include "dem/detail/priority_flood.h"

namespace gpugeo::dem::tiled::detail {

// Holds one of `slots` places on the GPU for one tile's work while it lives (TiledOptions::gpuTiles):
// the tiles' threads take turns, so that the device's memory holds at most that many tiles' work.
class GpuTurn
{
public:
  explicit GpuTurn(int slots);
  ~GpuTurn();
  GpuTurn(const GpuTurn&) = delete;
  GpuTurn& operator=(const GpuTurn&) = delete;
};

// Pass 1 of the tiled fill for one tile of width x height cells, given with a one-cell halo
// (zPadded, (width + 2) x (height + 2), NaN off the raster): the lowest spill between each pair of
// labels that meet in the tile, where the labels are tiled_fill.cpp's (the ocean for edge cells, and
// firstLabel + the place of each other perimeter cell) and each cell takes the label of a sink it
// reaches at its flooded level.
std::vector<dem::detail::Spill> floodSpillsCuda(const float* zPadded, int64_t width, int64_t height,
                                                int32_t firstLabel, const RunControl& control);

}  // namespace gpugeo::dem::tiled::detail
