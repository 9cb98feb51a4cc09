// Issue 22 research: why a spread upload of pageable memory (core/staged_copy.h) ran at 25 GB/s at
// 384 MiB and 16.8 GB/s for the 10,000^2 DEM (381 MiB) where 256 and 768 MiB ran at 41-43 GB/s.
// One large host-to-device copy from touched pageable memory, by size, each way below, in rounds
// whose order of sizes changes (so that a slow spell of the host shows as spread, not as a size):
//   pinned         cudaMemcpy from cudaMallocHost memory (the link's ceiling)
//   spread/T/C     T threads, each its slice through two pinned chunks of C MiB on a stream of its
//                  own (staged_copy.h's way; T = 8, chunk 4 MiB is what it does today)
//   host/T         the same threads' memcpy into their chunks only (the host's side alone)
//   dma/T          the same DMAs from the chunks only (the device's side alone)
//   real           gpugeo::cuda::copyToDevice (staged_copy.h itself: kept threads, the pool's pairs)
//   real/async     the same into a buffer fresh from cudaMallocAsync each copy, the pool trimmed
//                  to nothing between copies (as the DEM chain's buffer: its pool gives memory back)
//   real/malloc    the same into a buffer fresh from cudaMalloc each copy
// Each way's median over the rounds, GB/s, and for spread the slowest thread's time against the
// fastest's. Every spread copy is checked to arrive whole.
//
// usage: upload_sweep [MiB ...]   (nvcc -Inative upload_sweep.cu native/core/parallel.cpp)   (default 256 320 352 381.5 384 416 448 512 768)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_check.h"
#include "core/staged_copy.h"

namespace {

double now()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr std::size_t kMiB = std::size_t(1) << 20;

struct Lane
{
  cudaStream_t stream = nullptr;
  void* chunk[2] = {nullptr, nullptr};
  cudaEvent_t moved[2] = {nullptr, nullptr};
  std::size_t bytes = 0;
};

std::vector<Lane> makeLanes(int threads, std::size_t chunk)
{
  std::vector<Lane> lanes(static_cast<std::size_t>(threads));
  for (Lane& l : lanes)
  {
    GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    for (int k = 0; k < 2; ++k)
    {
      GPUGEO_CUDA_CHECK(cudaMallocHost(&l.chunk[k], chunk));
      std::memset(l.chunk[k], 0, chunk);
      GPUGEO_CUDA_CHECK(cudaEventCreateWithFlags(&l.moved[k], cudaEventDisableTiming));
    }
    l.bytes = chunk;
  }
  return lanes;
}

void freeLanes(std::vector<Lane>& lanes)
{
  for (Lane& l : lanes)
  {
    for (int k = 0; k < 2; ++k)
    {
      cudaFreeHost(l.chunk[k]);
      cudaEventDestroy(l.moved[k]);
    }
    cudaStreamDestroy(l.stream);
  }
  lanes.clear();
}

enum class Part { Both, HostOnly, DmaOnly };

// One copy of `bytes` from src to dst spread over the lanes; returns seconds, and the slowest and
// fastest thread's seconds.
double spread(std::vector<Lane>& lanes, char* dst, const char* src, std::size_t bytes, Part part, double& slowest,
              double& fastest)
{
  const std::size_t parts = lanes.size();
  const std::size_t slice = ((bytes + parts - 1) / parts + kMiB - 1) / kMiB * kMiB;
  std::vector<double> took(parts, 0.0);
  const double t0 = now();
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < parts; ++t)
    pool.emplace_back([&, t] {
      const double s = now();
      Lane& l = lanes[t];
      const std::size_t begin = t * slice, end = std::min(bytes, begin + slice);
      int k = 0;
      for (std::size_t at = begin; at < end; at += l.bytes, k ^= 1)
      {
        const std::size_t n = std::min(l.bytes, end - at);
        GPUGEO_CUDA_CHECK(cudaEventSynchronize(l.moved[k]));
        if (part != Part::DmaOnly)
          std::memcpy(l.chunk[k], src + at, n);
        if (part != Part::HostOnly)
        {
          GPUGEO_CUDA_CHECK(cudaMemcpyAsync(dst + at, l.chunk[k], n, cudaMemcpyHostToDevice, l.stream));
          GPUGEO_CUDA_CHECK(cudaEventRecord(l.moved[k], l.stream));
        }
      }
      GPUGEO_CUDA_CHECK(cudaStreamSynchronize(l.stream));
      took[t] = now() - s;
    });
  for (auto& p : pool)
    p.join();
  const double seconds = now() - t0;
  slowest = *std::max_element(took.begin(), took.end());
  fastest = *std::min_element(took.begin(), took.end());
  return seconds;
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<double> mibs;
  for (int i = 1; i < argc; ++i)
    mibs.push_back(std::atof(argv[i]));
  if (mibs.empty())
    mibs = {256, 320, 352, 381.5, 384, 416, 448, 512, 768};
  const int rounds = 5;
  std::vector<std::size_t> sizes;
  std::vector<char*> hosts;
  std::size_t largest = 0;
  for (double m : mibs)
  {
    const std::size_t bytes = std::size_t(m * double(kMiB)) / 4 * 4;
    sizes.push_back(bytes);
    char* h = new char[bytes];
    for (std::size_t i = 0; i < bytes; i += 4)
      reinterpret_cast<unsigned*>(h)[i / 4] = unsigned(i * 2654435761u);
    hosts.push_back(h);
    largest = std::max(largest, bytes);
  }
  char* dev = nullptr;
  GPUGEO_CUDA_CHECK(cudaMalloc(&dev, largest));
  char* pinned = nullptr;
  GPUGEO_CUDA_CHECK(cudaMallocHost(&pinned, largest));
  std::memset(pinned, 1, largest);

