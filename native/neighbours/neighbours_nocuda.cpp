// makeCudaIndex() where the neighbour index has no CUDA backend.
#include "core/backend.h"
#include "core/errors.h"
#include "neighbours/neighbour_index.h"

namespace gpugeo::neighbours::detail {

std::unique_ptr<NeighbourIndex> makeCudaIndex(const Points&, const RunControl&)
{
  throw DeviceUnavailable(builtWithCuda() ? "the neighbour index has no GPU path in this build"
                                          : "this build of GPU Geoprocessing has no CUDA backend");
}

}  // namespace gpugeo::neighbours::detail
