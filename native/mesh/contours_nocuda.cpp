// makeCudaContourer() where the mesh contours have no CUDA backend.
#include "core/errors.h"
#include "mesh/detail/contourer.h"

namespace gpugeo::mesh::detail {

std::unique_ptr<MeshContourer> makeCudaContourer(const Mesh&, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

}  // namespace gpugeo::mesh::detail
