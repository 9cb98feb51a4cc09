// Issue 22 research: why the plane Voronoi's overlapped start uploaded 1,000,000 sites (20 MB in 8
// bands, each a 16-byte-a-site copy and a 4-byte-a-site copy from pinned memory) at 10 GB/s on an
// H100 host and 22 GB/s on an H200 host, where one 64 MB copy ran at 52 GB/s on both.
// The product's pattern (voronoi_cuda.cu, startBanded) and variations of it, each timed by CUDA
// events from an event before the first copy to the last band's arrival, medians over rounds:
//   whole          one copy of the points and one of the indices
//   bands          16 copies (8 bands x 2), an event after each band (the product's way)
//   bands/fused    8 copies: each band's points and indices lie together
//   */fresh        the pinned buffer allocated (cudaMallocHost) and filled just before the round,
//                  as a fresh labeller does; otherwise one buffer for every round
//   */busy         a kernel writing device memory runs on another stream meanwhile (the labelling)
//   */idle         the host sleeps 50 ms before the round (the host's prepare, the GPU idle)
//   */dev          the device buffer also fresh (cudaMalloc) each round, as a fresh labeller's
//   bands/graph    the product's 16 copies and events captured in a CUDA graph beforehand, launched
//                  as one (no host time between the copies)
// Also the host's time to enqueue the copies, and for one round of `bands` each band's arrival.
//
// usage: banded_upload [sites ...]   (nvcc -O2 -Inative banded_upload.cu)   (default 1000000 4000000)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_check.h"

namespace {

constexpr int kBands = 8;
constexpr int kRounds = 7;

double nowMs()
{
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void busyKernel(float* data, long long n, int passes)
{
  for (int p = 0; p < passes; ++p)
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
      data[i] = data[i] * 0.999f + 1.0f;
}

// Scattered atomic additions into a table of n counters (as the index's count kernel makes), passes
// times over m keys.
__global__ void atomicKernel(int* table, long long n, long long m, int passes)
{
  for (int p = 0; p < passes; ++p)
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x)
      atomicAdd(table + (unsigned long long)(i * 2654435761ull) % n, 1);
}

struct Way
{
  bool whole = false, fused = false, fresh = false, busy = false, idle = false, graph = false, dev = false,
       atomics = false;
  std::string name() const
  {
    std::string s = whole ? "whole" : fused ? "bands/fused" : graph ? "bands/graph" : "bands";
    if (fresh)
      s += "/fresh";
    if (busy)
      s += "/busy";
    if (idle)
      s += "/idle";
    if (dev)
      s += "/dev";
    if (atomics)
      s += "/atomics";
    return s;
  }
};

struct Result
{
  double deviceMs = 0, enqueueMs = 0;
  std::vector<float> arrivals;
};

// The bands' copies on `copy`, an event after each band's; returns the events recorded.
int enqueueBands(long long sites, const char* host, char* device, bool fused, cudaStream_t copy, cudaEvent_t* arrived,
                 bool captured = false)
{
  const size_t pointBytes = size_t(sites) * 16;
  for (int b = 0; b < kBands; ++b)
  {
    const long long first = sites * b / kBands, count = sites * (b + 1) / kBands - first;
    if (fused)
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(device + first * 20, host + first * 20, size_t(count) * 20,
                                        cudaMemcpyHostToDevice, copy));
    else
    {
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(device + first * 16, host + first * 16, size_t(count) * 16,
                                        cudaMemcpyHostToDevice, copy));
      GPUGEO_CUDA_CHECK(cudaMemcpyAsync(device + pointBytes + first * 4, host + pointBytes + first * 4,
                                        size_t(count) * 4, cudaMemcpyHostToDevice, copy));
    }
    // (In a capture, only an external record becomes a record node of the graph.)
    GPUGEO_CUDA_CHECK(cudaEventRecordWithFlags(arrived[b], copy, captured ? cudaEventRecordExternal : 0));
  }
  return kBands;
}

