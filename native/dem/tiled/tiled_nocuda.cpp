// The tiled tools' GPU work where this build has no CUDA backend.
#include "core/errors.h"
#include "dem/tiled/tile_cuda.h"
#include "dem/tiled/tiled_dem.h"

namespace gpugeo::dem::tiled::detail {

std::vector<dem::detail::Spill> floodSpillsCuda(const float*, int64_t, int64_t, int32_t, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

FlatTileResult flatTileCuda(const float*, int64_t, int64_t, const int32_t*, const int32_t*, bool, const int32_t*,
                            int32_t*, const RunControl&, FlatTilesOnGpu*, int64_t)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

GpuTurn::GpuTurn(int) {}
GpuTurn::~GpuTurn() = default;

GpuTurnTotals gpuTurnTotals()
{
  return {};
}

}  // namespace gpugeo::dem::tiled::detail

namespace gpugeo::dem::tiled {

int64_t freeGpuMemory()
{
  return 0;
}

}  // namespace gpugeo::dem::tiled
