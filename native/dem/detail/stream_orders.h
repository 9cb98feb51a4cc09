// What the in-memory and tiled stream networks share (streams.cpp, tiled/tiled_streams.cpp).
#pragma once

#include "dem/streams.h"

namespace gpugeo::dem::detail {

// The Strahler and Shreve orders from the segments' downstream links, upstream first (Kahn's order
// over the segments' tree; segments on a loop keep order 0).
void addStreamOrders(StreamNetwork& network);

}  // namespace gpugeo::dem::detail
