// How the tiled DEM tools (tiled_dem.h) take and give rasters: window by window, never whole. The
// native core keeps no GDAL: the QGIS side reads and writes GDAL datasets behind these interfaces,
// the tests and the benchmarks use rasters in memory or in raw files.
//
// A window is [x0, x0 + w) x [y0, y0 + h) of a width x height raster, row-major, row 0 at the top;
// the tools ask only for windows inside the raster. read() and write() are called from several
// threads at once (one tile each): an implementation that cannot take that serialises them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.h"

namespace gpugeo::dem::tiled {

struct Window
{
  int64_t x0 = 0, y0 = 0, width = 0, height = 0;
  int64_t cells() const { return width * height; }
  bool contains(int64_t x, int64_t y) const { return x >= x0 && y >= y0 && x < x0 + width && y < y0 + height; }
};

template <typename T>
class RasterSource
{
public:
  virtual ~RasterSource() = default;
  virtual int64_t width() const = 0;
  virtual int64_t height() const = 0;
  // The window's cells into `out` (window.cells() of them).
  virtual void read(const Window& window, T* out) const = 0;
  // The same with the window's rows `stride` cells apart in `out` (stride >= window.width): a tile
  // read straight into its place inside a larger array. By default through a copy; the rasters in
  // memory and in raw files read in place.
  virtual void readStrided(const Window& window, T* out, int64_t stride) const
  {
    if (stride == window.width)
    {
      read(window, out);
      return;
    }
    std::vector<T> cells(std::size_t(window.cells()));
    read(window, cells.data());
    for (int64_t y = 0; y < window.height; ++y)
      std::copy(cells.begin() + y * window.width, cells.begin() + (y + 1) * window.width, out + y * stride);
  }
};

template <typename T>
class RasterSink
{
public:
  virtual ~RasterSink() = default;
  // The window's cells from `in`. Each cell is written once.
  virtual void write(const Window& window, const T* in) = 0;
};

// A sink that keeps nothing (an output nobody asked for).
template <typename T>
class DiscardSink : public RasterSink<T>
{
public:
  void write(const Window&, const T*) override {}
};

// A raster held in memory (the tests' in-memory runs, and the outputs the benchmarks keep).
template <typename T>
class MemoryRaster : public RasterSource<T>, public RasterSink<T>
{
public:
  MemoryRaster(int64_t width, int64_t height, T fill = T())
    : mWidth(width), mHeight(height), mCells(std::size_t(width * height), fill)
  {
  }
  MemoryRaster(int64_t width, int64_t height, std::vector<T> cells)
    : mWidth(width), mHeight(height), mCells(std::move(cells))
  {
  }
  int64_t width() const override { return mWidth; }
  int64_t height() const override { return mHeight; }
  void read(const Window& window, T* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, T* out, int64_t stride) const override
  {
    for (int64_t y = 0; y < window.height; ++y)
    {
      const T* row = mCells.data() + (window.y0 + y) * mWidth + window.x0;
      std::copy(row, row + window.width, out + y * stride);
    }
  }
  void write(const Window& window, const T* in) override
  {
    for (int64_t y = 0; y < window.height; ++y)
      std::copy(in + y * window.width, in + (y + 1) * window.width,
                mCells.data() + (window.y0 + y) * mWidth + window.x0);
  }
  const std::vector<T>& cells() const { return mCells; }

private:
  int64_t mWidth, mHeight;
  std::vector<T> mCells;
};

// Writes each window to a first sink and, where given, to a second (a scratch raster and an output).
template <typename T>
class TeeSink : public RasterSink<T>
{
public:
  TeeSink(RasterSink<T>& first, RasterSink<T>* second) : mFirst(first), mSecond(second) {}
  void write(const Window& window, const T* in) override
  {
    mFirst.write(window, in);
    if (mSecond)
      mSecond->write(window, in);
  }

private:
  RasterSink<T>& mFirst;
  RasterSink<T>* mSecond;
};

// A folder for a run's intermediate rasters, removed (with all it holds) when the object goes: on
// success, on an error and on a cancel alike. Created under `parent` with a unique name.
class ScratchFolder
{
public:
  explicit ScratchFolder(const std::string& parent);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return mPath; }
  // Bytes written into it so far (by RawFileRaster).
  int64_t bytes() const;

private:
  std::string mPath;
};

namespace detail {
// Throws InvalidInput naming `path` unless the window lies within a raster of width x height cells.
void checkWindow(const Window& window, int64_t width, int64_t height, const std::string& path);
}  // namespace detail

// A raster of T in a raw file (row-major, no header): the intermediate rasters of a tiled chain and
// the benchmarks' inputs. Reads and writes with pread/pwrite (thread-safe without a lock). A write
// that the disk cannot take throws WriteFailed naming the file.
class RawFile
{
public:
  // Create: a new file of `bytes` (sparse until written); Read: an existing one, read only; Update: an
  // existing one, read and written, opened when first read or written (a worker of a distributed run
  // using the coordinator's file: it opens it only within a pass, while the file surely exists).
  enum class Mode
  {
    Create,
    Read,
    Update
  };
  RawFile(const std::string& path, int64_t bytes, Mode mode);
  ~RawFile();
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;
  void readAt(int64_t offset, void* out, int64_t bytes) const;
  void writeAt(int64_t offset, const void* in, int64_t bytes);
  const std::string& path() const { return mPath; }

private:
  void open(Mode mode, int64_t bytes);
  int fd() const;

  std::string mPath;
  Mode mMode;
  mutable int mFd = -1;
  mutable std::once_flag mOpened;
};

