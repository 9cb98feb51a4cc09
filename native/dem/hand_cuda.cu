// The CUDA backend of detail/down_paths.h: pointer jumping, as watersheds_cuda.cu labels, carrying the
// paths' lengths. Each cell starts with its successor and its own step, or, where its end is known,
// itself; each round every unresolved cell adds its successor's length and takes the successor's end
// where it is known, else jumps to the successor's successor. The lengths are integers, so the sums
// are the CPU's whatever their order. A loop never resolves and reaches no end after enough rounds.
// The in-memory run and each tile run whole on the device (cell indices in 32 bits: dem.h's grids and
// the tiles have fewer than 2³¹ cells), only the elevations, directions, streams and the ring going
// up and the outputs (a tile's perimeter ends in pass 1) coming down.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/detail/down_paths.h"
#include "dem/tiled/perimeter.h"

namespace gpugeo::dem::detail {

namespace {

template <typename T>
using DeviceBuffer = cuda::PooledDeviceBuffer<T>;
constexpr int kThreads = 256;

unsigned blocksFor(int64_t n)
{
  return unsigned(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

// The successor of an unresolved cell c with direction d and its step; false where the path ends
// (a pit, nodata, off the grid).
__device__ bool successorOf(const uint8_t* directions, int64_t w, int64_t h, const int64_t* steps, int64_t c,
                            int64_t& next, int64_t& step)
{
  const uint8_t d = directions[c];
  if (d >= 8)
    return false;
  const int64_t x = c % w + stepX(d), y = c / w + stepY(d);
  if (x < 0 || y < 0 || x >= w || y >= h)
    return false;
  next = y * w + x;
  step = stepUnits(steps + 3 * (c / w), d);
  return true;
}

// The in-memory run's start: stream cells end their own paths, invalid cells reach none.
__global__ void startHeightsKernel(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t w,
                                   int64_t h, const int64_t* steps, int32_t* end, int64_t* length, int32_t* next)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  int32_t e = int32_t(kPathUnknown);
  int64_t s = c, step = 0;
  if (!isfinite(z[c]) || directions[c] == kNoData)
    e = int32_t(kPathNone);
  else if (streams[c] != 0)
    e = int32_t(c);
  else if (!successorOf(directions, w, h, steps, c, s, step))
    e = int32_t(kPathNone);
  end[c] = e;
  length[c] = step;
  next[c] = int32_t(s);
}

template <typename I>
__global__ void jumpKernel(int64_t n, const I* end, const int64_t* length, const I* next, I* endOut,
                           int64_t* lengthOut, I* nextOut, unsigned long long* unresolved)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  I e = end[c], s = next[c];
  // Unsigned: a loop's lengths grow without bound before the loop is given up (wrapping, unused).
  unsigned long long l = (unsigned long long)length[c];
  if (e == I(kPathUnknown))
  {
    l += (unsigned long long)length[s];
    const I after = end[s];
    if (after != I(kPathUnknown))
      e = after;
    else
    {
      s = next[s];
      atomicAdd(unresolved, 1ull);
    }
  }
  endOut[c] = e;
  lengthOut[c] = (int64_t)l;
  nextOut[c] = s;
}

// Rounds of jumping until every path is resolved (or only loops are left: a path has fewer than n
// cells, so after ceil(log2 n) + 1 rounds); returns the copy that holds the result.
template <typename I>
int jumpRounds(int64_t n, DeviceBuffer<I> (&end)[2], DeviceBuffer<int64_t> (&length)[2], DeviceBuffer<I> (&next)[2],
               const RunControl& control)
{
  DeviceBuffer<unsigned long long> unresolved(1);
  int rounds = 2;
  while ((int64_t(1) << (rounds - 2)) < n)
    ++rounds;
  int from = 0;
  for (int round = 0; round < rounds; ++round)
  {
    if (control.isCanceled())
      throw Canceled();
    GPUGEO_CUDA_CHECK(cudaMemsetAsync(unresolved.data(), 0, sizeof(unsigned long long)));
    jumpKernel<I><<<blocksFor(n), kThreads>>>(n, end[from].data(), length[from].data(), next[from].data(),
                                              end[1 - from].data(), length[1 - from].data(), next[1 - from].data(),
                                              unresolved.data());
    GPUGEO_CUDA_CHECK(cudaGetLastError());
    from = 1 - from;
    if (cuda::readOne(unresolved.data()) == 0)
      break;
  }
  return from;
}

template <typename I>
__global__ void loopsKernel(int64_t n, I* end)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && end[c] == I(kPathUnknown))
    end[c] = I(kPathNone);
}

