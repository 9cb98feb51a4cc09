// Host <-> device copies of pageable memory: plain cudaMemcpy (the driver's staging) against
// core/staged_copy.h's pinned chunks, and cudaMemcpy from pinned memory as the ceiling; 1, 4 and 16
// threads at once, each copying its own 64 MiB buffer 8 times (a staged copy alone is spread over
// helper threads from kSpreadAtLeast up, else cudaMemcpy; staged_copy.h). Each copy is checked to arrive whole. Prints one JSON object: GB/s per way,
// direction and thread count, and staged / pageable.
//
// usage: bench_staged_copy [--mib M] [--reps R]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_check.h"
#include "core/staged_copy.h"

namespace {

enum class Way { Pageable, Staged, Pinned };

// GB/s of `threads` threads each copying `bytes` `reps` times (toDevice: host to device).
double rate(Way way, bool toDevice, int threads, std::size_t bytes, int reps)
{
  std::vector<void*> host(static_cast<std::size_t>(threads)), device(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
  {
    if (way == Way::Pinned)
      GPUGEO_CUDA_CHECK(cudaMallocHost(&host[std::size_t(t)], bytes));
    else
      host[std::size_t(t)] = new char[bytes];
    std::memset(host[std::size_t(t)], t + 1, bytes);
    GPUGEO_CUDA_CHECK(cudaMalloc(&device[std::size_t(t)], bytes));
    GPUGEO_CUDA_CHECK(cudaMemset(device[std::size_t(t)], t + 1, bytes));
  }
  GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      void* h = host[std::size_t(t)];
      void* d = device[std::size_t(t)];
      for (int r = 0; r < reps; ++r)
      {
        if (way == Way::Staged)
          toDevice ? gpugeo::cuda::copyToDevice(d, h, bytes) : gpugeo::cuda::copyToHost(h, d, bytes);
        else
          GPUGEO_CUDA_CHECK(cudaMemcpy(toDevice ? d : h, toDevice ? h : d, bytes,
                                       toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
      }
    });
  for (auto& p : pool)
    p.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Every buffer still holds its thread's bytes (uploaded and downloaded whole).
  for (int t = 0; t < threads; ++t)
  {
    std::vector<char> check(bytes);
    GPUGEO_CUDA_CHECK(cudaMemcpy(check.data(), device[std::size_t(t)], bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < bytes; i += 4093)
      if (check[i] != char(t + 1) || static_cast<const char*>(host[std::size_t(t)])[i] != char(t + 1))
      {
        std::fprintf(stderr, "a copy did not arrive whole\n");
        std::exit(1);
      }
    if (way == Way::Pinned)
      cudaFreeHost(host[std::size_t(t)]);
    else
      delete[] static_cast<char*>(host[std::size_t(t)]);
    cudaFree(device[std::size_t(t)]);
  }
  return double(bytes) * reps * threads / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv)
{
  std::size_t mib = 64;
  int reps = 8;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) mib = std::stoul(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
  }
  const std::size_t bytes = mib << 20;
  // The one-off costs first (the pinned pairs of a spread copy, its helper threads), as a process
  // that has copied before has paid them.
  rate(Way::Staged, true, 1, bytes, 1);
  rate(Way::Staged, false, 1, bytes, 1);
  std::printf("{\"mib\": %zu, \"reps\": %d", mib, reps);
  for (const bool toDevice : {true, false})
    for (const int threads : {1, 4, 16})
    {
      const double pageable = rate(Way::Pageable, toDevice, threads, bytes, reps);
      const double staged = rate(Way::Staged, toDevice, threads, bytes, reps);
      const double pinned = rate(Way::Pinned, toDevice, threads, bytes, reps);
      std::printf(",\n \"%s_%d_threads_GBps\": {\"pageable\": %.1f, \"staged\": %.1f, \"pinned\": %.1f, "
                  "\"staged_over_pageable\": %.2f}",
                  toDevice ? "to_device" : "to_host", threads, pageable, staged, pinned, staged / pageable);
    }
  std::printf("}\n");
  return 0;
}
