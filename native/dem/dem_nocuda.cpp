// The DEM tools where this build has no CUDA backend.
#include "core/errors.h"
#include "dem/detail/breach_cuda.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/down_paths.h"
#include "dem/detail/streams_cuda.h"
#include "dem/detail/watershed_labels.h"
#include "dem/watersheds.h"

namespace gpugeo::dem::detail {

namespace {
[[noreturn]] void noCuda()
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}
}  // namespace

void labelWatershedsCuda(const uint8_t*, int64_t, int64_t, int32_t*, const RunControl&)
{
  noCuda();
}

void labelWatershedsCuda(const uint8_t*, int64_t, int64_t, const std::vector<int64_t>&, const std::vector<int32_t>&,
                         int32_t*, const RunControl&)
{
  noCuda();
}

DrainageCounts drainageHeightsCuda(const float*, const uint8_t*, const uint8_t*, int64_t, int64_t, const int64_t*,
                                   double, float*, float*, const RunControl&)
{
  noCuda();
}

DrainageCounts resolveTileCuda(const float*, const uint8_t*, const uint8_t*, int64_t, int64_t, const int64_t*,
                               const uint8_t*, const int64_t*, const float*, double, int64_t*, int64_t*, float*, float*,
                               const RunControl&)
{
  noCuda();
}

void streamSegmentsCuda(const uint8_t*, const int64_t*, const int64_t*, int64_t, int64_t, const int64_t*,
                        const StreamThreshold&, StreamNetwork&, std::vector<int64_t>&, const RunControl&)
{
  noCuda();
}

std::vector<float> fillCuda(const Grid&, const RunControl&)
{
  noCuda();
}

void fillCuda(const Grid&, const RunControl&, std::vector<float>&)
{
  noCuda();
}

BreachOnDevice breachCuda(const Grid&, const BreachLimits&, int, const RunControl&, StageTimes&)
{
  noCuda();
}

RaisedFlats fillAndRaiseCuda(const Grid&, bool, const RunControl&)
{
  noCuda();
}

std::vector<int32_t> flatMaskCuda(const Grid&, bool, const RunControl&)
{
  noCuda();
}

std::vector<uint8_t> directionsCuda(const Grid&, bool, const RunControl&)
{
  noCuda();
}

void travelTileCuda(const Grid&, const uint8_t*, const int64_t*, const VelocityModel&, int64_t, const double*, bool,
                    const RunControl&, TileTravel&)
{
  noCuda();
}

TravelTimes travelTimeCuda(const Grid&, const std::vector<uint8_t>&, const Accumulation&, int64_t, const VelocityModel&,
                           const RunControl&)
{
  noCuda();
}

Accumulation accumulationCuda(const Grid&, const std::vector<uint8_t>&, const RunControl&)
{
  noCuda();
}

void accumulationTileCuda(const Grid&, const uint8_t*, const int64_t*, const int64_t*, bool, const RunControl&,
                          Accumulation&)
{
  noCuda();
}

void directionsWithMaskCuda(const Grid&, const int32_t*, const RunControl&, std::vector<uint8_t>&)
{
  noCuda();
}

RawRings regionRingsCuda(const int32_t*, int64_t, int64_t, int32_t, const RunControl&)
{
  noCuda();
}

RawRings regionRingsOnDevice(const int32_t*, int64_t, int64_t, int32_t, const RunControl&)
{
  noCuda();
}

ChainResult isochroneChainCuda(const Grid&, const ChainOptions&, const RunControl&, StageTimes&)
{
  noCuda();
}

}  // namespace gpugeo::dem::detail
