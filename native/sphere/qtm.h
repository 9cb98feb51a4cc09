// The octahedral Quaternary Triangular Mesh (QTM) used by the spherical Voronoi family.
//
// Grid: Goodchild & Yang's subdivision of the octahedron in longitude/latitude (M. F. Goodchild and
// Y. Shiren, "A hierarchical spatial data structure for global geographic information systems",
// CVGIP: Graphical Models and Image Processing 54(1), 31-44, 1992; the QTM idea is G. Dutton's).
// The sphere is cut into eight octants by the equator and the meridians -180, -90, 0, 90. Each
// octant is a triangle with two corners on the equator and one at a pole, and every triangle is
// cut into four by joining the midpoints of its edges, midpoints taken in longitude and latitude
// (the midpoint of an edge that ends at a pole lies on the edge's meridian). Every cell edge is
// therefore a straight line in longitude/latitude: a parallel, a meridian or a line of constant
// slope, so the cell polygons are exact in EPSG:4326. Cells touching a pole are drawn in
// EPSG:4326 as quadrilaterals whose top side lies on the pole line.
//
// Level L has 8 * 4^L cells. Numbering:
// - octants 0-3 are north of the equator, 4-7 south, each row west to east starting at -180;
// - a cell's child digit is 0 for the centre child, 1 for the child at the parent's apex (the
//   corner that points along the parent's own orientation: pole-ward or equator-ward), 2 for the
//   west corner child and 3 for the east corner child;
// - the cell id is the octant followed by the L digits in base 4 (id = octant * 4^L + digits), so
//   the cells of one parent are consecutive and the address text is the octant digit followed by
//   the L child digits ("3" at level 0, "30121" at level 4).
//
// Inside an octant a cell is also found by its lattice position: with n = 2^L, row r (0 at the
// pole, n - 1 on the equator) holds 2r + 1 cells, pos = 0 .. 2r west to east; even positions point
// their apex to the pole, odd ones to the equator. A vertex of the octant's lattice is (r, q),
// q = 0 .. r, r = 0 being the pole. Its latitude is +-90 * (1 - r / n); its longitude is the octant's
// west meridian plus 90 * x(r, q) degrees, where x(r, q) * n is a whole number (closed form in
// qtmVertexLonUnits). So every vertex sits on the integer lattice of 90/n degree steps:
// lon = -180 + 90 * lonUnits / n, lat = 90 * latUnits / n.
//
// Cell centre (the point each cell is labelled by): the normalised sum of the unit vectors of its
// three corners (the pole for a pole cell).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hd.h"