  struct Way
  {
    std::string name;
    int threads;
    std::size_t chunk;
    Part part;
  };
  std::vector<Way> ways = {{"pinned", 0, 0, Part::Both}, {"real", -1, 0, Part::Both}, {"real/async", -2, 0, Part::Both},
                           {"real/malloc", -3, 0, Part::Both}};
  for (int t : {8, 16})
    for (std::size_t c : {1, 2, 4})
      ways.push_back({"spread/" + std::to_string(t) + "/" + std::to_string(c), t, c * kMiB, Part::Both});
  for (int t : {8, 16})
  {
    ways.push_back({"host/" + std::to_string(t), t, 4 * kMiB, Part::HostOnly});
    ways.push_back({"dma/" + std::to_string(t), t, 4 * kMiB, Part::DmaOnly});
  }
  std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> rate, spreadRatio;  // (way, size)
  std::map<std::size_t, std::vector<Lane>> lanesOf;
  for (std::size_t w = 0; w < ways.size(); ++w)
    if (ways[w].threads > 0)
      lanesOf[w] = makeLanes(ways[w].threads, ways[w].chunk);
  // warm-up
  {
    double a = 0, b = 0;
    spread(lanesOf.begin()->second, dev, hosts[0], sizes[0], Part::Both, a, b);
    gpugeo::cuda::copyToDevice(dev, hosts[0], sizes[0]);  // the pool's pairs and the kept threads
  }
  for (int r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < sizes.size(); ++j)
    {
      const std::size_t s = (j * 5 + std::size_t(r) * 3) % sizes.size();  // a different order each round
      for (std::size_t w = 0; w < ways.size(); ++w)
      {
        const std::size_t bytes = sizes[s];
        double seconds = 0, slowest = 0, fastest = 0;
        if (ways[w].threads < 0)
        {
          char* to = dev;
          cudaMemPool_t pool;
          GPUGEO_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
          if (ways[w].threads == -2)
          {
            GPUGEO_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
            GPUGEO_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&to), bytes, cudaStreamPerThread));
          }
          else if (ways[w].threads == -3)
            GPUGEO_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&to), bytes));
          GPUGEO_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
          const double t0 = now();
          gpugeo::cuda::copyToDevice(to, hosts[s], bytes);
          seconds = now() - t0;
          std::vector<unsigned> probe(1);
          GPUGEO_CUDA_CHECK(cudaMemcpy(probe.data(), to + bytes / 2 / 4 * 4, 4, cudaMemcpyDeviceToHost));
          if (probe[0] != unsigned(bytes / 2 / 4 * 4 * 2654435761u))
          {
            std::fprintf(stderr, "%s: a copy did not arrive whole\n", ways[w].name.c_str());
            return 1;
          }
          if (ways[w].threads == -2)
          {
            GPUGEO_CUDA_CHECK(cudaFreeAsync(to, cudaStreamPerThread));
            GPUGEO_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
          }
          else if (ways[w].threads == -3)
            GPUGEO_CUDA_CHECK(cudaFree(to));
        }
        else if (ways[w].threads == 0)
        {
          const double t0 = now();
          GPUGEO_CUDA_CHECK(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));
          seconds = now() - t0;
        }
        else
        {
          GPUGEO_CUDA_CHECK(cudaMemset(dev, 0, bytes));
          GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
          seconds = spread(lanesOf[w], dev, hosts[s], bytes, ways[w].part, slowest, fastest);
          spreadRatio[{w, s}].push_back(slowest / fastest);
          if (ways[w].part == Part::Both)
          {
            std::vector<unsigned> probe(1);
            for (std::size_t i = 0; i < bytes; i += bytes / 97 / 4 * 4)
            {
              GPUGEO_CUDA_CHECK(cudaMemcpy(probe.data(), dev + i, 4, cudaMemcpyDeviceToHost));
              if (probe[0] != unsigned(i * 2654435761u))
              {
                std::fprintf(stderr, "%s: a copy did not arrive whole\n", ways[w].name.c_str());
                return 1;
              }
            }
          }
        }
        rate[{w, s}].push_back(double(bytes) / seconds / 1e9);
      }
    }
  std::printf("%-14s", "GB/s");
  for (double m : mibs)
    std::printf(" %7.1f", m);
  std::printf("   (MiB; medians of %d, slowest/fastest thread in brackets)\n", rounds);
  for (std::size_t w = 0; w < ways.size(); ++w)
  {
    std::printf("%-14s", ways[w].name.c_str());
    for (std::size_t s = 0; s < sizes.size(); ++s)
    {
      const auto& v = rate[{w, s}];
      std::printf(" %7.1f", median(v));
    }
    std::printf("\n");
    if (ways[w].threads != 0)
    {
      std::printf("%-14s", "  min..max");
      for (std::size_t s = 0; s < sizes.size(); ++s)
      {
        const auto& v = rate[{w, s}];
        std::printf(" %3.0f..%-3.0f", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
      }
      if (ways[w].threads < 0)
      {
        std::printf("\n");
        continue;
      }
      std::printf("\n%-14s", "  slow/fast");
      for (std::size_t s = 0; s < sizes.size(); ++s)
        std::printf(" %7.2f", median(spreadRatio[{w, s}]));
      std::printf("\n");
    }
  }
  for (auto& [w, lanes] : lanesOf)
    freeLanes(lanes);
  cudaFreeHost(pinned);
  cudaFree(dev);
  for (char* h : hosts)
    delete[] h;
  return 0;
}
