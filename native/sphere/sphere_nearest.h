// Spherical nearest-site labelling: every cell of a QTM grid (qtm.h), or every pixel centre of a
// longitude/latitude grid, labelled with its nearest site by great-circle distance.
//
// Contract (both backends, every method, and the tests' brute-force check):
// - Sites are unit vectors (cos lat cos lon, cos lat sin lon, sin lat) made on the host in float64.
//   Query points are unit vectors made from sine tables computed once on the host (QTM: the
//   normalised sum of a cell's corner vectors; grid: the pixel centre), so both backends see the
//   same bits.
// - A point's label is the input index of the site with the smallest squared chord
//   (x - sx)^2 + (y - sy)^2 + (z - sz)^2, evaluated in float64 in that order without fused
//   multiply-adds; equal values go to the lowest input index. The chord grows with the great-circle
//   distance, so this is the nearest site on the sphere; unlike the dot product it keeps its
//   relative precision for sites centimetres from a point.
// - Near ties: against exact arithmetic on the exact points, the label can differ only where the
//   two nearest great-circle distances differ by less than kNearTieRadians (unit sphere), which is
//   about 6 nanometres on the Earth (the rounding of the unit vectors plus that of the chord).
// - Distances are reported in km on a sphere of radius kEarthRadiusKm (6,371.0088 km, the IUGG
//   mean Earth radius R1) as float(2 R asin(chord / 2)); the two backends agree within 1 ulp there.
//
// Methods (source: Wang et al. 2015, ../shared/papers 000, one thread per cell against all sites):
// - BruteGlobal, BruteShared, BruteConstant, BruteRegister: the paper's kernels (all sites from global
//   memory; staged through shared-memory tiles; from constant memory; constant memory with four cells
//   a thread in registers). On the CPU they are one register-blocked scan.
// - Indexed: the unique sites are sorted along a 3D Morton curve into a packed bounding-box tree.
//   Points go in blocks of 64 that lie close together (64 consecutive QTM ids are one cell three
//   levels up; grid pixels in 8 x 8 tiles). A block finds the nearest site d0 of its centre c and its
//   radius rho (farthest point), gathers every site within 2 rho + d0 of c (no other site can be
//   nearest to any of its points) and each point scans that short list; a block with more than 128
//   candidates searches the tree per point.
// - Auto: brute force up to kBruteForceSitesGpu / kBruteForceSitesCpu sites, Indexed above.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "sphere/earth.h"

namespace gpugeo::sphere {

constexpr double kNearTieRadians = 1e-15;
constexpr int64_t kMaxSites = (int64_t(1) << 31) - 64;
// The most points of one labelling call (a QTM range or a band of grid rows): 2^30.
constexpr int64_t kMaxPointsPerCall = int64_t(1) << 30;

// Sites in degrees; index i of these arrays is "site i" in the labels.
struct SiteSet
{
  const double* lon = nullptr;
  const double* lat = nullptr;
  int64_t count = 0;
};

// A longitude beyond two turns either way is no longitude (a coordinate of another CRS, a unit
// error); within, the sphere code takes longitudes modulo 360 (the 0..360 convention, tracks that
// pass the antimeridian).
constexpr double kMaxLongitude = 720.0;

// Counts the sites that break the preconditions (NaN or infinite coordinates, |lat| > 90,
// |lon| > kMaxLongitude); the labeller refuses a set with any.
int64_t countInvalidSites(const SiteSet& sites);
// Throws InvalidInput giving that count, as "k of n points have ...", when it is not zero.
void requireValidSites(const SiteSet& sites);

// The great-circle distances (km, float64) from the centres of QTM cells [first, first + count) of
// `level` to their sites (site[i], an index into `sites`): what labelQtm's float32 distanceKm holds
// before its rounding. Throws InvalidInput for a range outside the grid or a site index outside
// `sites`.
void qtmCellDistancesKm(const SiteSet& sites, int level, uint64_t first, int64_t count, const int32_t* site,
                        double* distanceKm, int threads, const RunControl& control);

enum class NearestMethod
{
  Auto = 0,
  Indexed = 1,
  BruteGlobal = 2,
  BruteShared = 3,
  BruteConstant = 4,
  BruteRegister = 5,
};
const char* methodName(NearestMethod method);

// Auto's choice, from the benchmark (QTM level 9 on an H200; level 8 on 2 CPU cores): brute force
// (on the GPU the shared-memory kernel, the fastest of the four today) up to this many sites.
constexpr int64_t kBruteForceSitesGpu = 192;
constexpr int64_t kBruteForceSitesCpu = 8;

// A north-up grid in EPSG:4326 degrees; pixel (c, r) has its centre at
// (west + (c + 0.5) * pixelWidth, north - (r + 0.5) * pixelHeight).
struct LonLatGrid
{
  double west = -180.0;
  double north = 90.0;
  double pixelWidth = 1.0;
  double pixelHeight = 1.0;
  int64_t width = 360;
  int64_t height = 180;
};

struct SphereOptions
{
  int threads = 0;  // CPU threads; 0: defaultThreadCount()
  NearestMethod method = NearestMethod::Auto;
};

struct SphereStats
{
  int64_t uniqueSites = 0;      // sites in the tree (exact duplicates are dropped: the lowest index wins)
  int64_t blocks = 0;           // point blocks labelled by the indexed method
  int64_t candidates = 0;       // list entries over those blocks
  int64_t overflowBlocks = 0;   // blocks that searched the tree per point

  bool operator==(const SphereStats& o) const
  {
    return uniqueSites == o.uniqueSites && blocks == o.blocks && candidates == o.candidates &&
           overflowBlocks == o.overflowBlocks;
  }
};

class SphereLabeller
{
public:
  virtual ~SphereLabeller() = default;

  // Labels QTM cells [first, first + count) of `level` (0..kMaxQtmLevel). `site` receives count input
  // indices; `distanceKm` (may be null) the great-circle distances. Throws InvalidInput for a range
  // outside the grid, Canceled, DeviceOutOfMemory, DeviceError.
  virtual void labelQtm(int level, uint64_t first, int64_t count, int32_t* site, float* distanceKm,
                        const RunControl& control) = 0;
  // Labels rows [row0, row0 + rows) of `grid`, row-major.
  virtual void labelGridRows(const LonLatGrid& grid, int64_t row0, int64_t rows, int32_t* site, float* distanceKm,
                             const RunControl& control) = 0;

  virtual Backend backend() const = 0;
  virtual std::string deviceName() const = 0;
  virtual NearestMethod method() const = 0;  // never Auto
  virtual const StageTimes& times() const = 0;
  virtual const SphereStats& stats() const = 0;
};

// Validates the sites (InvalidInput with the count of bad ones), makes the unit vectors and the
// site tree, and for Gpu uploads them (DeviceUnavailable without a usable device).
std::unique_ptr<SphereLabeller> makeSphereLabeller(Backend backend, const SiteSet& sites, const SphereOptions& options,
                                                   const RunControl& control);

}  // namespace gpugeo::sphere
