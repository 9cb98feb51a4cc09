#include "dem/tiled/raster_io.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/errors.h"

namespace gpugeo::dem::tiled {

namespace {

std::string systemError(int code)
{
  return std::generic_category().message(code);
}

}  // namespace

ScratchFolder::ScratchFolder(const std::string& parent)
{
  std::string pattern = (parent.empty() ? std::string("/tmp") : parent) + "/gpugeo-scratch-XXXXXX";
  if (!mkdtemp(pattern.data()))
    throw WriteFailed("could not create a scratch folder in " + parent + ": " + systemError(errno));
  mPath = pattern;
}

ScratchFolder::~ScratchFolder()
{
  std::error_code ignored;
  std::filesystem::remove_all(mPath, ignored);
}

int64_t ScratchFolder::bytes() const
{
  int64_t total = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(mPath, error))
  {
    struct stat info;
    if (::stat(entry.path().c_str(), &info) == 0)
      total += int64_t(info.st_blocks) * 512;
  }
  return total;
}

RawFile::RawFile(const std::string& path, int64_t bytes, Mode mode) : mPath(path), mMode(mode)
{
  if (mode != Mode::Update)
    open(mode, bytes);
}

void RawFile::open(Mode mode, int64_t bytes)
{
  const bool create = mode == Mode::Create;
  const int flags = create ? O_RDWR | O_CREAT | O_TRUNC : mode == Mode::Update ? O_RDWR : O_RDONLY;
  mFd = ::open(mPath.c_str(), flags | O_CLOEXEC, 0600);
  if (mFd < 0 && create)
    throw WriteFailed("could not create " + mPath + ": " + systemError(errno));
  if (mFd < 0)
    throw InvalidInput("could not open " + mPath + ": " + systemError(errno));
  if (create && ::ftruncate(mFd, bytes) != 0)
  {
    const int code = errno;
    ::close(mFd);
    mFd = -1;
    throw WriteFailed("could not make " + mPath + " " + std::to_string(bytes) + " bytes: " + systemError(code));
  }
}

int RawFile::fd() const
{
  if (mMode == Mode::Update)
    std::call_once(mOpened, [this] { const_cast<RawFile*>(this)->open(Mode::Update, 0); });
  return mFd;
}

RawFile::~RawFile()
{
  if (mFd >= 0)
    ::close(mFd);
}

void RawFile::readAt(int64_t offset, void* out, int64_t bytes) const
{
  char* to = static_cast<char*>(out);
  while (bytes > 0)
  {
    const ssize_t got = ::pread(fd(), to, std::size_t(bytes), offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      throw Error("could not read " + mPath + ": " + (got < 0 ? systemError(errno) : std::string("the file is short")));
    to += got;
    offset += got;
    bytes -= got;
  }
}

void RawFile::writeAt(int64_t offset, const void* in, int64_t bytes)
{
  const char* from = static_cast<const char*>(in);
  while (bytes > 0)
  {
    const ssize_t put = ::pwrite(fd(), from, std::size_t(bytes), offset);
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
    {
      const int code = put < 0 ? errno : ENOSPC;  // nothing written: no room
      throw WriteFailed("could not write " + mPath + ": " + systemError(code) +
                        (code == ENOSPC ? " (the disk is full)" : ""));
    }
    from += put;
    offset += put;
    bytes -= put;
  }
}

void detail::checkWindow(const Window& window, int64_t width, int64_t height, const std::string& path)
{
  if (window.x0 < 0 || window.y0 < 0 || window.width < 0 || window.height < 0 || window.x0 + window.width > width ||
      window.y0 + window.height > height)
    throw InvalidInput("a window (" + std::to_string(window.x0) + ", " + std::to_string(window.y0) + ", " +
                       std::to_string(window.width) + " x " + std::to_string(window.height) + ") outside the " +
                       std::to_string(width) + " x " + std::to_string(height) + " cells of " + path);
}

MappedFile::MappedFile(const std::string& path, int64_t bytes, RawFile::Mode mode)
  : mPath(path), mBytes(bytes), mMode(mode)
{
  if (mode != RawFile::Mode::Update)
    map();
}

void MappedFile::map()
{
  const bool create = mMode == RawFile::Mode::Create, readOnly = mMode == RawFile::Mode::Read;
  const int flags = create ? O_RDWR | O_CREAT | O_TRUNC : readOnly ? O_RDONLY : O_RDWR;
  const int fd = ::open(mPath.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0)
  {
    const std::string why = systemError(errno);
    if (create)
      throw WriteFailed("could not create " + mPath + ": " + why);
    throw InvalidInput("could not open " + mPath + ": " + why);
  }
  if (create && mBytes > 0)
  {
    const int code = ::posix_fallocate(fd, 0, mBytes);
    if (code != 0)
    {
      ::close(fd);
      throw WriteFailed("could not make " + mPath + " " + std::to_string(mBytes) + " bytes: " + systemError(code) +
                        (code == ENOSPC ? " (the disk is full)" : ""));
    }
  }
  struct stat info;
  if (!create && (::fstat(fd, &info) != 0 || int64_t(info.st_size) < mBytes))
  {
    ::close(fd);
    throw InvalidInput(mPath + " is shorter than its raster");  // mapped, its missing end would be a fault
  }
  if (mBytes > 0)
  {
    void* at = ::mmap(nullptr, std::size_t(mBytes), readOnly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED)
    {
      const int code = errno;
      ::close(fd);
      throw Error("could not map " + mPath + " into memory: " + systemError(code));
    }
    mData = static_cast<char*>(at);
  }
  ::close(fd);  // the mapping holds the file
}

char* MappedFile::data() const
{
  std::call_once(mMapped, [this] {
    if (!mData && mBytes > 0)
      const_cast<MappedFile*>(this)->map();
  });
  return mData;
}

MappedFile::~MappedFile()
{
  if (mData)
    ::munmap(mData, std::size_t(mBytes));
}

}  // namespace gpugeo::dem::tiled
