// The host side of the neighbour index: validation, the local frame, and the index built on the CPU
// (the CUDA backend builds the same layout on the device from detail/neighbour_math.h).
#pragma once

#include <memory>
#include <vector>

#include "neighbours/detail/neighbour_math.h"
#include "neighbours/neighbours.h"

namespace gpugeo::neighbours::detail {

// Throws InvalidInput unless the points are usable (count, finite coordinates).
void validatePoints(const Points& points);
// Throws InvalidInput unless the query is usable.
void validateQuery(const Query& query);
void validateDbscan(const DbscanOptions& options);

// The points relative to the centre of their bounding box, in input order, and the quantiser of the
// Morton codes (frameFromBounds() in detail/neighbour_math.h).
template <int D>
struct LocalFrame
{
  std::vector<Point<D>> points;
  Quantiser<D> quantiser{};
};

template <int D>
LocalFrame<D> localFrame(const Points& points, int threads, const RunControl& control);

template <int D>
struct HostIndex
{
  std::vector<Point<D>> points;     // Morton order
  std::vector<int32_t> original;    // input index of each
  std::vector<int64_t> start;       // region starts, then n
  std::vector<Box<D>> boxes;        // the region tree, level 0 = the regions
  int levels = 0;
  int64_t levelOffset[kMaxTreeLevels] = {};
  int64_t levelSize[kMaxTreeLevels] = {};

  RegionView<D> view() const;
};

template <int D>
HostIndex<D> buildHostIndex(const LocalFrame<D>& frame, int threads, const RunControl& control);

// The region starts of sorted codes (the quadtree's leaves): region boundaries after the rules of
// leafLevel().
template <int D>
std::vector<int64_t> regionStarts(const std::vector<uint64_t>& codes);

// The tree levels above the region boxes (boxes holds the regions' boxes on entry).
template <int D>
void buildTreeLevels(HostIndex<D>& index);

// Throws InvalidInput when a query's pairs are more than maxPairs (before they are allocated).
void requirePairsAtMost(int64_t pairs, int64_t maxPairs);
// requirePairsAtMost(pairs, capacity), and a and b given when there is a pair.
void requirePairsFit(int64_t pairs, int64_t capacity, const PairsOutput& out);

// DBSCAN's last step, the same for both backends. By input index: core flags, the root (lowest
// index) of each core point's component, and for other points their lowest-index core neighbour
// (INT32_MAX: none).
Clusters assignClusters(std::vector<uint8_t> core, const std::vector<int32_t>& root,
                        const std::vector<int32_t>& borderCore, bool borderPointsAreNoise);

std::unique_ptr<NeighbourIndex> makeCpuIndex(const Points& points, int threads, const RunControl& control);
std::unique_ptr<NeighbourIndex> makeCudaIndex(const Points& points, const RunControl& control);

}  // namespace gpugeo::neighbours::detail
