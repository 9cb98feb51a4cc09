#include "core/errors.h"
#include "sphere/detail/labeller_base.h"
#include "sphere/detail/site_prep.h"
#include "sphere/detail/spherical_cells.h"

namespace gpugeo::sphere::detail {

std::unique_ptr<SphereLabeller> makeCudaSphereLabeller(const SiteSet&, const SphereOptions&, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

PreparedSites prepareSitesOnDevice(const SiteSet&, int, const RunControl&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

SphereCells deviceCells(const double*, const uint64_t*, int32_t, const RunControl&, StageTimes&)
{
  throw DeviceUnavailable("this build of GPU Geoprocessing has no CUDA backend");
}

}  // namespace gpugeo::sphere::detail
