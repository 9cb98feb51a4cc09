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
#include "core/parallel_sort.h"
#include "core/stage_times.h"
#include "sphere/detail/sphere_math.h"
#include "sphere/detail/spherical_cells.h"
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

// A site's place in the unique sites' order: its Morton key, then its vector (-0 equal to +0), then
// its index.
struct Keyed
{
  uint64_t morton;
  V3 p;
  int64_t i;
  bool operator<(const Keyed& o) const
  {
    return std::tie(morton, p.x, p.y, p.z, i) < std::tie(o.morton, o.p.x, o.p.y, o.p.z, o.i);
  }
  bool sameSite(const Keyed& o) const { return morton == o.morton && p.x == o.p.x && p.y == o.p.y && p.z == o.p.z; }
};

struct UniqueSites
{
  FlatArray<Site> sites;
  FlatArray<uint64_t> morton;                           // their Morton keys, ascending
  std::vector<std::pair<int64_t, int64_t>> duplicates;  // (input index, the unique site's input index)
};

// The unique sites in Morton order of their unit vectors, so that sites near each other on the
// sphere sit near each other in memory (every per-site step reads a site's neighbours). Equal vectors
// have equal keys, so each run of them sorts together, its lowest index first: that one is unique,
// the others are its duplicates. On all cores but for the sort's last merge.
UniqueSites uniqueSites(const double* lonDeg, const double* latDeg, int64_t n, int threads,
                        const RunControl& control)
{
  FlatArray<Keyed> keyed(static_cast<size_t>(n));
  parallelFor(n, 4096, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
    {
      const V3 p = makeSite(lonDeg[i], latDeg[i], i).p;
      keyed[static_cast<size_t>(i)] = {detail::mortonKey(detail::Vec3{p.x, p.y, p.z}), p, i};
    }
  }, &control);
  parallelSort(keyed, threads, control);
  // Blocks of the sorted sites: their unique counts, then each block's sites from its offset.
  constexpr int64_t kBlock = 65536;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<int64_t> offset(static_cast<size_t>(blocks) + 1, 0), duplicateOffset(offset);
  const auto isFirst = [&](int64_t r) { return r == 0 || !keyed[size_t(r - 1)].sameSite(keyed[size_t(r)]); };
  parallelFor(blocks, 1, threads, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      for (int64_t r = b * kBlock; r < std::min(n, (b + 1) * kBlock); ++r)
        ++(isFirst(r) ? offset : duplicateOffset)[size_t(b) + 1];
  }, &control);
  for (size_t b = 1; b < offset.size(); ++b)
  {
    offset[b] += offset[b - 1];
    duplicateOffset[b] += duplicateOffset[b - 1];
  }
  UniqueSites u;
  u.sites.resize(static_cast<size_t>(offset.back()));
  u.morton.resize(static_cast<size_t>(offset.back()));
  u.duplicates.resize(static_cast<size_t>(duplicateOffset.back()));
  if (static_cast<int64_t>(u.sites.size()) > kMaxUniqueSites)
    throw InvalidInput("spherical Voronoi: too many distinct sites (" + std::to_string(u.sites.size()) +
                       ", at most " + std::to_string(kMaxUniqueSites) + ")");
  parallelFor(blocks, 1, threads, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
    {
      int64_t at = offset[size_t(b)], duplicate = duplicateOffset[size_t(b)];
      // The first of the run the block starts in (found once: a run may span blocks).
      int64_t first = b * kBlock;
      while (!isFirst(first))
        --first;
      first = keyed[size_t(first)].i;
      for (int64_t r = b * kBlock; r < std::min(n, (b + 1) * kBlock); ++r)
      {
        const int64_t i = keyed[size_t(r)].i;
        if (isFirst(r))
        {
          first = i;
          u.sites[size_t(at)] = makeSite(lonDeg[i], latDeg[i], i);
          u.morton[size_t(at++)] = keyed[size_t(r)].morton;
          continue;
        }
        u.duplicates[size_t(duplicate++)] = {i, first};
      }
    }
  }, &control);
  return u;
}

