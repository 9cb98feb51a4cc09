// The tiled DEM tools (tiled_dem.h) run by several processes together: Barnes's (2016, 2017) single
// producer and many consumers. Every process calls the same tool with the same arguments (SPMD);
// rank 0, the coordinator, holds the perimeters and the graphs, hands the tiles of each pass out
// from a work queue and writes the outputs; the other ranks, the workers, process the tiles they are
// given and send back what the pass keeps of each (its perimeter, links, counts) and the windows
// they write. The outputs are the single-process run's, bit for bit, for any number of ranks: each
// tile is computed by the same code from the same data, whichever rank takes it.
//
// The messages go through a Transport: MPI in the command-line tool, threads of one process in the
// tests (ThreadTransports). The native core needs no MPI.
//
// A tool keeps three rules for its passes to run distributed (tiling.h's forEachTile):
//  - a tile's body writes only that tile's slots of the pass's arrays, and reads what it needs of
//    other tiles only through TileTraffic::in (sent with the tile);
//  - what the coordinator needs after the pass goes back through TileTraffic::out;
//  - whatever the coordinator decides between passes and the next pass reads (the graph's solution,
//    whether another round is needed) reaches the workers through share().
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/errors.h"
#include "core/run_control.h"
#include "dem/tiled/raster_io.h"

namespace gpugeo::dem::tiled {

// Bytes written or read by one visitor: the same calls save a structure on one side and load it on
// the other (value, span, vector of trivially copyable types; strings).
class Archive
{
public:
  Archive() = default;  // saving into bytes()
  // Loading from `data`, which is aligned for any type (a new allocation's, as a message's bytes are).
  Archive(const char* data, std::size_t size) : mLoading(true), mBegin(data), mRead(data), mEnd(data + size) {}

  bool loading() const { return mLoading; }
  std::vector<char>& bytes() { return mBytes; }

  template <typename T>
  void value(T& v)
  {
    span(&v, 1);
  }
  template <typename T>
  void span(T* data, int64_t count)
  {
    static_assert(std::is_trivially_copyable_v<T>, "only trivially copyable types travel as bytes");
    const std::size_t bytes = std::size_t(count) * sizeof(T);
    if (bytes == 0)
      return;
    if (mLoading)
    {
      need(bytes);
      std::memcpy(static_cast<void*>(data), mRead, bytes);
      mRead += bytes;
    }
    else
    {
      const std::size_t at = mBytes.size();
      mBytes.resize(at + bytes);
      std::memcpy(mBytes.data() + at, static_cast<const void*>(data), bytes);
    }
  }
  template <typename T>
  void vector(std::vector<T>& v)
  {
    int64_t n = int64_t(v.size());
    value(n);
    if (mLoading)
      v.resize(std::size_t(n));
    span(v.data(), n);
  }
  void string(std::string& s)
  {
    int64_t n = int64_t(s.size());
    value(n);
    if (mLoading)
    {
      need(std::size_t(n));
      s.assign(mRead, std::size_t(n));
      mRead += n;
    }
    else
      mBytes.insert(mBytes.end(), s.begin(), s.end());
  }
  // Pads (saving) or skips (loading) to a multiple of `bytes` from the start: what follows may then be
  // read in place as values of that alignment (the windows a worker writes, handed to a sink as they
  // lie in the message).
  void align(std::size_t bytes)
  {
    if (mLoading)
      skip((bytes - std::size_t(mRead - mBegin) % bytes) % bytes);
    else
      mBytes.resize((mBytes.size() + bytes - 1) / bytes * bytes, 0);
  }
  // Loading: what is left unread.
  std::size_t remaining() const { return std::size_t(mEnd - mRead); }
  const char* position() const { return mRead; }
  void skip(std::size_t bytes)
  {
    need(bytes);
    mRead += bytes;
  }

private:
  void need(std::size_t bytes) const
  {
    if (std::size_t(mEnd - mRead) < bytes)
      throw Error("a message between the ranks ended early (the ranks run different versions or arguments?)");
  }
  bool mLoading = false;
  std::vector<char> mBytes;
  const char* mBegin = nullptr;
  const char* mRead = nullptr;
  const char* mEnd = nullptr;
};

// How the ranks reach each other. send() may be called from the rank's main thread only; messages
// between two ranks arrive in the order sent.
class Transport
{
public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void send(int to, std::vector<char> message) = 0;
  // The next message from any rank into `message` (its sender into `from`), waiting at most `wait`;
  // false when none came.
  virtual bool receive(int& from, std::vector<char>& message, std::chrono::milliseconds wait) = 0;
};

// Ranks as threads of one process (the tests): endpoint(r) is rank r's transport.
class ThreadTransports
{
public:
  explicit ThreadTransports(int ranks);
  ~ThreadTransports();
  Transport& endpoint(int rank);

private:
  struct Shared;
  class Endpoint;
  std::shared_ptr<Shared> mShared;
  std::vector<std::unique_ptr<Endpoint>> mEndpoints;
};

// A worker ended its run because the coordinator stopped it (an error elsewhere, a cancel).
struct RunStopped : Error
{
  using Error::Error;
};

// What travels with a tile of a pass, as Archive visitors of that tile: `in` saved by the coordinator
// and loaded by the worker before the tile's body runs, `out` saved by the worker after it and
// loaded by the coordinator. Either may be empty.
struct TileTraffic
{
  std::function<void(int64_t tile, Archive&)> in, out;
};

// One rank's part in a distributed run (TiledOptions::cluster). With one rank the tools run as
// without it.
class Cluster
{
public:
  // `threads`: the tiles a worker processes at once.
  Cluster(Transport& transport, int threads);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const { return mTransport.rank(); }
  int size() const { return mTransport.size(); }
  bool coordinator() const { return rank() == 0; }
  bool distributed() const { return size() > 1; }
  int threads() const { return mThreads; }

