// The CUDA backend's index and labelling kernels (voronoi_index_cuda.cu, voronoi_grid_cuda.cu), as
// host-callable launches for the labeller in voronoi_cuda.cu. Device code only; see voronoi_cuda.cu
// for the method.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "nearest_site.h"

namespace gpugeo::voronoi::detail::grid {

constexpr int kRoot = 64;          // root side in pixels
constexpr int kWarps = 8;          // warps per block of the labelling kernels
constexpr int kCap = 256;          // candidates of a tile in shared memory
constexpr int kQueueCap = 1 << 18;  // overflowed tiles per split level
constexpr int kMaxBuckets = 1 << 24;
constexpr int kMinShift = 1;       // buckets of at least 2 x 2 pixels ...
constexpr int kMaxShift = 10;      // ... and at most 1024 x 1024
constexpr int kHeavyPerSide = 2;   // a dense root's parts a side (launchLabels' heavy items; 4 tried: slower)
constexpr int kHeavyParts = kHeavyPerSide * kHeavyPerSide;

// Counters read back by the labeller's stats() (one atomicAdd per warp or block).
enum Counter
{
  kTilesLabelled,   // tiles whose pixels scanned a candidate list
  kTilesSplit,      // tiles whose list overflowed (split into four)
  kCandidates,      // list entries over the labelled tiles
  kRefinedPixels,   // pixels of those tiles re-evaluated in float64 at a near tie
  kDirectRoots,     // roots labelled by the direct scan
  kExactPixels,     // single pixels answered by an exact scan of their buckets (list still too long)
  kCrowdedRoots,    // roots labelled a pixel a thread (crowded buckets)
  kCounterCount
};

// The bucket grid over the whole raster and the band being labelled.
struct GridView
{
  int width = 0, height = 0;     // pixels of the whole grid
  int rowBegin = 0, rowEnd = 0;  // the band: rows [rowBegin, rowEnd); outputs are band-relative
  int bucket = 2, shift = 1;     // bucket side in pixels (a power of two) and its log2
  int bx = 0, by = 0;            // buckets a row, a column
  const int32_t* start = nullptr;  // bx * by + 1 offsets into the sorted sites
  const Point* points = nullptr;   // sorted by bucket
  const int32_t* index = nullptr;  // input index of each sorted site
  int sitesPerTile = 8;          // target list length of a tile
  int minTile = 2;               // smallest tile side a root plans
  int maxTile = 32;              // largest tile side
  double directMax = 24.0;       // a root is labelled directly when a warp's first ring holds at most this many sites
  double directMinFill = 0.5;    // ... and its buckets hold at least this many sites on average
  double crowdedMin = 1.0;       // a root holding this many sites a pixel is labelled a pixel a thread (0: never)
  double pixelSize = 1.0;
  int32_t* outSite = nullptr;
  float* outDistance = nullptr;  // may be null
  unsigned long long* counters = nullptr;
};

struct TileJob
{
  int c0, r0, side;
};

struct RootItem
{
  int c0, r0, extent, side;  // side 0: nothing (a root labelled directly, or split into quarters)
};

// Index: bucket key and rank within its bucket of sites [first, first + count) (skipping those
// flagged in `duplicate`, may be null), counts per bucket by atomics.
void launchCount(const Point* points, const uint8_t* duplicate, int first, int count, int shift, int bx, int by,
                 uint32_t* key, int32_t* rank, int32_t* bucketCount, cudaStream_t stream);
// The sorted order (start[key] + rank) and the points and input indices gathered by it.
void launchOrder(const Point* points, const uint8_t* duplicate, const uint32_t* key, const int32_t* rank,
                 const int32_t* start, int n, int32_t* order, cudaStream_t stream);
void launchGather(const Point* points, const int32_t* order, int n, Point* sorted, cudaStream_t stream);

// The banded index (voronoi_cuda.cu, detail/site_bands.h): every bucket of [first, first + count)
// starts at `value`; every slot of `points` made a site farther than any (its index the largest),
// so that a band not indexed yet reads as empty or as sites that never win; the sorted slot of
// sites [first, first + count) (start[key] + rank) given the point and its input index original[i].
void launchFill(int32_t* start, int first, int count, int32_t value, cudaStream_t stream);
void launchFarSites(Point* points, int32_t* index, int n, cudaStream_t stream);
void launchScatter(const Point* points, const int32_t* original, const uint32_t* key, const int32_t* rank,
                   const int32_t* start, int first, int count, Point* sorted, int32_t* index, cudaStream_t stream);

// Exact duplicates: `table` (capacity a power of two, at least n + 1, filled with -1) keeps the lowest
// input index of each distinct point; duplicate[i] = 1 where site i is not its point's lowest.
// `uniqueCount` (zeroed by the caller) receives the distinct points.
void launchMarkDuplicates(const Point* points, int n, int32_t* table, uint32_t capacity, uint8_t* duplicate,
                          int32_t* uniqueCount, cudaStream_t stream);

// Which roots of the band a labelling takes: all (ids null), or `count` of them, root ids[i] - base
// (numbered row by row from the band's first row, `rootsX` a row).
struct RootSet
{
  const int32_t* ids = nullptr;
  int count = 0;
  int base = 0;
};

// Labels the band of `g` (or the roots of it in `set`): plans the roots, labels the direct and the
// crowded ones, then the tiles and the split levels. `heavy`/`light`/`crowded` hold kHeavyParts x
// roots, roots and roots items, `counts` 2 + levels ints (heavy items, crowded roots, then each
// split level's jobs; zeroed here) and `jobs` levels x kQueueCap jobs.
void launchLabels(const GridView& g, RootSet set, int levels, RootItem* heavy, RootItem* light, RootItem* crowded,
                  int* counts, TileJob* jobs, int multiprocessors, cudaStream_t stream,
                  void (*phase)(void*, const char*), void* phaseContext);

// Sets the labelling kernels' shared memory limit (once per device, before launchLabels).
void prepareLabels();

}  // namespace gpugeo::voronoi::detail::grid
