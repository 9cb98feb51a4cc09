// The brute-force reference of the mesh contours, for the tests: measures only (no geometry), worked
// out triangle by triangle straight from the rules of mesh_contours.h, sharing no code with the
// implementation.
//
// A triangle takes part when it is active (Field::active null or non-zero), its three values are
// finite and its three vertices have finite x and y. The input must be valid (indices in range,
// levels strictly increasing); nothing is checked.
#pragma once

#include <vector>

#include "mesh_contours.h"

namespace gpugeo::mesh::reference {

// The participating triangles.
int64_t trianglesUsed(const Mesh& mesh, const Field& field);

// Per level: the total 2D length of the level set. A triangle flat at the level gives nothing; an
// edge with both ends at the level counts once (per unordered vertex pair) when at least one
// participating non-flat triangle holds it; otherwise a triangle gives the segment between the two
// points where the level crosses its edges or meets its vertices (a single point gives nothing).
std::vector<double> lineLengths(const Mesh& mesh, const Field& field, const std::vector<double>& levels);

// Per band k (levels[k], levels[k + 1]): the total area of {p : levels[k] <= f(p) <= levels[k + 1]}
// over the participating triangles, each triangle clipped by the two half-planes of its linear field
// (Sutherland-Hodgman) and measured with the shoelace formula. levels.size() - 1 values (none for
// fewer than two levels).
std::vector<double> bandAreas(const Mesh& mesh, const Field& field, const std::vector<double>& levels);

}  // namespace gpugeo::mesh::reference
