// Region tracing (regions.h): input checks, the CPU backend, and the polygons from the rings.
#include "dem/regions.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/region_math.h"

namespace gpugeo::dem {

namespace detail {

// The rings of every set, walked one after the other: each boundary edge is walked once, from the
// first not yet walked in cell order, and the ring is then started at its lowest turning edge.
RawRings regionRingsCpu(const int32_t* labels, int64_t w, int64_t h, int32_t count, int threads,
                        const RunControl& control)
{
  std::vector<uint8_t> sides(static_cast<std::size_t>(w * h));
  parallelFor(h, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
      for (int64_t x = 0; x < w; ++x)
        sides[std::size_t(y * w + x)] = uint8_t(boundarySides(labels, w, h, x, y, count));
  }, &control);
  struct Ring
  {
    int32_t label;
    int64_t lowest;       // the lowest turning edge, 4 x cell + side
    int64_t begin, end;   // its corners in `corner`
  };
  std::vector<Ring> rings;
  std::vector<int64_t> corner;  // the corners' keys, row * (w + 1) + column
  std::vector<int64_t> walkCell;
  std::vector<uint8_t> walkSide;
  for (int64_t c = 0; c < w * h; ++c)
  {
    if ((c & 0xffff) == 0 && control.isCanceled())
      throw Canceled();
    while (sides[std::size_t(c)])
    {
      walkCell.clear();
      walkSide.clear();
      int64_t x = c % w, y = c / w;
      int s = 0;
      while (!(sides[std::size_t(c)] & (1u << s)))
        ++s;
      const int64_t startX = x, startY = y;
      const int startSide = s;
      do
      {
        walkCell.push_back(y * w + x);
        walkSide.push_back(uint8_t(s));
        sides[std::size_t(y * w + x)] = uint8_t(sides[std::size_t(y * w + x)] & ~(1u << s));
        int64_t nx, ny;
        int ns;
        nextEdge(labels, w, h, x, y, s, nx, ny, ns);
        x = nx, y = ny, s = ns;
      } while (x != startX || y != startY || s != startSide);
      const std::size_t m = walkCell.size();
      std::size_t first = m;
      int64_t lowest = 0;
      for (std::size_t i = 0; i < m; ++i)
      {
        const bool turns = walkSide[i] != walkSide[(i + m - 1) % m];
        const int64_t id = 4 * walkCell[i] + walkSide[i];
        if (turns && (first == m || id < lowest))
          first = i, lowest = id;
      }
      Ring ring{labels[c], lowest, int64_t(corner.size()), 0};
      for (std::size_t k = 0; k < m; ++k)
      {
        const std::size_t i = (first + k) % m;
        if (walkSide[i] == walkSide[(i + m - 1) % m])
          continue;
        const int64_t cell = walkCell[i];
        corner.push_back(edgeStartRow(cell / w, walkSide[i]) * (w + 1) + edgeStartColumn(cell % w, walkSide[i]));
      }
      ring.end = int64_t(corner.size());
      rings.push_back(ring);
    }
  }
  std::sort(rings.begin(), rings.end(), [](const Ring& a, const Ring& b) {
    return a.label != b.label ? a.label < b.label : a.lowest < b.lowest;
  });
  RawRings raw;
  raw.vertexCount = (w + 1) * (h + 1);
  raw.bandRing.assign(std::size_t(count) + 1, 0);
  raw.ringNode.reserve(rings.size() + 1);
  raw.ringNode.push_back(0);
  raw.key.reserve(corner.size());
  for (std::size_t r = 0; r < rings.size(); ++r)
  {
    raw.key.insert(raw.key.end(), corner.begin() + rings[r].begin, corner.begin() + rings[r].end);
    raw.ringNode.push_back(int64_t(raw.key.size()));
    ++raw.bandRing[std::size_t(rings[r].label) + 1];
  }
  for (int32_t k = 0; k < count; ++k)
    raw.bandRing[std::size_t(k) + 1] += raw.bandRing[std::size_t(k)];
  return raw;
}

BandPolygons polygonsFromRings(RawRings raw, int64_t width, const RunControl& control)
{
  // The rings were walked with their region on the right in row-down coordinates; with y = -row
  // that is clockwise, so each ring is reversed (keeping its first corner) to make shells
  // counter-clockwise. The corners' coordinates come from their keys.
  for (std::size_t r = 0; r + 1 < raw.ringNode.size(); ++r)
    std::reverse(raw.key.begin() + raw.ringNode[r] + 1, raw.key.begin() + raw.ringNode[r + 1]);
  const int64_t stride = width + 1;
  reserveHuge(raw.x, raw.key.size());
  reserveHuge(raw.y, raw.key.size());
  raw.x.resize(raw.key.size());
  raw.y.resize(raw.key.size());
  raw.z.clear();  // flat: the polygons come without z
  for (std::size_t i = 0; i < raw.key.size(); ++i)
  {
    raw.x[i] = double(raw.key[i] % stride);
    raw.y[i] = -double(raw.key[i] / stride);
  }
  int64_t dropped = 0;
  return assembleRings(raw, dropped, control);
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
  return detail::polygonsFromRings(std::move(raw), width, control);
}

}  // namespace gpugeo::dem
