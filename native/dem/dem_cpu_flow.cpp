// The CPU backend's flats, directions and accumulation.
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <memory>

#include "core/errors.h"
#include "core/parallel.h"
#include "dem/detail/dem_cpu.h"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

namespace {

// The neighbours of the inner cell x of a row (rows up and down beside it) whose values make
// test(value) true, as bits in the order of kDx and kDy (E, SE, S, SW, W, NW, N, NE).
template <typename T, typename Test>
uint8_t neighbourBits(const T* up, const T* row, const T* down, int64_t x, Test test)
{
  return uint8_t(test(row[x + 1]) | test(down[x + 1]) << 1 | test(down[x]) << 2 | test(down[x - 1]) << 3 |
                 test(row[x - 1]) << 4 | test(up[x - 1]) << 5 | test(up[x]) << 6 | test(up[x + 1]) << 7);
}

// For the inner cells of a row (x from 1 to w - 2): out[x] = finish(the bits of the neighbours v with
// test(v, the cell's value), the cell's value). A function of its own, with the width a local, so
// that the compiler vectorises the loop.
template <typename T, typename Test, typename Finish>
void neighbourBitsOfRow(const T* up, const T* row, const T* down, int64_t w, uint8_t* out, Test test, Finish finish)
{
  for (int64_t x = 1; x < w - 1; ++x)
  {
    const T c = row[x];
    out[x] = finish(neighbourBits(up, row, down, x, [&](T v) { return test(v, c); }), c);
  }
}

constexpr uint8_t kUp = 0xe0, kDown = 0x0e;  // the neighbour bits of NW, N, NE and of SE, S, SW

// The offsets of the eight neighbours in a row-major grid, in the order of the bits. The jobs below
// take their inputs by value or through pointers and keep their outputs local until they end: a
// thread that wrote into a cache line that another thread keeps reading (the caller's locals, a
// vector's size beside its neighbour's) would slow both down.
struct Steps
{
  int64_t at[8];
  explicit Steps(int64_t w)
  {
    for (int d = 0; d < 8; ++d)
      at[d] = kDy[d] * w + kDx[d];
  }
};

// Breadth-first rings from the sources (ring 1) through the flat cells, each stepping to the flat
// neighbours that its bits in `flatNext` name; ring k is written to `ring` for the cells k - 1
// steps from the nearest source (what a first-in first-out queue gives, whatever the sources'
// order). Which cells have been reached is a bitmap (a few hundred kilobytes, in cache, where
// `ring` is tens of megabytes), and only the ring being stepped from and the next one are kept.
void rings(const std::vector<std::vector<int32_t>>& sourcesOf, const uint8_t* flatNext, const Steps steps, int64_t n,
           int32_t* ring)
{
  std::vector<uint64_t> reached(static_cast<std::size_t>((n + 63) / 64), 0);
  std::vector<int32_t> current, next;
  auto reach = [&](int64_t c, int32_t value) {
    uint64_t& word = reached[std::size_t(c >> 6)];
    const uint64_t bit = uint64_t(1) << (c & 63);
    if (word & bit)
      return false;
    word |= bit;
    ring[c] = value;
    return true;
  };
  auto stepFrom = [&](int64_t c, int32_t value) {
    for (uint32_t bits = flatNext[c]; bits; bits &= bits - 1)
    {
      const int64_t m = c + steps.at[__builtin_ctz(bits)];
      if (reach(m, value))
        next.push_back(int32_t(m));
    }
  };
  for (const auto& sources : sourcesOf)
    for (const int32_t s : sources)
      reach(s, 1);
  for (const auto& sources : sourcesOf)
    for (const int32_t s : sources)
      stepFrom(s, 2);
  for (int32_t value = 3; !next.empty(); ++value)
  {
    current.swap(next);
    next.clear();
    for (const int32_t c : current)
      stepFrom(c, value);
  }
}

// The pieces within a band of rows [b, e) of the equal-elevation components of drained flats
// (cells linked by the bits of `same`), flat cells and the others: each piece's flat cells, listed
// piece after piece, and the piece of each cell in the band's first and last rows (-1 for none),
// for joining the pieces across the bands' edges. The pieces start at the flat cells next to a low
// edge (`starts`: every drained flat has one) and at the cells with a neighbour of their elevation
// across the band's edges (a piece of a drained flat without such a flat cell joins the rest of
// its component through them).
struct Band
{
  std::vector<int32_t> flats, first;  // the pieces' flat cells; where each piece starts in `flats`, and the end
  std::vector<int32_t> firstRow, lastRow;
};

Band piecesOfBand(int64_t b, int64_t e, int64_t w, int64_t h, const std::vector<const std::vector<int32_t>*>& starts,
                  const uint8_t* flat, const uint8_t* same, const Steps steps)
{
  const int64_t lo = b * w, hi = e * w;
  Band band;
  band.firstRow.assign(std::size_t(w), -1);
  band.lastRow.assign(std::size_t(w), -1);
  std::vector<uint64_t> seen(static_cast<std::size_t>((hi - lo + 63) / 64), 0);  // a bit per cell of the band
  auto see = [&](int64_t c) {
    uint64_t& word = seen[std::size_t((c - lo) >> 6)];
    const uint64_t bit = uint64_t(1) << ((c - lo) & 63);
    const bool first = !(word & bit);
    word |= bit;
    return first;
  };
  std::vector<int32_t> queue;
  auto piece = [&](int64_t start) {
    if (!see(start))
      return;
    const int32_t id = int32_t(band.first.size());
    band.first.push_back(int32_t(band.flats.size()));
    queue.assign(1, int32_t(start));
    for (std::size_t head = 0; head < queue.size(); ++head)
    {
      const int64_t c = queue[head];
      if (flat[c])
        band.flats.push_back(int32_t(c));
      if (c < lo + w)
        band.firstRow[std::size_t(c - lo)] = id;
      if (c >= hi - w)
        band.lastRow[std::size_t(c - (hi - w))] = id;
      for (uint32_t bits = same[c]; bits; bits &= bits - 1)
      {
        const int64_t m = c + steps.at[__builtin_ctz(bits)];
        if (m >= lo && m < hi && see(m))
          queue.push_back(int32_t(m));
      }
    }
  };
  for (const std::vector<int32_t>* list : starts)
    for (const int32_t start : *list)
      piece(start);
  for (int64_t x = 0; x < w; ++x)
  {
    if (b > 0 && (same[lo + x] & kUp))
      piece(lo + x);
    if (e < h && (same[hi - w + x] & kDown))
      piece(hi - w + x);
  }
  band.first.push_back(int32_t(band.flats.size()));
  return band;
}

}  // namespace

