#include "cli/cleanup_guard.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <unistd.h>

namespace gpugeo::cli {

namespace {

int gPipe = -1;  // the write end, in the program

void removeAll(const std::set<std::string>& paths)
{
  std::error_code ignored;
  for (const std::string& path : paths)
  {
    std::filesystem::remove_all(path, ignored);
    for (const char* sidecar : {".aux.xml", "-wal", "-shm", "-journal"})
      std::filesystem::remove(path + sidecar, ignored);
  }
}

[[noreturn]] void guard(int in)
{
  setsid();
  // Not the job's output: mpiexec waits for its ranks' output to end.
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0)
    for (int fd : {0, 1, 2})
      dup2(null, fd);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::set<std::string> paths;
  std::string line;
  char buffer[4096];
  for (;;)
  {
    const ssize_t got = read(in, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    for (ssize_t i = 0; i < got; ++i)
    {
      if (buffer[i] != '\n')
      {
        line += buffer[i];
        continue;
      }
      if (line.size() > 1 && line[0] == '+')
        paths.insert(line.substr(1));
      else if (line.size() > 1 && line[0] == '-')
        paths.erase(line.substr(1));
      line.clear();
    }
  }
  removeAll(paths);
  _exit(0);
}

void tell(char what, const std::string& path)
{
  if (gPipe < 0)
    return;
  const std::string line = what + path + "\n";
  for (std::size_t done = 0; done < line.size();)
  {
    const ssize_t put = write(gPipe, line.data() + done, line.size() - done);
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      return;
    done += std::size_t(put);
  }
}

}  // namespace

void startCleanupGuard()
{
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return;
  const pid_t child = fork();
  if (child < 0)
  {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (child == 0)
  {
    close(fds[1]);
    guard(fds[0]);
  }
  close(fds[0]);
  gPipe = fds[1];
  std::signal(SIGPIPE, SIG_IGN);  // a guardian gone: writes to it fail, the program goes on
}

void guardPath(const std::string& path)
{
  tell('+', std::filesystem::absolute(path).string());
}

void releasePath(const std::string& path)
{
  tell('-', std::filesystem::absolute(path).string());
}

}  // namespace gpugeo::cli