Result round(const Way& w, long long sites, char* reused, char* device, float* scratch, long long scratchN,
             cudaStream_t copy, cudaStream_t other, cudaStream_t busy)
{
  const size_t bytes = size_t(sites) * 20;
  char* host = reused;
  if (w.fresh)
  {
    GPUGEO_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), bytes));
    std::memset(host, 1, bytes);
  }
  if (w.dev)
    GPUGEO_CUDA_CHECK(cudaMalloc(&device, bytes));
  if (w.idle)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (w.busy)
    busyKernel<<<1024, 256, 0, busy>>>(scratch, scratchN, 4);
  if (w.atomics)
    atomicKernel<<<1024, 256, 0, busy>>>(reinterpret_cast<int*>(scratch), 1 << 22, 4000000, 8);
  cudaEvent_t start, arrived[kBands];
  GPUGEO_CUDA_CHECK(cudaEventCreate(&start));
  for (auto& e : arrived)
    GPUGEO_CUDA_CHECK(cudaEventCreate(&e));
  const size_t pointBytes = size_t(sites) * 16;
  int events = 0;
  cudaGraphExec_t exec = nullptr;
  if (w.graph)
  {
    GPUGEO_CUDA_CHECK(cudaStreamBeginCapture(copy, cudaStreamCaptureModeThreadLocal));
    events = enqueueBands(sites, host, device, false, copy, arrived, true);
    cudaGraph_t graph;
    GPUGEO_CUDA_CHECK(cudaStreamEndCapture(copy, &graph));
    GPUGEO_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    GPUGEO_CUDA_CHECK(cudaGraphDestroy(graph));
    GPUGEO_CUDA_CHECK(cudaGraphUpload(exec, copy));
    GPUGEO_CUDA_CHECK(cudaStreamSynchronize(copy));
  }
  const double t0 = nowMs();
  GPUGEO_CUDA_CHECK(cudaEventRecord(start, other));
  GPUGEO_CUDA_CHECK(cudaStreamWaitEvent(copy, start, 0));
  if (w.graph)
    GPUGEO_CUDA_CHECK(cudaGraphLaunch(exec, copy));
  else if (w.whole)
  {
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(device, host, pointBytes, cudaMemcpyHostToDevice, copy));
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(device + pointBytes, host + pointBytes, bytes - pointBytes,
                                      cudaMemcpyHostToDevice, copy));
    GPUGEO_CUDA_CHECK(cudaEventRecord(arrived[events++], copy));
  }
  else
    events = enqueueBands(sites, host, device, w.fused, copy, arrived);
  Result r;
  r.enqueueMs = nowMs() - t0;
  GPUGEO_CUDA_CHECK(cudaEventSynchronize(arrived[events - 1]));
  for (int k = 0; k < events; ++k)
  {
    float ms = 0;
    GPUGEO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, arrived[k]));
    r.arrivals.push_back(ms);
  }
  r.deviceMs = r.arrivals.back();
  GPUGEO_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEventDestroy(start);
  for (auto& e : arrived)
    cudaEventDestroy(e);
  if (exec)
    cudaGraphExecDestroy(exec);
  if (w.dev)
    GPUGEO_CUDA_CHECK(cudaFree(device));
  if (w.fresh)
    GPUGEO_CUDA_CHECK(cudaFreeHost(host));
  return r;
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<long long> counts;
  for (int i = 1; i < argc; ++i)
    counts.push_back(std::atoll(argv[i]));
  if (counts.empty())
    counts = {1000000, 4000000};
  cudaDeviceProp prop{};
  GPUGEO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, async engines %d\n", prop.name, prop.asyncEngineCount);
  cudaStream_t copy, other, busy;
  GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  GPUGEO_CUDA_CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  const long long scratchN = 64ll << 20;  // 256 MB written 4 times: a few ms
  float* scratch = nullptr;
  GPUGEO_CUDA_CHECK(cudaMalloc(&scratch, size_t(scratchN) * sizeof(float)));
  GPUGEO_CUDA_CHECK(cudaMemset(scratch, 0, size_t(scratchN) * sizeof(float)));
  for (const long long sites : counts)
  {
    const size_t bytes = size_t(sites) * 20;
    char *reused = nullptr, *device = nullptr;
    GPUGEO_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&reused), bytes));
    std::memset(reused, 1, bytes);
    GPUGEO_CUDA_CHECK(cudaMalloc(&device, bytes));
    std::vector<Way> ways;
    for (int fresh = 0; fresh < 2; ++fresh)
      for (int kind = 0; kind < 3; ++kind)
      {
        Way w;
        w.whole = kind == 0;
        w.fused = kind == 2;
        w.fresh = fresh;
        ways.push_back(w);
      }
    for (Way w : {Way{false, false, false, true, false}, Way{false, false, false, false, true},
                  Way{true, false, false, false, true}, Way{false, false, true, true, true},
                  Way{false, false, false, false, false, true}, Way{false, false, true, false, false, true},
                  Way{false, false, true, false, false, false, true}, Way{true, false, true, false, false, false, true},
                  Way{false, false, false, false, false, false, false, true}})
      ways.push_back(w);
    // Rounds interleave the ways, so that a slow spell of the host shows as spread.
    std::vector<std::vector<double>> took(ways.size()), enqueue(ways.size());
    std::vector<float> oneBands;
    for (int r = 0; r <= kRounds; ++r)
      for (size_t k = 0; k < ways.size(); ++k)
      {
        const Result res = round(ways[k], sites, reused, device, scratch, scratchN, copy, other, busy);
        if (r == 0)
          continue;
        took[k].push_back(res.deviceMs);
        enqueue[k].push_back(res.enqueueMs);
        if (k == 1 && r == 1)
          oneBands = res.arrivals;
      }
    std::printf("\n%lld sites (%.1f MB)\n", sites, bytes / 1e6);
    for (size_t k = 0; k < ways.size(); ++k)
    {
      const double ms = median(took[k]);
      std::printf("  %-22s device %.3f ms (%5.1f GB/s; min %.3f, max %.3f)  host enqueue %.3f ms\n",
                  ways[k].name().c_str(), ms, bytes / ms / 1e6, *std::min_element(took[k].begin(), took[k].end()),
                  *std::max_element(took[k].begin(), took[k].end()), median(enqueue[k]));
    }
    std::printf("  bands, one round, arrivals (ms):");
    for (float a : oneBands)
      std::printf(" %.3f", a);
    std::printf("\n");
    cudaFreeHost(reused);
    cudaFree(device);
  }
  return 0;
}
