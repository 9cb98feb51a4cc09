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
// A large copy made alone (kSpreadAtLeast bytes or more, one copy or a list of several laid end to
// end; downloads and uploads) is spread over helper threads: the caller's stream is synchronised,
// then each of T threads (half the host's cores, 2 to 8) moves a slice through a pair of its own. Into pageable memory already touched (a band's buffer reused), measured on the lent
// H200 host (2026-11-29, tests/benchmarks/prototypes/download_pageable.cu): cudaMemcpy 17 GB/s
// at 64-512 MiB and 11 GB/s at 1 GiB, spread over 4 threads 24-26 GB/s, over 8 30-40 GB/s; pinned
// memory 55 GB/s. (Into fresh memory the page faults bound every way: 1.6-3.4 GB/s, 11 GB/s over 8
// threads; allocating pinned memory for a copy runs at 3 GB/s, so the destination stays pageable.)
//
// A copy whose host side is page-locked goes straight through cudaMemcpy (cudaPointerGetAttributes
// tells). Both copies return when the data is where it goes (as cudaMemcpy from pageable memory does); they
// run on the calling thread's default stream (per thread in this build), after its earlier work.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "cuda_check.h"
#include "parallel.h"

namespace gpugeo::cuda {

constexpr std::size_t kStagedChunk = std::size_t(4) << 20;
// Copies smaller than this go straight through cudaMemcpy (latency, not bandwidth, bounds them).
constexpr std::size_t kStagedAtLeast = std::size_t(1) << 20;
// Downloads at least this large, made while no other copy is under way, are spread over threads.
constexpr std::size_t kSpreadAtLeast = std::size_t(8) << 20;

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
// stream, in pieces of `chunk` bytes (at most kStagedChunk): the DMA fills one chunk while the
// thread copies the other out.
inline void stagedToHost(Pair* p, void* dst, const void* src, std::size_t bytes, std::size_t chunk = kStagedChunk)
{
  const cudaStream_t stream = cudaStreamPerThread;
  const std::size_t chunks = (bytes + chunk - 1) / chunk;
  const auto start = [&](std::size_t c) {
    const std::size_t at = c * chunk, n = std::min(chunk, bytes - at);
    GPUGEO_CUDA_CHECK(
      cudaMemcpyAsync(p->chunk[c & 1], static_cast<const char*>(src) + at, n, cudaMemcpyDeviceToHost, stream));
    GPUGEO_CUDA_CHECK(cudaEventRecord(p->moved[c & 1], stream));
  };
  start(0);
  for (std::size_t c = 0; c < chunks; ++c)
  {
    if (c + 1 < chunks)
      start(c + 1);  // into the other chunk, emptied by the previous round
    const std::size_t at = c * chunk, n = std::min(chunk, bytes - at);
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(p->moved[c & 1]));
    std::memcpy(static_cast<char*>(dst) + at, p->chunk[c & 1], n);
  }
}

// Copies `bytes` from host memory `src` to device memory `dst` through `p` on the calling thread's
// stream, in pieces of `chunk` bytes: the thread fills one chunk while the DMA moves the other;
// returns when all has arrived.
inline void stagedToDevice(Pair* p, void* dst, const void* src, std::size_t bytes, std::size_t chunk = kStagedChunk)
{
  const cudaStream_t stream = cudaStreamPerThread;
  int k = 0;
  for (std::size_t at = 0; at < bytes; at += chunk, k ^= 1)
  {
    const std::size_t n = std::min(chunk, bytes - at);
    GPUGEO_CUDA_CHECK(cudaEventSynchronize(p->moved[k]));  // the chunk's last DMA is done
    std::memcpy(p->chunk[k], static_cast<const char*>(src) + at, n);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + at, p->chunk[k], n, cudaMemcpyHostToDevice, stream));
    GPUGEO_CUDA_CHECK(cudaEventRecord(p->moved[k], stream));
  }
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Helper threads for the spread copies, started on first use and kept, idle, for the life of the
// process (a thread started per copy cost ~30 us each, a tenth of a 30 MB download).
class CopyWorkers
{
public:
  static CopyWorkers& instance()
  {
    static CopyWorkers* workers = new CopyWorkers;  // never destroyed, as the pool
    return *workers;
  }

  // Runs task(t) for t = 1 .. count - 1 on the workers and task(0) on the calling thread; returns
  // when all are done, rethrowing the first failure. Where no thread can be started, the calling
  // thread runs the rest.
  void run(std::size_t count, const std::function<void(std::size_t)>& task)
  {
    struct State
    {
      std::mutex lock;
      std::condition_variable done;
      std::size_t left = 0;
      std::exception_ptr failure;
    } state;
    const auto attempt = [&](std::size_t t) {
      try
      {
        task(t);
      }
      catch (...)
      {
        std::lock_guard<std::mutex> guard(state.lock);
        if (!state.failure)
          state.failure = std::current_exception();
      }
    };
    const std::size_t helpers = count > 1 ? startUpTo(count - 1) : 0;
    state.left = helpers;
    {
      std::lock_guard<std::mutex> guard(mLock);
      for (std::size_t t = 1; t <= helpers; ++t)
        mQueue.push_back([&, t] {
          attempt(t);
          std::lock_guard<std::mutex> done(state.lock);
          if (--state.left == 0)
            state.done.notify_one();
        });
    }
    mWake.notify_all();
    attempt(0);
    for (std::size_t t = helpers + 1; t < count; ++t)
      attempt(t);
    std::unique_lock<std::mutex> wait(state.lock);
    state.done.wait(wait, [&] { return state.left == 0; });
    if (state.failure)
      std::rethrow_exception(state.failure);
  }

private:
  // Starts workers up to n; returns how many there are.
  std::size_t startUpTo(std::size_t n)
  {
    std::lock_guard<std::mutex> guard(mLock);
    while (mThreads < n)
    {
      try
      {
        std::thread([this] { loop(); }).detach();
      }
      catch (const std::system_error&)
      {
        countThreadStartFailure();
        break;
      }
      ++mThreads;
    }
    return std::min(mThreads, n);
  }

