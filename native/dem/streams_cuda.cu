// The CUDA backend of streams.h's in-memory network: each per-cell step of the CPU's walk as a pass over
// the cells, the same segments whatever the order of the threads.
//  1. Stream marks (isStreamCell, as the CPU).
//  2. Each stream cell gathers the stream cells that flow into it from its eight neighbours (no
//     atomics: only the cell itself writes its entry): its inflow (0, 1, or 2 for two or more, as the
//     CPU caps it), and with one inflow that one cell, the unique stream cell upstream. A stream cell
//     whose inflow is not 1 starts a segment.
//  3. The starts numbered 1, 2, … in row order by an exclusive scan of their flags (CUB).
//  4. Pointer jumping up the single-inflow chains, as hand_cuda.cu and watersheds_cuda.cu jump down
//     theirs: each non-start stream cell starts at its upstream cell, a start at itself (a fixed
//     point); each round every cell whose pointer is not yet a start takes its pointer's pointer,
//     reading one copy and writing the other. A chain has fewer than n cells, so after
//     ceil(log2 n) + 1 rounds every cell that has a start above it points at it; a chain that never
//     meets a start is a loop of single-inflow cells, which the CPU's walks never reach: segment 0.
//  5. Every stream cell labelled with its start's number. 6. Then per segment, with 32- and 64-bit
//     atomics on integers (so in any order the CPU's sums): its cells and its line's length in the
//     fixed-point units of detail/down_paths.h (each cell's step where it flows on to a stream cell:
//     the next cell of the segment or the next segment's first). The one cell of a segment whose
//     successor is no stream cell (none, off the grid, nodata, a pit) or a start is its last; it alone
//     writes the segment's last cell and the segment it flows into (that start's number, else 0).
// The drops, lengths in metres, upstream areas and orders are finished on the host (streams.cpp).
// Cells are indexed with 32 bits on the device, as hand_cuda.cu indexes them: dem.h's grids have at
// most 2³¹ − 1 cells (validateGrid), checked again below; the numbers of segments are below that too.
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/down_paths.h"
#include "dem/detail/streams_cuda.h"
#include "dem/streams.h"

namespace gpugeo::dem::detail {

namespace {

// A cell's state after step 2.
constexpr uint8_t kNotStream = 0;
constexpr uint8_t kInChain = 1;  // a stream cell with exactly one stream cell flowing into it
constexpr uint8_t kStart = 2;    // a stream cell with none or two or more: a segment's first cell

// The cell the direction of c points to, -1 for none (a pit, nodata, any code of 8 and up, off the
// grid), as streams.cpp's successor.
__device__ int64_t successorOf(const uint8_t* directions, int64_t w, int64_t h, int64_t c)
{
  const uint8_t d = directions[c];
  if (d >= 8)
    return -1;
  const int64_t x = c % w + stepX(d), y = c / w + stepY(d);
  return x < 0 || y < 0 || x >= w || y >= h ? -1 : y * w + x;
}

__global__ void marksKernel(int64_t n, const uint8_t* directions, const int64_t* cells, const int64_t* area,
                            StreamThreshold threshold, uint8_t* stream)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n)
    stream[c] = isStreamCell(directions[c], cells[c], area[c], threshold) ? 1 : 0;
}

// Step 2: state, the pointer up (the upstream cell in a chain, else the cell itself) and the start flag
// to scan. A neighbour p flows into c where its direction k steps from p to c: p = c - step(k).
__global__ void linksKernel(const uint8_t* directions, const uint8_t* stream, int64_t w, int64_t h, uint8_t* state,
                            int32_t* up, int32_t* startFlag)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  uint8_t s = kNotStream;
  int64_t above = c;
  if (stream[c])
  {
    const int64_t x = c % w, y = c / w;
    int inflow = 0;
    for (int k = 0; k < 8; ++k)
    {
      const int64_t px = x - stepX(k), py = y - stepY(k);
      if (px < 0 || py < 0 || px >= w || py >= h)
        continue;
      const int64_t p = py * w + px;
      if (directions[p] == k && stream[p])
      {
        ++inflow;
        above = p;
      }
    }
    s = inflow == 1 ? kInChain : kStart;
    if (s == kStart)
      above = c;
  }
  state[c] = s;
  up[c] = int32_t(above);
  startFlag[c] = s == kStart ? 1 : 0;
}

