// Owning device and pinned-host allocations (RAII), so that an exception thrown half-way through
// a GPU run frees everything it had taken.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "host_memory.h"
#include "parallel.h"
#include "staged_copy.h"


namespace gpugeo::cuda {

// Plain cudaMalloc / cudaFree.
struct DeviceAllocation
{
  static void allocate(void** p, std::size_t bytes) { GPUGEO_CUDA_CHECK(cudaMalloc(p, bytes)); }
  static void free(void* p) { cudaFree(p); }
};

// The device's stream-ordered pool on the calling thread's default stream (cudaMallocAsync /
// cudaFreeAsync; the per-thread default stream, native/CMakeLists.txt): for a backend that runs all
// its work there and takes and frees many buffers per call, where
// cudaMalloc and cudaFree (which synchronises) would cost more than the kernels. How much the pool
// keeps between calls is its release threshold (cudaMemPoolAttrReleaseThreshold).
struct PooledAllocation
{
  static void allocate(void** p, std::size_t bytes) { GPUGEO_CUDA_CHECK(cudaMallocAsync(p, bytes, 0)); }
  static void free(void* p) { cudaFreeAsync(p, 0); }
};

template <typename T, typename Allocation = DeviceAllocation>
class BasicDeviceBuffer
{
public:
  BasicDeviceBuffer() = default;
  explicit BasicDeviceBuffer(std::size_t count) { resize(count); }
  ~BasicDeviceBuffer() { release(); }
  BasicDeviceBuffer(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer& operator=(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer(BasicDeviceBuffer&& other) noexcept { swap(other); }
  BasicDeviceBuffer& operator=(BasicDeviceBuffer&& other) noexcept
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
      Allocation::allocate(reinterpret_cast<void**>(&mData), count * sizeof(T));
      mCapacity = count;
    }
    mSize = count;
  }

  void release()
  {
    if (mData)
      Allocation::free(mData);
    mData = nullptr;
    mSize = mCapacity = 0;
  }

