// The backends' part of dem/watersheds.h and what its in-memory and tiled runs share (watersheds.cpp,
// watersheds_cuda.cu, tiled/tiled_watersheds.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "dem/watersheds.h"

namespace gpugeo::dem::detail {

// The labels alone (the backends' part): `labels` holds k + 1 at outlet k's cell and -1 elsewhere on
// entry, the final labels on return.
void labelWatershedsCpu(const uint8_t* directions, int64_t width, int64_t height, int32_t* labels,
                        const RunControl& control);
void labelWatershedsCuda(const uint8_t* directions, int64_t width, int64_t height, int32_t* labels,
                         const RunControl& control);
// The same on the device with the labels only written: every cell starts at -1 but seedCells[i], which
// starts at seedLabels[i] (no upload of the grid's labels). The seed cells lie on the grid, each once
// (the caller's to check: watersheds() does).
void labelWatershedsCuda(const uint8_t* directions, int64_t width, int64_t height,
                         const std::vector<int64_t>& seedCells, const std::vector<int32_t>& seedLabels,
                         int32_t* labels, const RunControl& control);
// Per outlet, the earlier outlet on the same cell (-1: none).
std::vector<int32_t> sameCellAs(const std::vector<int64_t>& outlets);
// The totals from the own cells and areas and the downstream outlets (the in-memory and tiled runs').
void addNestedTotals(Watersheds& w);

}  // namespace gpugeo::dem::detail