// The heights and distances from the resolved ends, and the counts (stream cells, cells that reach a
// stream, valid cells that reach none), a block's counted at once.
__global__ void heightsKernel(int64_t n, const float* z, const uint8_t* directions, const uint8_t* streams,
                              const int32_t* end, const int64_t* length, double unit, float* height, float* distance,
                              unsigned long long* counts)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool stream = false, drained = false, undrained = false;
  if (c < n)
  {
    const int32_t e = end[c];
    const bool valid = isfinite(z[c]) && directions[c] != kNoData;
    stream = valid && streams[c] != 0;
    drained = e >= 0;
    undrained = valid && !drained;
    // The host's quiet NaN (std::numeric_limits<float>::quiet_NaN()), so that the bits are the CPU's.
    const float nan = __int_as_float(0x7fc00000);
    height[c] = drained ? float(double(z[c]) - double(z[e])) : nan;
    distance[c] = drained ? float(double(length[c]) * unit) : nan;
  }
  const int s = __syncthreads_count(stream), d = __syncthreads_count(drained), u = __syncthreads_count(undrained);
  if (threadIdx.x == 0)
  {
    atomicAdd(counts, (unsigned long long)s);
    atomicAdd(counts + 1, (unsigned long long)d);
    atomicAdd(counts + 2, (unsigned long long)u);
  }
}

// A tile's start: its ring cells end their own paths where known (else reach none), its stream cells
// too; invalid cells reach none.
__global__ void startTileKernel(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t pw,
                                int64_t ph, const int64_t* steps, const uint8_t* ringKnown, const int64_t* ringLength,
                                int32_t* end, int64_t* length, int32_t* next)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= pw * ph)
    return;
  const int64_t x = c % pw, y = c / pw;
  int32_t e = int32_t(kPathUnknown);
  int64_t s = c, step = 0;
  if (x == 0 || y == 0 || x == pw - 1 || y == ph - 1)
  {
    const int64_t k = tiled::detail::perimeterPlace(pw, ph, x, y);
    e = ringKnown[k] ? int32_t(c) : int32_t(kPathNone);
    step = ringLength[k];
  }
  else if (!isfinite(z[c]) || directions[c] == kNoData)
    e = int32_t(kPathNone);
  else if (streams[c] != 0)
    e = int32_t(c);
  else if (!successorOf(directions, pw, ph, steps, c, s, step))
    e = int32_t(kPathNone);
  end[c] = e;
  length[c] = step;
  next[c] = int32_t(s);
}

// Pass 1's outcome: the tile's perimeter cells' ends and lengths.
__global__ void perimeterKernel(int64_t pw, int64_t ph, const int32_t* end, const int64_t* length, int64_t* outEnd,
                                int64_t* outLength)
{
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t tw = pw - 2, th = ph - 2;
  if (k >= tiled::detail::perimeterCount(tw, th))
    return;
  int64_t x = 0, y = 0;
  tiled::detail::perimeterCell(tw, th, k, x, y);
  const int64_t c = (y + 1) * pw + x + 1;
  outEnd[k] = end[c];
  outLength[k] = length[c];
}

