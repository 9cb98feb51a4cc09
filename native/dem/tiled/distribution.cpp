#include "dem/tiled/distribution.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "dem/dem.h"
#include "dem/tiled/tiling.h"

namespace gpugeo::dem::tiled {

namespace {

// The messages, by their first byte. Each then holds the step (uint32) it belongs to.
enum class Kind : uint8_t
{
  Ask = 1,     // worker: "I can take this many more tiles" (uint32)
  Tile = 2,    // coordinator: a tile (int64) and its `in` bytes
  NoMore = 3,  // coordinator: the pass has no more tiles for you
  Result = 4,  // worker: a tile, its `out` bytes and its writes
  Failed = 5,  // worker: a tile (-1: outside a tile), the error's kind and text
  Share = 6,   // coordinator: the state shared between passes
  Abort = 7,   // coordinator: the run failed (the reason)
  End = 8,     // coordinator: the run succeeded
  Word = 9,    // worker: its answer (uint8) to everyWorker()
};

// Errors travel as a code and their text, and are thrown again as the same type.
enum class ErrorCode : uint8_t
{
  Other,
  Invalid,
  Looped,
  Write,
  NoDevice,
  DeviceMemory,
  Device,
  Canceled,
  Stopped
};

ErrorCode codeOf(const std::exception& e)
{
  if (dynamic_cast<const LoopedDirections*>(&e))
    return ErrorCode::Looped;
  if (dynamic_cast<const InvalidInput*>(&e))
    return ErrorCode::Invalid;
  if (dynamic_cast<const WriteFailed*>(&e))
    return ErrorCode::Write;
  if (dynamic_cast<const DeviceUnavailable*>(&e))
    return ErrorCode::NoDevice;
  if (dynamic_cast<const DeviceOutOfMemory*>(&e))
    return ErrorCode::DeviceMemory;
  if (dynamic_cast<const DeviceError*>(&e))
    return ErrorCode::Device;
  if (dynamic_cast<const Canceled*>(&e))
    return ErrorCode::Canceled;
  if (dynamic_cast<const RunStopped*>(&e))
    return ErrorCode::Stopped;
  return ErrorCode::Other;
}

[[noreturn]] void throwAs(ErrorCode code, const std::string& text)
{
  switch (code)
  {
    case ErrorCode::Looped:
      throw LoopedDirections(text);
    case ErrorCode::Invalid:
      throw InvalidInput(text);
    case ErrorCode::Write:
      throw WriteFailed(text);
    case ErrorCode::NoDevice:
      throw DeviceUnavailable(text);
    case ErrorCode::DeviceMemory:
      throw DeviceOutOfMemory(text);
    case ErrorCode::Device:
      throw DeviceError(text);
    case ErrorCode::Stopped:
      throw RunStopped(text);
    case ErrorCode::Canceled:
    case ErrorCode::Other:
      break;
  }
  throw Error(text);
}

Archive header(Kind kind, uint32_t step)
{
  Archive a;
  uint8_t k = uint8_t(kind);
  a.value(k);
  a.value(step);
  return a;
}

struct Header
{
  Kind kind;
  uint32_t step;
};

Header readHeader(Archive& a)
{
  uint8_t k = 0;
  uint32_t step = 0;
  a.value(k);
  a.value(step);
  return Header{Kind(k), step};
}

// A worker's Failed message (after its header) thrown again as its error, naming the rank and, where
// it came from a tile, the tile.
[[noreturn]] void throwFailure(Archive& a, int from, const std::function<std::string(int64_t)>& describe)
{
  int64_t tile = -1;
  uint8_t code = 0;
  std::string text;
  a.value(tile);
  a.value(code);
  a.string(text);
  const std::string where = tile >= 0 && describe ? "rank " + std::to_string(from) + ", " + describe(tile)
                                                  : "rank " + std::to_string(from);
  throwAs(ErrorCode(code), where + ": " + text);
}

thread_local std::vector<Cluster::Write>* tCurrentWrites = nullptr;

// A written window's cells lie in the message at this alignment: the coordinator's sink reads them in
// place (as int64 or double).
constexpr std::size_t kWriteAlignment = 16;

}  // namespace

// --- ThreadTransports --------------------------------------------------------------------------------

struct ThreadTransports::Shared
{
  struct Box
  {
    std::mutex lock;
    std::condition_variable arrived;
    std::deque<std::pair<int, std::vector<char>>> messages;
  };
  explicit Shared(int ranks) : boxes(std::size_t(ranks)) {}
  std::vector<Box> boxes;
};

class ThreadTransports::Endpoint : public Transport
{
public:
  Endpoint(std::shared_ptr<Shared> shared, int rank) : mShared(std::move(shared)), mRank(rank) {}
  int rank() const override { return mRank; }
  int size() const override { return int(mShared->boxes.size()); }
  void send(int to, std::vector<char> message) override
  {
    Shared::Box& box = mShared->boxes.at(std::size_t(to));
    {
      std::lock_guard<std::mutex> lock(box.lock);
      box.messages.emplace_back(mRank, std::move(message));
    }
    box.arrived.notify_one();
  }
  bool receive(int& from, std::vector<char>& message, std::chrono::milliseconds wait) override
  {
    Shared::Box& box = mShared->boxes[std::size_t(mRank)];
    std::unique_lock<std::mutex> lock(box.lock);
    if (!box.arrived.wait_for(lock, wait, [&] { return !box.messages.empty(); }))
      return false;
    from = box.messages.front().first;
    message = std::move(box.messages.front().second);
    box.messages.pop_front();
    return true;
  }

private:
  std::shared_ptr<Shared> mShared;
  int mRank;
};

ThreadTransports::ThreadTransports(int ranks) : mShared(std::make_shared<Shared>(ranks))
{
  for (int r = 0; r < ranks; ++r)
    mEndpoints.push_back(std::make_unique<Endpoint>(mShared, r));
}

ThreadTransports::~ThreadTransports() = default;

Transport& ThreadTransports::endpoint(int rank)
{
  return *mEndpoints.at(std::size_t(rank));
}

// --- Cluster ----------------------------------------------------------------------------------------

Cluster::Cluster(Transport& transport, int threads) : mTransport(transport), mThreads(std::max(1, threads)) {}

Cluster::~Cluster() = default;

void Cluster::addWrite(Write write)
{
  if (!tCurrentWrites)
    throw Error("a remote sink was written outside a tile's work");
  tCurrentWrites->push_back(std::move(write));
}

void Cluster::pass(const std::vector<int64_t>& tiles, const TileTraffic& traffic,
                   const std::function<void(int64_t)>& body, const std::function<void(int64_t)>& onResult,
                   const std::function<std::string(int64_t)>& describe, const RunControl& control)
{
  ++mStep;
  if (coordinator())
    dispatch(tiles, traffic, onResult, describe, control);
  else
    serve(traffic, body);
}

void Cluster::dispatch(const std::vector<int64_t>& tiles, const TileTraffic& traffic,
                       const std::function<void(int64_t)>& onResult,
                       const std::function<std::string(int64_t)>& describe, const RunControl& control)
{
  std::vector<uint8_t> told(std::size_t(size()), 0);
  int64_t results = 0;
  mInFlight.clear();
  // Each tile waits in the queue of the rank that ran it last (what a rank keeps of a tile between
  // passes, the flats' state on its GPU, serves it again), the others in a common queue; a rank whose
  // queue is empty takes from the common one, then from the longest other queue's end.
  std::vector<std::deque<int64_t>> queues(static_cast<std::size_t>(size()));  // [0]: the common queue
  for (const int64_t tile : tiles)
  {
    const auto home = mHome.find(tile);
    queues[home != mHome.end() ? std::size_t(home->second) : 0].push_back(tile);
  }
  std::size_t left = tiles.size();
  const auto nextFor = [&](int from) {
    std::deque<int64_t>* q = &queues[std::size_t(from)];
    if (q->empty())
      q = &queues[0];
    bool back = false;
    if (q->empty())
    {
      for (std::deque<int64_t>& other : queues)
        if (other.size() > q->size())
          q = &other;
      back = true;
    }
    const int64_t tile = back ? q->back() : q->front();
    if (back)
      q->pop_back();
    else
      q->pop_front();
    --left;
    return tile;
  };
  // Hands out up to `wanted` tiles to `from` (or tells it that none are left).
  const auto give = [&](int from, uint32_t wanted) {
    for (; wanted > 0; --wanted)
    {
      if (left == 0)
      {
        if (!told[std::size_t(from)])
          mTransport.send(from, header(Kind::NoMore, mStep).bytes());
        told[std::size_t(from)] = 1;
        return;
      }
      int64_t tile = nextFor(from);
      Archive m = header(Kind::Tile, mStep);
      m.value(tile);
      Archive in;
      if (traffic.in)
        traffic.in(tile, in);
      m.vector(in.bytes());
      mTransport.send(from, std::move(m.bytes()));
      mInFlight[tile] = from;
    }
  };
  // Workers that left the last pass early asked for this one's tiles before it began.
  std::vector<EarlyAsk> early;
  early.swap(mEarlyAsks);
  for (const EarlyAsk& ask : early)
    if (ask.step == mStep)
      give(ask.from, ask.wanted);
    else if (ask.step > mStep)
      mEarlyAsks.push_back(ask);
  while (results < int64_t(tiles.size()))
  {
    if (control.isCanceled())
      throw Canceled();
    int from = -1;
    std::vector<char> message;
    if (!mTransport.receive(from, message, std::chrono::milliseconds(50)))
      continue;
    Archive a(message.data(), message.size());
    const Header h = readHeader(a);
    if (h.kind == Kind::Failed)
      throwFailure(a, from, describe);
    if (h.step != mStep)
    {
      // An ask of an earlier pass comes late and is void; one of a later pass comes from a worker that
      // left this pass (it had no tile left) and waits for that pass to begin.
      if (h.kind == Kind::Ask && h.step > mStep)
      {
        uint32_t wanted = 0;
        a.value(wanted);
        mEarlyAsks.push_back(EarlyAsk{h.step, from, wanted});
      }
      if (h.kind == Kind::Ask)
        continue;
      if (h.kind == Kind::Word && h.step > mStep)
      {
        // A worker that left this pass gave its word for a later everyWorker().
        uint8_t word = 0;
        a.value(word);
        mEarlyWords.push_back(EarlyWord{h.step, word});
        continue;
      }
      throw Error("rank " + std::to_string(from) + " sent a message of another step (the ranks disagree)");
    }
    if (h.kind == Kind::Ask)
    {
      uint32_t wanted = 0;
      a.value(wanted);
      give(from, wanted);
    }
    else if (h.kind == Kind::Result)
    {
      int64_t tile = -1;
      a.value(tile);
      int64_t outBytes = 0;
      a.value(outBytes);
      if (traffic.out)
      {
        Archive out(a.position(), std::size_t(outBytes));
        traffic.out(tile, out);
      }
      a.skip(std::size_t(outBytes));
      applyWrites(a);
      mInFlight.erase(tile);
      mHome[tile] = from;
      ++results;
      if (onResult)
        onResult(results);
    }
    else
      throw Error("rank " + std::to_string(from) + " sent an unexpected message during a pass");
  }
  for (int r = 1; r < size(); ++r)
    if (!told[std::size_t(r)])
      mTransport.send(r, header(Kind::NoMore, mStep).bytes());
}

void Cluster::applyWrites(Archive& a)
{
  int64_t count = 0;
  a.value(count);
  for (int64_t w = 0; w < count; ++w)
  {
    int32_t id = 0;
    Window window;
    int64_t cellBytes = 0;
    a.value(id);
    a.value(window);
    a.value(cellBytes);
    a.align(kWriteAlignment);
    const auto sink = mSinks.find(id);
    if (sink == mSinks.end() || int64_t(sink->second.cellBytes) != cellBytes)
      throw Error("a worker wrote to an output the coordinator does not have (the ranks disagree)");
    const std::size_t bytes = std::size_t(window.cells() * cellBytes);
    if (a.remaining() < bytes)
      throw Error("a message between the ranks ended early");
    sink->second.write(window, a.position());
    a.skip(bytes);
  }
}

void Cluster::serve(const TileTraffic& traffic, const std::function<void(int64_t)>& body)
{
  struct Job
  {
    int64_t tile;
    std::vector<char> in;
  };
  std::mutex lock;
  std::condition_variable ready, finishedOne;
  std::deque<Job> todo;
  std::deque<std::vector<char>> done;
  bool stop = false;
  const uint32_t step = mStep;

  // One tile: its `in` loaded, its body run with its writes collected, its result (or error) made.
  const auto run = [&](Job& job) {
    std::vector<Write> writes;
    try
    {
      if (traffic.in)
      {
        Archive in(job.in.data(), job.in.size());
        traffic.in(job.tile, in);
      }
      tCurrentWrites = &writes;
      body(job.tile);
      tCurrentWrites = nullptr;
      Archive m = header(Kind::Result, step);
      m.value(job.tile);
      Archive out;
      if (traffic.out)
        traffic.out(job.tile, out);
      m.vector(out.bytes());
      int64_t count = int64_t(writes.size());
      m.value(count);
      for (Write& w : writes)
      {
        int32_t id = w.id;
        int64_t cellBytes = w.window.cells() > 0 ? int64_t(w.bytes.size()) / w.window.cells() : 0;
        m.value(id);
        m.value(w.window);
        m.value(cellBytes);
        m.align(kWriteAlignment);
        m.span(w.bytes.data(), int64_t(w.bytes.size()));
      }
      return std::move(m.bytes());
    }
    catch (const std::exception& e)
    {
      tCurrentWrites = nullptr;
      Archive m = header(Kind::Failed, step);
      m.value(job.tile);
      uint8_t code = uint8_t(codeOf(e));
      m.value(code);
      std::string text = e.what();
      m.string(text);
      return std::move(m.bytes());
    }
  };
  const auto work = [&] {
    for (;;)
    {
      Job job;
      {
        std::unique_lock<std::mutex> hold(lock);
        ready.wait(hold, [&] { return stop || !todo.empty(); });
        if (stop)
          return;
        job = std::move(todo.front());
        todo.pop_front();
      }
      std::vector<char> message = run(job);
      {
        std::lock_guard<std::mutex> hold(lock);
        done.push_back(std::move(message));
      }
      finishedOne.notify_one();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < mThreads; ++t)
    try
    {
      threads.emplace_back(work);
    }
    catch (const std::system_error&)
    {
      break;  // the threads that started do the work (none: the main thread below)
    }
  const auto stopThreads = [&] {
    {
      std::lock_guard<std::mutex> hold(lock);
      stop = true;
    }
    ready.notify_all();
    for (std::thread& t : threads)
      t.join();
  };

  {
    // Twice as many tiles as threads: each thread finds its next tile waiting when it ends one, so that
    // the messages' round trips hide behind the work.
    Archive ask = header(Kind::Ask, step);
    uint32_t wanted = uint32_t(2 * std::max<std::size_t>(1, threads.size()));
    ask.value(wanted);
    mTransport.send(0, std::move(ask.bytes()));
  }
  int64_t inFlight = 0;
  bool noMore = false;
  try
  {
    for (;;)
    {
      std::deque<std::vector<char>> finished;
      {
        std::lock_guard<std::mutex> hold(lock);
        finished.swap(done);
        if (threads.empty() && !todo.empty())
        {
          Job job = std::move(todo.front());
          todo.pop_front();
          finished.push_back(run(job));
        }
      }
      for (std::vector<char>& message : finished)
      {
        mTransport.send(0, std::move(message));
        --inFlight;
        if (!noMore)
        {
          Archive ask = header(Kind::Ask, step);
          uint32_t one = 1;
          ask.value(one);
          mTransport.send(0, std::move(ask.bytes()));
        }
      }
      if (noMore && inFlight == 0)
        break;
      // A message now if one is there; else, while every thread has a tile, wait for one of them to
      // end (its result goes out at once) but look for messages again within half a millisecond; with
      // a thread idle, wait for a message.
      int from = -1;
      std::vector<char> message;
      if (!mTransport.receive(from, message, std::chrono::milliseconds(0)))
      {
        std::unique_lock<std::mutex> hold(lock);
        if (inFlight >= int64_t(threads.size()) && !threads.empty())
          finishedOne.wait_for(hold, std::chrono::microseconds(500), [&] { return !done.empty(); });
        else
        {
          hold.unlock();
          if (!mTransport.receive(from, message, std::chrono::milliseconds(1)))
            continue;
        }
        if (message.empty())
          continue;
      }
      Archive a(message.data(), message.size());
      const Header h = readHeader(a);
      if (h.kind == Kind::Abort)
      {
        std::string why;
        a.string(why);
        throw RunStopped("stopped by rank 0: " + why);
      }
      if (h.step != step)
        throw Error("rank 0 sent a message of another step (the ranks disagree)");
      if (h.kind == Kind::Tile)
      {
        Job job;
        a.value(job.tile);
        a.vector(job.in);
        ++inFlight;
        {
          std::lock_guard<std::mutex> hold(lock);
          todo.push_back(std::move(job));
        }
        ready.notify_one();
      }
      else if (h.kind == Kind::NoMore)
        noMore = true;
      else
        throw Error("rank 0 sent an unexpected message during a pass");
    }
  }
  catch (...)
  {
    stopThreads();
    throw;
  }
  stopThreads();
}

std::vector<char> Cluster::waitFromCoordinator()
{
  for (;;)
  {
    int from = -1;
    std::vector<char> message;
    if (!mTransport.receive(from, message, std::chrono::milliseconds(50)))
      continue;
    Archive a(message.data(), message.size());
    const Header h = readHeader(a);
    if (h.kind == Kind::Abort)
    {
      std::string why;
      a.string(why);
      throw RunStopped("stopped by rank 0: " + why);
    }
    return message;
  }
}

void Cluster::share(const std::function<void(Archive&)>& visit)
{
  ++mStep;
  if (!distributed())
    return;
  if (coordinator())
  {
    Archive m = header(Kind::Share, mStep);
    visit(m);
    for (int r = 1; r < size(); ++r)
      mTransport.send(r, m.bytes());
    return;
  }
  const std::vector<char> message = waitFromCoordinator();
  Archive a(message.data(), message.size());
  const Header h = readHeader(a);
  if (h.kind != Kind::Share || h.step != mStep)
    throw Error("rank 0 sent an unexpected message where its shared state was due (the ranks disagree)");
  visit(a);
}

bool Cluster::everyWorker(bool mine, const RunControl& control)
{
  if (!distributed())
  {
    ++mStep;
    return mine;
  }
  uint8_t all = 1;
  if (coordinator())
  {
    const uint32_t step = mStep + 1;
    int heard = 0;
    // Words that came during the last pass, from workers that had left it.
    for (const EarlyWord& early : mEarlyWords)
      if (early.step == step)
      {
        all = all && early.word;
        ++heard;
      }
    mEarlyWords.clear();
    while (heard < size() - 1)
    {
      if (control.isCanceled())
        throw Canceled();
      int from = -1;
      std::vector<char> message;
      if (!mTransport.receive(from, message, std::chrono::milliseconds(50)))
        continue;
      Archive a(message.data(), message.size());
      const Header h = readHeader(a);
      if (h.kind == Kind::Failed)
        throwFailure(a, from, nullptr);
      if (h.kind == Kind::Ask && h.step < step)
        continue;  // a late ask of a pass that is over
      if (h.kind != Kind::Word || h.step != step)
        throw Error("rank " + std::to_string(from) + " sent an unexpected message where its word was due (the ranks disagree)");
      uint8_t word = 0;
      a.value(word);
      all = all && word;
      ++heard;
    }
  }
  else
  {
    Archive m = header(Kind::Word, mStep + 1);
    uint8_t word = mine ? 1 : 0;
    m.value(word);
    mTransport.send(0, std::move(m.bytes()));
  }
  // The answer goes back as shared state (this call's step).
  share([&](Archive& a) { a.value(all); });
  return all != 0;
}

void Cluster::finish()
{
  if (!coordinator() || mEnded)
    return;
  mEnded = true;
  for (int r = 1; r < size(); ++r)
    mTransport.send(r, header(Kind::End, mStep).bytes());
}

void Cluster::abort(const std::string& why)
{
  if (!coordinator() || mEnded)
    return;
  mEnded = true;
  for (int r = 1; r < size(); ++r)
  {
    Archive m = header(Kind::Abort, mStep);
    std::string text = why;
    m.string(text);
    mTransport.send(r, std::move(m.bytes()));
  }
}

void Cluster::fail(const std::exception& error)
{
  if (coordinator())
    return;
  Archive m = header(Kind::Failed, mStep);
  int64_t tile = -1;
  m.value(tile);
  uint8_t code = uint8_t(codeOf(error));
  m.value(code);
  std::string text = error.what();
  m.string(text);
  mTransport.send(0, std::move(m.bytes()));
}

void Cluster::awaitEnd()
{
  if (coordinator())
    return;
  for (;;)
  {
    const std::vector<char> message = waitFromCoordinator();
    Archive a(message.data(), message.size());
    if (readHeader(a).kind == Kind::End)
      return;
    // Anything else (a late word of a pass this worker left on an error) waits for the end.
  }
}

std::string Cluster::inFlight(const std::function<std::string(int64_t)>& describe) const
{
  std::string text;
  for (const auto& [tile, rank] : mInFlight)
    text += (text.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) + ": " + describe(tile);
  return text;
}

// --- tiling.h's helpers for passes ------------------------------------------------------------------

namespace detail {

std::string describeTile(const TileLayout& layout, int64_t i)
{
  const Window t = layout.tile(i);
  return "tile " + std::to_string(i) + " (columns " + std::to_string(t.x0) + "-" + std::to_string(t.x0 + t.width - 1) +
         ", rows " + std::to_string(t.y0) + "-" + std::to_string(t.y0 + t.height - 1) + ")";
}

std::vector<int64_t> allTiles(const TileLayout& layout)
{
  std::vector<int64_t> tiles(std::size_t(layout.count()));
  for (int64_t i = 0; i < layout.count(); ++i)
    tiles[std::size_t(i)] = i;
  return tiles;
}

}  // namespace detail

}  // namespace gpugeo::dem::tiled
