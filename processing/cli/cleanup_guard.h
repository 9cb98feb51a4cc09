// Rank 0's outputs in progress and its scratch folder, removed however the run ends, a killed rank 0
// included: mpiexec ends a job whose rank died with SIGTERM and, a second later, SIGKILL, which may
// come before rank 0 has cleaned up. A guardian process, forked when the program starts (before MPI
// and before any thread), holds the paths registered and not yet released, and removes them when the
// program ends, however it ends (the pipe between them closes). It ignores SIGTERM and SIGINT and
// sits in its own session, so that the signals that end the job do not end it.
#pragma once

#include <string>

namespace gpugeo::cli {

// In the process that will be rank 0 (or runs alone). Nothing happens where the fork fails.
void startCleanupGuard();
// A file (with its GDAL sidecars) or a folder to remove unless released.
void guardPath(const std::string& path);
// Kept (a finished output of a run that succeeded) or already removed.
void releasePath(const std::string& path);

}  // namespace gpugeo::cli
