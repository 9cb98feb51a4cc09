// makeGpuLabeller() in a build without CUDA.
#include "core/backend.h"
#include "core/errors.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

std::unique_ptr<Labeller> makeGpuLabeller(const Grid&, const Sites&, const LabellerOptions&, const RunControl&)
{
  throw DeviceUnavailable(probeGpu().reason);
}

std::unique_ptr<Labeller> makeGpuFeatureLabeller(const Grid&, const FeatureSites&, const FeatureLabellerOptions&,
                                                 const RunControl&)
{
  throw DeviceUnavailable(probeGpu().reason);
}

}  // namespace gpugeo::voronoi
