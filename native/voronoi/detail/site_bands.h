// Bands of the sites for the GPU backend's overlapped start (voronoi_cuda.cu): the sites cut by
// bucket rows into bands of about equal counts, so that each band's upload, index and the labelling
// of the pixel rows that only need it and the bands already there overlap the next band's upload.
//
// What a band's labelling reads. Every pixel's nearest site lies within a distance D of it: a
// coarse grid of kReachCell-pixel cells records which cells hold a site inside the grid, and a pixel
// whose cell is r cells (Chebyshev) from such a cell has a site within kReachCell * sqrt(2) * (r + 1).
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

struct SiteBands
{
  int shift = 0, bx = 0, by = 0;  // the bucket grid's side (2^shift pixels) and size
  std::vector<int> row0;          // band b: bucket rows [row0[b], row0[b + 1])
  std::vector<int32_t> offset;    // band b: sites [offset[b], offset[b + 1]) of the banded order
  std::vector<int> needFirst;     // band b's pixel rows are labelled from bands [needFirst[b], needLast[b]]
  std::vector<int> needLast;
  std::vector<int> order;         // the order the bands go up in (and are indexed in)
  int32_t fullestCell = 0;        // the most sites in a kReachCell cell (those outside the grid in
                                  // the nearest edge cell): no bucket of at most that side holds more

  int count() const { return row0.empty() ? 0 : static_cast<int>(row0.size()) - 1; }
};

// The bucket row of a pixel-frame point (the device's bucketKey's).
inline int bucketRow(const Point& p, int shift, int by)
{
  return bucketOf(p.y, shift, by);
}

// Rows beyond a pixel that the GPU's labelling of it may read, where every pixel of its band has a
// site within `nearest` (buckets of `bucket` pixels, tiles of at most `maxTile`).
int reachRows(double nearest, int bucket, int maxTile);

// The order the bands go up in: each next band the one whose arrival lets the most labelling start
// (the bands whose whole reach is then up) for the sites it brings; a pixel counts 1, a site 15 (the
// GPU's labelling of 8192^2 pixels with 4,000,000 sites against 100, H200). Where no band lets
// anything start, the one with the fewest sites.
std::vector<int> uploadOrder(const SiteBands& bands, int width, int height);

// The bands of n pixel-frame points on a width x height grid with buckets of 2^shift pixels, at most
// `bands` of them, each a whole number of 64-pixel root rows; none (count() == 0) where fewer than
// three bands come out or no site lies inside the grid.
SiteBands planSiteBands(const Point* points, int64_t n, int width, int height, int shift, int maxTile, int bands,
                        int threads);

// The points in band order (stable within a band) into `banded`, each one's input index into
// `original` (n values each).
void partitionSites(const SiteBands& bands, const Point* points, int64_t n, Point* banded, int32_t* original,
                    int threads);

// The most sites any bucket holds (up to 65,535), counting the points in band order
// (partitionSites' `banded`), a band a thread.
int32_t fullestBucket(const SiteBands& bands, const Point* banded, int threads);

}  // namespace gpugeo::voronoi::detail