  // The coordinator: the sink that windows written to remoteSink(id) on the workers go to.
  template <typename T>
  void addSink(int id, RasterSink<T>& sink)
  {
    mSinks[id] = SinkEntry{sizeof(T), [&sink](const Window& w, const char* bytes) {
                             sink.write(w, reinterpret_cast<const T*>(bytes));
                           }};
  }
  // A worker: a sink whose windows, written within a tile's body, travel with the tile's result to
  // the coordinator's sink `id`.
  template <typename T>
  std::unique_ptr<RasterSink<T>> remoteSink(int id, int64_t width, int64_t height)
  {
    return std::make_unique<Remote<T>>(id, width, height);
  }

  // A pass over `tiles` (tile indices): the coordinator hands them out and calls onResult(done) after
  // each tile's result is loaded; a worker runs body(tile) on its threads until the coordinator says
  // the pass is over. Throws the first error of a tile (on the coordinator, naming the rank and the
  // tile), Canceled on a cancel (the coordinator's control; the workers are stopped), RunStopped on a
  // worker that the coordinator stopped.
  void pass(const std::vector<int64_t>& tiles, const TileTraffic& traffic, const std::function<void(int64_t)>& body,
            const std::function<void(int64_t done)>& onResult, const std::function<std::string(int64_t)>& describe,
            const RunControl& control);
  // The coordinator's state to every worker: visit saves it on the coordinator, loads it on workers.
  void share(const std::function<void(Archive&)>& visit);
  // Whether `mine` holds on every worker (the coordinator's own is not asked): each worker's word goes
  // to the coordinator, whose answer every rank returns. With one rank: `mine`. The coordinator
  // throws Canceled on a cancel while it waits.
  bool everyWorker(bool mine, const RunControl& control);

  // The end of a run: the coordinator tells the workers that it succeeded (finish) or failed
  // (abort, with the reason); a worker waits for that word (awaitEnd throws RunStopped on an abort).
  void finish();
  void abort(const std::string& why);
  void awaitEnd();
  // A worker's error outside a tile's work (opening a file, say): told to the coordinator, whose
  // current or next pass throws it, naming the rank. The worker then waits for the end (awaitEnd).
  void fail(const std::exception& error);
  // The coordinator: the tiles handed out and not yet done, with their ranks ("rank 2: tile 7 ..."),
  // for the message of a run that ends while they are out (a rank killed).
  std::string inFlight(const std::function<std::string(int64_t)>& describe) const;

  // Workers: the current tile's outbox (set while its body runs on this thread).
  struct Write
  {
    int id;
    Window window;
    std::vector<char> bytes;
  };

private:
  struct SinkEntry
  {
    std::size_t cellBytes = 0;
    std::function<void(const Window&, const char*)> write;
  };
  template <typename T>
  class Remote : public RasterSink<T>
  {
  public:
    Remote(int id, int64_t, int64_t) : mId(id) {}
    void write(const Window& window, const T* in) override
    {
      const char* bytes = reinterpret_cast<const char*>(in);
      addWrite(Write{mId, window, std::vector<char>(bytes, bytes + window.cells() * int64_t(sizeof(T)))});
    }

  private:
    int mId;
  };
  static void addWrite(Write write);

  void dispatch(const std::vector<int64_t>& tiles, const TileTraffic& traffic,
                const std::function<void(int64_t)>& onResult, const std::function<std::string(int64_t)>& describe,
                const RunControl& control);
  void serve(const TileTraffic& traffic, const std::function<void(int64_t)>& body);
  // The next message from rank 0; throws RunStopped on an abort.
  std::vector<char> waitFromCoordinator();
  void applyWrites(Archive& a);

  Transport& mTransport;
  int mThreads;
  uint32_t mStep = 0;  // passes and shares so far: every rank counts them alike
  std::map<int, SinkEntry> mSinks;
  std::map<int64_t, int> mInFlight;  // tile -> rank
  std::unordered_map<int64_t, int> mHome;  // tile -> the rank that ran it last
  struct EarlyAsk
  {
    uint32_t step;
    int from;
    uint32_t wanted;
  };
  std::vector<EarlyAsk> mEarlyAsks;  // asks of a pass not yet begun
  struct EarlyWord
  {
    uint32_t step;
    uint8_t word;
  };
  std::vector<EarlyWord> mEarlyWords;  // words for an everyWorker() not yet begun
  bool mEnded = false;
};

}  // namespace gpugeo::dem::tiled
