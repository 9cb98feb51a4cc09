// The tiled tools' GPU work where this build has no CUDA backend.
#include "core/errors.h"
#include "dem/tiled/tile_cuda.h"

namespace gpugeo::dem::tiled::detail {

std::vector<dem::detail::Spill> floodSpillsCuda(const float*, int64_t, int64_t, int32_t, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

}  // namespace gpugeo::dem::tiled::detail
