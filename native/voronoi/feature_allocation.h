// Allocation and distance to lines and polygons: every pixel centre of a grid labelled with its
// nearest feature, by the Euclidean distance to the feature's segments (not to rasterized pixels).
//
// Contract (both backends, and the brute-force reference in the tests):
// - Vertices go to the grid's pixel frame as the point sites do (voronoi_raster.h); each segment
//   is a Segment of detail/segment_grid.h and the squared distance from a pixel centre to it is
//   segmentSquared() there, evaluated in float64 in that order without fused operations. A path
//   of one vertex is a point; a zero-length segment is its point.
// - Polygons: with PolygonInterior::Zero a pixel centre inside a polygon (even-odd over the rings
//   of each polygon part: shells and holes; inside any part of a multipolygon) is at distance 0
//   from it; with PolygonInterior::Boundary only the rings count, inside or out. A centre is
//   inside a part when an odd number of the crossings of its row's centre line with the part's
//   rings (half-open in y, x in float64) lie left of it (x < the centre's); the host computes
//   them once for both backends.
// - A pixel's label is the index of the feature at the smallest squared distance; equal distances
//   go to the lowest feature index. The distance output is float(sqrt(e) * pixelSize).
// Against exact arithmetic a label can differ only where two features' distances differ by less
// than about 1e-15 of the coordinates' magnitude in pixels (from the rounding of the pixel frame
// and of the formula).
//
// Method (both backends): the segments are listed in a grid of square buckets (each segment in
// every bucket it passes through; a bucket's side about the mean spacing of the segments), with a
// pyramid of the buckets' counts above it. Each block of 8 x 8 pixels scans its buckets and one
// ring (a few more while that stays small; where all are empty, a near non-empty bucket found in
// the pyramid); the least distance from the block's centre plus the block's radius bounds every
// pixel's nearest distance, and every other bucket within that bound is found by descending the
// pyramid (empty cells and cells beyond it pruned). The
// segments that may be nearest to one of its pixels are kept, and cut again for smaller parts of
// the block, down to 2 x 2 cells whose pixels scan their lists. Polygon interiors are painted
// first from their rows' crossings. The CPU hands blocks to its threads; the GPU gives each block
// a warp (feature_allocation_cuda.cu).
#pragma once

#include <cstdint>
#include <memory>

#include "voronoi_raster.h"

namespace gpugeo::voronoi {

// Line or polygon features as sites, in the grid's CRS units.
struct FeatureSites
{
  const double* x = nullptr;  // the vertices of every path, path after path
  const double* y = nullptr;
  const int64_t* pathStart = nullptr;    // pathCount + 1 offsets into x and y
  const int32_t* pathFeature = nullptr;  // each path's feature: its index in the labels
  int64_t pathCount = 0;
  int64_t featureCount = 0;
  // Polygons: each path is a ring (the last vertex joins the first, whether repeated or not) and
  // pathPart[p] names its polygon part: the rings of one part (its shell and holes) are combined
  // even-odd. Null for lines (each path an open polyline).
  const int32_t* pathPart = nullptr;
};

enum class PolygonInterior
{
  Zero,      // inside a polygon the distance is 0 and the label that polygon's
  Boundary,  // the distance to the nearest ring, inside or out
};

struct FeatureLabellerOptions
{
  int threads = 0;                 // CPU threads; 0: defaultThreadCount()
  std::size_t gpuMemoryBudget = 0;  // GPU: the most the band buffers may take; 0: a share of what is free
  PolygonInterior interior = PolygonInterior::Zero;
};

// At most this many vertices (paths of one vertex and open rings count one more each).
constexpr int64_t kMaxFeatureVertices = (int64_t(1) << 31) - 64;

// Checks the grid (as validate(Grid, Sites)) and the features: at least one path with a vertex,
// finite coordinates within 1e15 pixels of the grid, path offsets non-decreasing, each path's
// feature in [0, featureCount), featureCount <= kMaxSites. Throws InvalidInput naming the first
// offending value.
void validate(const Grid& grid, const FeatureSites& features);

// The labeller of a grid for these features (LabelStats: uniqueSites the features with a segment,
// tiles the blocks, splitTiles the blocks whose own buckets and ring held nothing, refinedPixels the
// pixels inside a polygon, all the same on both backends; candidates the lengths of each backend's
// candidate lists (the CPU's 2 x 2 cells', the GPU's blocks'); denseTiles the GPU's blocks whose
// tile or own list overflowed shared memory and were labelled block by block, 0 on the CPU).
// Throws what makeLabeller() throws.
std::unique_ptr<Labeller> makeFeatureLabeller(Backend backend, const Grid& grid, const FeatureSites& features,
                                              const FeatureLabellerOptions& options, const RunControl& control);

}  // namespace gpugeo::voronoi
