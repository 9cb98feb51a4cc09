// Spherical Voronoi polygons of lon/lat sites, as EPSG:4326 polygons: each site's region is the set
// of points on the sphere whose great-circle distance to it is no larger than to any other site.
// The regions are exact up to float64 rounding (no raster, no projection); their lon/lat polygons are
// the great-circle edges densified (step 6).
//
// Method
// 1. Each site becomes the unit vector x = (cos lat cos lon, cos lat sin lon, sin lat). Sines and
//    cosines are taken in degrees with an exact reduction, so lon 180, -180 and 540 give the same
//    vector, and lat +-90 gives exactly (0, 0, +-1) whatever the longitude. Sites with identical
//    vectors are duplicates: the lowest index keeps the region, the others get duplicateOf only.
//    The difference of two sites' vectors is never formed by subtracting the rounded vectors: it is
//    computed from the degrees with sum-to-product identities (across the antimeridian from
//    longitudes reduced by 180 exactly), to full relative precision however close the sites are.
//    Every predicate and every Voronoi vertex below is built on those differences: that is what
//    keeps sites millimetres apart correct.
// 2. One unique site: its region is the whole sphere (the rectangle lon [-180, 180] x lat [-90, 90]).
// 3. All unique sites on one plane (always so for two or three; for more, no site is farther from the
//    plane through site 0 and two well-spread sites than 1e-12 times the sites' spread, or the hull
//    finds them flat): every bisector then contains the plane's normal axis a, so the regions are
//    lunes between a and -a. The sites are sorted by azimuth around a; a site's lune is bounded by the
//    half great circles of its bisectors with its two azimuth neighbours, its area is 2w for the
//    lune's dihedral angle w. Two sites give two hemispheres.
// 4. Otherwise the spherical Delaunay triangulation is the convex hull of the unit vectors (Brown
//    1979, "Voronoi diagrams from convex hulls", IPL 9; Caroli et al. 2010, "Robust and efficient
//    Delaunay triangulations of points on or close to a sphere", SEA 2010). The hull comes from that
//    paper's method in CGAL (detail/sphere_hull.h: exact predicates on the points' rays), given the
//    sites relative to site 0 (step 1's accurate differences) and the centre in that frame. CGAL
//    leaves out a site closer than 2^-23 rad (0.76 m on the Earth) to one it has; when it leaves out
//    nearly all or many, the sites are first magnified about a left-out one by a conformal map (the
//    stereographic projection from its antipode, scaled, and back), which keeps circles circles and
//    so the triangulation. The mesh is then repaired with this module's own predicate: is a site
//    inside a triangle's circumscribed cap? That is the in-circle determinant after a stereographic
//    projection centred on the site, taken relative to the closest pair of the four points (and with
//    a second close pair subtracted row from row), from projected differences that inherit the full
//    relative precision of step 1; a plain float64 determinant with a rounding bound answers first
//    whenever it can. Every edge whose opposite site lies inside the cap by more than 1e-12 (relative
//    to the determinant's terms) is flipped; then each left-out site is inserted Bowyer-Watson style
//    (the triangles whose caps hold it, with the one it lies in, are replaced by the fan from it;
//    split and flips if rounding makes that region no disk); then every edge is checked again. The
//    Voronoi vertex of a triangle is the unit normal of its plane pointing out of the hull, the centre
//    of its empty circumscribed cap, from the cross product at its largest angle. (When all sites lie
//    in one hemisphere the far facets face the origin; their normals are the Voronoi vertices on the
//    far side, so the orientation comes from the hull, not from the origin.) Adjacent triangles whose
//    centres are within 1e-13 rad (co-circular sites: cube faces, lon/lat grids) share the centre of
//    the lowest-indexed one. A site's region has the centres of its triangles, walked through
//    triangle neighbours counter-clockwise seen from outside, equal consecutive ones merged.
//    With options.backend Gpu the mesh may come instead from Voronoi cells clipped on the GPU
//    (detail/spherical_cells.h; Ray et al. 2018 on the sphere): taken only when the cells close into
//    a consistent triangulation facing out whose every edge is clearly Delaunay by the predicate
//    above (margin 1e-10), which makes it the one triangulation the hull gives. Either mesh is put in
//    a canonical order (each triangle from its lowest site, sorted) before anything reads it, so both
//    backends give every output bit for bit the same. The unique sites are kept in Morton order of
//    their unit vectors (neighbours on the sphere near in memory), duplicates to the lowest index.
// 5. Area on the unit sphere: if every vertex is within 90 degrees of the site, the sum of the signed
//    triangles (site, v_i, v_i+1) by the Van Oosterom-Strackee formula tan(E/2) = a.(b x c) /
//    (1 + a.b + b.c + c.a) (atan2), each edge cut into pieces of at most 90 degrees, so the formula is
//    well conditioned and small regions keep their relative precision; otherwise Gauss-Bonnet, 2 pi
//    minus the exterior angles between consecutive bisector planes (a fan would lose precision in a
//    region reaching nearly to its site's antipode). Lunes: 2w. The areas sum to 4 pi within a few
//    1e-15 relative.
// 6. Lon/lat polygons. Each great-circle edge is cut into pieces of at most densifyStepDeg of arc,
//    graded towards its ends (pieces halving down to about half the spacing of the two sites it
//    separates, where regions have their small features), with the pole itself as a point where the
//    edge's great circle passes through it; then a piece is cut again while it spans more than
//    densifyStepDeg of longitude or its straight lon/lat chord strays from the great circle by more
//    than a fifth of the smaller of the regions' width there and the sites' distance (so that no ring
//    crosses itself, also near the poles, and every site stays inside its polygon), at most 16384
//    extra points an edge. An edge's points depend on the edge alone and are computed in one fixed
//    direction, so the two regions sharing it get bitwise the same points: the polygons form a clean
//    coverage (on the antimeridian one side says 180 and the other -180). Longitudes are unwrapped
//    along the ring; the sense of each step near a pole comes from which side of its great circle
//    the pole lies (a piece's longitude turns with the sign of its circle normal's z), not from
//    rounding. A point within 1e-12 rad of a pole is the pole: the ring runs along lat +-90 between
//    the meridians it arrives and leaves on. A ring winding +360 (-360) holds the north (south) pole:
//    it is started at -180 (+180), runs to the other side and is closed along lat 90 (-90), one
//    polygon. Any other ring is cut where it crosses the antimeridian (Sutherland-Hodgman against the
//    vertical lines; a region is spherically convex, so each side is one piece; the crossing is the
//    point of the piece's great circle on the antimeridian, the same for both regions) and
//    shifted by whole turns into [-180, 180]: one or two polygons.
//
// Guarantees: every unique site gets a region; the areas sum to 4 pi; every ring is closed,
// counter-clockwise in lon/lat, simple, has at least 4 points and no consecutive duplicates, lon in
// [-180, 180] (antimeridian points exactly +-180), lat in [-90, 90], no holes; each site lies inside
// its polygon (or on its boundary: sites on a pole or on the antimeridian); shared edges match
// exactly. Between their points the lon/lat polygons depart from the great circles by at most the
// chord tolerance above and about s^2 / 4 rad for densifyStepDeg s in radians (the straight lon/lat
// piece bows away from the arc most at high latitudes; measured on 312 cities: 7.0e-5 rad for 1
// degree, 7.5e-7 rad for 0.1 degree).
// Limits: the Delaunay decisions are exact only down to the 1e-12 tie tolerance; sites less than
// about 1e-9 rad apart within about 1e-9 rad of a pole can give a region too thin to draw as a valid
// lon/lat polygon (it then has a self-touching ring, or no polygon; its area is still right). The
// CPU hull takes some 2 s per million sites on one core and its call cannot be canceled; the GPU's
// cells some 20 ms (H200). The per-site steps (unit vectors, regions and areas, step 6) run on
// options.threads threads, each site's result the same bits whatever the count. A tiny densifyStepDeg gives very large output.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "sphere/earth.h"