  T* data() { return mData; }
  const T* data() const { return mData; }
  std::size_t size() const { return mSize; }
  std::size_t bytes() const { return mSize * sizeof(T); }

private:
  void swap(BasicDeviceBuffer& other) noexcept
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
using DeviceBuffer = BasicDeviceBuffer<T, DeviceAllocation>;
template <typename T>
using PooledDeviceBuffer = BasicDeviceBuffer<T, PooledAllocation>;

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

// Copies n values from the host into `d` (resized to n), through pinned staging (staged_copy.h).
template <typename T, typename A>
void upload(BasicDeviceBuffer<T, A>& d, const T* h, std::size_t n)
{
  d.resize(n);
  if (n)
    copyToDevice(d.data(), h, n * sizeof(T));
}

// A host vector of n values to download into (core/host_memory.h: huge pages where Linux gives them).
template <typename T>
std::vector<T> hostVector(std::size_t n)
{
  return hugeVector<T>(n);
}

// hostVector<T>(n) made on another thread, for a download to come: the page faults of a large fresh
// vector then overlap the device's work instead of following it. (A task that is not waited for is
// waited for when the future goes.)
template <typename T>
std::future<std::vector<T>> hostVectorAhead(std::size_t n)
{
  return startAsync([n] { return hostVector<T>(n); });
}

// Copies the first n values of `d` into the vector that `ahead` makes (hostVectorAhead(n)).
template <typename T, typename A>
std::vector<T> download(const BasicDeviceBuffer<T, A>& d, std::size_t n, std::future<std::vector<T>>& ahead)
{
  std::vector<T> h = ahead.get();
  if (n)
    copyToHost(h.data(), d.data(), n * sizeof(T));
  return h;
}

// A download of `d`'s first h.size() values into h, for copyToHost's list (copies that go together
// are spread over threads together where they are large).
template <typename T, typename A>
Copy downloadTo(std::vector<T>& h, const BasicDeviceBuffer<T, A>& d)
{
  return {h.data(), d.data(), h.size() * sizeof(T)};
}

// The first n values of `d`, on the host.
template <typename T, typename A>
std::vector<T> download(const BasicDeviceBuffer<T, A>& d, std::size_t n)
{
  std::vector<T> h = hostVector<T>(n);
  if (n)
    copyToHost(h.data(), d.data(), n * sizeof(T));
  return h;
}

// The first n values of `d` into `h` (resized to n), whose room a caller reuses from call to call.
template <typename T, typename A>
void downloadInto(const BasicDeviceBuffer<T, A>& d, std::size_t n, std::vector<T>& h)
{
  resizeHuge(h, n);
  if (n)
    copyToHost(h.data(), d.data(), n * sizeof(T));
}

// One value from device memory.
template <typename T>
T readOne(const T* p)
{
  T v;
  GPUGEO_CUDA_CHECK(cudaMemcpy(&v, p, sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// How much memory the device's stream-ordered pool (PooledDeviceBuffer) keeps between calls.
inline void keepPooledMemory(int device, uint64_t bytes)
{
  cudaMemPool_t pool;
  GPUGEO_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  GPUGEO_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes));
}

// What the current device can still give (bytes): its free memory plus what its stream-ordered pool
// holds unused; `total` (if set) receives the device's whole memory.
inline std::size_t availableDeviceMemory(std::size_t* total = nullptr)
{
  std::size_t freeBytes = 0, totalBytes = 0;
  GPUGEO_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  int device = 0;
  GPUGEO_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool;
  uint64_t reserved = 0, used = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess && reserved > used)
    freeBytes += std::size_t(reserved - used);
  cudaGetLastError();
  if (total)
    *total = totalBytes;
  return freeBytes;
}

// The message of a DeviceOutOfMemory that names the limit: `what` (e.g. "the isochrone chain on a DEM
// of 20000 x 20000 cells") needs about `need` bytes; the device has `available` of `total`.
inline std::string memoryLimitMessage(const std::string& what, std::size_t need, std::size_t available,
                                      std::size_t total)
{
  const auto gib = [](std::size_t bytes) {
    const double g = double(bytes) / double(1ull << 30);
    const std::string s = std::to_string(int64_t(g * 10 + 0.5));
    return (s.size() > 1 ? s.substr(0, s.size() - 1) : std::string("0")) + "." + s.back() + " GiB";
  };
  return what + " needs about " + gib(need) + " of GPU memory; the GPU has " + gib(available) + " free of " +
         gib(total) + ". Run it on the CPU, or on a smaller extent";
}

// Throws DeviceOutOfMemory (memoryLimitMessage) when `need` bytes exceed what the device can give.
inline void requireDeviceMemory(const std::string& what, std::size_t need)
{
  std::size_t total = 0;
  const std::size_t available = availableDeviceMemory(&total);
  if (need > available)
    throw DeviceOutOfMemory(memoryLimitMessage(what, need, available, total));
}

// Runs work() after requireDeviceMemory(what, need); an out-of-memory inside it (the estimate fell
// short, or another process took memory meanwhile) is rethrown with the same message. Returns after
// waiting for the calling thread's stream (an error there is thrown): the stream-ordered pool gives
// back what it holds above its release threshold at a synchronisation, and a call that freed
// gigabytes left that (9-12 ms after the 10,000^2 isochrone chain on the H200) to the next call's
// first synchronisation: there, the next chain's upload (24 ms instead of 9). Each call pays for its
// own memory.
template <typename Work>
auto withinDeviceMemory(const std::string& what, std::size_t need, Work&& work) -> decltype(work())
{
  requireDeviceMemory(what, need);
  const auto settle = [] { GPUGEO_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread)); };
  try
  {
    if constexpr (std::is_void_v<decltype(work())>)
    {
      work();
      settle();
    }
    else
    {
      auto result = work();
      settle();
      return result;
    }
  }
  catch (const DeviceOutOfMemory& e)
  {
    std::size_t total = 0;
    const std::size_t available = availableDeviceMemory(&total);
    throw DeviceOutOfMemory(memoryLimitMessage(what, need, available, total) + " (" + e.what() + ")");
  }
}

}  // namespace gpugeo::cuda
