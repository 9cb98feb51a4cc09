// Issue 22 research (one call on the GPU machine, a few seconds): does the pattern of the overlapped
// start's uploads (the sites band by band, each band's index gaps after it, the index kernels on
// another stream) cost link speed by itself? Times host-to-device copies of 64 MB from pinned memory
// (4,000,000 sites of 16 bytes, as at 8192^2 with 4,000,000 sites) in these patterns, medians of 9:
//   one        one copy
//   bands8     8 copies of 8 MB
//   bands8+g   8 copies, each followed by a small copy of 0.5 MB at a 16-byte offset (the gaps)
//   bands8+g1  the same with the small copies at odd offsets
//   bands8+k   8 copies while a kernel scatters 4,000,000 x 16 bytes at random on another stream
//   fresh      one copy from pinned memory allocated and written (16 threads) just before
//   fresh8+g   bands8+g from such memory
// usage: nvcc -O2 -arch=sm_90 -o /tmp/upload_pattern upload_pattern.cu && /tmp/upload_pattern
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
  do                                                                                               \
  {                                                                                                \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess)                                                                         \
    {                                                                                              \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

__global__ void scatter(const int4* in, int4* out, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[(int64_t(i) * 2654435761u) % n] = in[i];
}

static void fill(char* p, size_t bytes)
{
  std::vector<std::thread> pool;
  for (int t = 0; t < 16; ++t)
    pool.emplace_back([=] {
      const size_t a = bytes * t / 16, b = bytes * (t + 1) / 16;
      std::memset(p + a, t + 1, b - a);
    });
  for (auto& t : pool)
    t.join();
}

int main()
{
  const size_t bytes = size_t(4000000) * 16, gapBytes = size_t(4000000);
  char *host = nullptr, *gaps = nullptr, *dev = nullptr, *devGaps = nullptr;
  int4 *kin = nullptr, *kout = nullptr;
  CHECK(cudaMallocHost(&host, bytes));
  CHECK(cudaMallocHost(&gaps, gapBytes + 64));
  fill(host, bytes);
  fill(gaps, gapBytes + 64);
  CHECK(cudaMalloc(&dev, bytes));
  CHECK(cudaMalloc(&devGaps, gapBytes + 64));
  CHECK(cudaMalloc(&kin, bytes));
  CHECK(cudaMalloc(&kout, bytes));
  cudaStream_t copy, side;
  CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));

  auto pattern = [&](const char* src, int pieces, bool withGaps, bool withKernel, size_t shift = 0) -> float {
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(a, copy));
    if (withKernel)
    {
      CHECK(cudaStreamWaitEvent(side, a, 0));
      for (int r = 0; r < 8; ++r)
        scatter<<<(4000000 + 255) / 256, 256, 0, side>>>(kin, kout, 4000000);
    }
    for (int p = 0; p < pieces; ++p)
    {
      const size_t f = bytes * p / pieces, l = bytes * (p + 1) / pieces;
      CHECK(cudaMemcpyAsync(dev + f, src + f, l - f, cudaMemcpyHostToDevice, copy));
      if (withGaps)
      {
        const size_t gf = gapBytes * p / pieces / 16 * 16 + shift, gl = gapBytes * (p + 1) / pieces / 16 * 16 + shift;
        CHECK(cudaMemcpyAsync(devGaps + gf, gaps + gf, gl - gf, cudaMemcpyHostToDevice, copy));
      }
    }
    CHECK(cudaEventRecord(b, copy));
    CHECK(cudaDeviceSynchronize());
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  };
  auto median = [&](auto&& once) {
    std::vector<float> t;
    once();
    for (int r = 0; r < 9; ++r)
      t.push_back(once());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  auto report = [&](const char* name, float ms, size_t moved) {
    std::printf("%-10s %7.3f ms  %6.1f GB/s\n", name, ms, moved / (ms * 1e6));
  };
  report("one", median([&] { return pattern(host, 1, false, false); }), bytes);
  report("bands8", median([&] { return pattern(host, 8, false, false); }), bytes);
  report("bands8+g", median([&] { return pattern(host, 8, true, false); }), bytes + gapBytes);
  report("bands8+g1", median([&] { return pattern(host, 8, true, false, 1); }), bytes + gapBytes);
  report("bands16", median([&] { return pattern(host, 16, false, false); }), bytes);
  report("bands8+k", median([&] { return pattern(host, 8, false, true); }), bytes);
  report("one+k", median([&] { return pattern(host, 1, false, true); }), bytes);
  auto fresh = [&](int pieces, bool withGaps) {
    return median([&] {
      char* p = nullptr;
      if (cudaMallocHost(&p, bytes) != cudaSuccess)
        return -1.f;
      fill(p, bytes);
      const float ms = pattern(p, pieces, withGaps, false);
      cudaFreeHost(p);
      return ms;
    });
  };
  report("fresh", fresh(1, false), bytes);
  report("fresh8+g", fresh(8, true), bytes + gapBytes);
  return 0;
}
