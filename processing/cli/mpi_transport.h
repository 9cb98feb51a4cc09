// The distributed tiled runs' messages (dem/tiled/distribution.h) over MPI: Open MPI from Debian in
// practice, any MPI-3 library in principle. Only the rank's main thread calls MPI
// (MPI_THREAD_FUNNELED): the Cluster sends and receives there, its tile threads never do.
#pragma once

#include <chrono>
#include <list>
#include <vector>

#include <mpi.h>

#include "dem/tiled/distribution.h"

namespace gpugeo::cli {

// MPI_Init_thread on construction when the process was started by an MPI launcher (mpiexec, srun;
// its environment says so), MPI_Finalize on destruction; nothing otherwise, so that the program also
// runs alone without starting MPI's runtime.
class MpiSession
{
public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  bool active() const { return mActive; }
  // Ends every rank of the job at once (a failure that leaves no way to tell the others).
  [[noreturn]] void abortJob(int code);

private:
  bool mActive = false;
};

class MpiTransport : public dem::tiled::Transport
{
public:
  MpiTransport();
  ~MpiTransport() override;
  int rank() const override { return mRank; }
  int size() const override { return mSize; }
  void send(int to, std::vector<char> message) override;
  bool receive(int& from, std::vector<char>& message, std::chrono::milliseconds wait) override;
  // The rank among those on this host, their number, and whether rank 0 is one of them (for the GPU a
  // rank takes and the threads it uses).
  int localRank() const { return mLocalRank; }
  int localSize() const { return mLocalSize; }
  bool hostHoldsRankZero() const { return mHostHoldsRankZero; }

private:
  void completeSends(bool wait);
  int mRank = 0, mSize = 1, mLocalRank = 0, mLocalSize = 1;
  bool mHostHoldsRankZero = true;
  struct Pending
  {
    MPI_Request request;
    std::vector<char> bytes;
  };
  std::list<Pending> mPending;  // sends not yet complete, with their bytes
};

}  // namespace gpugeo::cli
