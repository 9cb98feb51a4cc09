// Issue 22 research: one large download (a raster band, an output array) from the device into the
// caller's pageable memory, the way the plugin's outputs arrive, at the bus's rate. Ways compared,
// each copy checked to arrive whole:
//   pageable      cudaMemcpy into the pageable buffer (the driver's own staging, one copy at a time)
//   pinned        cudaMemcpy into memory from cudaMallocHost, allocated beforehand (the ceiling)
//   pinned+alloc  the same with the cudaMallocHost (and cudaFreeHost) of the buffer timed
//   register      cudaHostRegister of the pageable buffer, cudaMemcpy, cudaHostUnregister, all timed
//   staged/T      a ring of pinned chunks (allocated once, not timed): the DMA engine fills chunk after
//                 chunk on one stream while T host threads copy the filled ones out (memcpy) into the
//                 pageable buffer, each waiting on its chunk's event; a chunk is refilled once copied
// Each way on a destination already touched (a buffer reused from band to band) and on a fresh one
// (a new vector: its pages are faulted in by the copy).
//
// usage: download_pageable [MiB ...]   (default 64 256 512)
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call)                                                                                \
  do                                                                                               \
  {                                                                                                \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                         \
    {                                                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

double now()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void fillKernel(unsigned* data, std::size_t n, unsigned salt)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = unsigned(i * 2654435761u) ^ salt;
}

bool whole(const unsigned* host, std::size_t n, unsigned salt)
{
  for (std::size_t i = 0; i < n; i += 4099)
    if (host[i] != (unsigned(i * 2654435761u) ^ salt))
      return false;
  return host[n - 1] == (unsigned((n - 1) * 2654435761u) ^ salt);
}

constexpr std::size_t kChunk = std::size_t(8) << 20;
constexpr int kRing = 8;

struct Ring
{
  void* chunk[kRing];
  cudaEvent_t filled[kRing];
  cudaStream_t stream;
  Ring()
  {
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int k = 0; k < kRing; ++k)
    {
      CHECK(cudaMallocHost(&chunk[k], kChunk));
      CHECK(cudaEventCreateWithFlags(&filled[k], cudaEventDisableTiming));
    }
  }
};

