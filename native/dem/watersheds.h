// Watersheds of many outlets on D8 directions: every cell labelled with the first outlet its flow
// path meets (itself included), so that nested outlets each keep their own part of the watershed,
// as a gauge network's subcatchments; the outlets' own and total (nested) cells and areas, and which
// outlet each drains into. The peer is GRASS r.water.outlet run once per outlet: its watershed of an
// outlet is our outlet's own cells plus those of every outlet nested upstream of it.
//
// CPU: each unlabelled cell walks down its path to the first labelled cell (or a terminal) and
// labels the cells it passed (one thread; on several, tiled_dem.h's watershedsOnThreads gives the same
// results). GPU: pointer jumping (Wyllie), each round every unresolved cell either
// takes its successor's label or jumps to its successor's successor, about log₂ of the longest path
// rounds. A path that ends off the grid, on nodata, in a pit (kNoFlow) or goes round a loop reaches no
// outlet: label 0. Both give the same labels.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"

namespace gpugeo::dem {

struct Watersheds
{
  std::vector<int32_t> labels;      // per cell: k + 1 in outlet k's own watershed, else 0
  std::vector<int64_t> ownCells;    // per outlet (0 for an outlet whose cell an earlier outlet holds)
  std::vector<double> ownArea;      // m², per outlet: its cells per row times the row's cell area, summed top down
  std::vector<int32_t> downstream;  // per outlet: the outlet its outlet cell drains into (-1: none)
  std::vector<int64_t> totalCells;  // per outlet: its own and every outlet's upstream of it (outlets on a
                                    // loop of directions: each all that reaches the loop)
  std::vector<double> totalArea;    // m², the same
  std::vector<int32_t> sameCellAs;  // per outlet: the earlier outlet on the same cell (-1: none)
};

// `directions`: width x height (dem.h's 0..7, kNoFlow, kNoData); `outlets`: cell indices (y * width + x)
// in the outlets' order; the cell sizes per row (metres). Two outlets on one cell: the first takes it,
// the later has no cells and sameCellAs names the first (it is not nested under it). Throws
// InvalidInput for an outlet off the grid or on a nodata cell (naming it, from 1), for more than
// 2³¹ − 2 outlets, and for arrays of the wrong size. The outlets' own cells and areas on `threads`
// threads (parallelFor's count; the same sums on any); the labels themselves as above.
Watersheds watersheds(Backend backend, const std::vector<uint8_t>& directions, int64_t width, int64_t height,
                      const double* cellWidth, const double* cellHeight, const std::vector<int64_t>& outlets,
                      int threads, const RunControl& control);

}  // namespace gpugeo::dem
