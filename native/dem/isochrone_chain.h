// The whole isochrone chain in one call: fill, flats + D8, accumulation, the outlet, travel times,
// and the polygons of the isochrone bands and of the watershed. On the GPU every stage works on the
// previous stage's arrays in device memory (no round trip through the host); only what the caller
// keeps comes back. On the CPU it is the stages of dem.h, travel_time.h and regions.h in turn. Both
// give the same arrays (travel times within 1e-9 relative, as travelTime()).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "core/polygon_rings.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/dem.h"
#include "dem/travel_time.h"

namespace gpugeo::dem {

// Some travel time is past what a double counts in minutes: a speed or a velocity model's coefficient
// is too small (the caller names its own parameters).
struct TravelTimesOverflow : InvalidInput
{
  using InvalidInput::InvalidInput;
};

enum class ChainStage
{
  Fill,
  Directions,  // flats and D8
  Accumulation,
  TravelTime,  // the outlet and the travel times
  Bands,       // the band and watershed polygons
};

struct ChainOptions
{
  // The outlet: the outlet of the largest basin, or the cell of highest accumulation within
  // snapDistance (metres) of (outletColumn, outletRow), as snapOutlet().
  bool automaticOutlet = true;
  int64_t outletColumn = 0, outletRow = 0;
  double snapDistance = 0;
  VelocityModel model;  // a Manning raster, if any, is a host array
  // Minutes; band k holds the times in [k, k + 1) x interval. 0: automatic (automaticInterval()).
  double interval = 0;
  int32_t maxBands = 10000;
  // What comes back besides the travel times and the polygons.
  bool keepFilled = false, keepDirections = false, keepAccumulation = false, keepSpeed = false;
  // Called on the calling thread as each stage starts (for a caller's progress report).
  std::function<void(ChainStage)> onStage;
};

struct ChainResult
{
  std::vector<float> filled;         // if keepFilled
  std::vector<uint8_t> directions;   // if keepDirections
  Accumulation accumulation;         // if keepAccumulation
  TravelTimes travel;                // minutes always, speed if keepSpeed; watershed cells and area
  int64_t outlet = -1;
  int64_t outletCells = 0;           // the accumulation at the outlet
  int64_t raisedCells = 0;           // the cells the fill raised
  // The least and greatest speed over the watershed (m/s).
  double minSpeed = std::numeric_limits<double>::quiet_NaN(), maxSpeed = std::numeric_limits<double>::quiet_NaN();
  double interval = 0;               // the bands' interval (minutes): the one asked for, or the automatic one
  int32_t bands = 0;                 // floor(longest time / interval) + 1
  BandPolygons bandPolygons;         // band k: the cells with times in band k (regions.h coordinates)
  BandPolygons watershed;            // one band: the watershed
};

// The automatic interval: the first of 1, 2, 5, 10, 15, 20, 30 minutes, 1, 2, 3, 4, 6, 8, 12 hours, 1,
// 2, 3 days, then whole weeks, that cuts times of up to `longest` minutes into at most
// kAutomaticBands bands.
constexpr int32_t kAutomaticBands = 12;
double automaticInterval(double longest);

// Throws InvalidInput as the stages do (the velocity model is checked before any work), and when the
// bands would number more than maxBands. On the GPU, a DEM whose arrays do not fit in the GPU's
// memory throws DeviceOutOfMemory naming the memory it needs and the GPU's (before any work when the
// estimate shows it).
ChainResult isochroneChain(Backend backend, const Grid& dem, const ChainOptions& options, int threads,
                           const RunControl& control, StageTimes* times = nullptr);

}  // namespace gpugeo::dem