namespace gpugeo::sphere {

// Labelling goes to level 13 (536,870,912 cells): vertex lattice units then fit easily in int32.
constexpr int kMaxQtmLevel = 13;

GPUGEO_HD constexpr uint64_t qtmCellCount(int level)
{
  return uint64_t(8) << (2 * level);
}

struct QtmLattice
{
  int octant = 0;
  int32_t row = 0;
  int32_t pos = 0;
};

GPUGEO_HD QtmLattice qtmLatticeFromId(uint64_t id, int level)
{
  QtmLattice cell;
  cell.octant = int(id >> (2 * level));
  int32_t r = 0;
  int32_t p = 0;
  for (int l = level - 1; l >= 0; --l)
  {
    const int digit = int((id >> (2 * l)) & 3u);
    if ((p & 1) == 0)
    {  // apex toward the pole
      switch (digit)
      {
        case 0: r = 2 * r + 1; p = 2 * p + 1; break;
        case 1: r = 2 * r; p = 2 * p; break;
        case 2: r = 2 * r + 1; p = 2 * p; break;
        default: r = 2 * r + 1; p = 2 * p + 2; break;
      }
    }
    else
    {  // apex toward the equator
      switch (digit)
      {
        case 0: r = 2 * r; p = 2 * p; break;
        case 1: r = 2 * r + 1; p = 2 * p + 1; break;
        case 2: r = 2 * r; p = 2 * p - 1; break;
        default: r = 2 * r; p = 2 * p + 1; break;
      }
    }
  }
  cell.row = r;
  cell.pos = p;
  return cell;
}

GPUGEO_HD uint64_t qtmIdFromLattice(const QtmLattice& cell, int level)
{
  uint64_t digits = 0;
  int32_t r = cell.row;
  int32_t p = cell.pos;
  for (int l = 0; l < level; ++l)
  {
    int digit;
    int32_t parent;
    if ((r & 1) == 0)
    {
      if ((p & 1) == 0)
      {
        parent = p / 2;
        digit = (parent & 1) == 0 ? 1 : 0;
      }
      else
      {
        parent = ((p + 1) / 2) & 1 ? (p + 1) / 2 : (p - 1) / 2;
        digit = parent == (p + 1) / 2 ? 2 : 3;
      }
    }
    else
    {
      if ((p & 1) == 0)
      {
        parent = ((p / 2) & 1) == 0 ? p / 2 : p / 2 - 1;
        digit = parent == p / 2 ? 2 : 3;
      }
      else
      {
        parent = (p - 1) / 2;
        digit = (parent & 1) == 0 ? 0 : 1;
      }
    }
    digits |= uint64_t(digit) << (2 * l);
    r >>= 1;
    p = parent;
  }
  return (uint64_t(cell.octant) << (2 * level)) | digits;
}

// x(r, q) * n for lattice vertex (r, q), 1 <= r <= n, 0 <= q <= r: the vertex's longitude offset
// from the octant's west meridian in units of 90/n degrees. Rows r with n'/2 <= r <= n' (n' a power
// of two, at least 2) lie in one band of the recursive construction, which the octant's first
// subdivision cuts into three triangles (west corner, centre, east corner); on each the
// lattice-to-lon/lat map is affine.
GPUGEO_HD int32_t qtmVertexLonUnits(int32_t r, int32_t q, int32_t n)
{
  if (r <= 1)
    return q * n;
  int32_t band = 2;
  while (band < r)
    band *= 2;
  const int32_t half = band / 2;
  const int32_t scale = n / band;
  if (q <= r - half)
    return q * scale;
  if (q >= half)
    return n + (q - r) * scale;
  return n / 2 + (2 * q - r) * scale;
}

// The three corners of a cell in lattice units: lonUnits in [0, 4n] from -180, latUnits in [-n, n].
// Corner order: apex, west, east. A pole corner has latUnits = +-n and the lonUnits of the
// corner's meridian is meaningless there (it is set to the west corner's).
struct QtmCorners
{
  int32_t lonUnits[3];
  int32_t latUnits[3];
};

GPUGEO_HD QtmCorners qtmCellCorners(const QtmLattice& cell, int level)
{
  const int32_t n = int32_t(1) << level;
  const int32_t lonBase = (cell.octant & 3) * n;
  const int32_t latSign = cell.octant < 4 ? 1 : -1;
  const int32_t r = cell.row;
  int32_t vr[3], vq[3];
  if ((cell.pos & 1) == 0)
  {
    const int32_t q = cell.pos / 2;
    vr[0] = r; vq[0] = q;
    vr[1] = r + 1; vq[1] = q;
    vr[2] = r + 1; vq[2] = q + 1;
  }
  else
  {
    const int32_t q = (cell.pos - 1) / 2;
    vr[0] = r + 1; vq[0] = q + 1;
    vr[1] = r; vq[1] = q;
    vr[2] = r; vq[2] = q + 1;
  }
  QtmCorners c;
  for (int k = 0; k < 3; ++k)
  {
    c.latUnits[k] = latSign * (n - vr[k]);
    c.lonUnits[k] = vr[k] == 0 ? 0 : lonBase + qtmVertexLonUnits(vr[k], vq[k], n);
  }
  if (vr[0] == 0)
    c.lonUnits[0] = c.lonUnits[1];
  return c;
}

// ---- Host-side grid functions (qtm.cpp) ----

// "30121": the octant digit, then one child digit a level.
std::string qtmAddress(uint64_t id, int level);
// Inverse of qtmAddress; throws InvalidInput on a malformed address.
uint64_t qtmIdFromAddress(const std::string& address);

// The cell's polygon in EPSG:4326, counter-clockwise, closed (first point repeated): a triangle, or
// for a pole cell the quadrilateral with two points on the pole line.
void qtmCellPolygon(uint64_t id, int level, std::vector<double>& lon, std::vector<double>& lat);

// The cell's area on the unit sphere (steradians), exact for the cell's lon/lat-straight edges:
// the integral of cos(lat) over the polygon, by Green's theorem along its edges.
double qtmCellArea(uint64_t id, int level);
// Area on the unit sphere of a polygon in lon/lat degrees whose edges are straight in lon/lat
// (the same integral); positive for counter-clockwise rings.
double lonLatPolygonArea(const double* lon, const double* lat, std::size_t count);

// The three edge neighbours, across the cell's edges in the order (west-east edge that is a parallel
// or the apex-opposite edge, then west side, then east side): ids at the same level.
void qtmNeighbours(uint64_t id, int level, uint64_t out[3]);

}  // namespace gpugeo::sphere