namespace gpugeo::sphere {

// A closed ring in degrees: the last point equals the first.
struct LonLatRing
{
  std::vector<double> lon, lat;
};

struct LonLatPolygon
{
  LonLatRing outer;
  std::vector<LonLatRing> holes;  // always empty here: Voronoi regions have no holes
};

struct SphericalRegion
{
  // EPSG:4326 polygons: one, or two when the antimeridian cuts the region; empty for a duplicate.
  std::vector<LonLatPolygon> parts;
  // Area on the unit sphere (multiply by kEarthRadiusM^2 for square metres).
  double areaSteradians = 0;
  // >= 0: this site has the same unit vector as that earlier site, and no region of its own.
  int64_t duplicateOf = -1;
  // The spherical polygon before densification: its Voronoi vertices as unit vectors (x, y, z),
  // counter-clockwise seen from outside the sphere. Edge i runs from vertices[i] to
  // vertices[(i + 1) % size] along the bisector of this site and site neighbors[i] (an input index);
  // it is the shorter arc, except for a lune, whose two vertices are its antipodal axis points and
  // whose edges are half great circles. Empty for the whole sphere and for duplicates.
  std::vector<std::array<double, 3>> vertices;
  std::vector<int64_t> neighbors;
};

struct SphericalVoronoiOptions
{
  // Great-circle edges are densified so that no piece is longer than this angle, in degrees
  // (> 0, <= 10), nor spans more than this much longitude.
  double densifyStepDeg = 1.0;
  // CPU threads for the per-site steps (unit vectors, regions, polygons); 0: defaultThreadCount().
  // The hull itself (CGAL) and its repair run on one.
  int threads = 0;
  // Gpu: the Delaunay mesh from Voronoi cells clipped on the GPU (detail/spherical_cells.h), taken
  // when every check passes, which makes it the mesh the hull would give (the same regions bit for
  // bit); else, and with Cpu, from the hull. Auto is Cpu here (the caller resolves it).
  Backend backend = Backend::Cpu;
  // For the tests: with backend Gpu, the cells made on the host by the GPU's own per-site code
  // (detail/spherical_cells.h: the same bits), so that the GPU path's checks run without a GPU.
  bool cellsOnHost = false;
};

// What a run did, for the log.
struct SphericalVoronoiReport
{
  bool gpuMesh = false;         // the mesh came from the GPU's cells
  std::string gpuMeshRefused;   // why not, when the GPU was asked
  int64_t uniqueSites = 0;
  StageTimes times;             // "sites", "mesh" (with the GPU's stages), "regions", "polygons"
};

// The spherical Voronoi regions of n sites given in degrees (EPSG:4326 order lon, lat). Result i is
// site i's region. Throws InvalidInput when n < 1, a coordinate is not finite, |lat| > 90 or the
// step is outside (0, 10]; Canceled when control asks to stop; Error on an internal failure;
// DeviceUnavailable, DeviceError or DeviceOutOfMemory when the GPU is asked and cannot be used.
std::vector<SphericalRegion> sphericalVoronoi(const double* lonDeg, const double* latDeg, int64_t n,
                                              const SphericalVoronoiOptions& options,
                                              const gpugeo::RunControl& control,
                                              SphericalVoronoiReport* report = nullptr);

}  // namespace gpugeo::sphere
