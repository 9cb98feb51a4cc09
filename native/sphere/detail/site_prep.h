// Host-side preparation shared by both backends: validation, site unit vectors, the site tree and
// the sine tables the query points are made from.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "core/stage_times.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere::detail {

struct PreparedSites
{
  std::vector<Vec3> vectors;         // every site, input order
  // The tree: unique sites sorted by Morton key, then by their coordinates' bits (so that exact
  // duplicates are neighbours: the lowest input index stays), then input index; leaves of
  // kLeafSites, kFanout children a node. A GPU labeller keeps these arrays on the device only.
  std::vector<Vec3> treeSites;       // unique sites, tree order
  std::vector<int32_t> treeOriginal;  // their input indices
  std::vector<Box> boxes;            // all tree levels, leaves first
  int32_t treeCount = 0;             // unique sites
  int32_t boxCount = 0;
  int levels = 0;
  int32_t levelOffset[kMaxTreeLevels] = {};
  int32_t levelSize[kMaxTreeLevels] = {};

  // Sets the tree's shape for `count` unique sites: treeCount, the levels, their offsets and sizes.
  void shapeTree(int32_t count);
  // A view whose pointers are the given arrays (host vectors above, or their device copies).
  SiteTreeView view(const Vec3* sites, const int32_t* original, const Box* boxArray) const;
  SiteTreeView hostView() const { return view(treeSites.data(), treeOriginal.data(), boxes.data()); }
};

// Validates the sites (InvalidInput: none, too many, or bad coordinates counted) and writes their
// unit vectors in input order to `vectors` (sites.count of them; uninitialised memory is fine: it is
// first touched by the threads that fill it). threads <= 0: defaultThreadCount().
void siteVectorsInto(const SiteSet& sites, Vec3* vectors, int threads, const RunControl& control);
std::vector<Vec3> siteVectors(const SiteSet& sites, int threads, const RunControl& control);

// The vectors and the tree, on the host (all cores).
PreparedSites prepareSites(const SiteSet& sites, int threads, const RunControl& control);

// The same, the tree built on the device and copied back (the GPU labeller keeps it there; the tests
// compare it with prepareSites's). DeviceUnavailable without a usable GPU or CUDA backend.
PreparedSites prepareSitesOnDevice(const SiteSet& sites, int threads, const RunControl& control);

// sin(pi/2 * m / n), m = 0..n, n = 2^level, rounded once from long double; exact at 0 and 1.
std::vector<double> qtmSineTable(int level);

// Per-column and per-row sines and cosines of a band of grid rows.
struct GridTables
{
  std::vector<double> colSin, colCos, rowSin, rowCos;
};
GridTables gridTables(const LonLatGrid& grid, int64_t row0, int64_t rows);

void checkQtmRange(int level, uint64_t first, int64_t count);
void checkGridBand(const LonLatGrid& grid, int64_t row0, int64_t rows);

NearestMethod resolveMethod(NearestMethod requested, bool gpu, int64_t sites);

}  // namespace gpugeo::sphere::detail