// Pass 2's outcome: the tile's heights and distances (an end on the ring takes its elevation from
// ringZ) and its counts, as heightsKernel.
__global__ void tileHeightsKernel(int64_t pw, int64_t ph, const float* z, const uint8_t* directions,
                                  const uint8_t* streams, const int32_t* end, const int64_t* length,
                                  const float* ringZ, double unit, float* height, float* distance,
                                  unsigned long long* counts)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t tw = pw - 2, th = ph - 2;
  bool stream = false, drained = false, undrained = false;
  if (i < tw * th)
  {
    const int64_t c = (i / tw + 1) * pw + i % tw + 1;
    const int32_t e = end[c];
    const bool valid = isfinite(z[c]) && directions[c] != kNoData;
    stream = valid && streams[c] != 0;
    drained = e >= 0;
    undrained = valid && !drained;
    const float nan = __int_as_float(0x7fc00000);
    float zEnd = nan;
    if (drained)
    {
      const int64_t ex = e % pw, ey = e / pw;
      zEnd = ex == 0 || ey == 0 || ex == pw - 1 || ey == ph - 1 ? ringZ[tiled::detail::perimeterPlace(pw, ph, ex, ey)]
                                                                : z[e];
    }
    height[i] = drained ? float(double(z[c]) - double(zEnd)) : nan;
    if (distance)
      distance[i] = drained ? float(double(length[c]) * unit) : nan;
  }
  const int s = __syncthreads_count(stream), d = __syncthreads_count(drained), u = __syncthreads_count(undrained);
  if (threadIdx.x == 0)
  {
    atomicAdd(counts, (unsigned long long)s);
    atomicAdd(counts + 1, (unsigned long long)d);
    atomicAdd(counts + 2, (unsigned long long)u);
  }
}

}  // namespace

DrainageCounts drainageHeightsCuda(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t width,
                                   int64_t height, const int64_t* steps, double unit, float* heights,
                                   float* distances, const RunControl& control)
{
  const int64_t n = width * height;
  DeviceBuffer<float> elevations;
  DeviceBuffer<uint8_t> dirs, marks;
  DeviceBuffer<int64_t> rowSteps;
  cuda::upload(elevations, z, std::size_t(n));
  cuda::upload(dirs, directions, std::size_t(n));
  cuda::upload(marks, streams, std::size_t(n));
  cuda::upload(rowSteps, steps, std::size_t(3 * height));
  DeviceBuffer<int32_t> ends[2], next[2];
  DeviceBuffer<int64_t> lengths[2];
  for (int k = 0; k < 2; ++k)
  {
    ends[k].resize(std::size_t(n));
    next[k].resize(std::size_t(n));
    lengths[k].resize(std::size_t(n));
  }
  startHeightsKernel<<<blocksFor(n), kThreads>>>(elevations.data(), dirs.data(), marks.data(), width, height,
                                                 rowSteps.data(), ends[0].data(), lengths[0].data(), next[0].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  const int from = jumpRounds(n, ends, lengths, next, control);
  loopsKernel<<<blocksFor(n), kThreads>>>(n, ends[from].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  DeviceBuffer<float> heightOut, distanceOut;
  heightOut.resize(std::size_t(n));
  distanceOut.resize(std::size_t(n));
  DeviceBuffer<unsigned long long> counts(3);
  GPUGEO_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, 3 * sizeof(unsigned long long)));
  heightsKernel<<<blocksFor(n), kThreads>>>(n, elevations.data(), dirs.data(), marks.data(), ends[from].data(),
                                            lengths[from].data(), unit, heightOut.data(), distanceOut.data(),
                                            counts.data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  cuda::copyToHost(heights, heightOut.data(), std::size_t(n) * sizeof(float));
  cuda::copyToHost(distances, distanceOut.data(), std::size_t(n) * sizeof(float));
  unsigned long long c[3] = {0, 0, 0};
  cuda::copyToHost(c, counts.data(), sizeof(c));
  return DrainageCounts{int64_t(c[0]), int64_t(c[1]), int64_t(c[2])};
}

}  // namespace gpugeo::dem::detail

