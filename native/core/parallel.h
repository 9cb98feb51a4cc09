// The CPU backend's threading: plain std::thread, chosen over OpenMP and TBB because it needs
// nothing beyond the C++ standard library (the native core builds on machines with only a compiler
// and CUDA), lets every worker poll the caller's cancel flag between work items so a cancel is
// honoured within milliseconds, and cannot clash with the OpenMP or TBB runtimes that GDAL, NumPy
// or other QGIS plugins may have loaded into the same process.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <system_error>
#include <type_traits>

#include "run_control.h"

namespace gpugeo {

// Threads the CPU backend uses when the caller does not say: the GPUGEO_THREADS environment
// variable if set, else std::thread::hardware_concurrency().
int defaultThreadCount();

// Runs body(begin, end) over [0, count) in chunks of `grain` items handed out dynamically to
// `threads` threads (the calling thread is one of them; threads <= 0 means defaultThreadCount()).
// Stops handing out chunks when a body throws or control->isCanceled(); then rethrows the first
// exception, or throws Canceled.
// A thread that cannot be started (a limit on processes or threads, memory pressure) is not an
// error: the work runs on the threads that did start, the calling thread at least.
void parallelFor(int64_t count, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& body,
                 const RunControl* control = nullptr);

// Resizes every vector, empty on entry, to n value-initialized elements, the vectors shared out over
// `threads` threads (parallelFor's count): a large new array's first touch, the kernel handing out and
// clearing its pages, then runs on several cores (2 GB of new int64 took 1.3 s on one core of this
// project's 2-core machine, 0.7 s on two).
template <typename... Vectors>
void resizeOnThreads(std::size_t n, int threads, Vectors&... vectors)
{
  const std::function<void()> resize[] = {[&vectors, n] { vectors.resize(n); }...};
  parallelFor(int64_t(sizeof...(Vectors)), 1, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      resize[i]();
  });
}

// How many threads the process could not start so far (parallelFor's and startAsync's), for the
// log: a caller compares the count before and after its work.
int64_t threadStartFailures();
void countThreadStartFailure();

// std::async(std::launch::async, f), or, when no thread can be started, f deferred to the thread that
// waits for its result (the future's get() or wait() then runs it).
template <typename F>
std::future<std::invoke_result_t<std::decay_t<F>>> startAsync(F&& f)
{
  try
  {
    return std::async(std::launch::async, f);
  }
  catch (const std::system_error&)
  {
    countThreadStartFailure();
    return std::async(std::launch::deferred, std::forward<F>(f));
  }
}

}  // namespace gpugeo
