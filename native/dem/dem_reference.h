// Serial references for the tests: Priority-Flood (Barnes et al. 2014, Algorithm 1, one priority
// queue) seeded from the edge cells, D8 by brute force, and accumulation by walking downstream from
// every cell.
#pragma once

#include <cstdint>
#include <vector>

#include "dem/dem.h"

namespace gpugeo::dem::reference {

std::vector<float> priorityFlood(const Grid& grid);

// D8 as dem.h states it, cell by cell; mask may be empty (no flat resolution).
std::vector<uint8_t> directions(const Grid& grid, const std::vector<int32_t>& mask);

// Accumulation by walking downstream from every cell (O(cells x path length)).
Accumulation accumulation(const Grid& grid, const std::vector<uint8_t>& directions);

}  // namespace gpugeo::dem::reference