__global__ void firstsKernel(int64_t n, const uint8_t* state, const int32_t* number, int32_t* first)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < n && state[c] == kStart)
    first[number[c]] = int32_t(c);
}

// One round of step 4: from `up` into `upOut`; counts the chain cells whose pointer is still no start.
__global__ void jumpKernel(int64_t n, const uint8_t* state, const int32_t* up, int32_t* upOut,
                           unsigned long long* unresolved)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  int32_t to = up[c];
  if (state[c] == kInChain && state[to] != kStart)
  {
    to = up[to];
    if (state[to] != kStart)
      atomicAdd(unresolved, 1ull);
  }
  upOut[c] = to;
}

// Step 5's labels: the number (1-based) of the start a stream cell's pointer reached, 0 elsewhere.
__global__ void labelsKernel(int64_t n, const uint8_t* state, const int32_t* top, const int32_t* number,
                             int32_t* segment)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n)
    return;
  const int32_t t = top[c];
  segment[c] = state[c] != kNotStream && state[t] == kStart ? number[t] + 1 : 0;
}

// Step 5's sums and ends. `last` and `down` are written by the segment's one last cell; `cells` and
// `units` start at 0.
__global__ void segmentsKernel(const uint8_t* directions, const uint8_t* state, const int32_t* segment, int64_t w,
                               int64_t h, const int64_t* steps, unsigned int* cells, unsigned long long* units,
                               int32_t* last, int32_t* down)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h)
    return;
  const int32_t s = segment[c];
  if (s == 0)
    return;
  const int64_t k = int64_t(s) - 1;
  atomicAdd(cells + k, 1u);
  const int64_t d = successorOf(directions, w, h, c);
  if (d >= 0 && state[d] != kNotStream)
  {
    atomicAdd(units + k, (unsigned long long)stepUnits(steps + 3 * (c / w), directions[c]));
    if (state[d] == kStart)
    {
      last[k] = int32_t(c);
      down[k] = segment[d];
    }
  }
  else
  {
    last[k] = int32_t(c);
    down[k] = 0;
  }
}

// Runs the rounds of step 4 on up[0]; returns the copy that holds the result.
int jumpRounds(int64_t n, const uint8_t* state, DeviceBuffer<int32_t> (&up)[2], const RunControl& control)
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
    jumpKernel<<<blocksFor(n), 256>>>(n, state, up[from].data(), up[1 - from].data(), unresolved.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    from = 1 - from;
    if (readOne(unresolved.data()) == 0)
      break;
  }
  return from;
}

template <typename To, typename From>
void widen(const std::vector<From>& from, std::vector<To>& to)
{
  to.assign(from.begin(), from.end());
}

}  // namespace