namespace gpugeo::dem::detail {

DrainageCounts resolveTileCuda(const float* z, const uint8_t* directions, const uint8_t* streams, int64_t pw,
                               int64_t ph, const int64_t* steps, const uint8_t* ringKnown, const int64_t* ringLength,
                               const float* ringZ, double unit, int64_t* perimeterEnd, int64_t* perimeterLength,
                               float* heights, float* distances, const RunControl& control)
{
  const int64_t n = pw * ph, ring = tiled::detail::perimeterCount(pw, ph);
  const int64_t tw = pw - 2, th = ph - 2;
  if (n > int64_t(INT32_MAX))
    throw InvalidInput("height above drainage: a tile of more than 2^31 cells on the GPU");
  DeviceBuffer<float> elevations, ringZs;
  DeviceBuffer<uint8_t> dirs, marks, known;
  DeviceBuffer<int64_t> rowSteps, ringLengths;
  cuda::upload(elevations, z, std::size_t(n));
  cuda::upload(dirs, directions, std::size_t(n));
  cuda::upload(marks, streams, std::size_t(n));
  cuda::upload(rowSteps, steps, std::size_t(3 * ph));
  cuda::upload(known, ringKnown, std::size_t(ring));
  cuda::upload(ringLengths, ringLength, std::size_t(ring));
  DeviceBuffer<int32_t> ends[2], next[2];
  DeviceBuffer<int64_t> lengths[2];
  for (int k = 0; k < 2; ++k)
  {
    ends[k].resize(std::size_t(n));
    next[k].resize(std::size_t(n));
    lengths[k].resize(std::size_t(n));
  }
  startTileKernel<<<blocksFor(n), kThreads>>>(elevations.data(), dirs.data(), marks.data(), pw, ph, rowSteps.data(),
                                              known.data(), ringLengths.data(), ends[0].data(), lengths[0].data(),
                                              next[0].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  const int from = jumpRounds(n, ends, lengths, next, control);
  loopsKernel<<<blocksFor(n), kThreads>>>(n, ends[from].data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  if (!ringZ)
  {
    const int64_t m = tiled::detail::perimeterCount(tw, th);
    DeviceBuffer<int64_t> outEnd, outLength;
    outEnd.resize(std::size_t(m));
    outLength.resize(std::size_t(m));
    perimeterKernel<<<blocksFor(m), kThreads>>>(pw, ph, ends[from].data(), lengths[from].data(), outEnd.data(),
                                                outLength.data());
    GPUGEO_CUDA_CHECK(cudaGetLastError());
    cuda::copyToHost(perimeterEnd, outEnd.data(), std::size_t(m) * sizeof(int64_t));
    cuda::copyToHost(perimeterLength, outLength.data(), std::size_t(m) * sizeof(int64_t));
    return DrainageCounts();
  }
  cuda::upload(ringZs, ringZ, std::size_t(ring));
  DeviceBuffer<float> heightOut, distanceOut;
  heightOut.resize(std::size_t(tw * th));
  if (distances)
    distanceOut.resize(std::size_t(tw * th));
  DeviceBuffer<unsigned long long> counts(3);
  GPUGEO_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, 3 * sizeof(unsigned long long)));
  tileHeightsKernel<<<blocksFor(tw * th), kThreads>>>(pw, ph, elevations.data(), dirs.data(), marks.data(),
                                                      ends[from].data(), lengths[from].data(), ringZs.data(), unit,
                                                      heightOut.data(), distances ? distanceOut.data() : nullptr,
                                                      counts.data());
  GPUGEO_CUDA_CHECK(cudaGetLastError());
  cuda::copyToHost(heights, heightOut.data(), std::size_t(tw * th) * sizeof(float));
  if (distances)
    cuda::copyToHost(distances, distanceOut.data(), std::size_t(tw * th) * sizeof(float));
  unsigned long long c[3] = {0, 0, 0};
  cuda::copyToHost(c, counts.data(), sizeof(c));
  return DrainageCounts{int64_t(c[0]), int64_t(c[1]), int64_t(c[2])};
}

}  // namespace gpugeo::dem::detail
