// The spherical site tree built on the device (CUDA builds only): the same arrays, bit for bit, as
// prepareSites builds on the host (site_prep.h), without the host sort that took 138 ms of a
// 1,000,000-site run.
#pragma once

#include "core/device_buffer.h"
#include "core/stage_times.h"
#include "sphere/detail/site_prep.h"

namespace gpugeo::sphere::detail {

struct DeviceSiteTree
{
  cuda::DeviceBuffer<Vec3> vectors;     // every site, input order (the brute-force kernels read these)
  cuda::DeviceBuffer<Vec3> sites;       // unique sites, tree order
  cuda::DeviceBuffer<int32_t> original;  // their input indices
  cuda::DeviceBuffer<Box> boxes;        // all levels, leaves first
};

// Validates the sites and makes their unit vectors on the host (siteVectorsInto, all cores:
// "prepare"), uploads them ("upload") and builds the tree from them on the calling thread's stream
// ("tree"; host clocks, returns when the tree is built). Sets prep's shape (treeCount, levels,
// offsets); leaves its host arrays empty.
void buildDeviceSiteTree(const SiteSet& sites, int threads, const RunControl& control, PreparedSites& prep,
                         DeviceSiteTree& tree, StageTimes& times);

}  // namespace gpugeo::sphere::detail
