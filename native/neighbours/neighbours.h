// Fixed-radius and k-nearest neighbours of points in the plane or in space, and DBSCAN on them.
//
// The index (after the source patent's forest of small quadtrees): the points, taken relative to the
// centre of their bounding box, are quantised to 32 bits an axis in 2D (21 in 3D) and sorted along
// the Morton curve; the adaptive quadtree (octree) of that order is cut into its leaves, the coarsest
// cells holding at most kRegionCapacity points. Dense places get small regions, sparse places large
// ones. More than kRegionCapacity points with one code (duplicates) form runs cut into regions of
// kRegionCapacity in sorted order. Each region has the float64 bounding box of its points; a tree of
// fan-out 4 over the regions, in their Morton order, finds the regions within a distance of a box.
//
// Distances: Euclidean in the points' units, computed in float64 from the coordinates relative to
// the local origin (so UTM-sized coordinates keep their precision), squared and summed in axis order
// without fused multiply-adds, so the CPU and the GPU compare the same bits. A point is a neighbour of
// another when their squared distance is <= radius^2 (points at exactly the radius are included).
// Ties among equal distances go to the lower input index. A point is never its own neighbour;
// duplicates of it are (at distance 0).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::neighbours {

constexpr int kRegionCapacity = 64;
// The most points an index takes (input indices are int32 on the device).
constexpr int64_t kMaxPoints = (int64_t(1) << 31) - 1024;
// The widest spread of the points along an axis: squared distances within it stay finite.
constexpr double kMaxExtent = 1e150;
// The largest k.
constexpr int32_t kMaxK = 1024;

// Coordinates in any units; z == nullptr for points in the plane.
struct Points
{
  const double* x = nullptr;
  const double* y = nullptr;
  const double* z = nullptr;
  int64_t count = 0;
};

struct Query
{
  // >= 0. With k == 0 the neighbours are all the points within the radius (then radius > 0 or the
  // neighbours are the duplicates); with k > 0 the k nearest within it, 0 meaning no bound.
  double radius = 0;
  int32_t k = 0;
};

// One entry per input point.
struct Summary
{
  std::vector<int32_t> count;           // neighbours (the point itself excluded)
  std::vector<int64_t> nearest;         // the nearest other point at any distance; -1 when there is none
  std::vector<double> nearestDistance;  // its distance; NaN when there is none
  std::vector<double> meanDistance;     // mean distance to the neighbours; NaN without neighbours
};

// Where summarizeInto() writes, one entry per input point, in input order, with Summary's meanings.
// A null array is not written (nor copied from the GPU); radius queries skip the work that only it
// needs (counts alone: no distance sums and no search for the nearest point). Host memory the
// caller owns; page-locked memory (cudaMallocHost) makes the GPU backend's copies faster.
struct SummaryOutput
{
  int32_t* count = nullptr;
  int64_t* nearest = nullptr;
  double* nearestDistance = nullptr;
  double* meanDistance = nullptr;
};

// Unordered pairs of input indices, a < b, sorted by (a, b).
struct Pairs
{
  std::vector<int32_t> a, b;
  std::vector<double> distance;
};

// Where pairsInto() writes, Pairs' arrays, `capacity` entries each; a and b are required, a null
// distance is neither computed nor copied. Host memory the caller owns, page-locked for the fastest
// GPU copies.
struct PairsOutput
{
  int32_t* a = nullptr;
  int32_t* b = nullptr;
  double* distance = nullptr;
};

// Throws InvalidInput (from dbscan()) for a negative or non-finite eps or minPoints < 1.
struct DbscanOptions
{
  double eps = 0;                      // >= 0
  int64_t minPoints = 5;               // >= 1; a point is core when its eps-neighbourhood, itself included, has this many
  bool borderPointsAreNoise = false;   // DBSCAN*: only core points are clustered
};

// One entry per input point. Core points within eps of each other are in one cluster (exactly
// DBSCAN's definition); a border point (not core, a core point within eps) joins the cluster of its
// lowest-index core neighbour. Cluster ids are 1, 2, ... in order of each cluster's lowest core
// point index (QGIS's numbering: a cluster is numbered when its first core point in feature order is
// met); 0 is noise.
struct Clusters
{
  std::vector<int64_t> cluster;
  std::vector<uint8_t> core;
  std::vector<int64_t> size;  // size[c - 1]: points in cluster c
};

// The regions (the quadtree's leaves), for tests and statistics: order[i] is the input index of the
// i-th point in Morton order; region r holds order[start[r] .. start[r + 1]).
struct Layout
{
  std::vector<int32_t> order;
  std::vector<int64_t> start;
  int dimensions = 2;
};

// An index keeps state between queries (cached candidate lists, the last pair count): use one from
// one thread at a time.
class NeighbourIndex
{
public:
  virtual ~NeighbourIndex() = default;
  virtual Backend backend() const = 0;
  virtual const StageTimes& times() const = 0;
  virtual Layout layout() const = 0;
  virtual int64_t pointCount() const = 0;

  // Throws InvalidInput for a negative or non-finite radius, or k < 0 or k > kMaxK. (k == 0 with
  // radius 0 gives the duplicates.) meanDistance sums the distances in the index's scan order, the
  // same on both backends; against a sum in another order it differs by a few ulps.
  Summary summarize(const Query& query, const RunControl& control);
  // summarize() into the caller's arrays, only those that are not null.
  virtual void summarizeInto(const Query& query, const SummaryOutput& out, const RunControl& control) = 0;
  // The number of unordered pairs the query gives (k nearest: a pair counts once if either point
  // has the other among its k nearest). The index keeps what the count found (per-point offsets,
  // or the k-nearest pairs themselves) for pairsInto() with the same query, which frees it.
  virtual int64_t countPairs(const Query& query, const RunControl& control) = 0;
  // Throws InvalidInput, before allocating them, when there are more than maxPairs.
  Pairs pairs(const Query& query, int64_t maxPairs, const RunControl& control);
  // Writes the pairs into the caller's arrays and returns their number; throws InvalidInput, before
  // writing anything, when there are more than `capacity` or a or b is null.
  virtual int64_t pairsInto(const Query& query, const PairsOutput& out, int64_t capacity, const RunControl& control) = 0;
  virtual Clusters dbscan(const DbscanOptions& options, const RunControl& control) = 0;
};

// Builds the index. Throws InvalidInput when there is no point, more than kMaxPoints, a coordinate
// that is not finite (with the count), or points that spread wider than kMaxExtent along an axis;
// DeviceUnavailable for Backend::Gpu without a usable GPU.
std::unique_ptr<NeighbourIndex> makeNeighbourIndex(Backend backend, const Points& points, int threads,
                                                   const RunControl& control);

}  // namespace gpugeo::neighbours
