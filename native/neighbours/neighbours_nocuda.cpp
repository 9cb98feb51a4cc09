// makeCudaIndex() where the neighbour index has no CUDA backend.
#include "core/errors.h"
#include "neighbours/neighbour_index.h"

namespace gpugeo::neighbours::detail {

std::unique_ptr<NeighbourIndex> makeCudaIndex(const Points&, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

}  // namespace gpugeo::neighbours::detail
