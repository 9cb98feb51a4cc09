// The CUDA backend of streams.h's in-memory network (streams_cuda.cu; dem_nocuda.cpp where there is
// no CUDA): every per-cell step on the device, the per-segment values the CPU's walk gives that need
// no more than a segment's first and last cells finished on the host (streams.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "dem/streams.h"

namespace gpugeo::dem::detail {

// What the device gives: out.segment (per cell), out.first, out.last, out.down and out.cells (per
// segment), and each segment's length in the units of `steps` (rowSteps(): three entries a row) in
// `units`. `directions`, `cells` and `area` are the grid's (width x height) on the host.
void streamSegmentsCuda(const uint8_t* directions, const int64_t* cells, const int64_t* area, int64_t width,
                        int64_t height, const int64_t* steps, const StreamThreshold& threshold, StreamNetwork& out,
                        std::vector<int64_t>& units, const RunControl& control);

}  // namespace gpugeo::dem::detail
