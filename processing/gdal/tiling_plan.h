// The memory a DEM tool may use and how it spends it: in memory, or tile by tile (native/dem/tiled)
// with which tiles; and the process-wide state a tiled run keeps small (GDAL's block cache, the heap
// pages freed).
#pragma once

#include <cstdint>
#include <string>

#include "core/backend.h"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::gdal {

// Whether a DEM tool runs in memory or tile by tile, and with which tiles.
struct TilingPlan
{
  bool tiled = false;
  int64_t budgetBytes = 0;     // the memory budget
  int64_t inMemoryBytes = 0;   // what the in-memory run would hold
  std::string budgetSource;    // where the budget came from, for the log ("given" for budgetMiB)
  int64_t gdalCacheBytes = 0;  // GDAL's block cache during a tiled run (GdalCacheLimit)
  // On the GPU: its memory free at the start, its budget (half of that, at most the budget), and
  // what the in-memory GPU run would hold.
  int64_t gpuFreeBytes = 0, gpuBudgetBytes = 0, gpuInMemoryBytes = 0;
  dem::tiled::TiledOptions options;  // options.backend: the resolved device
  // A tiled run whose tiles do not fit: fits is false, and neededBytes is the budget that tiles of
  // 16 x 16 cells would need (0 where the budget holds them but the GPU's cannot hold one).
  bool fits = true;
  int64_t neededBytes = 0;
};

// The memory a tool may use: `budgetMiB` if above 0, else half the memory available now
// (MemAvailable of /proc/meminfo; 4 GiB where it cannot be read). The in-memory run needs
// `inMemoryBytesPerCell` per cell plus its band of rows read as float64 (up to 32 MiB); a tiled run,
// for each tile in flight (one a thread), `tileBytesPerCell` plus 8 (the window read as float64) per
// cell of the tile and its halo, plus 48 bytes per perimeter cell of every tile for the graph, plus
// GDAL's block cache, held during the run at an eighth of the budget (128 KiB to 256 MiB). Runs
// tiled when `forceTiled` or the in-memory need passes the budget, with the largest square tiles (a
// multiple of 256 cells a side, GeoTIFF's blocks, up to 4,096; smaller budgets: multiples of 16, down
// to 16) that fit; where not even 16 x 16 tiles fit, the plan says so (fits, neededBytes).
// On the GPU (`backend`), also tiled where the in-memory GPU run (`gpuInMemoryBytesPerCell`) would
// pass the GPU's budget, half its free memory (at most the budget), or its 2^30 cells; the tiles then
// also fit that budget, as many at a time on the GPU as it holds (dem::tiled::kGpuBytesPerTileCell),
// at most one a thread, and what the budget has left beyond them keeps the flat mask's tiles between
// its rounds (TiledOptions::gpuKeepBytes). On the CPU's side, what the budget has left beyond the tiles
// in flight and the graph keeps the raise's tiles between its rounds (TiledOptions::hostKeepBytes).
// What a tiled run holds for the whole raster besides its tiles (the stream network's per-segment
// fields) may take the budget too (options.heldBytesLimit): tiles and those together stay within the
// memory available, and past it the run stops with a clear error instead of being killed.
// `halo`: the cells a side around a tile that its working window holds (1 for most tools; breaching's
// channels read a wide margin).
TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, int64_t width, int64_t height, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend = Backend::Cpu,
                      int64_t gpuInMemoryBytesPerCell = 0, int64_t halo = 1);

// The GPU's share of `gpuBudgetBytes` for options' tiles: options.gpuTiles tiles in flight (as many as
// fit, at least 1, at most `threads`) and, what is left beyond them, options.gpuKeepBytes for the flat
// mask's tiles kept between its rounds. planTiling() calls it; a caller that changes the tiles' size
// calls it again.
void shareGpuBudget(int64_t gpuBudgetBytes, int threads, dem::tiled::TiledOptions& options);

// Bytes as MiB for a message: whole from 10 MiB, else two significant digits.
std::string mebibytes(int64_t bytes);

// Holds GDAL's block cache (process-wide) at most at `bytes` while it lives, then gives back the
// limit it found: its default, 5% of the RAM, would otherwise keep much of a tiled run's rasters.
class GdalCacheLimit
{
public:
  explicit GdalCacheLimit(int64_t bytes);
  ~GdalCacheLimit();
  // Lowers the limit to `bytes` for the rest of its life (GDAL writes out the blocks past it): for
  // the last stage of a run, when no raster is read again.
  void shrink(int64_t bytes) const;
  GdalCacheLimit(const GdalCacheLimit&) = delete;
  GdalCacheLimit& operator=(const GdalCacheLimit&) = delete;

private:
  int64_t mPrevious;
};

// Gives the heap pages that freed memory left back to the system (glibc keeps them for reuse
// otherwise, so that a stage's peak would count what the stages before it freed). Nothing where the C
// library is not glibc.
void returnFreedMemory();

}  // namespace gpugeo::gdal
