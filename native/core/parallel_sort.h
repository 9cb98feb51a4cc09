// A sort on all cores for the host side of the indexes: slices sorted at once, then merged pairwise.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "parallel.h"

namespace gpugeo {

// Sorts v by operator< (the keys should be unique, e.g. (key, index), for a result independent of
// the thread count). Throws Canceled when control asks to stop.
template <typename T, typename Allocator>
void parallelSort(std::vector<T, Allocator>& v, int threads, const RunControl& control)
{
  threads = threads > 0 ? threads : defaultThreadCount();
  const int64_t n = int64_t(v.size());
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, n / 65536));
  std::vector<int64_t> bounds;
  for (int64_t k = 0; k <= parts; ++k)
    bounds.push_back(n * k / parts);
  parallelFor(parts, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      std::sort(v.begin() + bounds[std::size_t(k)], v.begin() + bounds[std::size_t(k + 1)]);
  }, &control);
  for (int64_t width = 1; width < parts; width *= 2)
  {
    const int64_t merges = (parts + 2 * width - 1) / (2 * width);
    parallelFor(merges, 1, threads, [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
      {
        const int64_t lo = m * 2 * width, mid = std::min(parts, lo + width), hi = std::min(parts, lo + 2 * width);
        std::inplace_merge(v.begin() + bounds[std::size_t(lo)], v.begin() + bounds[std::size_t(mid)],
                           v.begin() + bounds[std::size_t(hi)]);
      }
    }, &control);
  }
}

}  // namespace gpugeo
