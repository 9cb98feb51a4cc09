// Copies between pageable host memory and the device through pinned staging buffers.
//
// A cudaMemcpy from pageable memory goes through the driver's own staging, which serves one copy
// at a time for the whole process: measured on the lent H100/H200 hosts (2026-11-26), 7 GB/s host to
// device whether 1 or 16 threads copy at once, against 40-54 GB/s from pinned memory. Here each
// copying thread takes a pair of pinned chunks of its own from a pool and pipelines them: the
// thread copies the next chunk into one (memcpy) while the DMA engine moves the other, so the
// threads' copies proceed side by side at the host's memory bandwidth. The pool keeps the pairs
// between calls (kStagedChunk x 2 pinned bytes for each thread that has copied at once); where
// pinned memory cannot be had, the copy falls back to plain cudaMemcpy.
//
// Alone, one thread's cudaMemcpy from pageable memory is faster than its staged copy (13 against
// 10 GB/s measured: the staged copy's memcpy is the one thread's), so a copy made while no other
// staged or plain copy of this kind is under way goes straight through cudaMemcpy; the threads of a
// tiled run, copying at once, take the chunks (42 against 12 GB/s with 16 threads).
//
// A large download made alone is spread over helper threads: the caller's stream is synchronised,
// then each of T threads (half the host's cores, 2 to 8) moves a slice of the copy through a pair
// of its own. Into pageable memory already touched (a band's buffer reused), measured on the lent
// H200 host (2026-11-29, tests/benchmarks/prototypes/download_pageable.cu): cudaMemcpy 17 GB/s
// at 64-512 MiB and 11 GB/s at 1 GiB, spread over 4 threads 24-26 GB/s, over 8 30-40 GB/s; pinned
// memory 55 GB/s. (Into fresh memory the page faults bound every way: 1.6-3.4 GB/s, 11 GB/s over 8
// threads; allocating pinned memory for a copy runs at 3 GB/s, so the destination stays pageable.)
//
// Both copies return when the data is where it goes (as cudaMemcpy from pageable memory does); they
// run on the calling thread's default stream (per thread in this build), after its earlier work.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_check.h"
#include "parallel.h"

namespace gpugeo::cuda {

constexpr std::size_t kStagedChunk = std::size_t(4) << 20;
// Copies smaller than this go straight through cudaMemcpy (latency, not bandwidth, bounds them).
constexpr std::size_t kStagedAtLeast = std::size_t(1) << 20;
// Downloads at least this large, made while no other copy is under way, are spread over threads.
constexpr std::size_t kSpreadAtLeast = std::size_t(32) << 20;

namespace staging {

struct Pair
{
  void* chunk[2] = {nullptr, nullptr};
  cudaEvent_t moved[2] = {nullptr, nullptr};  // the DMA that last used each chunk
};

// The pinned pairs not in use. They live as long as the process (freeing pinned memory synchronises
// the device, and the CUDA runtime may be gone by the time static objects are destroyed).
class Pool
{
public:
  static Pool& instance()
  {
    static Pool* pool = new Pool;  // never destroyed, as above
    return *pool;
  }

  // A free pair, or a new one; null where pinned memory or events cannot be had.
  Pair* take()
  {
    {
      std::lock_guard<std::mutex> lock(mLock);
      if (!mFree.empty())
      {
        Pair* p = mFree.back();
        mFree.pop_back();
        return p;
      }
    }
    Pair* p = new Pair;
    bool ok = true;
    for (int k = 0; k < 2 && ok; ++k)
      ok = cudaMallocHost(&p->chunk[k], kStagedChunk) == cudaSuccess &&
           cudaEventCreateWithFlags(&p->moved[k], cudaEventDisableTiming) == cudaSuccess;
    if (ok)
      return p;
    cudaGetLastError();
    for (int k = 0; k < 2; ++k)
    {
      if (p->chunk[k])
        cudaFreeHost(p->chunk[k]);
      if (p->moved[k])
        cudaEventDestroy(p->moved[k]);
    }
    delete p;
    return nullptr;
  }

