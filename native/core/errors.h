// The exceptions the native core throws. The processing layer turns each into a
// QgsProcessingException (or, for DeviceOutOfMemory under DEVICE=Auto, a fall-back to the CPU).
#pragma once

#include <stdexcept>
#include <string>

namespace gpugeo {

struct Error : std::runtime_error
{
  using std::runtime_error::runtime_error;
};

// The input breaks a stated precondition; the message says which and how to fix it.
struct InvalidInput : Error
{
  using Error::Error;
};

// The caller asked to stop.
struct Canceled : Error
{
  Canceled() : Error("canceled") {}
};

// A file the run writes (an intermediate in the scratch folder, an output) could not be written in
// full: the disk is full or the file is not writable; the message names the file.
struct WriteFailed : Error
{
  using Error::Error;
};

// No usable CUDA device (not built with CUDA, no driver, no device, too old a device).
struct DeviceUnavailable : Error
{
  using Error::Error;
};

// The GPU ran out of memory even after the work was split into the smallest chunks.
struct DeviceOutOfMemory : Error
{
  using Error::Error;
};

// Any other failed CUDA call.
struct DeviceError : Error
{
  using Error::Error;
};

}  // namespace gpugeo
