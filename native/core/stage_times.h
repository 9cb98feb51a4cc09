// Wall-clock time spent in each named stage of a run (read, prepare, upload, compute, download,
// write ...), in the order the stages were first seen, so the log can print them as they happened.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace gpugeo {

class StageTimes
{
public:
  void add(const std::string& stage, double milliseconds)
  {
    for (auto& entry : mEntries)
      if (entry.first == stage)
      {
        entry.second += milliseconds;
        return;
      }
    mEntries.emplace_back(stage, milliseconds);
  }

  void merge(const StageTimes& other)
  {
    for (const auto& entry : other.mEntries)
      add(entry.first, entry.second);
  }

  double get(const std::string& stage) const
  {
    for (const auto& entry : mEntries)
      if (entry.first == stage)
        return entry.second;
    return 0.0;
  }

  const std::vector<std::pair<std::string, double>>& entries() const { return mEntries; }

private:
  std::vector<std::pair<std::string, double>> mEntries;
};

// Adds the time from construction to destruction (or to stop()) to one stage.
class ScopedStage
{
public:
  ScopedStage(StageTimes& times, std::string stage)
    : mTimes(&times), mStage(std::move(stage)), mStart(std::chrono::steady_clock::now())
  {
  }
  ~ScopedStage() { stop(); }
  ScopedStage(const ScopedStage&) = delete;
  ScopedStage& operator=(const ScopedStage&) = delete;

  void stop()
  {
    if (!mTimes)
      return;
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - mStart;
    mTimes->add(mStage, elapsed.count());
    mTimes = nullptr;
  }

private:
  StageTimes* mTimes;
  std::string mStage;
  std::chrono::steady_clock::time_point mStart;
};

}  // namespace gpugeo
