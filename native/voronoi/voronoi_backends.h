// The backend factories behind makeLabeller(); internal to the native library.
#pragma once

#include <memory>

#include "feature_allocation.h"
#include "voronoi_raster.h"

namespace gpugeo::voronoi {

std::unique_ptr<Labeller> makeCpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options);

// Defined in voronoi_cuda.cu, or in voronoi_nocuda.cpp (throws DeviceUnavailable).
std::unique_ptr<Labeller> makeGpuLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options,
                                          const RunControl& control);

// Defined in feature_labeller_cpu.cpp.
std::unique_ptr<Labeller> makeCpuFeatureLabeller(const Grid& grid, const FeatureSites& features,
                                                 const FeatureLabellerOptions& options, const RunControl& control);

// Defined in feature_allocation_cuda.cu, or in voronoi_nocuda.cpp (throws DeviceUnavailable).
std::unique_ptr<Labeller> makeGpuFeatureLabeller(const Grid& grid, const FeatureSites& features,
                                                 const FeatureLabellerOptions& options, const RunControl& control);

}  // namespace gpugeo::voronoi
