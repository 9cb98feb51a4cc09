// What the CPU and CUDA labellers share: the prepared sites, the chosen method, times and counters.
#pragma once

#include <string>

#include "sphere/detail/site_prep.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere::detail {

class LabellerBase : public SphereLabeller
{
public:
  NearestMethod method() const override { return mMethod; }
  const StageTimes& times() const override { return mTimes; }
  const SphereStats& stats() const override { return mStats; }

protected:
  PreparedSites mSites;
  NearestMethod mMethod = NearestMethod::Indexed;
  StageTimes mTimes;
  SphereStats mStats;
};

std::unique_ptr<SphereLabeller> makeCpuSphereLabeller(const SiteSet& sites, const SphereOptions& options,
                                                      const RunControl& control);
std::unique_ptr<SphereLabeller> makeCudaSphereLabeller(const SiteSet& sites, const SphereOptions& options,
                                                       const RunControl& control);

}  // namespace gpugeo::sphere::detail