// The staged download: chunk c goes to ring slot c % kRing; the DMA of chunk c + kRing waits until
// chunk c is copied out (the host enqueues it only then). Threads take chunks in order.
void stagedDownload(Ring& ring, void* dst, const void* src, std::size_t bytes, int threads)
{
  const std::size_t chunks = (bytes + kChunk - 1) / kChunk;
  std::vector<std::atomic<int>> copied(chunks);
  for (auto& c : copied)
    c = 0;
  std::atomic<std::size_t> next{0};
  const auto enqueue = [&](std::size_t c) {
    const std::size_t at = c * kChunk, n = std::min(kChunk, bytes - at);
    CHECK(cudaMemcpyAsync(ring.chunk[c % kRing], static_cast<const char*>(src) + at, n, cudaMemcpyDeviceToHost,
                          ring.stream));
    CHECK(cudaEventRecord(ring.filled[c % kRing], ring.stream));
  };
  // The first ring's worth goes at once; the thread that copies chunk c out enqueues chunk c + kRing
  // in order (a chunk's enqueue waits for the previous chunk's, so the stream keeps the order).
  for (std::size_t c = 0; c < std::min<std::size_t>(chunks, kRing); ++c)
    enqueue(c);
  std::atomic<std::size_t> enqueueTurn{0};  // chunk whose follow-up is next to be enqueued
  const auto work = [&] {
    while (true)
    {
      const std::size_t c = next.fetch_add(1);
      if (c >= chunks)
        return;
      if (c >= kRing)  // chunk c is enqueued once chunk c - kRing is copied out: wait for that first
        while (enqueueTurn.load() <= c - kRing)
          std::this_thread::yield();
      CHECK(cudaEventSynchronize(ring.filled[c % kRing]));
      const std::size_t at = c * kChunk, n = std::min(kChunk, bytes - at);
      std::memcpy(static_cast<char*>(dst) + at, ring.chunk[c % kRing], n);
      while (enqueueTurn.load() != c)
        std::this_thread::yield();
      if (c + kRing < chunks)
        enqueue(c + kRing);
      enqueueTurn.store(c + 1);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (auto& t : pool)
    t.join();
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i)
    sizes.push_back(std::size_t(std::atoi(argv[i])) << 20);
  if (sizes.empty())
    sizes = {std::size_t(64) << 20, std::size_t(256) << 20, std::size_t(512) << 20};
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, host threads %u\n", prop.name, std::thread::hardware_concurrency());
  Ring ring;
  for (const std::size_t bytes : sizes)
  {
    const std::size_t n = bytes / sizeof(unsigned);
    unsigned* device = nullptr;
    CHECK(cudaMalloc(&device, bytes));
    unsigned* pinned = nullptr;
    CHECK(cudaMallocHost(&pinned, bytes));
    std::vector<unsigned> touched(n, 1u);
    unsigned salt = 1;
    const auto report = [&](const char* way, const char* destination, double seconds, const unsigned* host) {
      std::printf("%5zu MiB  %-13s %-8s %7.2f ms  %6.1f GB/s  %s\n", bytes >> 20, way, destination, seconds * 1e3,
                  double(bytes) / seconds / 1e9, whole(host, n, salt) ? "whole" : "WRONG");
    };
    for (int rep = 0; rep < 2; ++rep)  // the first round warms up; the second is printed
    {
      const bool print = rep == 1;
      for (const bool fresh : {false, true})
      {
        const char* destination = fresh ? "fresh" : "touched";
        const auto target = [&]() -> unsigned* {
          if (!fresh)
            return touched.data();
          return static_cast<unsigned*>(std::malloc(bytes));  // pages faulted by the copy
        };
        const auto release = [&](unsigned* p) {
          if (fresh)
            std::free(p);
        };
        // pageable
        {
          fillKernel<<<1024, 256>>>(device, n, ++salt);
          CHECK(cudaDeviceSynchronize());
          unsigned* dst = target();
          const double t0 = now();
          CHECK(cudaMemcpy(dst, device, bytes, cudaMemcpyDeviceToHost));
          if (print)
            report("pageable", destination, now() - t0, dst);
          release(dst);
        }
        // register
        {
          fillKernel<<<1024, 256>>>(device, n, ++salt);
          CHECK(cudaDeviceSynchronize());
          unsigned* dst = target();
          const double t0 = now();
          CHECK(cudaHostRegister(dst, bytes, cudaHostRegisterDefault));
          CHECK(cudaMemcpy(dst, device, bytes, cudaMemcpyDeviceToHost));
          CHECK(cudaHostUnregister(dst));
          if (print)
            report("register", destination, now() - t0, dst);
          release(dst);
        }
        for (const int threads : {1, 2, 4, 8})
        {
          fillKernel<<<1024, 256>>>(device, n, ++salt);
          CHECK(cudaDeviceSynchronize());
          unsigned* dst = target();
          const double t0 = now();
          stagedDownload(ring, dst, device, bytes, threads);
          char way[32];
          std::snprintf(way, sizeof way, "staged/%d", threads);
          if (print)
            report(way, destination, now() - t0, dst);
          release(dst);
        }
      }
      // pinned, and pinned with its allocation
      {
        fillKernel<<<1024, 256>>>(device, n, ++salt);
        CHECK(cudaDeviceSynchronize());
        double t0 = now();
        CHECK(cudaMemcpy(pinned, device, bytes, cudaMemcpyDeviceToHost));
        if (print)
          report("pinned", "pinned", now() - t0, pinned);
        fillKernel<<<1024, 256>>>(device, n, ++salt);
        CHECK(cudaDeviceSynchronize());
        t0 = now();
        unsigned* fresh = nullptr;
        CHECK(cudaMallocHost(&fresh, bytes));
        CHECK(cudaMemcpy(fresh, device, bytes, cudaMemcpyDeviceToHost));
        const double copied = now();
        const bool ok = whole(fresh, n, salt);
        const double t1 = now();
        CHECK(cudaFreeHost(fresh));
        if (print)
          std::printf("%5zu MiB  %-13s %-8s %7.2f ms  %6.1f GB/s  %s (free %.2f ms more)\n", bytes >> 20,
                      "pinned+alloc", "fresh", (copied - t0) * 1e3, double(bytes) / (copied - t0) / 1e9,
                      ok ? "whole" : "WRONG", (now() - t1) * 1e3);
      }
    }
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(device));
  }
  return 0;
}
