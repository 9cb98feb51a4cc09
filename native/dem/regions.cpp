// Region tracing (regions.h): input checks, the CPU backend, and the polygons from the rings.
#include "dem/regions.h"

#include <algorithm>
#include <memory>
#include <string>

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/region_math.h"

namespace gpugeo::dem {

namespace detail {

// The rings of every set: each ring is walked from its first edge in cell order (by the band of rows
// that holds it, below) and then started at its lowest turning edge; the rings are sorted by set
// and that edge, so the result does not depend on the threads. A walk keeps only its turning edges
// (their ids and corners): whether the first edge turns is known when the walk comes back to it.
RawRings regionRingsCpu(const int32_t* labels, int64_t w, int64_t h, int32_t count, int threads,
                        const RunControl& control)
{
  std::unique_ptr<uint8_t[]> sides(new uint8_t[std::size_t(w * h)]);  // every cell written below
  parallelFor(h, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
    {
      uint8_t* out = sides.get() + y * w;
      const bool inner = y > 0 && y < h - 1;
      for (int64_t x = 0; x < w; x = (inner && x == 0) ? std::max<int64_t>(w - 1, 1) : x + 1)  // the border
        out[x] = uint8_t(boundarySides(labels, w, h, x, y, count));
      if (!inner)
        continue;
      const int32_t* row = labels + y * w;
      for (int64_t x = 1; x < w - 1; ++x)  // boundarySides without the bounds checks
      {
        const int32_t own = row[x];
        out[x] = own < 0 || own >= count ? 0
                                         : uint8_t((row[x - w] != own) | (row[x + 1] != own) << 1 |
                                                   (row[x + w] != own) << 2 | (row[x - 1] != own) << 3);
      }
    }
  }, &control);
  // The walks, by bands of rows on all threads (four bands a thread, so that a thread slowed down
  // leaves its share to the others). A ring belongs to the band of its first cell in
  // row-major order, and that band walks it whole, from its first edge. Another band below, finding
  // one of the ring's edges in its rows, walks it too, but only until the walk reaches a cell above
  // its rows or an edge in its rows that is already walked: such walks keep nothing, and they clear
  // only edges of their own rows, which no band above walks from. A band's ring never has a cell
  // above the band, and its edges in the band's rows are walked by the band alone, so its walk goes
  // round whole. The edges' bits are shared between the bands: read and cleared atomically.
  struct Ring
  {
    int32_t label;
    int64_t lowest;            // the lowest turning edge, 4 x cell + side
    int32_t band;              // whose `corner` holds it
    int64_t begin, end;        // its corners there
  };
  const int64_t bandCount = std::max<int64_t>(1, std::min<int64_t>(4 * (threads > 0 ? threads : defaultThreadCount()), h));
  std::vector<std::vector<Ring>> ringsOf(static_cast<std::size_t>(bandCount));
  std::vector<std::vector<int64_t>> cornerOf(ringsOf.size());  // the corners' keys, row * (w + 1) + column
  const int64_t stride = w + 1;
  uint8_t* bits = sides.get();
  parallelFor(bandCount, 1, threads, [&](int64_t band, int64_t) {
    const int64_t lo = h * band / bandCount * w, hi = h * (band + 1) / bandCount * w;
    std::vector<Ring>& rings = ringsOf[std::size_t(band)];
    std::vector<int64_t>& corner = cornerOf[std::size_t(band)];
    std::vector<int64_t> turnId, turnCorner;  // a walk's turning edges
    for (int64_t c = lo; c < hi; ++c)
    {
      if ((c & 0xffff) == 0 && control.isCanceled())
        throw Canceled();
      for (uint8_t left; (left = __atomic_load_n(bits + c, __ATOMIC_RELAXED)) != 0;)
      {
        turnId.clear();
        turnCorner.clear();
        const int64_t startY = c / w, startX = c - startY * w;
        int64_t x = startX, y = startY;
        int s = __builtin_ctz(left);
        const int startSide = s;
        int previous = -1;  // the side of the edge before, once there is one
        bool mine = true;
        do
        {
          const int64_t cell = y * w + x;
          if (cell < lo)
          {
            mine = false;
            break;
          }
          const uint8_t was = __atomic_fetch_and(bits + cell, uint8_t(~(1u << s)), __ATOMIC_RELAXED);
          if (cell < hi && !(was & (1u << s)))
          {
            mine = false;
            break;
          }
          if (s != previous && previous >= 0)
          {
            turnId.push_back(4 * cell + s);
            turnCorner.push_back(edgeStartRow(y, s) * stride + edgeStartColumn(x, s));
          }
          previous = s;
          int64_t nx, ny;
          int ns;
          nextEdge(labels, w, h, x, y, s, nx, ny, ns);
          x = nx, y = ny, s = ns;
        } while (x != startX || y != startY || s != startSide);
        if (!mine)
          continue;
        if (startSide != previous)  // the first edge turns from the last
        {
          turnId.insert(turnId.begin(), 4 * c + startSide);
          turnCorner.insert(turnCorner.begin(), edgeStartRow(startY, startSide) * stride +
                                                  edgeStartColumn(startX, startSide));
        }
        const std::size_t first = std::size_t(std::min_element(turnId.begin(), turnId.end()) - turnId.begin());
        Ring ring{labels[c], turnId[first], int32_t(band), int64_t(corner.size()), 0};
        corner.insert(corner.end(), turnCorner.begin() + std::ptrdiff_t(first), turnCorner.end());
        corner.insert(corner.end(), turnCorner.begin(), turnCorner.begin() + std::ptrdiff_t(first));
        ring.end = int64_t(corner.size());
        rings.push_back(ring);
      }
    }
  }, &control);
  std::vector<Ring> rings;
  std::size_t corners = 0;
  for (std::size_t b = 0; b < ringsOf.size(); ++b)
  {
    rings.insert(rings.end(), ringsOf[b].begin(), ringsOf[b].end());
    corners += cornerOf[b].size();
  }
  std::sort(rings.begin(), rings.end(), [](const Ring& a, const Ring& b) {
    return a.label != b.label ? a.label < b.label : a.lowest < b.lowest;
  });
  RawRings raw;
  raw.vertexCount = (w + 1) * (h + 1);
  raw.bandRing.assign(std::size_t(count) + 1, 0);
  raw.ringNode.reserve(rings.size() + 1);
  raw.ringNode.push_back(0);
  raw.key.reserve(corners);
  for (std::size_t r = 0; r < rings.size(); ++r)
  {
    const std::vector<int64_t>& corner = cornerOf[std::size_t(rings[r].band)];
    raw.key.insert(raw.key.end(), corner.begin() + rings[r].begin, corner.begin() + rings[r].end);
    raw.ringNode.push_back(int64_t(raw.key.size()));
    ++raw.bandRing[std::size_t(rings[r].label) + 1];
  }
  for (int32_t k = 0; k < count; ++k)
    raw.bandRing[std::size_t(k) + 1] += raw.bandRing[std::size_t(k)];
  return raw;
}

BandPolygons polygonsFromRings(RawRings raw, int64_t width, const RunControl& control, int threads)
{
  // The rings were walked with their region on the right in row-down coordinates; with y = -row
  // that is clockwise, so each ring is reversed (keeping its first corner) to make shells
  // counter-clockwise. The corners' coordinates come from their keys.
  const int64_t stride = width + 1;
  parallelFor(2, 1, threads, [&](int64_t job, int64_t) {  // fresh pages faulted on two threads
    resizeHuge(job == 0 ? raw.x : raw.y, raw.key.size());
  }, &control);
  raw.z.clear();  // flat: the polygons come without z
  const int64_t ringCount = int64_t(raw.ringNode.size()) - 1;
  parallelFor(ringCount, 1024, threads, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
    {
      const int64_t begin = raw.ringNode[std::size_t(r)], end = raw.ringNode[std::size_t(r) + 1];
      std::reverse(raw.key.begin() + begin + 1, raw.key.begin() + end);
      for (int64_t i = begin; i < end; ++i)
      {
        const int64_t row = raw.key[std::size_t(i)] / stride;
        raw.x[std::size_t(i)] = double(raw.key[std::size_t(i)] - row * stride);
        raw.y[std::size_t(i)] = -double(row);
      }
    }
  }, &control);
  int64_t dropped = 0;
  return assembleRings(raw, dropped, control, threads);
}

}  // namespace detail

BandPolygons traceRegions(Backend backend, const int32_t* labels, int64_t width, int64_t height, int32_t labelCount,
                          int threads, const RunControl& control)
{
  if (width < 1 || height < 1)
    throw InvalidInput("the label grid has no cells");
  if (!labels)
    throw InvalidInput("the label grid must not be null");
  if (labelCount < 1)
    throw InvalidInput("there must be at least one label to trace");
  RawRings raw = backend == Backend::Gpu ? detail::regionRingsCuda(labels, width, height, labelCount, control)
                                         : detail::regionRingsCpu(labels, width, height, labelCount, threads, control);
  return detail::polygonsFromRings(std::move(raw), width, control, threads);
}

}  // namespace gpugeo::dem
