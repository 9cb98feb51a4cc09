// What the command-line program tells its user: log lines and progress. Only rank 0 speaks (the
// workers of a distributed run say nothing unless they fail). With --machine-readable, each line
// starts with a tag the QGIS algorithms read back into their feedback:
//   @progress 42.5     the whole run's progress, percent
//   @text <text>       what the run is doing now
//   @info <text>       a log line
//   @warning <text>    a warning
//   @error <text>      why the run failed (then the exit status is 1)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gpugeo::cli {

class Reporter
{
public:
  Reporter(bool machineReadable, bool quiet, bool speaks)
    : mMachine(machineReadable), mQuiet(quiet), mSpeaks(speaks)
  {
  }

  void info(const std::string& text) const;
  void warning(const std::string& text) const;
  void error(const std::string& text) const;  // on any rank
  // A new step (index from 0 of `steps`): its text, progress at its start.
  void step(const std::string& text, int index, int steps);
  // Progress within the current step (0 to 1).
  void progress(double fraction);
  // TiledOptions::onTile for a step of `passes` passes over the tiles, and for one of rounds whose
  // number is not known ahead (10% a round, up to 99%).
  std::function<void(int, int64_t, int64_t)> tileProgress(int passes);
  std::function<void(int, int64_t, int64_t)> roundsProgress();

private:
  void line(const char* tag, const std::string& text) const;
  bool mMachine, mQuiet, mSpeaks;
  int mStep = 0, mSteps = 1;
  int mShown = -1;  // the last percent shown (human-readable: in steps of 10)
};

}  // namespace gpugeo::cli