void streamSegmentsCuda(const uint8_t* directions, const int64_t* cells, const int64_t* area, int64_t width,
                        int64_t height, const int64_t* steps, const StreamThreshold& threshold, StreamNetwork& out,
                        std::vector<int64_t>& units, const RunControl& control)
{
  const int64_t w = width, h = height, n = w * h;
  const std::string what = sizeWhat("the stream network", w, h);
  // 32-bit cell indices and segment numbers on the device (as hand_cuda.cu's in-memory run): dem.h's
  // grids have at most 2³¹ − 1 cells, so this never refuses one that validateGrid took.
  if (n > int64_t(INT32_MAX))
    throw InvalidInput(what + ": more than 2^31 - 1 cells on the GPU; run it on the CPU");
  useGpu();
  cuda::withinDeviceMemory(what, need(n, std::size_t(kGpuStreamsBytesPerCell)), [&] {
    const unsigned blocks = blocksFor(n);
    DeviceBuffer<uint8_t> dirs, stream, state;
    DeviceBuffer<int64_t> rowSteps;
    upload(dirs, directions, std::size_t(n));
    upload(rowSteps, steps, std::size_t(3 * h));

    // 1. Marks (the accumulation's 16 bytes a cell held only for this).
    {
      DeviceBuffer<int64_t> cellsIn, areaIn;
      upload(cellsIn, cells, std::size_t(n));
      upload(areaIn, area, std::size_t(n));
      stream.resize(std::size_t(n));
      marksKernel<<<blocks, 256>>>(n, dirs.data(), cellsIn.data(), areaIn.data(), threshold, stream.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    if (control.isCanceled())
      throw Canceled();

    // 2. Inflows, the pointers up and the start flags (into up[1], which the scan then frees for
    // the jumping).
    DeviceBuffer<int32_t> up[2];
    up[0].resize(std::size_t(n));
    up[1].resize(std::size_t(n));
    state.resize(std::size_t(n));
    linksKernel<<<blocks, 256>>>(dirs.data(), stream.data(), w, h, state.data(), up[0].data(), up[1].data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    stream.release();
    if (control.isCanceled())
      throw Canceled();

    // 3. The starts' numbers (0-based here) by an exclusive scan of the flags in row order.
    DeviceBuffer<int32_t> number(static_cast<std::size_t>(n));
    {
      std::size_t tempBytes = 0;
      GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, up[1].data(), number.data(), int(n)));
      DeviceBuffer<uint8_t> temp(std::max<std::size_t>(tempBytes, 1));
      GPUGEO_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(temp.data(), tempBytes, up[1].data(), number.data(), int(n)));
    }
    const int64_t count = int64_t(readOne(number.data() + (n - 1))) + int64_t(readOne(up[1].data() + (n - 1)));
    if (count > 0)
    {
      DeviceBuffer<int32_t> first(static_cast<std::size_t>(count));
      firstsKernel<<<blocks, 256>>>(n, state.data(), number.data(), first.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      widen(download(first, std::size_t(count)), out.first);
    }
    if (control.isCanceled())
      throw Canceled();

    // 4. The chains' tops (with no start at all, every stream cell is on a loop: no jumping needed).
    int from = 0;
    if (count > 0)
      from = jumpRounds(n, state.data(), up, control);
    // 5. The labels, into the other copy.
    DeviceBuffer<int32_t>& segment = up[1 - from];
    if (count > 0)
    {
      labelsKernel<<<blocks, 256>>>(n, state.data(), up[from].data(), number.data(), segment.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
    }
    else
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(segment.data(), 0, std::size_t(n) * sizeof(int32_t)));
    up[from].release();
    number.release();
    if (control.isCanceled())
      throw Canceled();

    // 6. The segments' cells, lengths and ends.
    std::vector<int32_t> segmentLast, segmentDown;
    std::vector<unsigned int> segmentCells;
    std::vector<unsigned long long> segmentUnits;
    if (count > 0)
    {
      DeviceBuffer<unsigned int> cellsOut(static_cast<std::size_t>(count));
      DeviceBuffer<unsigned long long> unitsOut(static_cast<std::size_t>(count));
      DeviceBuffer<int32_t> lastOut(static_cast<std::size_t>(count)), downOut(static_cast<std::size_t>(count));
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(cellsOut.data(), 0, std::size_t(count) * sizeof(unsigned int)));
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(unitsOut.data(), 0, std::size_t(count) * sizeof(unsigned long long)));
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(lastOut.data(), 0xff, std::size_t(count) * sizeof(int32_t)));
      GPUGEO_CUDA_CHECK(cudaMemsetAsync(downOut.data(), 0, std::size_t(count) * sizeof(int32_t)));
      segmentsKernel<<<blocks, 256>>>(dirs.data(), state.data(), segment.data(), w, h, rowSteps.data(),
                                      cellsOut.data(), unitsOut.data(), lastOut.data(), downOut.data());
      GPUGEO_CUDA_CHECK_LAUNCH();
      segmentLast = download(lastOut, std::size_t(count));
      segmentDown = download(downOut, std::size_t(count));
      segmentCells = download(cellsOut, std::size_t(count));
      segmentUnits = download(unitsOut, std::size_t(count));
    }
    out.segment = download(segment, std::size_t(n));
    widen(segmentLast, out.last);
    out.down = std::move(segmentDown);
    widen(segmentCells, out.cells);
    widen(segmentUnits, units);
  });
}

}  // namespace gpugeo::dem::detail
