// How a long native call talks back to its caller: cancel requests and progress.
#pragma once

#include <functional>

namespace gpugeo {

struct RunControl
{
  // Polled from worker threads between small work items (well under a second apart); must be
  // thread-safe. Empty: never canceled.
  std::function<bool()> canceled;
  // Called from the calling thread only, with the finished fraction (0..1) of the current call.
  std::function<void(double)> progress;

  bool isCanceled() const { return canceled && canceled(); }
  void report(double fraction) const
  {
    if (progress)
      progress(fraction);
  }
};

}  // namespace gpugeo
