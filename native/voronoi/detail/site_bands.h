// Bands of the sites for the GPU backend's overlapped start (voronoi_cuda.cu): the sites cut by
// bucket rows into bands of about equal work (pixels to label and sites), so that each band's
// upload, index and the labelling of the pixel rows that only need it and the bands already there
// overlap the next band's upload.
//
// What a band's labelling reads. Every pixel's nearest site lies within a distance D of it: a
// coarse grid of kReachCell-pixel cells records which cells hold a site inside the grid, and a pixel
// whose cell is r cells (Chebyshev) from such a cell has a site within kReachCell * sqrt(2) * (r + 1);
// within a quarter of that where every quarter-side sub-cell of its cell holds one (crowded sites).
// The GPU's kernels read buckets only within a reach of the pixels they label that follows from D
// (voronoi_grid_cuda.cu): the direct scan grows its rectangle until every best is certified, so no
// farther than D + a bucket, staging two rings of buckets around its root; a tile widens by doubling
// until it finds a site (at most 2D, or a bucket) and then reads within the bound that site gives,
// at most sqrt(2) (tile side + widening + bucket) beyond the tile. reachRows() takes the larger with
// a margin; a band's labelling waits for every band within that many rows of its pixels. A band
// that has not arrived reads as empty buckets, so the margin is what keeps the labels exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "nearest_site.h"

namespace gpugeo::voronoi::detail {

constexpr int kReachShift = 4;  // the cells that bound the nearest distance: 2^4 pixels a side
constexpr int kReachCell = 1 << kReachShift;
constexpr int kRootSide = 64;  // the labelling kernels' roots (pixels a side): bands and pieces are made of them

struct SiteBands
{
  int shift = 0, bx = 0, by = 0;  // the bucket grid's side (2^shift pixels) and size
  std::vector<int> row0;          // band b: bucket rows [row0[b], row0[b + 1])
  std::vector<int32_t> offset;    // band b: sites [offset[b], offset[b + 1]) of the banded order
  std::vector<int> needFirst;     // band b's pixel rows are labelled from bands [needFirst[b], needLast[b]]
  std::vector<int> needLast;
  std::vector<int> order;         // the order the bands go up in (and are indexed in): each next band
                                  // the one whose arrival lets the most labelling start for its sites
  // The labelling's pieces, each a set of roots (kRootSide-pixel squares, numbered ry * rootsX + rx
  // over the whole grid) that can start at the same point of `order`: piece p's roots are
  // pieceRoots[pieceAt[p], pieceAt[p + 1]) (increasing), all of whose reads lie in the bands
  // order[0], ..., order[pieceReady[p]] (increasing with p). Roots, not rows: a crowded patch's roots
  // read a few rows around them and start with their band, while the sparse rows beside them wait
  // for the bands far above and below.
  int rootsX = 0;
  std::vector<int32_t> pieceRoots;
  std::vector<int32_t> pieceAt;
  std::vector<int> pieceReady;
  int32_t fullestCell = 0;        // the most sites in a kReachCell cell (those outside the grid in
                                  // the nearest edge cell): no bucket of at most that side holds more

  int count() const { return row0.empty() ? 0 : static_cast<int>(row0.size()) - 1; }
  int pieces() const { return static_cast<int>(pieceReady.size()); }
};

// The bucket row of a pixel-frame point (the device's bucketKey's).
inline int bucketRow(const Point& p, int shift, int by)
{
  return bucketOf(p.y, shift, by);
}

// Rows beyond a pixel that the GPU's labelling of it may read, where every pixel of its band has a
// site within `nearest` (buckets of `bucket` pixels, tiles of at most `maxTile`).
int reachRows(double nearest, int bucket, int maxTile);

// The bands of n pixel-frame points on a width x height grid with buckets of 2^shift pixels, at most
// `bands` of them, each a whole number of 64-pixel root rows, of about equal work (a pixel 1, a site
// 15: the GPU's labelling of 8192^2 pixels with 4,000,000 sites against 100, H200), with their upload
// order and the labelling's pieces; none (count() == 0) where fewer than three bands come out or no
// site lies inside the grid.
SiteBands planSiteBands(const Point* points, int64_t n, int width, int height, int shift, int maxTile, int bands,
                        int threads);

// The points in band order (stable within a band) into `banded`, each one's input index into
// `original` (n values each).
void partitionSites(const SiteBands& bands, const Point* points, int64_t n, Point* banded, int32_t* original,
                    int threads);

// The input indices of the banded order (partitionSites' `original`, increasing within a band) as
// they go up: per band its first index, then the gaps between consecutive ones in the fewest bytes
// that hold every gap of the band (1, 2 or 4), so that a band spread through the input costs 1 byte
// a site rather than 4. The device restores them by a scan (out[0] = first, out[j + 1] = out[j] +
// gap[j]; a band's last gap is 0).
struct IndexGaps
{
  std::vector<int> bytes;          // per band: 1, 2 or 4 bytes a gap
  std::vector<int64_t> at;         // per band: where its gaps start (16-byte aligned); at[count] the total
  std::vector<int32_t> first;      // per band: its first input index (0 for an empty band)
};
IndexGaps planIndexGaps(const SiteBands& bands, const int32_t* original, int threads);
void writeIndexGaps(const SiteBands& bands, const IndexGaps& gaps, const int32_t* original, uint8_t* out,
                    int threads);

// The most sites any bucket holds (up to 65,535), counting the points in band order
// (partitionSites' `banded`), a band a thread.
int32_t fullestBucket(const SiteBands& bands, const Point* banded, int threads);

}  // namespace gpugeo::voronoi::detail
