// The CUDA backend's device-resident entry, for the benchmark and the GPU tests: it labels rows
// into device buffers on the labeller's stream and leaves them there.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "voronoi_raster.h"

namespace gpugeo::voronoi {

class CudaLabeller : public Labeller
{
public:
  // Enqueues the labelling of rows [row0, row0 + rows) into device arrays (rows * width values;
  // deviceDistance may be null) on stream(); returns without waiting. Adds nothing to times().
  virtual void labelRowsOnDevice(int64_t row0, int64_t rows, int32_t* deviceSite, float* deviceDistance) = 0;
  virtual cudaStream_t stream() const = 0;
  // Recorded on the device before the sites' upload began: the device time of the index and a
  // labelling is the time from it to an event recorded on stream() after labelRowsOnDevice (the
  // overlapped start, voronoi_cuda.cu, labels bands while later ones are still uploading).
  virtual cudaEvent_t startEvent() const = 0;
  // Profiling: time each phase of each band with CUDA events; phaseTimes() waits for the stream and
  // returns (and forgets) the sums per phase.
  virtual void setProfiling(bool on) = 0;
  virtual StageTimes phaseTimes() = 0;
};

std::unique_ptr<CudaLabeller> makeCudaLabeller(const Grid& grid, const Sites& sites, const LabellerOptions& options,
                                               const RunControl& control);

}  // namespace gpugeo::voronoi
