// Device steps shared by the backends that link pieces into chains and rings (mesh isolines and
// isobands, DEM region boundaries): CUB scans, sorts and selections on pooled buffers, and Wyllie's
// list ranking by pointer jumping. Everything runs on the calling thread's default stream.
#pragma once

#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/device_buffer.h"

namespace gpugeo::cuda {

namespace {

constexpr int kRankThreads = 256;

unsigned rankBlocks(int64_t items)
{
  return static_cast<unsigned>(std::max<int64_t>(1, (items + kRankThreads - 1) / kRankThreads));
}

// Exclusive sum of n counts into n + 1 offsets; returns the total.
int64_t exclusiveScan(PooledDeviceBuffer<int64_t>& counts, int64_t n, PooledDeviceBuffer<int64_t>& offsets)
{
  offsets.resize(std::size_t(n + 1));
  std::size_t need = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, need, counts.data(), offsets.data(), n + 1));
  PooledDeviceBuffer<unsigned char> temp(need);
  GPUGEO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), need, counts.data(), offsets.data(), n + 1));
  return readOne(offsets.data() + n);
}

template <typename K, typename V>
void sortPairs(PooledDeviceBuffer<K>& keys, PooledDeviceBuffer<V>& values, int64_t n, int endBit = int(sizeof(K) * 8))
{
  PooledDeviceBuffer<K> keysOut(static_cast<std::size_t>(n));
  PooledDeviceBuffer<V> valuesOut(static_cast<std::size_t>(n));
  std::size_t need = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, need, keys.data(), keysOut.data(), values.data(),
                                                    valuesOut.data(), n, 0, endBit));
  PooledDeviceBuffer<unsigned char> temp(need);
  GPUGEO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), need, keys.data(), keysOut.data(), values.data(),
                                                    valuesOut.data(), n, 0, endBit));
  keys = std::move(keysOut);
  values = std::move(valuesOut);
}

template <int Shift>
__global__ void rankInitKernel(const int32_t* next, const int32_t* rankOf, const uint8_t* weight, int64_t n,
                               int32_t* jump, int32_t* dist, int32_t* low, int32_t* tail)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n)
    return;
  jump[d] = next[d];
  dist[d] = next[d] < 0 ? 0 : (weight ? weight[next[d]] : 1);
  low[d] = rankOf ? rankOf[d >> Shift] : int32_t(d >> Shift);
  tail[d] = int32_t(d);
}

__global__ void rankStepKernel(int64_t n, const int32_t* jumpIn, const int32_t* distIn, const int32_t* lowIn,
                               const int32_t* tailIn, int32_t* jumpOut, int32_t* distOut, int32_t* lowOut,
                               int32_t* tailOut)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n)
    return;
  const int32_t j = jumpIn[d];
  if (j < 0)
  {
    jumpOut[d] = j;
    distOut[d] = distIn[d];
    lowOut[d] = lowIn[d];
    tailOut[d] = tailIn[d];
    return;
  }
  jumpOut[d] = jumpIn[j];
  distOut[d] = distIn[d] + distIn[j];
  lowOut[d] = min(lowIn[d], lowIn[j]);
  tailOut[d] = tailIn[j];
}

// Wyllie's list ranking over a successor array of paths and cycles: for a state on a path, the
// steps to the path's last state (dist; with `weight`, only the steps onto states of weight 1 count),
// that state (tail) and the lowest item from it on (low); on a cycle, jump stays >= 0 and low is the
// cycle's lowest item. Items are states >> Shift, ranked by rankOf (null: by index).
struct Ranking
{
  PooledDeviceBuffer<int32_t> jump, dist, low, tail;
};

template <int Shift>
Ranking rank(const PooledDeviceBuffer<int32_t>& next, const int32_t* rankOf, int64_t n, const uint8_t* weight = nullptr)
{
  Ranking a, b;
  for (Ranking* r : {&a, &b})
  {
    r->jump.resize(std::size_t(n));
    r->dist.resize(std::size_t(n));
    r->low.resize(std::size_t(n));
    r->tail.resize(std::size_t(n));
  }
  rankInitKernel<Shift><<<rankBlocks(n), kRankThreads>>>(next.data(), rankOf, weight, n, a.jump.data(), a.dist.data(), a.low.data(),
                                                     a.tail.data());
  GPUGEO_CUDA_CHECK_LAUNCH();
  int rounds = 0;
  while ((int64_t(1) << rounds) < n)
    ++rounds;
  for (int r = 0; r < rounds; ++r)
  {
    rankStepKernel<<<rankBlocks(n), kRankThreads>>>(n, a.jump.data(), a.dist.data(), a.low.data(), a.tail.data(),
                                               b.jump.data(), b.dist.data(), b.low.data(), b.tail.data());
    GPUGEO_CUDA_CHECK_LAUNCH();
    std::swap(a, b);
  }
  return a;
}

// Cuts each cycle before the state that starts its lowest-ranked item (item = rank % items).
template <int Shift>
__global__ void cutKernel(const int32_t* next, const int32_t* jump, const int32_t* low, int64_t n, int64_t items,
                          int32_t* cut)
{
  const int64_t d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= n)
    return;
  const int32_t s = next[d];
  cut[d] = (jump[d] >= 0 && s >= 0 && s == ((low[d] % items) << Shift)) ? -1 : s;
}

__global__ void slotKernel(const int32_t* headOfSlot, int64_t count, int32_t* slotOfHead)
{
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    slotOfHead[headOfSlot[i]] = int32_t(i);
}

// The heads flagged in isHead, ordered by their keys: returns their number; headOfSlot[i] is the
// i-th head, keyOfSlot its key.
int64_t orderHeads(const PooledDeviceBuffer<uint8_t>& isHead, PooledDeviceBuffer<int64_t>& key, int64_t n,
                   PooledDeviceBuffer<int32_t>& headOfSlot, PooledDeviceBuffer<int64_t>& keyOfSlot)
{
  PooledDeviceBuffer<int64_t> selected(1);
  thrust::counting_iterator<int32_t> states(0);
  headOfSlot.resize(std::size_t(n));
  keyOfSlot.resize(std::size_t(n));
  std::size_t need = 0;
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, need, states, isHead.data(), headOfSlot.data(),
                                               selected.data(), n));
  PooledDeviceBuffer<unsigned char> temp(need);
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), need, states, isHead.data(), headOfSlot.data(),
                                               selected.data(), n));
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, need, key.data(), isHead.data(), keyOfSlot.data(),
                                               selected.data(), n));
  temp.resize(need);
  GPUGEO_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), need, key.data(), isHead.data(), keyOfSlot.data(),
                                               selected.data(), n));
  const int64_t count = readOne(selected.data());
  if (count > 1)
    sortPairs(keyOfSlot, headOfSlot, count);
  return count;
}

}  // namespace

}  // namespace gpugeo::cuda