  void loop()
  {
    for (;;)
    {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> guard(mLock);
        mWake.wait(guard, [&] { return !mQueue.empty(); });
        job = std::move(mQueue.front());
        mQueue.pop_front();
      }
      job();
    }
  }

  std::mutex mLock;
  std::condition_variable mWake;
  std::deque<std::function<void()>> mQueue;
  std::size_t mThreads = 0;
};

// The threads a spread copy uses: half the host's cores, from 2 to 8.
inline int spreadThreads()
{
  const unsigned cores = std::thread::hardware_concurrency();
  return int(std::clamp<unsigned>(cores / 2, 2, 8));
}

}  // namespace staging

// One copy of several (copyToHost's and copyToDevice's list form): `bytes` from `src` to `dst`.
struct Copy
{
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};

namespace staging {

// The copies spread over threads (above): laid end to end and cut into one slice a thread (whole
// MiB), each thread's slice through a pinned pair of its own; false (nothing copied) where the
// pairs cannot be had. A download first waits for the caller's stream (the work that wrote the
// sources); an upload returns when every byte has arrived.
inline bool spread(const Copy* copies, std::size_t count, std::size_t total, bool toHost)
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
  GPUGEO_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  constexpr std::size_t kMiB = std::size_t(1) << 20, kPiece = std::size_t(64) << 10;
  const std::size_t parts = pairs.size();
  const std::size_t slice = ((total + parts - 1) / parts + kMiB - 1) / kMiB * kMiB;
  // Four pieces a slice at least, so that each thread's copies and DMAs overlap.
  const std::size_t chunk = std::clamp((slice / 4 + kPiece - 1) / kPiece * kPiece, std::size_t(4) * kPiece, kStagedChunk);
  // Thread t copies bytes [t * slice, (t + 1) * slice) of the copies laid end to end.
  const auto part = [&](std::size_t t) {
    GPUGEO_CUDA_CHECK(cudaSetDevice(device));
    const std::size_t begin = t * slice, end = std::min(total, begin + slice);
    std::size_t at = 0;
    for (std::size_t k = 0; k < count && at < end; at += copies[k].bytes, ++k)
    {
      const std::size_t from = std::max(begin, at), to = std::min(end, at + copies[k].bytes);
      if (from >= to)
        continue;
      char* dst = static_cast<char*>(copies[k].dst) + (from - at);
      const char* src = static_cast<const char*>(copies[k].src) + (from - at);
      if (toHost)
        stagedToHost(pairs[t], dst, src, to - from, chunk);
      else
        stagedToDevice(pairs[t], dst, src, to - from, chunk);
    }
  };
  try
  {
    CopyWorkers::instance().run(std::min(parts, (total + slice - 1) / slice), part);
  }
  catch (...)
  {
    giveBack();
    throw;
  }
  giveBack();
  return true;
}

// Whether `p` is page-locked host memory (cudaMallocHost, cudaHostRegister), which cudaMemcpy
// reaches at the link's full speed without staging.
inline bool pageLocked(const void* p)
{
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess)
  {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

// copyToHost's and copyToDevice's body: copies with a host side in page-locked memory go straight;
// the rest through cudaMemcpy, or, where other copies are under way, a pinned pair; those of at
// least kSpreadAtLeast bytes together, made alone, are spread over threads.
inline void copyAll(std::initializer_list<Copy> list, bool toHost)
{
  const cudaMemcpyKind kind = toHost ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  std::vector<Copy> pageable;
  std::size_t total = 0;
  for (const Copy& c : list)
  {
    if (!c.dst || !c.src || c.bytes == 0)
      continue;
    if (c.bytes >= kStagedAtLeast && pageLocked(toHost ? c.dst : c.src))
      GPUGEO_CUDA_CHECK(cudaMemcpy(c.dst, c.src, c.bytes, kind));
    else
    {
      pageable.push_back(c);
      total += c.bytes;
    }
  }
  if (pageable.empty())
    return;
  const Held held(total);
  if (held.alone() && total >= kSpreadAtLeast && spread(pageable.data(), pageable.size(), total, toHost))
    return;
  for (const Copy& c : pageable)
  {
    Pair* p = c.bytes >= kStagedAtLeast ? held.get() : nullptr;
    if (!p)
      GPUGEO_CUDA_CHECK(cudaMemcpy(c.dst, c.src, c.bytes, kind));
    else if (toHost)
      stagedToHost(p, c.dst, c.src, c.bytes);
    else
      stagedToDevice(p, c.dst, c.src, c.bytes);
  }
}

}  // namespace staging

// Copies host memory to device memory, each copy's bytes from src to dst (a null pointer or zero
// bytes: nothing), as staging::copyAll says. Returns when every byte has arrived.
inline void copyToDevice(std::initializer_list<Copy> list)
{
  staging::copyAll(list, false);
}

inline void copyToDevice(void* dst, const void* src, std::size_t bytes)
{
  staging::copyAll({Copy{dst, src, bytes}}, false);
}

// Copies device memory to host memory, the same way, after the calling thread's stream's earlier
// work. Returns when every byte is there.
inline void copyToHost(std::initializer_list<Copy> list)
{
  staging::copyAll(list, true);
}

inline void copyToHost(void* dst, const void* src, std::size_t bytes)
{
  staging::copyAll({Copy{dst, src, bytes}}, true);
}

}  // namespace gpugeo::cuda
