// Breaching depressions (after Lindsay 2016's hybrid breach–fill): where a short, shallow channel can
// drain a depression, the channel is cut; what cannot be breached within the limits is filled. A
// hydrologist's alternative to filling, which changes far fewer cells where depressions are the DEM's
// noise (a road embankment over a culvert, a pit of a few centimetres).
//
// The definition (deterministic: the same bits whatever the order of the work, so that the CPU, the
// GPU and a tiled run agree):
//  1. Every single-cell pit (a cell lower than all eight neighbours, none of them nodata or off the
//     grid) is raised to its lowest neighbour, the fill of a one-cell depression.
//  2. The depressions' bottoms: the 8-connected sets of equal elevation with no edge cell (on the
//     border or beside nodata) and no cell that has a lower neighbour; h is a bottom's elevation.
//  3. Each bottom, on its own, searches for a channel: a path of at most maxLength cells from the bottom
//     (its first cell next to a bottom cell, each next to the one before) to a target, a cell lower than
//     h or an edge cell, through valid cells outside the bottom at most maxDepth above h. Its cost is
//     the sum of its cells' heights above h (0 for cells at or below h), in float64, added in path
//     order. The channel is the path of least cost, then of fewest cells, then ending at the lowest
//     cell index, then coming from the lowest (Dijkstra's search over (cell, steps), detail/
//     breach_area.h). None within the limits: the bottom is not breached.
//  4. Step i of a channel is cut to i float32 steps (ULPs) below h where it is higher: the channel
//     falls from the bottom to the target. The channels of all bottoms are merged by their minimum.
//  5. What is left is filled (dem.h's fillDepressions), then its flats drained by raising them
//     (flatMask, raiseFlats): every valid cell then drains with plain D8.
// The cut surface is never above the input's fill, so neither is the result but where flats are raised
// by float steps; breaching changes fewer cells than filling on a DEM of noise pits, though not on every
// DEM (a two-cell depression behind a five-cell plateau: the channel lowers six cells, the fill raises two).
// Least cost (Lindsay's least-cost breaching) rather than fewest cells: a channel goes round a ridge
// where a longer way cuts less, instead of trenching through it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/dem.h"

namespace gpugeo::dem {

struct BreachLimits
{
  int64_t maxLength = 50;                                    // cells a channel may lower, >= 1
  double maxDepth = std::numeric_limits<double>::infinity();  // m a channel may cut below a cell, >= 0
};

struct BreachCounts
{
  int64_t pitsRaised = 0;  // single-cell pits raised to their lowest neighbour (step 1)
  int64_t bottoms = 0;     // depressions' bottoms searched (step 2)
  int64_t breached = 0;    // bottoms a channel drains
  int64_t channelCells = 0;  // cells the channels lowered
  int64_t hostSearches = 0;  // on the GPU: bottoms whose search outgrew the device's windows (searched on the host)
};

// Steps 1 to 4: the DEM with its single-cell pits raised and every channel cut (NaN nodata kept), the
// counts. On the CPU (one thread).
std::vector<float> cutChannels(const Grid& grid, const BreachLimits& limits, const RunControl& control,
                               BreachCounts* counts = nullptr);

// Bytes a cell of the GPU's whole run holds on the device at most (breach_cuda.cu), besides the
// searches' scratch (about 1.4 GB on a GPU of 132 multiprocessors, 64² or 128² cells a warp).
constexpr int64_t kGpuBreachBytesPerCell = 31;

struct BreachedDem
{
  std::vector<float> z;  // the breached DEM, the rest filled and its flats raised
  BreachCounts counts;
  int64_t lowered = 0, raised = 0;  // valid cells below and above the input
};

// The whole definition on `backend`: on the CPU the channels on one thread, the fill and the flats on
// `threads`; on the GPU every step on the device (the same bits and counts). Throws InvalidInput for grids dem.h refuses, maxLength < 1 and a maxDepth that is
// negative or NaN.
BreachedDem breachDepressions(Backend backend, const Grid& grid, const BreachLimits& limits, int threads,
                              const RunControl& control, StageTimes* times = nullptr);

// Step 5 of a cut DEM (cutChannels', or the same from tiled_dem.h's cutChannelsOnThreads) on
// `backend`: filled, its flats raised; `counts` the cut's, the changed cells counted against `grid`.
BreachedDem finishBreach(Backend backend, const Grid& grid, const std::vector<float>& cut, const BreachCounts& counts,
                         int threads, const RunControl& control, StageTimes* times = nullptr);

// x lowered by `steps` float32 steps (−0 counts as +0, which goes to −denorm_min; stops at −FLT_MAX):
// raiseBySteps's mirror.
float lowerBySteps(float x, int64_t steps);

}  // namespace gpugeo::dem