// Barnes et al.'s flats (dem.h), without labelling the flats for the distances. A flat cell is no
// edge cell: it is off the border and its eight neighbours are valid cells of the grid. Two
// neighbouring flat cells have the same elevation (neither is lower than the other), and two
// neighbouring valid cells are in the same equal-elevation component exactly when their
// elevations are equal. So the breadth-first rings step from flat cell to flat cell by a byte of
// neighbour bits, with no bounds checks and no labels, and the first ring towards the outlet is the
// flat cells with a non-flat neighbour of their elevation (that neighbour is a low edge). The
// components are needed only for each flat's highest count of steps from higher ground: they are
// found in pieces, band of rows by band, and the pieces joined. The two kinds of rings are a job
// each, beside the bands' jobs; the rest goes by rows or by bands on all threads. Large scratch
// arrays are left uninitialised and written where they are read, on all threads (the first touches
// of fresh pages cost as much as the work).
std::vector<int32_t> flatMaskCpu(const Grid& grid, bool towardsOnly, int threads, const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const float* z = grid.z;
  if (w < 3 || h < 3)
    return std::vector<int32_t>(static_cast<std::size_t>(n), 0);  // no inner cell, no flat cell
  const Steps steps(w);
  // Flat cells: valid, not edge cells, no lower neighbour, i.e. every neighbour >= the cell (false
  // for a NaN on either side).
  std::unique_ptr<uint8_t[]> flat(new uint8_t[std::size_t(n)]);
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
    {
      uint8_t* out = flat.get() + y * w;
      out[0] = out[w - 1] = 0;
      if (y == 0 || y == h - 1)
        std::fill(out, out + w, uint8_t(0));
      else
        neighbourBitsOfRow(z + (y - 1) * w, z + y * w, z + (y + 1) * w, w, out, [](float v, float c) { return v >= c; },
                           [](uint8_t bits, float) { return uint8_t(bits == 0xff); });
    }
  }, &control);
  // Per flat cell, its flat neighbours (`flatNext`, for the rings). Per valid cell, unless only the
  // steps towards the outlet are asked for, its neighbours of its elevation (`same`, for the
  // components). Per chunk of rows, the rings' sources (in any order: it does not change
  // breadth-first distances), i.e. the flat cells next to a low edge and the high edges (flat
  // cells beside higher ground), and the count of flat cells.
  const int64_t grain = 16, chunks = (h + grain - 1) / grain;
  std::unique_ptr<uint8_t[]> flatNext(new uint8_t[std::size_t(n)]), same(towardsOnly ? nullptr : new uint8_t[std::size_t(n)]);
  std::unique_ptr<int32_t[]> away(towardsOnly ? nullptr : new int32_t[std::size_t(n)]);
  std::vector<std::vector<int32_t>> byOutletOf(static_cast<std::size_t>(chunks)), byHigherOf(byOutletOf.size());
  std::vector<int64_t> flatsOf(byOutletOf.size(), 0);
  parallelFor(h, grain, threads, [&](int64_t b, int64_t e) {
    std::vector<int32_t> byOutlet, byHigher;
    std::vector<uint8_t> equalRow(static_cast<std::size_t>(w));
    int64_t flats = 0;
    for (int64_t y = b; y < e; ++y)
    {
      const bool inner = y > 0 && y < h - 1;
      const float* row = z + y * w;
      uint8_t* equal = same ? same.get() + y * w : equalRow.data();
      if (same)
        for (int64_t x = 0; x < w; x = (inner && x == 0) ? w - 1 : x + 1)  // the cells on the border
        {
          uint8_t bits = 0;
          for (int d = 0; d < 8; ++d)
          {
            const int64_t nx = x + kDx[d], ny = y + kDy[d];
            if (nx >= 0 && ny >= 0 && nx < w && ny < h && z[ny * w + nx] == row[x])
              bits = uint8_t(bits | 1 << d);
          }
          equal[x] = bits;
        }
      if (!inner)
        continue;
      neighbourBitsOfRow(row - w, row, row + w, w, equal, [](float v, float c) { return v == c; },
                         [](uint8_t bits, float) { return bits; });
      const uint8_t* isFlat = flat.get() + y * w;
      uint8_t* next = flatNext.get() + y * w;
      neighbourBitsOfRow(isFlat - w, isFlat, isFlat + w, w, next, [](uint8_t v, uint8_t) { return v; },
                         [](uint8_t bits, uint8_t c) { return uint8_t(c ? bits : 0); });
      for (int64_t x = 1; x < w - 1; ++x)
      {
        if (!isFlat[x])
          continue;
        const int32_t c = int32_t(y * w + x);
        ++flats;
        if (equal[x] & ~next[x])
          byOutlet.push_back(c);
        if (equal[x] != 0xff)  // its neighbours are >= it, so the others are higher
          byHigher.push_back(c);
        if (away)
          away[c] = 0;
      }
    }
    byOutletOf[std::size_t(b / grain)] = std::move(byOutlet);
    byHigherOf[std::size_t(b / grain)] = std::move(byHigher);
    flatsOf[std::size_t(b / grain)] = flats;
  }, &control);
  int64_t flatCount = 0;
  for (const int64_t f : flatsOf)
    flatCount += f;
  if (flatCount == 0)
    return std::vector<int32_t>(static_cast<std::size_t>(n), 0);
  // The jobs, on all threads: (0) the steps towards the outlet, kept in the mask: they reach every
  // flat cell of a drained flat (a path through the flat's equal-elevation component to its low
  // edge meets a non-flat cell first, and that cell is a low edge) and no other cell; (1) the steps
  // from higher ground, in every flat (those of undrained flats are not read); (2...) per band of
  // rows, the pieces of the equal-elevation components of the drained flats, with their non-flat
  // cells (flat cells joined only through non-flat cells of their elevation share one highest count
  // of steps from higher ground).
  const int64_t bandRows = 4 * grain, bandCount = towardsOnly ? 0 : (h + bandRows - 1) / bandRows;
  std::vector<int32_t> mask;  // zeroed in its job: the first touches of its pages take as long as the rings
  std::vector<Band> bands(static_cast<std::size_t>(bandCount));
  parallelFor(towardsOnly ? 1 : 2 + bandCount, 1, threads, [&](int64_t job, int64_t) {
    if (job == 0)
    {
      mask.assign(static_cast<std::size_t>(n), 0);
      rings(byOutletOf, flatNext.get(), steps, n, mask.data());
    }
    else if (job == 1)
      rings(byHigherOf, flatNext.get(), steps, n, away.get());
    else
    {
      const int64_t b = (job - 2) * bandRows, e = std::min(h, b + bandRows);
      std::vector<const std::vector<int32_t>*> starts;
      for (int64_t chunk = b / grain; chunk < (e + grain - 1) / grain; ++chunk)
        starts.push_back(&byOutletOf[std::size_t(chunk)]);
      bands[std::size_t(job - 2)] = piecesOfBand(b, e, w, h, starts, flat.get(), same.get(), steps);
    }
  }, &control);
  if (towardsOnly)
    return mask;
  // The pieces joined across the bands' edges into components (union-find over all pieces; each
  // piece ends pointing at its component's first piece, which counts the component's pieces). Then
  // per component its highest count of steps from higher ground and the combined mask of its
  // drained flat cells (those the steps towards the outlet reached): a component of one piece at
  // once, while its cells are in cache; the others after their pieces' highest counts are gathered.
  std::vector<int32_t> pieceBase(static_cast<std::size_t>(bandCount) + 1, 0);
  for (int64_t k = 0; k < bandCount; ++k)
    pieceBase[std::size_t(k + 1)] = pieceBase[std::size_t(k)] + int32_t(bands[std::size_t(k)].first.size()) - 1;
  std::vector<int32_t> root(static_cast<std::size_t>(pieceBase.back())), pieces(root.size(), 0), height(root.size(), 0);
  for (std::size_t i = 0; i < root.size(); ++i)
    root[i] = int32_t(i);
  auto find = [&](int32_t i) {
    while (root[std::size_t(i)] != i)
      i = root[std::size_t(i)] = root[std::size_t(root[std::size_t(i)])];
    return i;
  };
  for (int64_t k = 1; k < bandCount; ++k)
  {
    const int64_t y = k * bandRows;
    for (int64_t x = 0; x < w; ++x)
      for (uint32_t bits = same[std::size_t(y * w + x)] & kUp; bits; bits &= bits - 1)
      {
        const int64_t x2 = x + kDx[__builtin_ctz(bits)];
        const int32_t p = find(pieceBase[std::size_t(k)] + bands[std::size_t(k)].firstRow[std::size_t(x)]);
        const int32_t q = find(pieceBase[std::size_t(k - 1)] + bands[std::size_t(k - 1)].lastRow[std::size_t(x2)]);
        root[std::size_t(std::max(p, q))] = std::min(p, q);
      }
  }
  for (std::size_t i = 0; i < root.size(); ++i)
    ++pieces[std::size_t(root[i] = find(int32_t(i)))];
  auto combine = [&](const Band& band, std::size_t i, int32_t highest) {
    for (int32_t j = band.first[i]; j < band.first[i + 1]; ++j)
    {
      const int32_t c = band.flats[std::size_t(j)], a = away[c];
      if (mask[std::size_t(c)] > 0)
        mask[std::size_t(c)] = 2 * mask[std::size_t(c)] + (a > 0 ? highest - a : 0);
    }
  };
  parallelFor(bandCount, 1, threads, [&](int64_t k, int64_t) {
    const Band& band = bands[std::size_t(k)];
    for (std::size_t i = 0; i + 1 < band.first.size(); ++i)
    {
      const std::size_t piece = std::size_t(pieceBase[std::size_t(k)]) + i;
      int32_t highest = 0;
      for (int32_t j = band.first[i]; j < band.first[i + 1]; ++j)
        highest = std::max(highest, away[band.flats[std::size_t(j)]]);
      if (pieces[std::size_t(root[piece])] == 1)
        combine(band, i, highest);
      else
        height[piece] = highest;
    }
  }, &control);
  for (std::size_t i = 0; i < root.size(); ++i)
    height[std::size_t(root[i])] = std::max(height[std::size_t(root[i])], height[i]);
  parallelFor(bandCount, 1, threads, [&](int64_t k, int64_t) {
    const Band& band = bands[std::size_t(k)];
    for (std::size_t i = 0; i + 1 < band.first.size(); ++i)
    {
      const std::size_t r = std::size_t(root[std::size_t(pieceBase[std::size_t(k)]) + i]);
      if (pieces[r] > 1)
        combine(band, i, height[r]);
    }
  }, &control);
  return mask;
}

