// The GPU's share of the tiled tools' work on one tile (tiled_cuda.cu; tiled_nocuda.cpp where the
// build has no CUDA): the fill's pass-1 flood and the flat mask's visits. The rest of their GPU work
// uses dem_cuda.h's entry points on the tile: the fill of pass 2 (the tile with its perimeter held at
// its levels), the directions and the accumulation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/run_control.h"
#include "core/hd.h"
#include "dem/detail/dem_math.h"
#include "dem/detail/priority_flood.h"
#include "dem/tiled/perimeter.h"

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

private:
  int64_t mStart = 0;  // steady-clock nanoseconds when the place was taken
};

// The turns taken on the GPU since the process started, for the benchmarks' account of where the
// time goes: how many, the nanoseconds threads waited for a place and held one (summed over threads).
struct GpuTurnTotals
{
  int64_t turns = 0, waitNs = 0, heldNs = 0;
};
GpuTurnTotals gpuTurnTotals();

// What the fill's pass-1 flood (tiled_fill.cpp's on the CPU, floodSpillsCuda's) seeds cell (px, py)
// of a tile given with a one-cell halo (pw x ph, NaN off the raster) with: kUnlabelled where it is
// nodata, the ocean for an edge cell (a nodata neighbour, the halo's included), firstLabel + its
// place for another perimeter cell, and kNotSeeded for any other cell.
constexpr int32_t kNotSeeded = -2;
GPUGEO_HD int32_t seedLabel(const float* z, int64_t pw, int64_t ph, int64_t px, int64_t py, int32_t firstLabel)
{
  if (dem::detail::isNoData(z[py * pw + px]))
    return dem::detail::kUnlabelled;
  for (int d = 0; d < 8; ++d)
    if (dem::detail::isNoData(z[(py + dem::stepY(d)) * pw + px + dem::stepX(d)]))
      return dem::detail::kOcean;
  if (px == 1 || py == 1 || px == pw - 2 || py == ph - 2)
    return firstLabel + int32_t(perimeterPlace(pw - 2, ph - 2, px - 1, py - 1));
  return kNotSeeded;
}

// Pass 1 of the tiled fill for one tile of width x height cells, given with a one-cell halo
// (zPadded, (width + 2) x (height + 2), NaN off the raster): the lowest spill between each pair of
// labels that meet in the tile, where the labels are tiled_fill.cpp's (the ocean for edge cells, and
// firstLabel + the place of each other perimeter cell) and each cell takes the label of a sink it
// reaches at its flooded level.
std::vector<dem::detail::Spill> floodSpillsCuda(const float* zPadded, int64_t width, int64_t height,
                                                int32_t firstLabel, const RunControl& control);

// One visit of the tiled flat mask (tiled_flats.cpp) to a tile on the GPU. The tile of width x height
// cells comes with a halo of two (zPadded, (width + 4) x (height + 4), NaN off the raster), and with
// the distances its neighbours' perimeters hold on the ring of cells around it (ringTowards,
// ringAway: one per ring cell, in the perimeter order of the (width + 2) x (height + 2) window around
// the tile; 0: not reached). The tile's two distances are then the shortest ways through its flat
// cells from its own sources and from the ring's (as tiled_flats.cpp's rounds compute them on the
// CPU). Returned per perimeter place of the tile: the two distances (0: not reached; `away` all 0
// without withAway), and with withAway the cell's equal-elevation component within the tile (its
// lowest cell, a padded index; -1 on nodata) and that component's greatest distance from higher
// ground within the tile. With `joinedHighest` (per perimeter place: the greatest distance of the
// component it joins across the tiles), the tile's mask (width x height cells) is written to `mask`.
//
// With `kept`, the tile's state stays on the device after a visit while the bytes it was given allow
// (TiledOptions::gpuKeepBytes): the elevations, classes, distances and components. A later visit to
// a tile it holds needs no zPadded (null): it sets the ring's new distances and lowers the kept ones
// from there, which ends where relaxing from scratch does (between rounds the ring's distances only
// fall, so the kept distances are never below the new shortest ones; relaxation lowers them to the
// same least fixed point), and keeps the components, which depend on the elevations alone. The visit
// that writes the mask (joinedHighest given) frees the tile's state (on its rank: in a distributed run
// another rank may still hold an older copy, kept until the flat mask ends).
class FlatTilesOnGpu
{
public:
  struct State  // tiled_cuda.cu's device buffers
  {
    virtual ~State() = default;
  };
  FlatTilesOnGpu(int64_t tiles, int64_t keepBytes) : mStates(std::size_t(tiles)), mKeepBytes(keepBytes) {}

  // Tile i's kept state, taken out for a visit (null when none is kept).
  std::unique_ptr<State> take(int64_t tile)
  {
    std::lock_guard<std::mutex> lock(mLock);
    Kept& k = mStates[std::size_t(tile)];
    mInUse -= k.bytes;
    k.bytes = 0;
    return std::move(k.state);
  }
  bool holds(int64_t tile) const
  {
    std::lock_guard<std::mutex> lock(mLock);
    return mStates[std::size_t(tile)].state != nullptr;
  }
  // Keeps tile i's state of `bytes` while the budget allows; otherwise it is freed.
  void put(int64_t tile, std::unique_ptr<State> state, int64_t bytes)
  {
    std::lock_guard<std::mutex> lock(mLock);
    if (mInUse + bytes > mKeepBytes)
      return;
    mStates[std::size_t(tile)] = Kept{std::move(state), bytes};
    mInUse += bytes;
    mPeak = std::max(mPeak, mInUse);
  }
  int64_t peakBytes() const
  {
    std::lock_guard<std::mutex> lock(mLock);
    return mPeak;
  }

private:
  struct Kept
  {
    std::unique_ptr<State> state;
    int64_t bytes = 0;
  };
  mutable std::mutex mLock;
  std::vector<Kept> mStates;
  int64_t mKeepBytes = 0, mInUse = 0, mPeak = 0;
};

struct FlatTileResult
{
  std::vector<int32_t> towards, away, component, highest;
};
FlatTileResult flatTileCuda(const float* zPadded, int64_t width, int64_t height, const int32_t* ringTowards,
                            const int32_t* ringAway, bool withAway, const int32_t* joinedHighest, int32_t* mask,
                            const RunControl& control, FlatTilesOnGpu* kept = nullptr, int64_t tile = -1);

}  // namespace gpugeo::dem::tiled::detail
