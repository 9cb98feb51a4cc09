// The fill, the flat mask and the raise of the flats (dem.h's fillAndRaiseFlats) in one call on the
// device: the arrays stay there between the steps. The raise of overtaken cells, which the CPU takes
// lowest first from a heap, goes here by rounds over a list of the cells left without a lower
// neighbour: each is raised to one float step above its lowest neighbour as it reads them, and the
// neighbours that raise may leave without a lower neighbour make the next round's list. Every value
// read is at or below the least DEM in which those cells drain (dem.h's RaisedFlats), so every raise
// stays at or below it too, and the rounds end on it whatever the order: the CPU's bits. (A relaxation
// by tiles needed thousands of passes where a chain of such cells runs along a tile's border; the
// rounds, once their lists are short, run inside one launch of one block.)
#include <cuda_runtime.h>

#include <cuda/atomic>

#include <cstdint>
#include <utility>

#include "core/cuda_check.h"
#include "dem/detail/dem_cuda.h"
#include "dem/detail/dem_cuda_common.cuh"
#include "dem/detail/dem_math.h"

namespace gpugeo::dem::detail {

namespace {

constexpr std::size_t kFillAndRaiseBytes = kFillAndRaiseBytesPerCell;

// The cells whose drainage the raise keeps: valid, not edge cells, and on a flat (a mask) or with a
// lower neighbour in the filled DEM. (Pits of a DEM that is not filled stay as they are.)
__device__ bool keepsDrained(const float* filled, const int32_t* mask, int64_t w, int64_t h, int64_t x, int64_t y)
{
  const int64_t c = y * w + x;
  const float v = filled[c];
  if (isNoData(v) || isEdgeCell(filled, w, h, x, y))
    return false;
  if (mask[c] > 0)
    return true;
  for (int d = 0; d < 8; ++d)
    if (filled[(y + stepY(d)) * w + x + stepX(d)] < v)
      return true;
  return false;
}

// Each flat cell raised by its mask; counts them (one atomic a warp).
__global__ void raiseByMaskKernel(const float* filled, const int32_t* mask, int64_t n, float* out,
                                  unsigned long long* raised)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool byMask = false;
  if (c < n)
  {
    const float v = filled[c];
    byMask = mask[c] > 0 && !isNoData(v);
    out[c] = byMask ? floatStepsUp(v, mask[c]) : v;
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, byMask);
  if ((threadIdx.x & 31) == 0 && ballot)
    atomicAdd(raised, static_cast<unsigned long long>(__popc(ballot)));
}

// Cell elevations read and written while other threads write their neighbours' (relaxed atomics: no
// data race, and no order needed, the raise's result being the same in any).
using RelaxedZ = ::cuda::atomic_ref<float, ::cuda::thread_scope_device>;
__device__ float loadZ(float* z, int64_t c)
{
  return RelaxedZ(z[c]).load(::cuda::memory_order_relaxed);
}

// A round's lists: the cells to look at, and the next round's, each cell once a list (`queued` holds
// the last round a cell was listed for).
struct RaiseRound
{
  const int32_t* cells;
  int32_t* next;
  unsigned* nextCount;
  int32_t* queued;
  int32_t round;
};

__device__ void listFor(const RaiseRound& r, int32_t c, int32_t round, int32_t* list, unsigned* count)
{
  if (atomicMax(&r.queued[c], round) < round)
    list[atomicAdd(count, 1u)] = c;
}

// Cell c of a round: raised to one step above its lowest neighbour if it has no lower one; then each
// neighbour the raise may leave without a lower one listed for the next round.
__device__ void raiseCell(const float* filled, const int32_t* mask, int64_t w, int64_t h, float* z, uint8_t* inTurn,
                          const RaiseRound& r, int32_t c)
{
  const int64_t x = c % w, y = c / w;
  const float mine = loadZ(z, c);
  float lowest = INFINITY;
  for (int d = 0; d < 8; ++d)  // a listed cell is no edge cell: eight valid neighbours on the grid
    lowest = fminf(lowest, loadZ(z, (y + stepY(d)) * w + x + stepX(d)));
  if (lowest < mine)
    return;
  const float up = floatStepsUp(lowest, 1);
  if (!(up > mine))
    return;  // at the largest finite float
  RelaxedZ(z[c]).store(up, ::cuda::memory_order_relaxed);
  inTurn[c] = 1;
  for (int d = 0; d < 8; ++d)
  {
    const int64_t nx = x + stepX(d), ny = y + stepY(d), n = ny * w + nx;
    if (loadZ(z, n) <= up && keepsDrained(filled, mask, w, h, nx, ny))
      listFor(r, int32_t(n), r.round + 1, r.next, r.nextCount);
  }
}

// The first round's list: the kept cells without a lower neighbour once raised by their masks.
__global__ void undrainedKernel(const float* filled, const int32_t* mask, int64_t w, int64_t h, float* z,
                                RaiseRound r)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= w * h || !keepsDrained(filled, mask, w, h, c % w, c / w))
    return;
  const float v = z[c];
  for (int d = 0; d < 8; ++d)
    if (z[(c / w + stepY(d)) * w + c % w + stepX(d)] < v)
      return;
  listFor(r, int32_t(c), r.round, r.next, r.nextCount);
}

// One round over a long list, a thread a cell.
__global__ void raiseRoundKernel(const float* filled, const int32_t* mask, int64_t w, int64_t h, float* z,
                                 uint8_t* inTurn, RaiseRound r, unsigned count)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    raiseCell(filled, mask, w, h, z, inTurn, r, r.cells[i]);
}

