// The CPU's vector form of segments::segmentSquared (segment_grid.h): a tile's segments as columns
// (one array per field), so that one instruction weighs one segment from four points (the four
// parts' centres of a cut, or a 2 x 2 cell's pixels). The operations are the scalar
// formula's, in its order, with no fused multiply-add (the host is compiled with
// -ffp-contract=off): every lane's value has the scalar's bits, so the CPU still equals the GPU.
// Host only (GCC/Clang vector extensions).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nearest_site.h"
#include "segment_grid.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>  // (distanceLanesAvx2's intrinsics, for a caller compiled for AVX2)
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

// The vectors are passed between inline functions only (no ABI concern where AVX is off).
#pragma GCC diagnostic ignored "-Wpsabi"

// Inlined into their callers, so that a caller compiled for AVX2 runs them with AVX2.
#define GPUGEO_LANES_INLINE __attribute__((always_inline)) inline

namespace gpugeo::voronoi::detail::segments {

constexpr int kLanes = 4;
typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));
typedef int64_t LaneInts __attribute__((vector_size(kLanes * sizeof(int64_t))));

GPUGEO_LANES_INLINE Lanes loadLanes(const double* p)
{
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

GPUGEO_LANES_INLINE Lanes splat(double v)
{
  return Lanes{v, v, v, v};
}

// segmentSquared with every argument a vector (a scalar's bits in each lane).
GPUGEO_LANES_INLINE Lanes segmentSquaredLanes(Lanes px, Lanes py, Lanes ax, Lanes ay, Lanes dx, Lanes dy, Lanes inv, Lanes dd)
{
  const Lanes wx = px - ax, wy = py - ay;
  const Lanes along = wx * dx + wy * dy;
  const Lanes toA = wx * wx + wy * wy;
  const Lanes bx = wx - dx, by = wy - dy;
  const Lanes toB = bx * bx + by * by;
  const Lanes cross = wx * dy - wy * dx;
  const Lanes toLine = (cross * cross) * inv;
  const Lanes beyondB = along >= dd ? toB : toLine;
  return along <= 0.0 ? toA : beyondB;
}

// Segments as columns.
struct SegmentColumns
{
  std::vector<double> ax, ay, dx, dy, inv, dd;
  std::vector<int32_t> feature;
  size_t n = 0;

  void clear() { n = 0; }

  void push(const Segment& s)
  {
    grow(n + 1);
    put(n++, s.ax, s.ay, s.dx, s.dy, s.inv, squaredLength(s.dx, s.dy), s.feature);
  }

private:
  void grow(size_t size)
  {
    if (ax.size() >= size)
      return;
    const size_t cap = size < 64 ? 64 : size * 2;
    for (auto* v : {&ax, &ay, &dx, &dy, &inv, &dd})
      v->resize(cap);
    feature.resize(cap);
  }

  void put(size_t k, double x, double y, double sx, double sy, double si, double sd, int32_t f)
  {
    ax[k] = x;
    ay[k] = y;
    dx[k] = sx;
    dy[k] = sy;
    inv[k] = si;
    dd[k] = sd;
    feature[k] = f;
  }
};

// The best (nearest, then lowest feature) of a 2 x 2 cell's four pixels, lanes j = (x + (j & 1),
// y + (j >> 1)), over segments `which` of `c`; best and label start as the pixels' own.
GPUGEO_LANES_INLINE void scanCell(const SegmentColumns& c, const uint32_t* which, size_t count, double x, double y, Lanes& best,
                     LaneInts& label)
{
  const Lanes px = Lanes{x, x + 1.0, x, x + 1.0}, py = Lanes{y, y, y + 1.0, y + 1.0};
  for (size_t i = 0; i < count; ++i)
  {
    const size_t k = which[i];
    const Lanes d = segmentSquaredLanes(px, py, splat(c.ax[k]), splat(c.ay[k]), splat(c.dx[k]), splat(c.dy[k]),
                                        splat(c.inv[k]), splat(c.dd[k]));
    const int64_t f = c.feature[k];
    const LaneInts fl = LaneInts{f, f, f, f};
    const LaneInts take = (d < best) | ((d == best) & (fl < label));
    best = take ? d : best;
    label = take ? fl : label;
  }
}

// distanceValue of each lane into out[0..3]: the square roots two at a time (SSE2's sqrtpd rounds
// as sqrt does, and the product and the narrowing are the scalar's), which the scalar form paid
// for pixel by pixel.
GPUGEO_LANES_INLINE void distanceLanes(Lanes squared, double pixelSize, float* out)
{
#if defined(__SSE2__)
  const __m128d size = _mm_set1_pd(pixelSize);
  const __m128d lo = _mm_mul_pd(_mm_sqrt_pd(_mm_set_pd(squared[1], squared[0])), size);
  const __m128d hi = _mm_mul_pd(_mm_sqrt_pd(_mm_set_pd(squared[3], squared[2])), size);
  _mm_storeu_ps(out, _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi)));
#else
  for (int j = 0; j < kLanes; ++j)
    out[j] = distanceValue(squared[j], pixelSize);
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
// distanceLanes with one four-wide square root (the same bits), for callers compiled for AVX2: the
// square roots' throughput bounds a cell's output.
__attribute__((target("avx2"))) inline void distanceLanesAvx2(Lanes squared, double pixelSize, float* out)
{
  const __m256d root = _mm256_sqrt_pd(_mm256_loadu_pd(reinterpret_cast<const double*>(&squared)));
  _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_mul_pd(root, _mm256_set1_pd(pixelSize))));
}
#endif

}  // namespace gpugeo::voronoi::detail::segments
