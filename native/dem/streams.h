// A stream network on D8 directions: the cells whose upstream area (or count) reaches a threshold,
// cut into segments at junctions, each with its Strahler and Shreve order, the segment it flows into,
// its length, drop and upstream area — what GRASS r.stream.extract, SAGA's Channel Network and TauDEM
// call links.
//
// A segment starts at a source (a stream cell no stream cell flows into) or at a junction (a stream
// cell two or more stream cells flow into) and runs down to the cell before the next junction, or to
// the end of its path (off the grid, a pit, nodata). Segments are numbered 1, 2, … by their first
// cell in row order. A segment's line runs through its cells' centres and on to the first cell of
// the segment it flows into, so that lines meet at junctions; its length is that line's (each step
// the width, height or diagonal of the cell it leaves, at its row) and its drop the elevation of its
// first cell minus that of the line's last. Strahler (1957): a source is 1; a junction takes the
// highest order flowing in, plus one where two or more segments bring it. Shreve (1966): a source is
// 1; a junction the sum of what flows in.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/hd.h"
#include "core/run_control.h"
#include "dem/dem.h"

namespace gpugeo::dem {

// Which cells are streams: at least minCells cells upstream (the cell included) and at least
// minArea (1e-6 m² units, as Accumulation::area) upstream area.
struct StreamThreshold
{
  int64_t minCells = 1;
  int64_t minArea = 0;
};

// Whether a cell with this direction, upstream cells and upstream area is a stream cell (on the host
// and, in streams_cuda.cu, on the device).
GPUGEO_HD bool isStreamCell(uint8_t direction, int64_t cells, int64_t area, const StreamThreshold& threshold)
{
  return direction != kNoData && cells > 0 && cells >= threshold.minCells && area >= threshold.minArea;
}

// What a network holds besides its segment raster: every field (Full), or only what the rasters of
// segments and Strahler orders need (Orders: first, down and strahler; last, shreve, cells, length,
// drop, area and upstreamCells left empty), about a fifth of Full's memory per segment.
enum class StreamFields
{
  Full,
  Orders
};

struct StreamNetwork
{
  std::vector<int32_t> segment;  // per cell: its segment (1 … segments), 0 for no stream
  int64_t streamCells = 0;       // the cells of all segments
  // Per segment k (index k - 1):
  std::vector<int64_t> first, last;  // its first and last cell (y * width + x)
  std::vector<int32_t> down;         // the segment it flows into, 0 for none
  std::vector<int32_t> strahler;
  std::vector<int64_t> shreve;
  std::vector<int64_t> cells;        // its cells
  std::vector<double> length;        // m, of its line
  std::vector<double> drop;          // m, along its line
  std::vector<int64_t> area;         // upstream area at its last cell, 1e-6 m² units
  std::vector<int64_t> upstreamCells;  // upstream cells at its last cell
};

// `grid` gives the elevations (for the drops; Orders does not read them) and cell sizes; `accumulation` is flowAccumulation()'s
// for these directions. Throws InvalidInput for arrays of the wrong size or more than 2³¹ − 1
// segments. On the CPU, on `threads` threads (parallelFor's count; the same result on any), the
// orders too. `fields`: what the network keeps (what Orders keeps is Full's, the same values).
StreamNetwork streamNetwork(const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold, int threads,
                            const RunControl& control, StreamFields fields = StreamFields::Full);

// The same on either backend, the same bits: Backend::Gpu on the device (streams_cuda.cu; throws
// DeviceUnavailable where there is none, DeviceOutOfMemory past its memory, InvalidInput past its
// 32-bit cell indices; the segments' sums and orders then on the host's `threads`), anything else on
// the CPU as above (Auto as the other DEM tools take it: the caller resolves it first,
// core/backend.h's resolveBackend).
StreamNetwork streamNetwork(Backend backend, const Grid& grid, const std::vector<uint8_t>& directions,
                            const Accumulation& accumulation, const StreamThreshold& threshold, int threads,
                            const RunControl& control, StreamFields fields = StreamFields::Full);

// The most device memory the GPU path holds at once, in bytes per cell of the grid (its grid-sized
// buffers and the per-segment ones for as many segments as cells; streams_cuda.cu checks them before
// it starts).
constexpr int64_t kGpuStreamsBytesPerCell = 26;

// The cells of segment k (1-based) in order down its line, the first cell of the segment it flows
// into last (when it flows into one). Needs a Full network (throws InvalidInput for an Orders one).
std::vector<int64_t> segmentLine(const StreamNetwork& network, const std::vector<uint8_t>& directions, int64_t width,
                                 int64_t height, int32_t k);

}  // namespace gpugeo::dem
