// The shared core: parallelFor, backend choice.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <system_error>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "core/stage_times.h"

using namespace gpugeo;

TEST(ParallelFor, VisitsEveryIndexExactlyOnce)
{
  for (int threads : {1, 2, 5})
    for (int64_t count : {0, 1, 7, 1000})
      for (int64_t grain : {1, 3, 64})
      {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(count));
        parallelFor(count, grain, threads, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            ++seen[static_cast<size_t>(i)];
        });
        for (int64_t i = 0; i < count; ++i)
          EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1)
            << "threads=" << threads << " count=" << count << " grain=" << grain << " index=" << i;
      }
}

TEST(ParallelFor, RethrowsTheFirstErrorAndStops)
{
  std::atomic<int> calls{0};
  // Each item takes 100 us: without the stop, 10000 items would take over a second.
  EXPECT_THROW(parallelFor(10000, 1, 3,
                           [&](int64_t begin, int64_t) {
                             ++calls;
                             if (begin == 5)
                               throw InvalidInput("bad item 5");
                             std::this_thread::sleep_for(std::chrono::microseconds(100));
                           }),
               InvalidInput);
  EXPECT_LT(calls.load(), 1000);
}

TEST(ParallelFor, CancelThrowsCanceledAndStopsEarly)
{
  std::atomic<int> calls{0};
  RunControl control;
  control.canceled = [&] { return calls.load() >= 10; };
  EXPECT_THROW(parallelFor(100000, 1, 2, [&](int64_t, int64_t) { ++calls; }, &control), Canceled);
  EXPECT_LT(calls.load(), 100);
}

namespace {

// Runs `check` in a child process that may not start any thread (RLIMIT_NPROC of 1, as an
// unprivileged user: root's processes are exempt from the limit, so a root test drops to nobody
// first). Returns the child's exit code: 0 when check() held, 77 when the limit could not be set.
int runWithoutNewThreads(const std::function<bool()>& check)
{
  const pid_t child = fork();
  if (child == 0)
  {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
      _exit(77);
    const rlimit one{1, 1};
    if (setrlimit(RLIMIT_NPROC, &one) != 0)
      _exit(77);
    try
    {
      std::thread probe([] {});
      probe.join();
      _exit(77);  // the limit does not hold here
    }
    catch (const std::system_error&)
    {
    }
    _exit(check() ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// When no worker thread can be started (ulimit -u, a pids limit), parallelFor runs everything on the
// calling thread and startAsync runs its task when it is waited for; the failures are counted. (It
// used to end the process through std::terminate, leaving a 0-byte output behind.)
TEST(ParallelFor, RunsOnTheCallingThreadWhenNoThreadCanStart)
{
  const int code = runWithoutNewThreads([] {
    const int64_t before = threadStartFailures();
    std::vector<int> seen(5000, 0);
    parallelFor(int64_t(seen.size()), 7, 8, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        ++seen[std::size_t(i)];
    });
    for (int v : seen)
      if (v != 1)
        return false;
    std::future<int> later = startAsync([] { return 42; });
    return later.get() == 42 && threadStartFailures() >= before + 2;
  });
  if (code == 77)
    GTEST_SKIP() << "cannot limit the number of threads here";
  EXPECT_EQ(code, 0);
}

TEST(Backend, CpuIsAlwaysAvailable)
{
  const BackendChoice choice = resolveBackend(Backend::Cpu, 3);
  EXPECT_EQ(choice.backend, Backend::Cpu);
  EXPECT_NE(choice.deviceName.find("3 threads"), std::string::npos) << choice.deviceName;
}

TEST(Backend, AutoAndGpuFollowTheProbe)
{
  const GpuInfo& gpu = probeGpu();
  const BackendChoice automatic = resolveBackend(Backend::Auto, 2);
  if (gpu.usable)
  {
    EXPECT_EQ(automatic.backend, Backend::Gpu);
    EXPECT_EQ(automatic.deviceName, gpu.name);
    EXPECT_EQ(resolveBackend(Backend::Gpu, 2).backend, Backend::Gpu);
  }
  else
  {
    EXPECT_FALSE(gpu.reason.empty());
    EXPECT_EQ(automatic.backend, Backend::Cpu);
    EXPECT_NE(automatic.note.find(gpu.reason), std::string::npos) << automatic.note;
    try
    {
      resolveBackend(Backend::Gpu, 2);
      ADD_FAILURE() << "DEVICE=GPU without a GPU must throw";
    }
    catch (const DeviceUnavailable& e)
    {
      EXPECT_NE(std::string(e.what()).find(gpu.reason), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("DEVICE=GPU"), std::string::npos) << e.what();
    }
  }
}

TEST(StageTimes, AccumulatesInFirstSeenOrder)
{
  StageTimes times;
  times.add("read", 1.0);
  times.add("compute", 2.0);
  times.add("read", 0.5);
  ASSERT_EQ(times.entries().size(), 2u);
  EXPECT_EQ(times.entries()[0].first, "read");
  EXPECT_DOUBLE_EQ(times.get("read"), 1.5);
  EXPECT_DOUBLE_EQ(times.get("compute"), 2.0);
  EXPECT_DOUBLE_EQ(times.get("write"), 0.0);
}

TEST(HostMemory, ResizeAndAssignHugeKeepWhatAVectorWouldHold)
{
  // Growing past the room (large enough for the huge-page advice) keeps the values held; shrinking
  // and growing within the room keep it; assignHuge fills every value.
  std::vector<int32_t> v{1, 2, 3};
  resizeHuge(v, std::size_t(3) << 20);
  ASSERT_EQ(v.size(), std::size_t(3) << 20);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[2], 3);
  EXPECT_EQ(v[3], 0);
  EXPECT_EQ(v.back(), 0);
  const int32_t* room = v.data();
  v[5] = 9;
  resizeHuge(v, 10);
  resizeHuge(v, 1000);
  EXPECT_EQ(v.data(), room) << "no new room within the capacity";
  EXPECT_EQ(v[5], 9);
  EXPECT_EQ(v[999], 0);
  assignHuge(v, std::size_t(5) << 20, int32_t(-3));
  ASSERT_EQ(v.size(), std::size_t(5) << 20);
  EXPECT_EQ(std::count(v.begin(), v.end(), -3), int64_t(5) << 20);
}
