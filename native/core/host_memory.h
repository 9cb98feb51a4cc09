// Large host arrays asked for as huge pages. On Linux with transparent huge pages in "madvise" mode
// (the H100 machine's), a fresh vector is faulted in 4 KiB pages on first touch, and that cost more
// than the work for the DEM chain's outputs (a 51 MB vector: 24 ms to fault, 3.6 ms to fill from the
// GPU). The advice is only advice: where it is not taken nothing changes but the speed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace gpugeo {

// Reserves room for n values in `v` (which must be empty) and advises huge pages for it when it is
// large (4 MiB or more).
template <typename T>
void reserveHuge(std::vector<T>& v, std::size_t n)
{
  v.reserve(n);
#if defined(__linux__)
  if (n * sizeof(T) >= (std::size_t(4) << 20) && v.empty())
  {
    const std::uintptr_t page = std::uintptr_t(sysconf(_SC_PAGESIZE));
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(v.data());
    const std::uintptr_t begin = (at + page - 1) & ~(page - 1), end = (at + n * sizeof(T)) & ~(page - 1);
    if (end > begin)
      madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
#endif
}

// v.resize(n), where new room is reserved with reserveHuge (the values v holds are kept): for the
// working arrays the tiled tools reuse from tile to tile, whose first fill then faults in huge pages.
template <typename T>
void resizeHuge(std::vector<T>& v, std::size_t n)
{
  if (n > v.capacity())
  {
    std::vector<T> room;
    reserveHuge(room, n);
    room.assign(v.begin(), v.end());
    v.swap(room);
  }
  v.resize(n);
}

// v.assign(n, value), with resizeHuge's room.
template <typename T>
void assignHuge(std::vector<T>& v, std::size_t n, const T& value)
{
  resizeHuge(v, n);
  std::fill(v.begin(), v.end(), value);
}

// A vector of n value-initialised values, reserved with reserveHuge.
template <typename T>
std::vector<T> hugeVector(std::size_t n)
{
  std::vector<T> v;
  reserveHuge(v, n);
  v.resize(n);
  return v;
}

}  // namespace gpugeo
