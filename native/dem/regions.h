// Polygons of the regions of a label grid (the isochrone bands and the watershed of a travel-time
// raster), traced on the CPU or the GPU.
//
// A cell whose label k lies in [0, labelCount) belongs to set k; any other label is background. A
// region is a 4-connected group of cells of one set (as GDAL's polygonizer traces by default); its
// boundary runs along the cell edges between it and other labels or the grid's border. The boundary
// is walked edge by edge and, at a corner where the region's cells meet only diagonally, turns around
// its own cell, so cells that touch only at a corner stay apart. The rings are cut where they pass a corner twice and sorted into shells and
// holes (core/polygon_rings.h): one valid polygon per region, holes included.
//
// Coordinates are the cell corners', x = column (0 .. width) and y = -row (0 .. -height), so that
// shells run counter-clockwise as they do on a north-up map; a ring keeps only the corners where it
// turns. Rings start at their lowest turning edge (cells in row-major order, sides top, right,
// bottom, left) and sets list their rings in that order, so both backends give the same arrays.
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "core/polygon_rings.h"
#include "core/run_control.h"

namespace gpugeo::dem {

// Band k of the result holds the polygons of set k. Throws InvalidInput for an empty grid, a null
// array, labelCount < 1, or more boundary edges than the GPU's 32-bit indices hold.
BandPolygons traceRegions(Backend backend, const int32_t* labels, int64_t width, int64_t height, int32_t labelCount,
                          int threads, const RunControl& control);

}  // namespace gpugeo::dem