// The rounds over short lists in one block, until a round lists nothing: `a` holds the first round's
// `count` cells, `b` takes the next round's; they swap each round. *nextCount starts at 0.
__global__ void __launch_bounds__(1024)
  raiseTailKernel(const float* filled, const int32_t* mask, int64_t w, int64_t h, float* z, uint8_t* inTurn, int32_t* a,
                  int32_t* b, unsigned* nextCount, int32_t* queued, int32_t round, unsigned count)
{
  __shared__ unsigned listed;
  for (;; ++round)
  {
    const RaiseRound r{a, b, nextCount, queued, round};
    for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
      raiseCell(filled, mask, w, h, z, inTurn, r, a[i]);
    __syncthreads();
    if (threadIdx.x == 0)
      listed = atomicExch(nextCount, 0u);
    __syncthreads();
    count = listed;
    if (count == 0)
      return;
    int32_t* t = a;
    a = b;
    b = t;
  }
}

__global__ void countMarksKernel(const uint8_t* marks, int64_t n, unsigned long long* count)
{
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned ballot = __ballot_sync(0xffffffffu, c < n && marks[c]);
  if ((threadIdx.x & 31) == 0 && ballot)
    atomicAdd(count, static_cast<unsigned long long>(__popc(ballot)));
}

// The rounds: one launch a round while the lists are long, then the rest in one block.
void raiseOvertaken(const DeviceBuffer<float>& filled, const DeviceBuffer<int32_t>& mask, int64_t w, int64_t h,
                    DeviceBuffer<float>& z, DeviceBuffer<uint8_t>& inTurn, const RunControl& control)
{
  constexpr unsigned kShortList = 1u << 16;
  const int64_t n = w * h;
  DeviceBuffer<int32_t> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
  DeviceBuffer<int32_t> queued(static_cast<std::size_t>(n));
  DeviceBuffer<unsigned> nextCount(1);
  GPUGEO_CUDA_CHECK(cudaMemset(queued.data(), 0, queued.bytes()));
  GPUGEO_CUDA_CHECK(cudaMemset(nextCount.data(), 0, nextCount.bytes()));
  int32_t round = 1;
  undrainedKernel<<<blocksFor(n), 256>>>(filled.data(), mask.data(), w, h, z.data(),
                                         RaiseRound{nullptr, a.data(), nextCount.data(), queued.data(), round});
  GPUGEO_CUDA_CHECK_LAUNCH();
  unsigned count = readOne(nextCount.data());
  while (count > kShortList)
  {
    GPUGEO_CUDA_CHECK(cudaMemset(nextCount.data(), 0, nextCount.bytes()));
    raiseRoundKernel<<<blocksFor(count), 256>>>(filled.data(), mask.data(), w, h, z.data(), inTurn.data(),
                                                RaiseRound{a.data(), b.data(), nextCount.data(), queued.data(), round},
                                                count);
    GPUGEO_CUDA_CHECK_LAUNCH();
    count = readOne(nextCount.data());
    std::swap(a, b);
    ++round;
    if (control.isCanceled())
      throw Canceled();
  }
  if (count == 0)
    return;
  GPUGEO_CUDA_CHECK(cudaMemset(nextCount.data(), 0, nextCount.bytes()));
  raiseTailKernel<<<1, 1024>>>(filled.data(), mask.data(), w, h, z.data(), inTurn.data(), a.data(), b.data(),
                               nextCount.data(), queued.data(), round, count);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

}  // namespace

RaisedOnDevice fillAndRaiseOnDevice(DeviceBuffer<float> z, int64_t w, int64_t h, bool towardsOnly,
                                    const RunControl& control)
{
  const int64_t n = w * h;
  const DeviceBuffer<float> filled = fillOnDevice(z, w, h, control);
  z = DeviceBuffer<float>();
  const DeviceBuffer<int32_t> mask = flatMaskOnDevice(filled, w, h, towardsOnly, control);
  RaisedOnDevice out;
  out.z = DeviceBuffer<float>(static_cast<std::size_t>(n));
  DeviceBuffer<uint8_t> inTurn(static_cast<std::size_t>(n));
  DeviceBuffer<unsigned long long> counts(2);
  GPUGEO_CUDA_CHECK(cudaMemset(counts.data(), 0, counts.bytes()));
  GPUGEO_CUDA_CHECK(cudaMemset(inTurn.data(), 0, inTurn.bytes()));
  raiseByMaskKernel<<<blocksFor(n), 256>>>(filled.data(), mask.data(), n, out.z.data(), counts.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  raiseOvertaken(filled, mask, w, h, out.z, inTurn, control);
  countMarksKernel<<<blocksFor(n), 256>>>(inTurn.data(), n, counts.data() + 1);
  GPUGEO_CUDA_CHECK_LAUNCH();
  const std::vector<unsigned long long> c = download(counts, 2);
  out.raised = int64_t(c[0]);
  out.raisedInTurn = int64_t(c[1]);
  return out;
}

RaisedFlats fillAndRaiseCuda(const Grid& grid, bool towardsOnly, const RunControl& control)
{
  useGpu();
  const int64_t w = grid.width, h = grid.height, n = w * h;
  return onDevice(sizeWhat("the fill and its flats", w, h), n, kFillAndRaiseBytes, [&] {
    DeviceBuffer<float> z;
    upload(z, grid.z, std::size_t(n));
    RaisedOnDevice raised = fillAndRaiseOnDevice(std::move(z), w, h, towardsOnly, control);
    RaisedFlats out;
    out.z = download(raised.z, std::size_t(n));
    out.raised = raised.raised;
    out.raisedInTurn = raised.raisedInTurn;
    return out;
  });
}

}  // namespace gpugeo::dem::detail