// The Voronoi regions as spherical polygons with their areas: lunes when the sites lie on one plane,
// else from the Delaunay mesh (from the GPU's cells when asked and they pass the checks).
void sphericalRegions(const Geometry& g, const FlatArray<uint64_t>& morton, const SphericalVoronoiOptions& options,
                      int threads, const RunControl& control, SphereRings& rings,
                      std::vector<double>& areas, SphericalVoronoiReport& report)
{
  const FlatArray<V3> d0 = diffsFromFirst(g, threads, control);
  const Plane plane = findPlane(g, d0, control);
  bool flat = plane.coplanar;
  if (!flat)
  {
    Mesh mesh;
    {
      ScopedStage stage(report.times, "mesh");
      SphereCells cells;
      const bool gpu = options.backend == Backend::Gpu;
      if (gpu)
      {
        FlatArray<double> xyz(3 * static_cast<size_t>(g.count()));
        parallelFor(g.count(), 65536, threads, [&](int64_t begin, int64_t end) {
          for (int32_t i = int32_t(begin); i < int32_t(end); ++i)
          {
            const V3 p = g.p(i);
            xyz[3 * size_t(i)] = p.x;
            xyz[3 * size_t(i) + 1] = p.y;
            xyz[3 * size_t(i) + 2] = p.z;
          }
        }, &control);
        cells = options.cellsOnHost ? hostCells(xyz.data(), morton.data(), g.count(), threads, control)
                                    : deviceCells(xyz.data(), morton.data(), g.count(), control, report.times);
      }
      flat = delaunay(g, d0, gpu ? &cells : nullptr, mesh, threads, control, &report.gpuMeshRefused) ==
             HullResult::Flat;
      report.gpuMesh = gpu && !flat && report.gpuMeshRefused.empty();
    }
    if (!flat)
    {
      ScopedStage stage(report.times, "regions");
      meshRegions(g, mesh, rings, areas, threads, control);
    }
  }
  if (flat)
    lunes(g, plane, rings, areas, control);
}

// Each region's area, vertices and neighbours, then its lon/lat polygons, into result.
void writeRegions(const Geometry& g, const SphereRings& rings, const std::vector<double>& areas,
                  double stepRad, int threads, const RunControl& control, std::vector<SphericalRegion>& result)
{
  parallelFor(g.count(), 1024, threads, [&](int64_t begin, int64_t end) {
    for (int32_t s = int32_t(begin); s < int32_t(end); ++s)
    {
      const RingView ring = rings[static_cast<size_t>(s)];
      SphericalRegion& r = result[static_cast<size_t>(g.site(s).input)];
      r.areaSteradians = areas[static_cast<size_t>(s)];
      r.vertices.reserve(ring.size());
      r.neighbors.reserve(ring.size());
      for (size_t i = 0; i < ring.size(); ++i)
      {
        r.vertices.push_back({ring.vert[i].x, ring.vert[i].y, ring.vert[i].z});
        r.neighbors.push_back(g.site(ring.neighbor[i]).input);
      }
    }
  }, &control);
  regionPolygons(g, rings, stepRad, threads, control, [&](int32_t s, std::vector<LonLatPolygon>&& parts) {
    result[static_cast<size_t>(g.site(s).input)].parts = std::move(parts);
  });
}

}  // namespace

std::vector<SphericalRegion> sphericalVoronoi(const double* lonDeg, const double* latDeg, int64_t n,
                                              const SphericalVoronoiOptions& options, const RunControl& control,
                                              SphericalVoronoiReport* report)
{
  validate(lonDeg, latDeg, n, options);
  SphericalVoronoiReport local;
  SphericalVoronoiReport& out = report ? *report : local;
  out = {};
  // The result's n empty regions are made on a thread of their own while the work goes on.
  auto made = startAsync([n] { return std::vector<SphericalRegion>(static_cast<size_t>(n)); });
  const int threads = options.threads > 0 ? options.threads : defaultThreadCount();
  UniqueSites unique;
  {
    ScopedStage stage(out.times, "sites");
    unique = uniqueSites(lonDeg, latDeg, n, threads, control);
  }
  out.uniqueSites = static_cast<int64_t>(unique.sites.size());
  if (unique.sites.size() == 1)
  {
    std::vector<SphericalRegion> result = made.get();
    for (const auto& [i, first] : unique.duplicates)
      result[static_cast<size_t>(i)].duplicateOf = first;
    SphericalRegion& r = result[static_cast<size_t>(unique.sites[0].input)];
    r.parts = wholeSphere();
    r.areaSteradians = 2.0 * kTwoPi;
    return result;
  }
  const Geometry g(std::move(unique.sites));
  SphereRings rings;
  std::vector<double> areas;
  sphericalRegions(g, unique.morton, options, threads, control, rings, areas, out);
  ScopedStage stage(out.times, "polygons");
  std::vector<SphericalRegion> result = made.get();
  for (const auto& [i, first] : unique.duplicates)
    result[static_cast<size_t>(i)].duplicateOf = first;
  writeRegions(g, rings, areas, options.densifyStepDeg * kRadPerDeg, threads, control, result);
  return result;
}

}  // namespace gpugeo::sphere
