#include "voronoi_raster.h"

#include "core/errors.h"
#include "voronoi_backends.h"

namespace gpugeo::voronoi {

std::unique_ptr<Labeller> makeLabeller(Backend backend, const Grid& grid, const Sites& sites,
                                       const LabellerOptions& options, const RunControl& control)
{
  validate(grid, sites);
  if (control.isCanceled())
    throw Canceled();
  switch (backend)
  {
    case Backend::Cpu:
      return makeCpuLabeller(grid, sites, options);
    case Backend::Gpu:
      return makeGpuLabeller(grid, sites, options, control);
    case Backend::Auto:
      break;
  }
  throw InvalidInput("makeLabeller needs a resolved backend (Cpu or Gpu), not Auto; see resolveBackend().");
}

}  // namespace gpugeo::voronoi
