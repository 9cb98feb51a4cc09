#include "gdal/tiling_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <gdal.h>

namespace gpugeo::gdal {

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kReadBytesPerCell = 8;    // a window read as float64
constexpr int64_t kReadBuffer = 32 * kMiB;  // the in-memory run's band of rows read as float64
constexpr int64_t kGraphBytesPerPerimeterCell = 48;

// Bytes available now (MemAvailable), or 0 where /proc/meminfo cannot tell.
int64_t availableMemory()
{
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

// What a tiled run holds with square tiles of `side` cells.
int64_t tiledBytes(int64_t width, int64_t height, int64_t side, int64_t tileBytesPerCell, int threads, int64_t halo)
{
  const int64_t w = std::min(side, width), h = std::min(side, height);
  const int64_t tiles = ((width + w - 1) / w) * ((height + h - 1) / h);
  // A window reaches no further than the raster and a ring of nodata around it.
  const int64_t ww = std::min(w + 2 * halo, width + 2), wh = std::min(h + 2 * halo, height + 2);
  return int64_t(threads) * ww * wh * (tileBytesPerCell + kReadBytesPerCell) +
         tiles * (2 * w + 2 * h) * kGraphBytesPerPerimeterCell;
}

}  // namespace

std::string mebibytes(int64_t bytes)
{
  const double value = double(bytes) / double(kMiB);
  char text[32];
  std::snprintf(text, sizeof text, value >= 10 ? "%.0f" : "%.2g", value);
  return text;
}

TilingPlan planTiling(int64_t budgetMiB, bool forceTiled, int64_t width, int64_t height, int64_t inMemoryBytesPerCell,
                      int64_t tileBytesPerCell, int threads, Backend backend, int64_t gpuInMemoryBytesPerCell,
                      int64_t halo)
{
  TilingPlan plan;
  threads = std::max(1, threads);
  if (budgetMiB > 0)
  {
    plan.budgetBytes = budgetMiB * kMiB;
    plan.budgetSource = "given";
  }
  else
  {
    const int64_t available = availableMemory();
    plan.budgetBytes = available > 0 ? available / 2 : 4096 * kMiB;
    plan.budgetSource = available > 0 ? "half the memory available now (" + mebibytes(available) + " MiB)"
                                      : "a default of 4096 MiB (the available memory is unknown)";
  }
  plan.options.heldBytesLimit = plan.budgetBytes;
  const int64_t cells = width * height;
  plan.inMemoryBytes = cells * inMemoryBytesPerCell + std::min(kReadBuffer, cells * kReadBytesPerCell);
  plan.tiled = forceTiled || plan.inMemoryBytes > plan.budgetBytes;
  plan.options.backend = backend;
  if (backend == Backend::Gpu)
  {
    plan.gpuFreeBytes = dem::tiled::freeGpuMemory();
    plan.gpuBudgetBytes = std::min(plan.budgetBytes, plan.gpuFreeBytes / 2);
    plan.gpuInMemoryBytes = cells * gpuInMemoryBytesPerCell + 64 * kMiB;
    plan.tiled = plan.tiled || plan.gpuInMemoryBytes > plan.gpuBudgetBytes || cells > dem::kGpuMostCells;
  }
  if (!plan.tiled)
    return plan;
  plan.gdalCacheBytes = std::clamp(plan.budgetBytes / 8, kMiB / 8, 256 * kMiB);  // (a block of 256 x 256 float32 is 256 KiB)
  const int64_t forTiles = plan.budgetBytes - plan.gdalCacheBytes;
  const auto fits = [&](int64_t s) { return tiledBytes(width, height, s, tileBytesPerCell, threads, halo) <= forTiles; };
  int64_t side = 0;
  for (int64_t s = 4096; s >= 256 && side == 0; s -= 256)
    if (fits(s))
      side = s;
  for (int64_t s = 240; s >= 16 && side == 0; s -= 16)
    if (fits(s))
      side = s;
  if (side == 0)
  {
    plan.fits = false;
    plan.neededBytes = tiledBytes(width, height, 16, tileBytesPerCell, threads, halo) + plan.gdalCacheBytes;
    return plan;
  }
  if (backend == Backend::Gpu)
  {
    // One tile at a time on the GPU: the largest side (a multiple of 256, else of 16) that fits its budget.
    const auto fitsGpu = [&](int64_t s) { return (s + 2) * (s + 2) * dem::tiled::kGpuBytesPerTileCell <= plan.gpuBudgetBytes; };
    while (side > 256 && !fitsGpu(side))
      side -= 256;
    while (side > 16 && !fitsGpu(side))
      side -= 16;
    if (!fitsGpu(side))
    {
      plan.fits = false;
      return plan;
    }
  }
  plan.options.tileWidth = plan.options.tileHeight = side;
  plan.options.threads = threads;
  plan.options.hostKeepBytes = std::max<int64_t>(0, forTiles - tiledBytes(width, height, side, tileBytesPerCell, threads, halo));
  if (backend == Backend::Gpu)
    shareGpuBudget(plan.gpuBudgetBytes, threads, plan.options);
  return plan;
}

void shareGpuBudget(int64_t gpuBudgetBytes, int threads, dem::tiled::TiledOptions& options)
{
  const int64_t perTile = (options.tileWidth + 2) * (options.tileHeight + 2) * dem::tiled::kGpuBytesPerTileCell;
  options.gpuTiles = int(std::clamp<int64_t>(gpuBudgetBytes / perTile, 1, threads));
  options.gpuKeepBytes = std::max<int64_t>(0, gpuBudgetBytes - options.gpuTiles * perTile);
}

GdalCacheLimit::GdalCacheLimit(int64_t bytes) : mPrevious(GDALGetCacheMax64())
{
  if (bytes < mPrevious)
    GDALSetCacheMax64(bytes);
}

GdalCacheLimit::~GdalCacheLimit()
{
  GDALSetCacheMax64(mPrevious);
}

void GdalCacheLimit::shrink(int64_t bytes) const
{
  if (bytes < GDALGetCacheMax64())
    GDALSetCacheMax64(bytes);
}

void returnFreedMemory()
{
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace gpugeo::gdal
