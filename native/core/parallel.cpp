#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "errors.h"

namespace gpugeo {

namespace {
std::atomic<int64_t> failedThreadStarts{0};
}  // namespace

int64_t threadStartFailures()
{
  return failedThreadStarts.load();
}

void countThreadStartFailure()
{
  ++failedThreadStarts;
}

int defaultThreadCount()
{
  if (const char* env = std::getenv("GPUGEO_THREADS"))
  {
    const int requested = std::atoi(env);
    if (requested > 0)
      return requested;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallelFor(int64_t count, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& body,
                 const RunControl* control)
{
  if (count <= 0)
    return;
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = (count + grain - 1) / grain;
  if (threads <= 0)
    threads = defaultThreadCount();
  threads = static_cast<int>(std::min<int64_t>(threads, chunks));

  std::atomic<int64_t> nextChunk{0};
  std::atomic<bool> stop{false};
  std::exception_ptr firstError;
  std::mutex errorMutex;

  auto worker = [&]() {
    while (!stop.load(std::memory_order_relaxed))
    {
      if (control && control->isCanceled())
      {
        stop = true;
        break;
      }
      const int64_t chunk = nextChunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks)
        break;
      const int64_t begin = chunk * grain;
      const int64_t end = std::min(count, begin + grain);
      try
      {
        body(begin, end);
      }
      catch (...)
      {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!firstError)
          firstError = std::current_exception();
        stop = true;
      }
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t)
  {
    try
    {
      pool.emplace_back(worker);
    }
    catch (const std::system_error&)
    {
      // No more threads: the dynamic chunks go to those that started.
      countThreadStartFailure();
      break;
    }
  }
  worker();
  for (auto& thread : pool)
    thread.join();

  if (firstError)
    std::rethrow_exception(firstError);
  if (control && control->isCanceled())
    throw Canceled();
}

}  // namespace gpugeo