  void give(Pair* p)
  {
    std::lock_guard<std::mutex> lock(mLock);
    mFree.push_back(p);
  }

private:
  std::mutex mLock;
  std::vector<Pair*> mFree;
};

// The copies under way (copyToDevice's and copyToHost's), across threads.
inline std::atomic<int>& underWay()
{
  static std::atomic<int> count{0};
  return count;
}

// A copy of `bytes` under way while it lives, holding a pair where the copy is large and another
// copy is under way too (else null: cudaMemcpy does better alone).
class Held
{
public:
  explicit Held(std::size_t bytes)
  {
    const bool others = underWay().fetch_add(1) > 0;
    mAlone = !others;
    if (bytes >= kStagedAtLeast && others)
      mPair = Pool::instance().take();
  }
  ~Held()
  {
    if (mPair)
      Pool::instance().give(mPair);
    underWay().fetch_sub(1);
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  Pair* get() const { return mPair; }
  // Whether no other copy was under way when this one began.
  bool alone() const { return mAlone; }

private:
  Pair* mPair = nullptr;
  bool mAlone = false;
};

// Copies `bytes` from device memory `src` to host memory `dst` through `p` on the calling thread's
// stream: the DMA fills one chunk while the thread copies the other out.
inline void stagedToHost(Pair* p, void* dst, const void* src, std::size_t bytes)
{
  const cudaStream_t stream = cudaStreamPerThread;
  const std::size_t chunks = (bytes + kStagedChunk - 1) / kStagedChunk;
  const auto start = [&](std::size_t c) {
    const std::size_t at = c * kStagedChunk, n = std::min(kStagedChunk, bytes - at);
    GPUGEO_CUDA_CHECK(
      cudaMemcpyAsync(p->chunk[c & 1], static_cast<const char*>(src) + at, n, cudaMemcpyDeviceToHost, stream));
    GPUGEO_CUDA_CHECK(cudaEventRecord(p->moved[c & 1], stream));
  };
  start(0);
  for (std::size_t c = 0; c < chunks; ++c)
  {
    if (c + 1 < chunks)
      start(c + 1);  // into the other chunk, emptied by the previous round
    const std::size_t at = c * kStagedChunk, n = std::min(kStagedChunk, bytes - at);
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(p->moved[c & 1]));
    std::memcpy(static_cast<char*>(dst) + at, p->chunk[c & 1], n);
  }
}

// The threads a spread download uses: half the host's cores, from 2 to 8.
inline int spreadThreads()
{
  const unsigned cores = std::thread::hardware_concurrency();
  return int(std::clamp<unsigned>(cores / 2, 2, 8));
}

// The download spread over threads (above), each slice a whole number of chunks; false (nothing
// copied) where the pairs cannot be had.
inline bool spreadToHost(void* dst, const void* src, std::size_t bytes)
{
  const int threads = spreadThreads();
  std::vector<Pair*> pairs;
  for (int t = 0; t < threads; ++t)
  {
    Pair* p = Pool::instance().take();
    if (!p)
      break;
    pairs.push_back(p);
  }
  const auto giveBack = [&] {
    for (Pair* p : pairs)
      Pool::instance().give(p);
  };
  if (pairs.size() < 2)
  {
    giveBack();
    return false;
  }
  int device = 0;
  GPUGEO_CUDA_CHECK(cudaGetDevice(&device));
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));  // the caller's work that wrote src
  const std::size_t parts = pairs.size();
  const std::size_t chunks = (bytes + kStagedChunk - 1) / kStagedChunk;
  const std::size_t slice = (chunks + parts - 1) / parts * kStagedChunk;
  const auto part = [&](std::size_t t) {
    const std::size_t at = std::min(bytes, t * slice), n = std::min(slice, bytes - at);
    if (n > 0)
      stagedToHost(pairs[t], static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, n);
  };
  std::vector<std::future<void>> helpers;
  std::exception_ptr failure;
  try
  {
    for (std::size_t t = 1; t < parts; ++t)
      helpers.push_back(startAsync([&, t] {
        GPUGEO_CUDA_CHECK(cudaSetDevice(device));
        part(t);
      }));
    part(0);
  }
  catch (...)
  {
    failure = std::current_exception();
  }
  for (std::future<void>& helper : helpers)
  {
    try
    {
      helper.get();
    }
    catch (...)
    {
      if (!failure)
        failure = std::current_exception();
    }
  }
  giveBack();
  if (failure)
    std::rethrow_exception(failure);
  return true;
}

}  // namespace staging

// Copies `bytes` from host memory `src` (pageable) to device memory `dst`.
inline void copyToDevice(void* dst, const void* src, std::size_t bytes)
{
  const staging::Held held(bytes);
  staging::Pair* p = held.get();
  if (!p)
  {
    GPUGEO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return;
  }
  const cudaStream_t stream = cudaStreamPerThread;
  int k = 0;
  for (std::size_t at = 0; at < bytes; at += kStagedChunk, k ^= 1)
  {
    const std::size_t n = std::min(kStagedChunk, bytes - at);
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(p->moved[k]));  // the chunk's last DMA is done
    std::memcpy(p->chunk[k], static_cast<const char*>(src) + at, n);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + at, p->chunk[k], n, cudaMemcpyHostToDevice, stream));
    GPUGEO_CUDA_CHECK(cudaEventRecord(p->moved[k], stream));
  }
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Copies `bytes` from device memory `src` to host memory `dst` (pageable).
inline void copyToHost(void* dst, const void* src, std::size_t bytes)
{
  const staging::Held held(bytes);
  if (staging::Pair* p = held.get())
    staging::stagedToHost(p, dst, src, bytes);
  else if (!(held.alone() && bytes >= kSpreadAtLeast && staging::spreadToHost(dst, src, bytes)))
    GPUGEO_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace gpugeo::cuda