namespace {

// Adds an upstream area in two's complement (a wrap is defined, not undefined behaviour): an area
// past the int64 range can only come from a catchment that checkUpstreamArea() then refuses, so a
// wrapped sum is never returned.
inline void addArea(int64_t& to, int64_t area)
{
  to = int64_t(uint64_t(to) + uint64_t(area));
}

// For the inner cells x = 1 .. w - 2 of a row (rows up and down beside it): the first part of dem.h's
// D8 rule, the direction of steepest positive drop (the first of equal drops), or -1 for none, as
// d8DirectionAround finds it, with the same IEEE operations (a NaN drop never compares greater).
// Here they run neighbour by neighbour along the row, two cells at a time in GCC's vector types
// (which compile to SSE2 on x86-64): one cell at a time, the choice of the best so far is a branch
// that goes either way, and it cost more than the divisions.
void steepestDropOfRow(const float* up, const float* row, const float* down, int64_t w, double width, double height,
                       double* bestDrop, double* best)
{
  typedef double Pair __attribute__((vector_size(16)));
  typedef int64_t Mask __attribute__((vector_size(16)));
  const double diagonal = exact::sqrt(exact::add(exact::mul(width, width), exact::mul(height, height)));
  std::fill(bestDrop, bestDrop + w, 0.0);
  std::fill(best, best + w, -1.0);
  for (int d = 0; d < 8; ++d)
  {
    const float* from = (kDy[d] < 0 ? up : (kDy[d] > 0 ? down : row)) + kDx[d];
    const double distance = neighbourDistance(d, width, height, diagonal);
    const Pair distances = {distance, distance}, direction = {double(d), double(d)};
    int64_t x = 1;
    for (; x + 1 < w - 1; x += 2)
    {
      const Pair own = {double(row[x]), double(row[x + 1])}, other = {double(from[x]), double(from[x + 1])};
      const Pair drop = (own - other) / distances;
      Pair bestSoFar, directionSoFar;
      std::memcpy(&bestSoFar, bestDrop + x, sizeof bestSoFar);
      std::memcpy(&directionSoFar, best + x, sizeof directionSoFar);
      const Mask steeper = drop > bestSoFar;
      const Pair nextBest = steeper ? drop : bestSoFar, nextDirection = steeper ? direction : directionSoFar;
      std::memcpy(bestDrop + x, &nextBest, sizeof nextBest);
      std::memcpy(best + x, &nextDirection, sizeof nextDirection);
    }
    for (; x < w - 1; ++x)
    {
      const double drop = exact::div(exact::sub(double(row[x]), double(from[x])), distance);
      if (drop > bestDrop[x])
      {
        bestDrop[x] = drop;
        best[x] = d;
      }
    }
  }
}

}  // namespace

