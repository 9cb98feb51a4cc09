// core/staged_copy.h: copies through pinned chunks arrive whole, whatever their size against the
// chunks, from one thread or many at once; a large download alone, spread over threads, arrives whole
// and after the work that wrote it. Skipped where no GPU can be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/device_buffer.h"
#include "core/staged_copy.h"

namespace {

using namespace gpugeo;

// n bytes of a pattern that differs with `seed` and along the buffer.
std::vector<uint8_t> pattern(std::size_t n, uint32_t seed)
{
  std::vector<uint8_t> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& b : v)
  {
    s = s * 1664525u + 1013904223u;
    b = uint8_t(s >> 24);
  }
  return v;
}

// Up and back down: the same bytes.
void roundTrip(std::size_t n, uint32_t seed)
{
  const std::vector<uint8_t> sent = pattern(n, seed);
  cuda::DeviceBuffer<uint8_t> device(n);
  cuda::copyToDevice(device.data(), sent.data(), n);
  std::vector<uint8_t> back(n, 0);
  cuda::copyToHost(back.data(), device.data(), n);
  EXPECT_EQ(back, sent) << n << " bytes";
}

// Counts as a copy under way (staged_copy.h) while it lives, so that the test's own large copies
// take the pinned chunks instead of cudaMemcpy alone.
class AnotherCopy
{
public:
  AnotherCopy() : mHeld(1) {}

private:
  cuda::staging::Held mHeld;
};

TEST(StagedCopyGpu, EverySizeArrivesWhole)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const std::vector<std::size_t> sizes = {1, 1000, cuda::kStagedAtLeast - 1, cuda::kStagedAtLeast,
                                          cuda::kStagedChunk - 1, cuda::kStagedChunk, cuda::kStagedChunk + 1,
                                          2 * cuda::kStagedChunk, 3 * cuda::kStagedChunk + 12345};
  for (const std::size_t n : sizes)  // alone: cudaMemcpy
    roundTrip(n, uint32_t(n));
  const AnotherCopy another;  // beside another: the chunks
  for (const std::size_t n : sizes)
    roundTrip(n, uint32_t(n) + 1);
}

TEST(StagedCopyGpu, ThreadsCopyingAtOnceKeepTheirOwnBytes)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  // More threads than chunk pairs made so far: the pool gives each its own pair.
  const AnotherCopy another;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (uint32_t r = 0; r < 3; ++r)
        roundTrip(2 * cuda::kStagedChunk + 4096 * (t + 1), 100 * t + r);
    });
  for (auto& t : threads)
    t.join();
}

TEST(StagedCopyGpu, UploadThenKernelOrderIsKept)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  // An upload followed at once by a device-to-device copy on the same thread's stream sees the
  // uploaded bytes (the staged copy returns with the data in place).
  const AnotherCopy another;
  const std::size_t n = 3 * cuda::kStagedChunk + 7;
  const std::vector<uint8_t> sent = pattern(n, 7);
  cuda::DeviceBuffer<uint8_t> a(n), b(n);
  cuda::copyToDevice(a.data(), sent.data(), n);
  GPUGEO_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
  std::vector<uint8_t> back(n, 0);
  cuda::copyToHost(back.data(), b.data(), n);
  EXPECT_EQ(back, sent);
}

// A download alone of kSpreadAtLeast or more goes over several threads, in slices of whole MiB:
// sizes around the slices' edges arrive whole, and a download that follows a kernel-like copy on the
// caller's stream at once sees its bytes (the caller's stream is waited for first).
TEST(StagedCopyGpu, ASpreadDownloadArrivesWholeAfterTheCallersWork)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const std::size_t threads = std::size_t(cuda::staging::spreadThreads());
  for (const std::size_t n : {cuda::kSpreadAtLeast, cuda::kSpreadAtLeast + 1, threads * cuda::kStagedChunk * 9 - 1,
                              threads * cuda::kStagedChunk * 9 + 4097})
  {
    const std::vector<uint8_t> sent = pattern(n, uint32_t(n % 1000));
    cuda::DeviceBuffer<uint8_t> a(n), b(n);
    cuda::copyToDevice(a.data(), sent.data(), n);
    GPUGEO_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
    std::vector<uint8_t> back(n, 0);
    cuda::copyToHost(back.data(), b.data(), n);
    EXPECT_TRUE(back == sent) << n << " bytes";
  }
}

// The list form: several downloads laid end to end and spread together (slices cross from one copy
// to the next at odd offsets), with a null destination skipped, a small copy, and a page-locked
// destination that goes straight.
TEST(StagedCopyGpu, AListOfDownloadsArrivesWhole)
{
  if (!probeGpu().usable)
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const std::size_t sizes[] = {cuda::kSpreadAtLeast / 3 + 7, 4093, cuda::kSpreadAtLeast + 12345, 3 * cuda::kStagedChunk + 1};
  std::vector<std::vector<uint8_t>> sent, back;
  std::vector<cuda::DeviceBuffer<uint8_t>> device;
  for (std::size_t k = 0; k < 4; ++k)
  {
    sent.push_back(pattern(sizes[k], uint32_t(40 + k)));
    back.emplace_back(sizes[k], 0);
    device.emplace_back(sizes[k]);
    cuda::copyToDevice(device[k].data(), sent[k].data(), sizes[k]);
  }
  cuda::PinnedBuffer<uint8_t> pinned;
  pinned.resize(sizes[3]);
  cuda::copyToHost({{back[0].data(), device[0].data(), sizes[0]},
                    {nullptr, device[1].data(), sizes[1]},
                    {back[1].data(), device[1].data(), sizes[1]},
                    {back[2].data(), device[2].data(), sizes[2]},
                    {pinned.data(), device[3].data(), sizes[3]}});
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_TRUE(back[k] == sent[k]) << "copy " << k;
  EXPECT_TRUE(std::equal(sent[3].begin(), sent[3].end(), pinned.data()));
  EXPECT_TRUE(cuda::staging::pageLocked(pinned.data()));
  EXPECT_FALSE(cuda::staging::pageLocked(back[0].data()));
}

}  // namespace
