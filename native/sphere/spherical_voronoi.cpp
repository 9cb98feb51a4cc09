// Spherical Voronoi polygons: see spherical_voronoi.h for the method and the guarantees. This file
// is the sequence (sites, mesh or lunes, regions, polygons); the steps are in spherical_mesh.cpp,
// spherical_regions.cpp and spherical_lonlat.cpp.
#include "sphere/spherical_voronoi.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "core/errors.h"
#include "core/parallel.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/detail/spherical_geometry.h"
#include "sphere/detail/spherical_lonlat.h"
#include "sphere/detail/spherical_mesh.h"
#include "sphere/detail/spherical_regions.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo::sphere {
namespace {

using namespace detail;

// The most unique sites: the mesh uses int32 triangle indices.
constexpr int64_t kMaxUniqueSites = int64_t(1) << 29;

void validate(const double* lonDeg, const double* latDeg, int64_t n, const SphericalVoronoiOptions& options)
{
  if (n < 1)
    throw InvalidInput("spherical Voronoi: there must be at least one site (got " + std::to_string(n) + ")");
  if (!lonDeg || !latDeg)
    throw InvalidInput("spherical Voronoi: the longitude and latitude arrays must not be null");
  if (!(options.densifyStepDeg > 0 && options.densifyStepDeg <= 10))
    throw InvalidInput("spherical Voronoi: the densification step must be in (0, 10] degrees (got " +
                       std::to_string(options.densifyStepDeg) + ")");
  requireValidSites(SiteSet{lonDeg, latDeg, n});
}

}  // namespace

std::vector<SphericalRegion> sphericalVoronoi(const double* lonDeg, const double* latDeg, int64_t n,
                                              const SphericalVoronoiOptions& options, const RunControl& control)
{
  validate(lonDeg, latDeg, n, options);
  std::vector<SphericalRegion> result(static_cast<size_t>(n));

  // Unit vectors, and exact duplicates: the lowest index of each group of equal vectors is unique.
  const int threads = options.threads > 0 ? options.threads : defaultThreadCount();
  std::vector<Site> all(static_cast<size_t>(n));
  parallelFor(n, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      all[static_cast<size_t>(i)] = makeSite(lonDeg[i], latDeg[i], i);
  }, &control);
  // The unique sites in Morton order of their unit vectors, so that sites near each other on the
  // sphere sit near each other in memory (every per-site step reads a site's neighbours): sorted by
  // Morton key, then vector (-0 equal to +0), then index. Equal vectors have equal keys, so each run
  // of them is together, its lowest index first: that one is unique, the others its duplicates.
  struct Keyed
  {
    uint64_t morton;
    V3 p;
    int64_t i;
  };
  std::vector<Keyed> keyed(static_cast<size_t>(n));
  parallelFor(n, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
    {
      const V3 p = all[static_cast<size_t>(i)].p;
      keyed[static_cast<size_t>(i)] = {detail::mortonKey(detail::Vec3{p.x, p.y, p.z}), p, i};
    }
  }, &control);
  auto key = [](const Keyed& k) { return std::make_tuple(k.morton, k.p.x, k.p.y, k.p.z); };
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    const auto ka = key(a), kb = key(b);
    return ka < kb || (ka == kb && a.i < b.i);
  });
  std::vector<Site> unique;
  int64_t first = -1;
  for (size_t r = 0; r < keyed.size(); ++r)
  {
    if (r > 0 && key(keyed[r - 1]) == key(keyed[r]))
    {
      result[static_cast<size_t>(keyed[r].i)].duplicateOf = first;
      continue;
    }
    first = keyed[r].i;
    unique.push_back(all[static_cast<size_t>(first)]);
  }
  keyed = {};
  all.clear();
  all.shrink_to_fit();
  if (static_cast<int64_t>(unique.size()) > kMaxUniqueSites)
    throw InvalidInput("spherical Voronoi: too many distinct sites (" + std::to_string(unique.size()) +
                       ", at most " + std::to_string(kMaxUniqueSites) + ")");

  if (unique.size() == 1)
  {
    SphericalRegion& r = result[static_cast<size_t>(unique[0].input)];
    r.parts = wholeSphere();
    r.areaSteradians = 2.0 * kTwoPi;
    return result;
  }

  const Geometry g(std::move(unique));
  std::vector<SphereRing> rings;
  std::vector<double> areas;
  const std::vector<V3> d0 = diffsFromFirst(g, threads, control);
  const Plane plane = findPlane(g, d0, control);
  bool flat = plane.coplanar;
  if (!flat)
  {
    Mesh mesh;
    flat = delaunay(g, d0, mesh, threads, control) == HullResult::Flat;
    if (!flat)
      meshRegions(g, mesh, rings, areas, threads, control);
  }
  if (flat)
    lunes(g, plane, rings, areas, control);

  // Each region's area, vertices and neighbours, then its lon/lat polygons.
  parallelFor(g.count(), 1024, threads, [&](int64_t begin, int64_t end) {
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      const SphereRing& ring = rings[static_cast<size_t>(s)];
      SphericalRegion& r = result[static_cast<size_t>(g.site(s).input)];
      r.areaSteradians = areas[static_cast<size_t>(s)];
      r.vertices.reserve(ring.vert.size());
      r.neighbors.reserve(ring.vert.size());
      for (size_t i = 0; i < ring.vert.size(); ++i)
      {
        r.vertices.push_back({ring.vert[i].x, ring.vert[i].y, ring.vert[i].z});
        r.neighbors.push_back(g.site(ring.neighbor[i]).input);
      }
    }
  }, &control);
  regionPolygons(g, rings, options.densifyStepDeg * kRadPerDeg, threads, control,
                 [&](int32_t s, std::vector<LonLatPolygon>&& parts) {
                   result[static_cast<size_t>(g.site(s).input)].parts = std::move(parts);
                 });
  return result;
}

}  // namespace gpugeo::sphere
