// The per-triangle math of the mesh contours, shared by the CPU and the CUDA backends so that both
// compute the same bits: the segment of one level in one triangle, the piece of one band in one
// triangle, the keys of the nodes where pieces meet, their coordinates, and the walk around a node
// that links a band's boundary segments into rings.
//
// Corners of a triangle are 0, 1, 2 counter-clockwise; local edge e runs from corner e to corner
// (e + 1) % 3, and half-edge 3 t + e is local edge e of triangle t. A node inside a triangle is
// described by a small code: 0..2 is a corner; 3 + 2 e + s is the crossing of local edge e (strictly
// between its corners) with the band's lower (s = 0) or upper (s = 1) level, or with the line's
// level (s = 0).
#pragma once

#include <cstdint>

#include "core/exact_math.h"
#include "core/hd.h"

namespace gpugeo::mesh::detail {

constexpr int kMaxPieceNodes = 5;  // a triangle cut by a band: at most a pentagon
// A successor search that walks around a node further than this reports a broken mesh.
constexpr int kMaxFanSteps = 1 << 16;

// The mesh and one field as the kernels see it (device or host pointers).
struct MeshArrays
{
  const double* x = nullptr;
  const double* y = nullptr;
  const double* z = nullptr;  // may be null
  int64_t vertexCount = 0;
  const int32_t* triangles = nullptr;  // 3 per triangle, counter-clockwise
  const int32_t* twin = nullptr;       // 3 per triangle: the opposite half-edge, or -1
  int64_t triangleCount = 0;
};

struct FieldArrays
{
  const double* value = nullptr;   // per vertex
  const uint8_t* valid = nullptr;  // per triangle: takes part
  const double* levels = nullptr;
  int32_t levelCount = 0;
};

// True for a finite number (NaN and the infinities give NaN here), the same on host and device.
GPUGEO_HD bool finite(double v)
{
  return exact::sub(v, v) == 0.0;
}

// Makes a triangle's corners counter-clockwise (swapping the last two) and says whether it can take
// part at all (1): three distinct vertices with finite coordinates; 0 when not (it is not turned);
// -1 when a corner is not a vertex of the mesh.
GPUGEO_HD int prepareTriangle(const double* x, const double* y, const double* z, int64_t vertexCount, int32_t c[3])
{
  if (c[0] < 0 || c[1] < 0 || c[2] < 0 || c[0] >= vertexCount || c[1] >= vertexCount || c[2] >= vertexCount)
    return -1;
  if (c[0] == c[1] || c[1] == c[2] || c[0] == c[2])
    return 0;
  for (int i = 0; i < 3; ++i)
    if (!finite(x[c[i]]) || !finite(y[c[i]]) || (z && !finite(z[c[i]])))
      return 0;
  const double cross = exact::sub(exact::mul(exact::sub(x[c[1]], x[c[0]]), exact::sub(y[c[2]], y[c[0]])),
                                  exact::mul(exact::sub(y[c[1]], y[c[0]]), exact::sub(x[c[2]], x[c[0]])));
  if (cross < 0)
  {
    const int32_t t = c[1];
    c[1] = c[2];
    c[2] = t;
  }
  return 1;
}

// Whether a triangle takes part for a field: usable, active, three finite values.
GPUGEO_HD bool takesPart(bool usable, const uint8_t* active, int64_t t, const double* value, const int32_t* c)
{
  return usable && (!active || active[t]) && finite(value[c[0]]) && finite(value[c[1]]) && finite(value[c[2]]);
}

GPUGEO_HD int32_t edgeId(const MeshArrays& m, int64_t halfEdge)
{
  const int32_t t = m.twin[halfEdge];
  return (t >= 0 && t < halfEdge) ? t : int32_t(halfEdge);
}

// First index i in [0, n) with a[i] >= v (lower) or a[i] > v (upper); n when none.
GPUGEO_HD int32_t lowerBound(const double* a, int32_t n, double v)
{
  int32_t lo = 0, hi = n;
  while (lo < hi)
  {
    const int32_t mid = (lo + hi) >> 1;
    if (a[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

GPUGEO_HD int32_t upperBound(const double* a, int32_t n, double v)
{
  int32_t lo = 0, hi = n;
  while (lo < hi)
  {
    const int32_t mid = (lo + hi) >> 1;
    if (a[mid] <= v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

GPUGEO_HD double min3(double a, double b, double c)
{
  const double m = a < b ? a : b;
  return m < c ? m : c;
}

GPUGEO_HD double max3(double a, double b, double c)
{
  const double m = a > b ? a : b;
  return m > c ? m : c;
}

// The levels a triangle's line segments may lie on: [first, last).
GPUGEO_HD void lineLevelRange(const double v[3], const double* levels, int32_t n, int32_t& first, int32_t& last)
{
  first = lowerBound(levels, n, min3(v[0], v[1], v[2]));
  last = upperBound(levels, n, max3(v[0], v[1], v[2]));
}

// The bands (levels k, k + 1) a triangle's values reach: [first, last).
GPUGEO_HD void bandRange(const double v[3], const double* levels, int32_t n, int32_t& first, int32_t& last)
{
  if (n < 2)
  {
    first = last = 0;
    return;
  }
  const int32_t lo = lowerBound(levels, n, min3(v[0], v[1], v[2])) - 1;
  const int32_t hi = upperBound(levels, n, max3(v[0], v[1], v[2]));
  first = lo < 0 ? 0 : lo;
  last = hi > n - 1 ? n - 1 : hi;
  if (last < first)
    last = first;
}

// The segment of level L in a triangle with corner values v, as two node codes oriented with the
// higher values on the left. Returns 2 with the segment, 0 without one, or -1 - e when local edge e
// lies at the level (both its corners equal L, the third does not): the caller writes it only from
// one of the triangles that hold it (nodes are set, oriented, in that case too).
GPUGEO_HD int lineNodes(const double v[3], double L, uint8_t nodes[2])
{
  const bool at0 = v[0] == L, at1 = v[1] == L, at2 = v[2] == L;
  const int atCount = int(at0) + int(at1) + int(at2);
  if (atCount == 3)
    return 0;
  if (atCount == 2)
  {
    const int e = !at0 ? 1 : (!at1 ? 2 : 0);  // the edge whose corners are both at L
    const int third = (e + 2) % 3;
    if (v[third] > L)
    {
      nodes[0] = uint8_t(e);
      nodes[1] = uint8_t((e + 1) % 3);
    }
    else
    {
      nodes[0] = uint8_t((e + 1) % 3);
      nodes[1] = uint8_t(e);
    }
    return -1 - e;
  }
  const bool high[3] = {v[0] >= L, v[1] >= L, v[2] >= L};
  const int highCount = int(high[0]) + int(high[1]) + int(high[2]);
  if (highCount == 0 || highCount == 3)
    return 0;
  // The corner that is alone on its side.
  int i = 0;
  for (int c = 0; c < 3; ++c)
    if (high[c] == (highCount == 1))
      i = c;
  const int before = (i + 2) % 3;  // the edge ending at corner i
  // The crossing of edge e: its corner at L when there is one (only the higher corner can be).
  auto crossing = [&](int e) -> uint8_t {
    const int a = e, b = (e + 1) % 3;
    if (v[a] == L)
      return uint8_t(a);
    if (v[b] == L)
      return uint8_t(b);
    return uint8_t(3 + 2 * e);
  };
  if (highCount == 1)
  {
    nodes[0] = crossing(i);
    nodes[1] = crossing(before);
  }
  else
  {
    nodes[0] = crossing(before);
    nodes[1] = crossing(i);
  }
  return nodes[0] == nodes[1] ? 0 : 2;
}

// The piece of band [lo, hi] in a triangle with corner values v: its nodes counter-clockwise.
// Returns their number; a piece with fewer than 3 has no area and is left out.
GPUGEO_HD int pieceNodes(const double v[3], double lo, double hi, uint8_t nodes[kMaxPieceNodes + 1])
{
  int n = 0;
  for (int e = 0; e < 3; ++e)
  {
    const double a = v[e], b = v[(e + 1) % 3];
    if (lo <= a && a <= hi)
      nodes[n++] = uint8_t(e);
    if (a < b)
    {
      if (a < lo && lo < b)
        nodes[n++] = uint8_t(3 + 2 * e);
      if (a < hi && hi < b)
        nodes[n++] = uint8_t(4 + 2 * e);
    }
    else if (b < a)
    {
      if (b < hi && hi < a)
        nodes[n++] = uint8_t(4 + 2 * e);
      if (b < lo && lo < a)
        nodes[n++] = uint8_t(3 + 2 * e);
    }
  }
  return n;
}

// The local edge two nodes of a triangle both lie on, or -1 (the segment between them crosses the
// triangle's inside).
GPUGEO_HD int commonEdge(uint8_t a, uint8_t b)
{
  int a0, a1, b0, b1;
  if (a < 3)
  {
    a0 = a;
    a1 = (a + 2) % 3;
  }
  else
    a0 = a1 = (a - 3) >> 1;
  if (b < 3)
  {
    b0 = b;
    b1 = (b + 2) % 3;
  }
  else
    b0 = b1 = (b - 3) >> 1;
  if (a0 == b0 || a0 == b1)
    return a0;
  if (a1 == b0 || a1 == b1)
    return a1;
  return -1;
}

// The key of a node, the same from every triangle that has it: a vertex's index, or past the
// vertices, (edge id, level index) of a crossing. `level` is the line's level or the band's lower
// level.
GPUGEO_HD int64_t nodeKey(const MeshArrays& m, int64_t t, uint8_t node, int32_t level, int32_t levelCount)
{
  if (node < 3)
    return m.triangles[3 * t + node];
  const int e = (node - 3) >> 1, s = (node - 3) & 1;
  return m.vertexCount + int64_t(edgeId(m, 3 * t + e)) * levelCount + level + s;
}

// A node's coordinates. A crossing is interpolated from the edge's lower-index vertex, so the two
// triangles of an edge find the same bits.
GPUGEO_HD void nodePoint(const MeshArrays& m, const FieldArrays& f, int64_t t, uint8_t node, int32_t level,
                         double out[3])
{
  const int32_t* tri = m.triangles + 3 * t;
  if (node < 3)
  {
    const int32_t p = tri[node];
    out[0] = m.x[p];
    out[1] = m.y[p];
    out[2] = m.z ? m.z[p] : 0.0;
    return;
  }
  const int e = (node - 3) >> 1, s = (node - 3) & 1;
  int32_t a = tri[e], b = tri[(e + 1) % 3];
  if (b < a)
  {
    const int32_t c = a;
    a = b;
    b = c;
  }
  const double L = f.levels[level + s];
  const double va = f.value[a], vb = f.value[b];
  const double tt = exact::div(exact::sub(L, va), exact::sub(vb, va));
  out[0] = exact::add(m.x[a], exact::mul(tt, exact::sub(m.x[b], m.x[a])));
  out[1] = exact::add(m.y[a], exact::mul(tt, exact::sub(m.y[b], m.y[a])));
  out[2] = m.z ? exact::add(m.z[a], exact::mul(tt, exact::sub(m.z[b], m.z[a]))) : 0.0;
}

GPUGEO_HD void cornerValues(const MeshArrays& m, const FieldArrays& f, int64_t t, double v[3])
{
  v[0] = f.value[m.triangles[3 * t]];
  v[1] = f.value[m.triangles[3 * t + 1]];
  v[2] = f.value[m.triangles[3 * t + 2]];
}

// The neighbour's triangle across local edge e of t when it takes part, else -1.
GPUGEO_HD int64_t liveNeighbour(const MeshArrays& m, const FieldArrays& f, int64_t t, int e)
{
  const int32_t h = m.twin[3 * t + e];
  if (h < 0)
    return -1;
  const int64_t u = h / 3;
  return f.valid[u] ? u : -1;
}

// Whether the line segment on local edge e of t (both corners at the level) is written by t: the
// other triangle of the edge does not write it (it is absent, left out, flat at the level) or has
// the higher index.
GPUGEO_HD bool ownsLevelEdge(const MeshArrays& m, const FieldArrays& f, int64_t t, int e, double L)
{
  const int64_t u = liveNeighbour(m, f, t, e);
  if (u < 0 || u > t)
    return true;
  double w[3];
  cornerValues(m, f, u, w);
  return w[0] == L && w[1] == L && w[2] == L;
}

// The line segment of level k in triangle t (which takes part): 2 with its nodes, else 0. `weak`
// tells a segment along an edge at the level, whose orientation the values beside it may not
// settle (both sides higher, both lower, or one side flat): a line takes its direction from its
// lowest segment that is not weak.
GPUGEO_HD int lineSegment(const MeshArrays& m, const FieldArrays& f, int64_t t, const double v[3], int32_t k,
                          uint8_t nodes[2], bool& weak)
{
  const double L = f.levels[k];
  const int r = lineNodes(v, L, nodes);
  weak = r < 0;
  if (r >= 0)
    return r;
  return ownsLevelEdge(m, f, t, -1 - r, L) ? 2 : 0;
}

// Whether segment j of a band piece (nodes[j] -> nodes[j + 1]) is on the band's boundary: it
// crosses the triangle, or it lies on an edge whose other side has no piece of the band. (An edge
// whose two corners lie strictly inside the band always has a piece on a live other side.)
GPUGEO_HD bool onBoundary(const MeshArrays& m, const FieldArrays& f, int64_t t, const double v[3],
                          const uint8_t* nodes, int n, int j, int32_t band)
{
  const uint8_t a = nodes[j], b = nodes[(j + 1) % n];
  const int e = commonEdge(a, b);
  if (e < 0)
    return true;
  const int64_t u = liveNeighbour(m, f, t, e);
  if (u < 0)
    return true;
  const double lo = f.levels[band], hi = f.levels[band + 1];
  if (a < 3 && b < 3 && lo < v[a] && v[a] < hi && lo < v[b] && v[b] < hi)
    return false;
  double w[3];
  cornerValues(m, f, u, w);
  uint8_t other[kMaxPieceNodes + 1];
  return pieceNodes(w, lo, hi, other) < 3;
}

// The boundary segment that follows segment j of band piece (t, band) on its ring: the next segment
// of the piece, or, where that one is shared with the neighbour's piece, the walk goes on around the
// node through the neighbour. Writes the follower's triangle and segment index; returns false when
// the walk does not end (a mesh whose neighbours are inconsistent).
GPUGEO_HD bool nextBoundarySegment(const MeshArrays& m, const FieldArrays& f, int64_t t, int j, int32_t band,
                                   int64_t& nextT, int& nextJ)
{
  const double lo = f.levels[band], hi = f.levels[band + 1];
  double v[3];
  cornerValues(m, f, t, v);
  uint8_t nodes[kMaxPieceNodes + 1];
  int n = pieceNodes(v, lo, hi, nodes);
  for (int step = 0; step < kMaxFanSteps; ++step)
  {
    const int j2 = (j + 1) % n;
    const uint8_t a = nodes[j2], b = nodes[(j2 + 1) % n];
    const int e = commonEdge(a, b);
    const int64_t u = e < 0 ? -1 : liveNeighbour(m, f, t, e);
    uint8_t other[kMaxPieceNodes + 1];
    int nu = 0;
    if (u >= 0)
    {
      double w[3];
      cornerValues(m, f, u, w);
      nu = pieceNodes(w, lo, hi, other);
    }
    if (nu < 3)
    {
      nextT = t;
      nextJ = j2;
      return true;
    }
    // The neighbour's piece holds the same segment the other way, b -> a: go on after it.
    const int64_t ka = nodeKey(m, t, a, band, f.levelCount), kb = nodeKey(m, t, b, band, f.levelCount);
    int found = -1;
    for (int i = 0; i < nu; ++i)
      if (nodeKey(m, u, other[i], band, f.levelCount) == kb &&
          nodeKey(m, u, other[(i + 1) % nu], band, f.levelCount) == ka)
        found = i;
    if (found < 0)
      return false;
    t = u;
    n = nu;
    for (int i = 0; i < nu; ++i)
      nodes[i] = other[i];
    j = found;
  }
  return false;
}

// A band's boundary segment as a sortable key: (triangle, band, segment of the piece).
GPUGEO_HD int64_t boundaryKey(int64_t t, int32_t band, int j, int32_t bandCount)
{
  return ((t * bandCount + band) << 3) | j;
}

}  // namespace gpugeo::mesh::detail
