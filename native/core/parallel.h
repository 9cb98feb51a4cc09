// The CPU backend's threading: plain std::thread, chosen over OpenMP and TBB because it needs
// nothing beyond the C++ standard library (the native core builds on machines with only a compiler
// and CUDA), lets every worker poll the caller's cancel flag between work items so a cancel is
// honoured within milliseconds, and cannot clash with the OpenMP or TBB runtimes that GDAL, NumPy
// or other QGIS plugins may have loaded into the same process.
#pragma once

#include <cstdint>
#include <functional>

#include "run_control.h"

namespace gpugeo {

// Threads the CPU backend uses when the caller does not say: the GPUGEO_THREADS environment
// variable if set, else std::thread::hardware_concurrency().
int defaultThreadCount();

// Runs body(begin, end) over [0, count) in chunks of `grain` items handed out dynamically to
// `threads` threads (the calling thread is one of them; threads <= 0 means defaultThreadCount()).
// Stops handing out chunks when a body throws or control->isCanceled(); then rethrows the first
// exception, or throws Canceled.
void parallelFor(int64_t count, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& body,
                 const RunControl* control = nullptr);

}  // namespace gpugeo
