// How a long native call learns that its caller wants it to stop. (Progress is the caller's: it
// calls the native core in bands and reports after each.)
#pragma once

#include <functional>

namespace gpugeo {

struct RunControl
{
  // Polled from worker threads between small work items (well under a second apart); must be
  // thread-safe. Empty: never canceled.
  std::function<bool()> canceled;

  bool isCanceled() const { return canceled && canceled(); }
};

}  // namespace gpugeo
