// Plane Voronoi raster (allocation): every pixel centre of a grid labelled with its nearest site.
//
// Contract (both backends, and the brute-force reference in voronoi_reference.h):
// - A site's coordinates are taken to the grid's pixel frame in float64:
//   u = (x - originX) / pixelSize, v = (originY - y) / pixelSize. Pixel (column c, row r) has its
//   centre at (c + 0.5, r + 0.5) in that frame, exactly.
// - The squared distance is e = (c + 0.5 - u)^2 + (r + 0.5 - v)^2, evaluated in float64 in that
//   order without fused multiply-adds (detail/nearest_site.h). A pixel's label is the input index of
//   the site with the smallest e; equal e go to the lowest input index, so duplicate sites are fine.
// - The distance output is float(sqrt(e) * pixelSize), in CRS units.
// Both backends return exactly that label and that distance, bit for bit. Against the true
// Euclidean distances in real arithmetic, the label can differ only where the two nearest sites'
// distances differ by less than kNearTieBound (see below), from the rounding of u and v.
//
// Method on the CPU: the sites are sorted along a Hilbert curve into a packed bounding-box tree. The grid is cut
// into 64 x 64 tiles, each split into four while its list of candidates (the sites that can be
// nearest to one of its pixel centres) is long, down to 2 x 2: a root tile searches the tree, a
// child filters its parent's list. Each pixel then scans its tile's short list in float32 with a
// certified error bound and re-evaluates in float64 only when two candidates are too close to
// call. A 2 x 2 tile with more than 512 candidates (only under extreme clustering) answers each
// pixel by an exact search of the tree. On the GPU: the sites in a grid of buckets, each pixel
// labelled from the buckets around it (voronoi_cuda.cu). The source method (one GPU thread per pixel
// over all generators, with neighbourhood expansion when they are many) is in ../shared/papers (001).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::voronoi {

// A north-up grid of square pixels; (originX, originY) is the top-left corner in CRS units.
struct Grid
{
  double originX = 0.0;
  double originY = 0.0;
  double pixelSize = 1.0;
  int64_t width = 0;
  int64_t height = 0;

  int64_t pixelCount() const { return width * height; }
};

// Sites in the grid's CRS units; index i of these arrays is "site i" in the labels.
struct Sites
{
  const double* x = nullptr;
  const double* y = nullptr;
  int64_t count = 0;
};

// The most pixels a grid may have (2^31), the widest or tallest it may be (2^24: a band of whole
// rows must fit in memory), and the most sites (a little under 2^31, so that int32 leaf and slot
// arithmetic cannot overflow).
constexpr int64_t kMaxPixels = int64_t(1) << 31;
constexpr int64_t kMaxSide = int64_t(1) << 24;
constexpr int64_t kMaxSites = (int64_t(1) << 31) - 64;
// Sites farther than this from the grid, in pixels, are refused (their float64 distances would
// lose all precision).
constexpr double kMaxSiteOffsetPixels = 1e15;

// Near-tie bound, in pixels: a label can differ from the exact real-arithmetic nearest site only
// where the two nearest distances differ by less than
//   kNearTieRelative * (|u| + |v| + 1) * 2  +  kNearTieRelative * d
// with u, v the larger pixel-frame coordinates of the two sites and d their distance. For sites
// within 10^6 pixels of the grid origin that is below 1e-9 pixel.
constexpr double kNearTieRelative = 4.0e-16;

// Checks the grid and the sites against the preconditions above; throws InvalidInput naming the
// first offending value.
void validate(const Grid& grid, const Sites& sites);

struct LabellerOptions
{
  int threads = 0;  // CPU threads; 0: defaultThreadCount()
  // GPU only: the most device memory the band buffers may take; 0: a share of what is free.
  std::size_t gpuMemoryBudget = 0;
};

// Counters of what happened, for the log and the tests. uniqueSites is the same on both backends;
// the others count each backend's own method (on the GPU: tiles are the bucket grid's tiles, and
// denseTiles the roots and single pixels answered by an exact scan of their buckets).
struct LabelStats
{
  int64_t uniqueSites = 0;    // after dropping exact duplicates (the lowest index is kept)
  int64_t tiles = 0;          // leaf tiles of the tile quadtree (their pixels scan the tile's list)
  int64_t splitTiles = 0;     // tiles split into four
  int64_t denseTiles = 0;     // leaf tiles answered per pixel by the tree (list too long)
  int64_t candidates = 0;     // list entries over all leaf tiles
  int64_t refinedPixels = 0;  // pixels re-evaluated in float64 because of a near tie
  int64_t siteBands = 0;      // GPU: bands of sites uploaded, indexed and labelled in turn (0: one piece)
  int64_t labelPieces = 0;    // GPU: runs of pixel rows labelled as soon as their bands are there (0: one piece)
  int64_t crowdedRoots = 0;   // GPU: roots of crowded buckets labelled a pixel a thread (also in denseTiles)

  bool operator==(const LabelStats& o) const
  {
    return uniqueSites == o.uniqueSites && tiles == o.tiles && splitTiles == o.splitTiles &&
           denseTiles == o.denseTiles && candidates == o.candidates && refinedPixels == o.refinedPixels &&
           siteBands == o.siteBands && labelPieces == o.labelPieces &&
           crowdedRoots == o.crowdedRoots;
  }
};

class Labeller
{
public:
  virtual ~Labeller() = default;

  // Labels rows [row0, row0 + rows) of the grid (InvalidInput outside it). `site` receives rows * width input site indices,
  // row-major; `distance` (may be null) the distances in CRS units. Throws Canceled when
  // control.isCanceled() turns true (checked many times a second), DeviceOutOfMemory when the GPU
  // cannot hold even one tile row, DeviceError on other CUDA failures.
  virtual void labelRows(int64_t row0, int64_t rows, int32_t* site, float* distance, const RunControl& control) = 0;

  virtual Backend backend() const = 0;
  virtual std::string deviceName() const = 0;
  // Time per stage so far: prepare (pixel frame and tree), upload, compute, download.
  virtual const StageTimes& times() const = 0;
  virtual const LabelStats& stats() const = 0;
  // Things the caller should pass on to the user (e.g. the GPU band had to shrink).
  virtual std::vector<std::string> warnings() const = 0;
};

// Builds the labeller for `backend` (Cpu or Gpu): validates, takes the sites to the pixel frame and
// builds the site tree (on the device for Gpu). Throws InvalidInput, DeviceUnavailable (Gpu without
// a usable device or in a build without CUDA), DeviceOutOfMemory, Canceled.
std::unique_ptr<Labeller> makeLabeller(Backend backend, const Grid& grid, const Sites& sites,
                                       const LabellerOptions& options, const RunControl& control);

}  // namespace gpugeo::voronoi
