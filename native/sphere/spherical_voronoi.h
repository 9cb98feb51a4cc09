// Spherical Voronoi polygons of lon/lat sites, as EPSG:4326 polygons: each site's region is the set
// of points on the sphere whose great-circle distance to it is no larger than to any other site.
// The result is exact up to float64 rounding; it does not depend on a raster or on a projection.
//
// Method
// 1. Each site becomes the unit vector x = (cos lat cos lon, cos lat sin lon, sin lat). Sines and
//    cosines are taken in degrees with an exact reduction, so lon 180 and -180 give the same vector,
//    and lat +-90 gives exactly (0, 0, +-1) whatever the longitude. Sites with identical vectors are
//    duplicates: the lowest index keeps the region, the others get duplicateOf and nothing else.
//    Differences of two sites' vectors are never formed by subtracting the rounded vectors: they are
//    computed from the degrees with sum-to-product identities, to full relative precision however
//    close the sites are. Every predicate and every Voronoi vertex below uses those differences,
//    which is what keeps sites a few centimetres apart correct.
// 2. One unique site: its region is the whole sphere (the rectangle lon [-180, 180] x lat [-90, 90]).
// 3. All unique sites on one plane (always so for two or three; for more, the largest distance of a
//    site from the plane through three well-spread sites is at most 1e-12 times their spread, or
//    Qhull finds the hull flat): every bisector then contains the plane's normal axis a, so the
//    regions are lunes between a and -a. Sites are sorted by azimuth around a; a site's lune is
//    bounded by the half great circles of its bisectors with its two azimuth neighbours, its area is
//    2w for the lune's dihedral angle w. Two sites give two hemispheres.
// 4. Otherwise the spherical Delaunay triangulation is the convex hull of the unit vectors (Brown
//    1979, "Voronoi diagrams from convex hulls", IPL 9; Caroli et al. 2010, "Robust and efficient
//    Delaunay triangulations of points on or close to a sphere", SEA 2010). The hull comes from Qhull
//    (options "Qt Qc": triangulated output, coplanar points kept), run on the vectors translated by
//    the first site so that Qhull's round-off scales with the sites' spread. Qhull merges facets
//    within its round-off and leaves out sites that lie within it of a facet (sites closer than
//    about 3e-8 rad, 20 cm on the Earth, among others far away). So the mesh is then repaired with
//    this module's own predicates: every edge that is reflex (the fourth point beyond the plane of a
//    triangle by more than 1e-13 of the product of the edge lengths) is flipped, and every left-out
//    site is inserted into the facet above which it lies, followed by flips. The Voronoi vertex of a
//    Delaunay triangle is the unit normal of its plane pointing out of the hull: the centre of its
//    empty circumscribed cap. (When all sites lie in one hemisphere the far facets of the hull face
//    the origin; their normals are the Voronoi vertices on the far side, so the orientation is taken
//    from the hull, not from the origin.) A site's region has the Voronoi vertices of its incident
//    triangles, walked through triangle neighbours counter-clockwise seen from outside the sphere;
//    consecutive vertices closer than 1e-13 rad (co-circular sites: cube, octahedron faces) merge.
// 5. Area on the unit sphere: if every vertex is within 90 degrees of the site, the sum of the signed
//    triangles (site, v_i, v_i+1) by the Van Oosterom-Strackee formula tan(E/2) = a.(b x c) /
//    (1 + a.b + b.c + c.a), with each edge cut into pieces of at most 90 degrees (the formula is well
//    conditioned there and small regions keep their relative precision); otherwise Gauss-Bonnet,
//    2 pi minus the sum of the exterior angles between consecutive bisector planes (the fan would
//    lose precision in a region reaching nearly to the antipode of its site). Lunes: 2w. The areas
//    sum to 4 pi within a few 1e-15 relative.
// 6. Lon/lat polygons: each great-circle edge is cut into pieces of at most densifyStepDeg of arc,
//    and further until no piece spans more than densifyStepDeg of longitude (so edges passing near a
//    pole stay near their great circle in lon/lat too). Longitudes are unwrapped along the ring; the
//    sense of each longitude step near a pole comes from which side of the piece's great circle the
//    pole lies, not from rounding. A point within 1e-12 rad of a pole is that pole; the ring then
//    runs along lat +-90 between the longitudes it arrives and leaves on. A ring that winds by +360
//    (-360) contains the north (south) pole: it is started at longitude -180 (+180), runs to the
//    other side and is closed along lat 90 (-90); one polygon. Any other ring is cut where it crosses
//    the antimeridian (Sutherland-Hodgman against the vertical lines; a Voronoi region is spherically
//    convex, so each side is one piece) and shifted into [-180, 180]: one or two polygons.
//
// Guarantees: every unique site gets a region (unless degeneracy beyond float64 leaves its region
// with no area), the areas sum to 4 pi, every ring is closed, counter-clockwise in lon/lat, has at
// least 4 points and no consecutive duplicates, lon within [-180, 180] (points on the antimeridian
// exactly +-180), lat within [-90, 90], no holes. Each site lies inside its region's polygons, or on
// their boundary in degenerate cases. The lon/lat polygons are the densified spherical polygons: a
// straight lon/lat segment of a piece of length s deviates from its great circle by at most about
// s^2 / 8 rad (2e-5 rad for 1 degree), which bounds how far the polygons are from the exact regions.
// Limits: sites closer than about 1e-9 degrees may get a Delaunay triangulation that is Delaunay
// only up to the 1e-13 flip tolerance (their regions are then wrong at that scale, not elsewhere);
// the Qhull call itself cannot be canceled (it takes about a second per million sites).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/run_control.h"

namespace gpugeo::sphere {

#ifndef GPUGEO_SPHERE_EARTH_RADIUS_DEFINED
#define GPUGEO_SPHERE_EARTH_RADIUS_DEFINED
// Mean Earth radius (IUGG R1), metres: multiply steradians by its square for square metres.
constexpr double kEarthRadiusM = 6371008.8;
#endif

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
};

// The spherical Voronoi regions of n sites given in degrees (EPSG:4326 order lon, lat). Result i is
// site i's region. Throws InvalidInput when n < 1, a coordinate is not finite, |lat| > 90 or the
// step is outside (0, 10]; Canceled when control asks to stop; Error if Qhull fails.
std::vector<SphericalRegion> sphericalVoronoi(const double* lonDeg, const double* latDeg, int64_t n,
                                              const SphericalVoronoiOptions& options,
                                              const gpugeo::RunControl& control);

}  // namespace gpugeo::sphere