std::vector<uint8_t> directionsCpu(const Grid& grid, const std::vector<int32_t>* mask, int threads,
                                   const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height;
  std::vector<uint8_t> out(static_cast<std::size_t>(w * h));
  const int32_t* m = mask ? mask->data() : nullptr;
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    std::vector<double> bestDrop(static_cast<std::size_t>(w)), best(static_cast<std::size_t>(w));
    for (int64_t y = b; y < e; ++y)
    {
      const double width = grid.cellWidth[y], height = grid.cellHeight[y];
      uint8_t* row = out.data() + y * w;
      const bool inner = y > 0 && y < h - 1;
      for (int64_t x = 0; x < w; x = (inner && x == 0) ? std::max<int64_t>(w - 1, 1) : x + 1)  // the border
        row[x] = d8Direction(grid.z, m, w, h, x, y, width, height);
      if (!inner)
        continue;
      const float* z = grid.z + y * w;
      steepestDropOfRow(z - w, z, z + w, w, width, height, bestDrop.data(), best.data());
      const int32_t* rowMask = m ? m + y * w : nullptr;
      for (int64_t x = 1; x < w - 1; ++x)  // the whole rule where no neighbour is lower
        row[x] = best[std::size_t(x)] >= 0
                   ? uint8_t(best[std::size_t(x)])
                   : d8DirectionAround(z[x], InnerAround{z + x, rowMask ? rowMask + x : nullptr, w}, m != nullptr,
                                       rowMask ? rowMask[x] : 0, width, height);
    }
  }, &control);
  return out;
}

