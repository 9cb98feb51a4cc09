// The lon/lat polygons of the spherical Voronoi regions (spherical_voronoi.h, step 6): each
// great-circle edge densified once, each ring unwrapped, cut at the antimeridian or closed around a
// pole.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/run_control.h"
#include "sphere/detail/spherical_geometry.h"
#include "sphere/spherical_voronoi.h"

namespace gpugeo::sphere::detail {

// The lon/lat rectangle of the whole globe: the region of a single site.
std::vector<LonLatPolygon> wholeSphere();

// The lon/lat polygons of every region with a ring, on `threads` threads: emit(s, parts) for unique
// site s, called once per such site, from any of the threads. Each edge's points are computed once
// (by its lower site) and shared by both regions.
void regionPolygons(const Geometry& g, const SphereRings& rings, double stepRad, int threads,
                    const RunControl& control,
                    const std::function<void(int32_t, std::vector<LonLatPolygon>&&)>& emit);

}  // namespace gpugeo::sphere::detail
