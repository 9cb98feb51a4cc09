// Owning device and pinned-host allocations (RAII), so that an exception thrown half-way through
// a GPU run frees everything it had taken.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda_check.h"

namespace gpugeo::cuda {

template <typename T>
class DeviceBuffer
{
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) { resize(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept
  {
    swap(other);
    return *this;
  }

  // Drops the contents; grows only when `count` exceeds the capacity.
  void resize(std::size_t count)
  {
    if (count > mCapacity)
    {
      release();
      GPUGEO_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&mData), count * sizeof(T)));
      mCapacity = count;
    }
    mSize = count;
  }

  void release()
  {
    if (mData)
      cudaFree(mData);
    mData = nullptr;
    mSize = mCapacity = 0;
  }

  T* data() { return mData; }
  const T* data() const { return mData; }
  std::size_t size() const { return mSize; }
  std::size_t bytes() const { return mSize * sizeof(T); }

private:
  void swap(DeviceBuffer& other) noexcept
  {
    std::swap(mData, other.mData);
    std::swap(mSize, other.mSize);
    std::swap(mCapacity, other.mCapacity);
  }

  T* mData = nullptr;
  std::size_t mSize = 0;
  std::size_t mCapacity = 0;
};

template <typename T>
class PinnedBuffer
{
public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void resize(std::size_t count)
  {
    if (count > mCapacity)
    {
      release();
      GPUGEO_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&mData), count * sizeof(T)));
      mCapacity = count;
    }
  }
  void release()
  {
    if (mData)
      cudaFreeHost(mData);
    mData = nullptr;
    mCapacity = 0;
  }
  T* data() { return mData; }

private:
  T* mData = nullptr;
  std::size_t mCapacity = 0;
};

// A CUDA event pair that times the stream work between start() and stop() (milliseconds).
class EventTimer
{
public:
  EventTimer()
  {
    GPUGEO_CUDA_CHECK(cudaEventCreate(&mStart));
    const cudaError_t status = cudaEventCreate(&mStop);
    if (status != cudaSuccess)
    {
      cudaEventDestroy(mStart);
      throwError(status, "cudaEventCreate", __FILE__, __LINE__);
    }
  }
  ~EventTimer()
  {
    cudaEventDestroy(mStart);
    cudaEventDestroy(mStop);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start(cudaStream_t stream) { GPUGEO_CUDA_CHECK(cudaEventRecord(mStart, stream)); }
  void stop(cudaStream_t stream) { GPUGEO_CUDA_CHECK(cudaEventRecord(mStop, stream)); }
  // Waits for the stop event.
  double milliseconds()
  {
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(mStop));
    float ms = 0.f;
    GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&ms, mStart, mStop));
    return ms;
  }

private:
  cudaEvent_t mStart = nullptr;
  cudaEvent_t mStop = nullptr;
};

}  // namespace gpugeo::cuda