Accumulation accumulationCpu(const Grid& grid, const std::vector<uint8_t>& directions, int threads,
                             const RunControl& control)
{
  const int64_t w = grid.width, h = grid.height, n = w * h;
  const uint8_t* dir = directions.data();
  Accumulation out;
  parallelFor(2, 1, threads, [&](int64_t job, int64_t) {  // fresh pages faulted on two threads, not one
    (job == 0 ? out.cells : out.area).assign(std::size_t(n), 0);
  }, &control);
  int64_t* cells = out.cells.data();
  int64_t* area = out.area.data();
  // Row by row on all threads: each valid cell's own count and area, its receiver (-1: none, as
  // receiverAt) and how many cells drain into it (its neighbours whose direction points back at it:
  // a gather, so no thread writes another's cells; inner cells without bounds checks), or kSource
  // for a valid cell nothing drains into.
  constexpr uint8_t kSource = 0x80;
  // (Scratch arrays uninitialised: the pass below writes every cell, on all threads.)
  std::unique_ptr<int32_t[]> receiver(new int32_t[std::size_t(n)]);
  std::unique_ptr<uint8_t[]> inflow(new uint8_t[std::size_t(n)]);
  static_assert(kMaxCells <= INT32_MAX, "receivers fit 32 bits");
  int64_t offset[8];
  for (int d = 0; d < 8; ++d)
    offset[d] = kDy[d] * w + kDx[d];
  parallelFor(h, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t y = b; y < e; ++y)
    {
      const int64_t own = cellArea(grid, y);
      const bool inner = y > 0 && y < h - 1;
      for (int64_t x = 0, c = y * w; x < w; ++x, ++c)
      {
        const uint8_t d = dir[c];
        int32_t to = -1;
        uint8_t in = 0;
        if (d != kNoData)
        {
          cells[c] = 1;
          area[c] = own;
          if (inner && x > 0 && x < w - 1)
          {
            if (d < 8 && dir[c + offset[d]] != kNoData)
              to = int32_t(c + offset[d]);
            for (int k = 0; k < 8; ++k)
              in = uint8_t(in + (dir[c + offset[k]] == ((k + 4) & 7)));
          }
          else
          {
            to = int32_t(receiverAt(dir, w, h, x, y));
            for (int k = 0; k < 8; ++k)
            {
              const int64_t mx = x + kDx[k], my = y + kDy[k];
              in = uint8_t(in + (mx >= 0 && my >= 0 && mx < w && my < h && dir[my * w + mx] == ((k + 4) & 7)));
            }
          }
        }
        else
        {
          cells[c] = 0;
          area[c] = 0;
        }
        receiver[std::size_t(c)] = to;
        inflow[std::size_t(c)] = d != kNoData && in == 0 ? kSource : in;
      }
    }
  }, &control);
  // The sums down the paths (dependency counting): each band of rows on its own thread, from its
  // sources (valid cells nothing drains into) down while the cell reached has no inflow left to wait
  // for, as far as the band's edge; the flows that leave a band are kept, then added on one thread,
  // each going on down (across any band) as far as it can. The sums are integers: the same in any
  // order.
  struct Handover
  {
    int32_t to;
    int64_t cells, area;
  };
  const int64_t bands = std::max<int64_t>(1, std::min<int64_t>(threads > 0 ? threads : defaultThreadCount(), h));
  std::vector<std::vector<Handover>> leaving(static_cast<std::size_t>(bands));
  std::vector<int64_t> doneIn(static_cast<std::size_t>(bands), 0), validIn(doneIn.size(), 0);
  const auto down = [&](int32_t c, int32_t lo, int32_t hi, std::vector<Handover>& leaves) {
    int64_t done = 1;
    for (int32_t d = receiver[std::size_t(c)]; d >= 0; c = d, d = receiver[std::size_t(c)])
    {
      if (d < lo || d >= hi)
      {
        leaves.push_back(Handover{d, cells[c], area[c]});
        break;
      }
      cells[d] += cells[c];
      addArea(area[d], area[c]);
      if (--inflow[std::size_t(d)] != 0)
        break;
      ++done;
    }
    return done;
  };
  parallelFor(bands, 1, threads, [&](int64_t k, int64_t) {
    const int64_t lo = h * k / bands * w, hi = h * (k + 1) / bands * w;
    int64_t done = 0, valid = 0;
    for (int64_t c = lo; c < hi; ++c)
    {
      if (dir[c] == kNoData)
        continue;
      ++valid;
      if (inflow[std::size_t(c)] == kSource)
        done += down(int32_t(c), int32_t(lo), int32_t(hi), leaving[std::size_t(k)]);
      if ((c & 0xfffff) == 0 && control.isCanceled())
        throw Canceled();
    }
    doneIn[std::size_t(k)] = done;
    validIn[std::size_t(k)] = valid;
  }, &control);
  int64_t done = 0, valid = 0;
  for (int64_t k = 0; k < bands; ++k)
  {
    done += doneIn[std::size_t(k)];
    valid += validIn[std::size_t(k)];
  }
  std::vector<Handover> none;  // nothing leaves the whole grid
  for (const std::vector<Handover>& list : leaving)
    for (const Handover& flow : list)
    {
      cells[flow.to] += flow.cells;
      addArea(area[flow.to], flow.area);
      if (--inflow[std::size_t(flow.to)] == 0)
        done += down(flow.to, 0, int32_t(n), none);
    }
  if (done != valid)
    throw LoopedDirections("the flow directions go round in a loop; they cannot be accumulated");
  return out;
}

}  // namespace gpugeo::dem::detail
