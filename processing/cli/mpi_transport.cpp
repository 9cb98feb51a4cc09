#include "cli/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/errors.h"

namespace gpugeo::cli {

namespace {

constexpr int kTag = 7;

// Whether an MPI launcher started this process: Open MPI's, PMIx's, MPICH's (Hydra) and Slurm's
// variables.
bool launchedByMpi()
{
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}

void check(int code, const char* what)
{
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(what) + " failed: " + std::string(text, std::size_t(length)));
}

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv)
{
  if (!launchedByMpi())
    return;
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (check()), not as the default abort of the whole job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  mActive = true;
}

MpiSession::~MpiSession()
{
  if (mActive)
    MPI_Finalize();
}

void MpiSession::abortJob(int code)
{
  if (mActive)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

MpiTransport::MpiTransport()
{
  check(MPI_Comm_rank(MPI_COMM_WORLD, &mRank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &mSize), "MPI_Comm_size");
  MPI_Comm local;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mRank, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  MPI_Comm_rank(local, &mLocalRank);
  MPI_Comm_size(local, &mLocalSize);
  int lowest = 0;
  check(MPI_Allreduce(&mRank, &lowest, 1, MPI_INT, MPI_MIN, local), "MPI_Allreduce");
  mHostHoldsRankZero = lowest == 0;
  MPI_Comm_free(&local);
}

MpiTransport::~MpiTransport()
{
  // Sends still in flight at the end (a worker's last words) complete before MPI_Finalize.
  try
  {
    completeSends(true);
  }
  catch (...)
  {
  }
}

void MpiTransport::completeSends(bool wait)
{
  for (auto it = mPending.begin(); it != mPending.end();)
  {
    int done = 0;
    if (wait)
    {
      MPI_Wait(&it->request, MPI_STATUS_IGNORE);
      done = 1;
    }
    else
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    it = done ? mPending.erase(it) : std::next(it);
  }
}

void MpiTransport::send(int to, std::vector<char> message)
{
  if (message.size() > std::size_t(INT_MAX))
    throw InvalidInput("a tile's message of " + std::to_string(message.size()) +
                       " bytes is too large for MPI; use smaller tiles");
  completeSends(false);
  mPending.push_back(Pending{MPI_REQUEST_NULL, std::move(message)});
  Pending& p = mPending.back();
  check(MPI_Isend(p.bytes.data(), int(p.bytes.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD, &p.request), "MPI_Isend");
}

bool MpiTransport::receive(int& from, std::vector<char>& message, std::chrono::milliseconds wait)
{
  const auto until = std::chrono::steady_clock::now() + wait;
  // Polled, with pauses that grow while nothing comes (50 to 250 us): a waiting rank leaves its core
  // to the others (ranks oversubscribing a host's cores, a worker's tile threads).
  auto pause = std::chrono::microseconds(50);
  for (;;)
  {
    completeSends(false);
    int ready = 0;
    MPI_Status status;
    check(MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &ready, &status), "MPI_Iprobe");
    if (ready)
    {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      message.resize(std::size_t(count));
      check(MPI_Recv(message.data(), count, MPI_BYTE, status.MPI_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
      from = status.MPI_SOURCE;
      return true;
    }
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(250));
  }
}

}  // namespace gpugeo::cli
