// Travel time to an outlet along D8 flow paths, and the outlet itself (snapped, or the outlet of
// the largest basin): the source paper's per-cell time t = n·l / (k·v(s)·b) summed downstream.
//
// A cell's step time is its D8 flow length L (its width, height or diagonal, as in dem.h) divided by
// its speed v. A cell's travel time is the sum of the step times along its flow path from the cell
// to the outlet, the outlet's own step included (as SAGA's "Isochrones Variable Speed" counts it).
// The watershed is the set of cells whose flow path passes through the outlet. Times are in
// minutes, summed in float64.
//
// Speeds (m/s), by model:
// - Constant: v = speed.
// - Slope: v = max(minSpeed, k · sqrt(s) · b / n), with s the D8 slope (drop / length to the
//   receiving cell, at least minSlope) and k = kChannel where the accumulated area reaches
//   channelArea, else kOverland. With n = b = 1 this is the velocity method t = l / (k·√s); with
//   other n and b it is the source paper's t = n·l / (k·v(s)·b), v(s) = √s (the paper leaves its
//   symbols undefined; this is our reading).
// - Manning (in the manner of SAGA's "Isochrones Variable Speed", Olaya 2004): runoff intensity I
//   from the rainfall intensity P (mm/h) and the SCS curve number CN (S = 25400/CN − 254 mm; I =
//   (P − 0.2 S)² / (P + 0.8 S) when P >= 0.2 S, else 0.1 mm/h); s = the Zevenbergen & Thorne slope's
//   tangent, at least 0.001; A = the accumulated area (m², the cell included). Below mixedArea:
//   overland flow, v = max(minSpeed, (I·D)^0.4 · s^0.3 / n^0.6), D = √(2A/π), n the cell's Manning
//   coefficient (a raster, or overlandN). Above: flow Q = I·A in a triangular channel of side slope
//   z (area h²/z, perimeter 2(h/z + √(h² + (h/z)²)) as SAGA has it), Manning's n = mixedN or, from
//   channelArea on, channelN; the depth h by bisection on [0, 60 m] from 2 m until Manning's flow is
//   within 0.1 m³/s of Q (at most maxIterations steps, which SAGA lacks), v = max(minSpeed, Q / area).
//   Unlike SAGA this runs on the filled DEM with our D8 directions and accumulation.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dem/dem.h"

namespace gpugeo::dem {

struct VelocityModel
{
  enum class Kind
  {
    Constant,
    Slope,
    Manning,
  };
  Kind kind = Kind::Slope;
  double minSpeed = 0.05;  // m/s, every model but Constant
  // Constant
  double speed = 1.0;
  // Slope. Overland: the NRCS's shallow concentrated flow on unpaved ground, V = 16.1345 √s ft/s
  // (TR-55, 1986, appendix F) = 4.918 √s m/s. Channels: Manning's v = R^(2/3) √s / n with a hydraulic
  // radius of 0.5 m and n = 0.035 (a clean natural channel, Chow 1959): k = 18 m/s. The slope at least
  // 0.001, as SAGA's Isochrones Variable Speed bounds it.
  double kOverland = 4.918, kChannel = 18.0, channelArea = 1e6, n = 1.0, b = 1.0, minSlope = 1e-3;
  // Manning
  double rainfall = 1.0, curveNumber = 75, overlandN = 0.15, mixedArea = 18e4, channelAreaManning = 360e4,
         mixedN = 0.06, channelN = 0.05, sideSlope = 0.5;
  int maxIterations = 100;
  const float* manning = nullptr;  // per cell, NaN = overlandN; null: overlandN everywhere
};

struct TravelTimes
{
  std::vector<double> minutes;  // NaN outside the watershed
  std::vector<double> speed;    // m/s, NaN outside the watershed (left empty where not asked for)
  int64_t watershedCells = 0;
  double watershedArea = 0;  // m²
};

// Throws InvalidInput for a parameter of the model that is out of its range (speeds, coefficients,
// thresholds not positive; a curve number outside (0, 100]; an iteration cap below 1).
void validateModel(const VelocityModel& model);

// Throws InvalidInput for an outlet outside the grid or on nodata, or speeds or parameters that are
// not positive. The GPU sums the steps by pointer jumping (in another order than the CPU's walk up
// from the outlet): its times agree with the CPU's to about 1e-12 relative, not bit for bit. With
// Backend::Gpu the model's manning pointer is a host array.
TravelTimes travelTime(Backend backend, const Grid& filled, const std::vector<uint8_t>& directions,
                       const Accumulation& accumulation, int64_t outlet, const VelocityModel& model, int threads,
                       const RunControl& control);
// On the CPU. Without keepSpeed, `speed` is left empty and the least and greatest speed over the
// watershed go to *speedRange (when given) instead.
TravelTimes travelTime(const Grid& filled, const std::vector<uint8_t>& directions, const Accumulation& accumulation,
                       int64_t outlet, const VelocityModel& model, int threads, const RunControl& control,
                       bool keepSpeed = true, std::pair<double, double>* speedRange = nullptr);

// The cell of highest accumulation within `radius` (metres) of cell (x, y), ties to the lowest
// index; the cell itself when the radius is 0. Throws InvalidInput when (x, y) is outside the grid
// or no valid cell lies within the radius.
int64_t snapOutlet(const Grid& grid, const Accumulation& accumulation, int64_t x, int64_t y, double radius);

// Whether a valid cell lies within `radius` (metres) of cell (x, y): whether snapOutlet() finds an
// outlet there. Throws InvalidInput as snapOutlet() does for (x, y) outside the grid or a bad radius.
bool validCellWithin(const Grid& grid, int64_t x, int64_t y, double radius);

// The cell that drains out of the grid with the largest accumulation (ties to the lowest index).
int64_t largestBasinOutlet(const Grid& grid, const std::vector<uint8_t>& directions, const Accumulation& accumulation);

// The speed of one cell for the Manning model (exposed for tests against SAGA's formulas).
double manningSpeed(const VelocityModel& model, double slopeTangent, double area, double cellN);

}  // namespace gpugeo::dem
