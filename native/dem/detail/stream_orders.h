// What the in-memory and tiled stream networks share (streams.cpp, tiled/tiled_streams.cpp).
#pragma once

#include "core/run_control.h"
#include "dem/streams.h"

namespace gpugeo::dem::detail {

// The Strahler and Shreve orders from the segments' downstream links, upstream first, on `threads`
// threads (parallelFor's count; the same orders on any); segments on a loop keep order 0. Without
// `shreve` the Shreve orders are left empty.
void addStreamOrders(StreamNetwork& network, int threads, const RunControl& control, bool shreve = true);

}  // namespace gpugeo::dem::detail
