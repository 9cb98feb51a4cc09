// Breaching's steps 1 to 4 (breach.h) over an area of the DEM: the whole grid (the in-memory run), or a
// window read with a margin (the tiled run). The rules are breach.h's; what an area adds is which of
// its cells are known: in a window, the outermost ring of cells is read only to know its inner
// neighbours, so its pits, edges and components are not decided there.
//
// Cells are numbered row-major within the area. Row-major order within a rectangle is the grid's
// row-major order, so the searches' ties (to the lowest index) fall as they do over the whole grid.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "dem/breach.h"

namespace gpugeo::dem::detail {

struct BreachArea
{
  int64_t width = 0, height = 0;
  bool window = false;          // the outermost ring is not known (its raised cells are NaN)
  std::vector<float> raised;    // step 1: single-cell pits raised (-0 as +0)
  std::vector<uint8_t> edge;    // valid cells on the grid's border or beside nodata
  bool inner(int64_t x, int64_t y) const  // a known cell
  {
    const int64_t m = window ? 1 : 0;
    return x >= m && y >= m && x < width - m && y < height - m;
  }
};

// The area of `z` (width x height, NaN nodata): a whole grid, or a window whose outer ring is read only
// as its neighbours' neighbours. `pitsRaised` counts the pits raised within [x0, x1) x [y0, y1).
struct CountRegion
{
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool contains(int64_t x, int64_t y) const { return x >= x0 && y >= y0 && x < x1 && y < y1; }
};
BreachArea prepareBreachArea(const float* z, int64_t width, int64_t height, bool window,
                             const CountRegion& count, int64_t* pitsRaised);

// An 8-connected set of equal raised elevation within a region of the area.
struct EqualSet
{
  std::vector<int64_t> cells;  // the first is the lowest index
  bool hasEdge = false;        // holds an edge cell
  bool hasLower = false;       // a cell with a lower neighbour (looked at in the whole area)
  bool touchesBorder = false;  // holds a cell on the region's border
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // bounding box, inclusive
  bool bottom() const { return !hasEdge && !hasLower; }
  int64_t extent() const { return std::max(x1 - x0, y1 - y0) + 1; }
};

// visit(set) for every set of equal raised elevation whose cells lie in `region` (cells outside it are
// looked at only as neighbours), in the order of their lowest cells; but a cell with no neighbour of its
// elevation in the area is skipped (after step 1 such a set of one cell is never a bottom). With
// `starts`, only the sets holding those cells, in their order (a set's first cell is then the start).
void forEachEqualSet(const BreachArea& area, const CountRegion& region, const RunControl& control,
                     const std::function<void(const EqualSet&)>& visit, const std::vector<int64_t>* starts = nullptr);

// visit(set) for every bottom among those sets (forEachEqualSet's, hasEdge and hasLower false), in the
// order of their lowest cells; the sets that are no bottom are left as soon as that shows.
void forEachBottom(const BreachArea& area, const CountRegion& region, const RunControl& control,
                   const std::function<void(const EqualSet&)>& visit);

// The set of equal raised elevation holding cell `start`, within the area's known cells.
EqualSet equalSetAt(const BreachArea& area, int64_t start);

// Step 3: one bottom's search over an area (breach.h): Dijkstra's search over the states (cell, steps
// taken), taken in the order of (cost, steps, cell, the cell it came from), a state skipped where its
// cell was already left in as few steps or fewer (it is then no better); the first target taken ends
// it. Its marks are kept in arrays stamped with the search's number, so that they need no clearing
// between searches. The bottom's cells must lie maxLength + 1 cells or more inside a window's border
// (the search then never leaves the known cells).
class ChannelSearch
{
public:
  ChannelSearch(const BreachArea& area, const BreachLimits& limits);
  // The channel of the bottom `cells` at elevation `level` (its cells from the first step to the
  // target), empty when there is none within the limits.
  std::vector<int64_t> channel(const std::vector<int64_t>& cells, float level);

private:
  struct State  // an open state
  {
    double cost;
    int64_t steps, cell, from;  // from: the cell it came from (-1 for the bottom's)
    int64_t parent;             // the place in mStates of the state it came from (-1: the bottom)
  };
  struct Left  // a state taken: its cell and the place of the state it came from
  {
    int64_t cell, parent;
  };
  bool isTarget(int64_t x, float level) const;
  // Whether any path within the limits reaches a target (a breadth-first search by steps, each cell
  // once): the search that finds none need not weigh every path.
  bool reachesTarget(const std::vector<int64_t>& cells, float level);

  const BreachArea& mArea;
  const BreachLimits& mLimits;
  int64_t mSearch = 0;
  std::vector<int64_t> mStamp, mFewestSteps, mReached;
  std::vector<int64_t> mLayer, mNextLayer;
  std::vector<State> mOpen;
  std::vector<Left> mStates;
};

// Step 4 for one channel: step i (from 1) to `level` lowered by i float32 steps where that is lower.
// cut(cell) is the elevation to lower (a reference), or null where the cell is not kept.
void cutChannel(const std::vector<int64_t>& path, float level, const std::function<float*(int64_t)>& cut);

// Checks breach.h's limits (InvalidInput).
void checkBreachLimits(const BreachLimits& limits);

}  // namespace gpugeo::dem::detail