template <typename T>
class RawFileRaster : public RasterSource<T>, public RasterSink<T>
{
public:
  // create: a new file of width x height cells (sparse until written); else an existing one, read only.
  RawFileRaster(const std::string& path, int64_t width, int64_t height, bool create = true)
    : RawFileRaster(path, width, height, create ? RawFile::Mode::Create : RawFile::Mode::Read)
  {
  }
  // bandWidth > 0 and < width: the raster in bands of that many columns, each its own file (path.0,
  // path.1 ...) holding its columns of every row: tiles side by side then write to different files
  // (a file system may take one write to a file at a time, as tmpfs does).
  RawFileRaster(const std::string& path, int64_t width, int64_t height, RawFile::Mode mode, int64_t bandWidth = 0)
    : mWidth(width), mHeight(height), mBand(bandWidth > 0 && bandWidth < width ? bandWidth : width)
  {
    const int64_t bands = mBand > 0 ? (width + mBand - 1) / mBand : 1;
    for (int64_t b = 0; b < bands; ++b)
      mFiles.push_back(std::make_unique<RawFile>(bands == 1 ? path : path + "." + std::to_string(b),
                                                 bandCells(b) * height * int64_t(sizeof(T)), mode));
  }
  int64_t width() const override { return mWidth; }
  int64_t height() const override { return mHeight; }
  void read(const Window& window, T* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, T* out, int64_t stride) const override
  {
    detail::checkWindow(window, mWidth, mHeight, mFiles.front()->path());
    for (int64_t y = 0; y < window.height; ++y)
      forPieces(window, y, [&](RawFile& file, int64_t offset, int64_t x, int64_t cells) {
        file.readAt(offset, out + y * stride + x, cells * int64_t(sizeof(T)));
      });
  }
  void write(const Window& window, const T* in) override
  {
    detail::checkWindow(window, mWidth, mHeight, mFiles.front()->path());
    for (int64_t y = 0; y < window.height; ++y)
      forPieces(window, y, [&](RawFile& file, int64_t offset, int64_t x, int64_t cells) {
        file.writeAt(offset, in + y * window.width + x, cells * int64_t(sizeof(T)));
      });
  }

private:
  int64_t bandCells(int64_t b) const { return std::min(mBand, mWidth - b * mBand); }
  // Row y of the window, a piece per band it crosses: (file, byte offset, first cell in the window's
  // row, cells).
  template <typename Piece>
  void forPieces(const Window& window, int64_t y, Piece piece) const
  {
    const int64_t row = window.y0 + y;
    for (int64_t x = window.x0; x < window.x0 + window.width;)
    {
      const int64_t b = mBand > 0 ? x / mBand : 0;
      const int64_t inBand = x - b * mBand, w = bandCells(b);
      const int64_t cells = std::min(w - inBand, window.x0 + window.width - x);
      piece(*mFiles[std::size_t(b)], (row * w + inBand) * int64_t(sizeof(T)), x - window.x0, cells);
      x += cells;
    }
  }
  int64_t mWidth, mHeight, mBand;
  std::vector<std::unique_ptr<RawFile>> mFiles;
};

// A file mapped into memory (MAP_SHARED): host memory that the processes of one host share when the
// file lies in /dev/shm, read and written by copying, without a system call per row. Create: a new
// file of `bytes`, its space reserved at once (posix_fallocate), so that a full disk is a WriteFailed
// here and never a fault at a later write; Update: an existing one (the coordinator's), mapped when
// first used; Read: an existing one, mapped read only (writing to it throws).
class MappedFile
{
public:
  MappedFile(const std::string& path, int64_t bytes, RawFile::Mode mode);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  char* data() const;
  int64_t bytes() const { return mBytes; }
  bool writable() const { return mMode != RawFile::Mode::Read; }
  const std::string& path() const { return mPath; }

private:
  void map();

  std::string mPath;
  int64_t mBytes;
  RawFile::Mode mMode;
  mutable char* mData = nullptr;
  mutable std::once_flag mMapped;
};

// A raster of T in a MappedFile (row-major, no header, as RawFileRaster's): the benchmark's rasters
// shared by the ranks of one host in its memory.
template <typename T>
class MappedRaster : public RasterSource<T>, public RasterSink<T>
{
public:
  MappedRaster(const std::string& path, int64_t width, int64_t height, RawFile::Mode mode)
    : mWidth(width), mHeight(height), mFile(path, width * height * int64_t(sizeof(T)), mode)
  {
  }
  int64_t width() const override { return mWidth; }
  int64_t height() const override { return mHeight; }
  void read(const Window& window, T* out) const override { readStrided(window, out, window.width); }
  void readStrided(const Window& window, T* out, int64_t stride) const override
  {
    detail::checkWindow(window, mWidth, mHeight, mFile.path());
    const T* cells = reinterpret_cast<const T*>(mFile.data());
    for (int64_t y = 0; y < window.height; ++y)
      std::copy_n(cells + (window.y0 + y) * mWidth + window.x0, window.width, out + y * stride);
  }
  void write(const Window& window, const T* in) override
  {
    detail::checkWindow(window, mWidth, mHeight, mFile.path());
    if (!mFile.writable())
      throw WriteFailed(mFile.path() + " is open for reading only");
    T* cells = reinterpret_cast<T*>(mFile.data());
    for (int64_t y = 0; y < window.height; ++y)
      std::copy_n(in + y * window.width, window.width, cells + (window.y0 + y) * mWidth + window.x0);
  }

private:
  int64_t mWidth, mHeight;
  MappedFile mFile;
};

}  // namespace gpugeo::dem::tiled
