// Raster algorithms compute a band of rows and then write it; this overlaps the two: while the
// calling thread writes band k (GDAL compression, disk), a worker thread computes band k + 1 into a
// second buffer. Exceptions from either side reach the caller after both sides have stopped.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <future>

#include "core/parallel.h"

namespace gpugeo {

// Calls produce(buffer, row0, rows) on a worker thread and consume(buffer, row0, rows) on the calling
// thread for consecutive bands of `bandRows` rows covering [0, height), alternating between
// buffers[0] and buffers[1]. `keepGoing()` is asked before each band is consumed; when it answers
// false the pipeline stops and returns false.
template <class Buffer>
bool runBandPipeline(int64_t height, int64_t bandRows, Buffer (&buffers)[2],
                     const std::function<void(Buffer&, int64_t, int64_t)>& produce,
                     const std::function<void(Buffer&, int64_t, int64_t)>& consume,
                     const std::function<bool()>& keepGoing)
{
  auto start = [&](int64_t row0) {
    Buffer& buffer = buffers[(row0 / bandRows) % 2];
    const int64_t rows = std::min(bandRows, height - row0);
    return startAsync([&produce, &buffer, row0, rows] { produce(buffer, row0, rows); });
  };
  std::future<void> pending = start(0);
  for (int64_t row0 = 0; row0 < height; row0 += bandRows)
  {
    pending.get();
    const int64_t next = row0 + bandRows;
    if (next < height)
      pending = start(next);
    try
    {
      if (!keepGoing())
      {
        if (pending.valid())
          pending.wait();
        return false;
      }
      consume(buffers[(row0 / bandRows) % 2], row0, std::min(bandRows, height - row0));
    }
    catch (...)
    {
      if (pending.valid())
        pending.wait();
      throw;
    }
  }
  return true;
}

}  // namespace gpugeo
