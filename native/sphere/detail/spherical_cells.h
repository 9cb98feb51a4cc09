// The Delaunay neighbours of every unique site from its Voronoi cell, clipped on the GPU (CUDA
// builds; the method of Ray, Sokolov, Lefebvre and Lévy 2018, "Meshless Voronoi on the GPU", ACM
// TOG 37(6), on the sphere). Each thread gathers its site's nearest sites from the Morton-sorted
// array (the cells of a Morton level around it, found by binary search), starts from a spherical
// square about the site and cuts it by the bisector plane of each in order of distance, until the
// next site is farther than twice the cell's farthest vertex (the security radius: no farther site
// can cut it). A cell that cannot be closed that way (a site whose cell is larger than the square,
// more than kCellCandidates sites needed, more than kCellEdges edges) fails the whole run, and the
// caller builds the mesh on the CPU. The GPU's floating point decides nothing on its own: the caller
// checks the mesh from these cycles (consistent, outward, every edge Delaunay with a margin, by the
// CPU's predicates) before it takes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/run_control.h"
#include "core/stage_times.h"

namespace gpugeo::sphere::detail {

struct SphereCells
{
  bool complete = false;        // every cell closed; else the rest is empty and `failure` says why
  std::string failure;
  std::vector<int64_t> start;   // site i's neighbours: neighbor[start[i], start[i + 1])
  std::vector<int32_t> neighbor;  // counter-clockwise seen from outside the sphere
};

// xyz: n >= 4 unit vectors (x, y, z) sorted by their Morton keys `key` (mortonKey, ascending).
// Stages "cells upload", "cells", "cells download" in times. Throws DeviceUnavailable without a
// usable GPU, DeviceError or DeviceOutOfMemory when the GPU fails, Canceled.
SphereCells deviceCells(const double* xyz, const uint64_t* key, int32_t n, const RunControl& control,
                        StageTimes& times);

// The same cells made on the host by the same per-site code (spherical_cells_math.h), on `threads`
// threads: the same bits as deviceCells. For the tests (the GPU path's checks run without a GPU).
SphereCells hostCells(const double* xyz, const uint64_t* key, int32_t n, int threads, const RunControl& control);

// Why cells failed, in words, from the failure bits (spherical_cells_math.h).
std::string cellFailureText(int bits);

}  // namespace gpugeo::sphere::detail
