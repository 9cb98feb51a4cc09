#include "cli/reporter.h"

#include <algorithm>
#include <cstdio>

namespace gpugeo::cli {

void Reporter::line(const char* tag, const std::string& text) const
{
  if (mMachine)
    std::printf("@%s %s\n", tag, text.c_str());
  else if (std::string(tag) == "warning")
    std::printf("Warning: %s\n", text.c_str());
  else
    std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Reporter::info(const std::string& text) const
{
  if (mSpeaks && !mQuiet)
    line("info", text);
}

void Reporter::warning(const std::string& text) const
{
  if (mSpeaks)
    line("warning", text);
}

void Reporter::error(const std::string& text) const
{
  if (mMachine)
  {
    std::printf("@error %s\n", text.c_str());
    std::fflush(stdout);
  }
  else
    std::fprintf(stderr, "gpugeo_dem: error: %s\n", text.c_str());
}

void Reporter::step(const std::string& text, int index, int steps)
{
  mStep = index;
  mSteps = std::max(1, steps);
  if (mSpeaks && !mQuiet)
    line("text", text);
  progress(0.0);
}

void Reporter::progress(double fraction)
{
  if (!mSpeaks)
    return;
  const double percent = 100.0 * (mStep + std::clamp(fraction, 0.0, 1.0)) / mSteps;
  if (mMachine)
  {
    // Tenths of a percent, each once.
    const int tenths = int(percent * 10.0);
    if (tenths == mShown)
      return;
    mShown = tenths;
    std::printf("@progress %.1f\n", tenths / 10.0);
    std::fflush(stdout);
    return;
  }
  const int shown = int(percent) / 10 * 10;
  if (mQuiet || shown == mShown)
    return;
  mShown = shown;
  std::printf("%d%%\n", shown);
  std::fflush(stdout);
}

std::function<void(int, int64_t, int64_t)> Reporter::tileProgress(int passes)
{
  return [this, passes](int pass, int64_t done, int64_t tiles) {
    progress((pass - 1 + double(done) / double(std::max<int64_t>(1, tiles))) / std::max(1, passes));
  };
}

std::function<void(int, int64_t, int64_t)> Reporter::roundsProgress()
{
  return [this](int round, int64_t done, int64_t tiles) {
    progress(std::min(0.99, 0.1 * (round - 1 + double(done) / double(std::max<int64_t>(1, tiles)))));
  };
}

}  // namespace gpugeo::cli
