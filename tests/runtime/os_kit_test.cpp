// runtime/os/: the OS kit every layer uses for fds, process liveness, host identity, safe names
// and whole-buffer I/O. Real processes and pipes, no mocks.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/host.h"
#include "fastrun/runtime/os/process.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/os/unique_fd.h"

using namespace fastrun;

namespace {
// A child that exits at once; not reaped, so it stays a zombie until wait_for(pid) reaps it.
pid_t exited_child() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  // A zombie shows 'Z' once the exit is complete; wait for that boundedly.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto stat = os::proc_stat(pid);
    if (stat && stat->state == 'Z') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pid;
}
}  // namespace

TEST_CASE("os kit: UniqueFd closes what it owns, once") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const int write_end = p[1];
  {
    os::UniqueFd r(p[0]);
    os::UniqueFd w(write_end);
    os::UniqueFd moved(std::move(w));
    CHECK_FALSE(w);
    CHECK(moved.get() == write_end);
  }
  CHECK(::fcntl(write_end, F_GETFD) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("os kit: write_all and read_full move whole buffers and stop at the end of the file") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  os::UniqueFd r(p[0]), w(p[1]);
  const std::string text(1000, 'x');
  REQUIRE(os::write_all(w.get(), text.data(), text.size()));
  w.reset();
  std::string got(2000, '\0');
  CHECK(os::read_full(r.get(), got.data(), got.size()) == 1000);
  CHECK(got.substr(0, 1000) == text);
  CHECK_FALSE(os::write_all(-1, "x", 1));
  CHECK(errno == EBADF);
}

TEST_CASE("os kit: a process is alive until it is reaped (a zombie shows as one)") {
  CHECK(os::pid_exists(::getpid()));
  CHECK(os::pid_exists(1));  // init: exists even when it is not ours to signal (EPERM)
  const auto self = os::proc_stat(::getpid());
  REQUIRE(self);
  CHECK(self->start_time > 0);

  const pid_t pid = exited_child();
  CHECK(os::pid_exists(pid));  // a zombie still exists
  REQUIRE(os::proc_stat(pid));
  CHECK(os::proc_stat(pid)->state == 'Z');
  {
    const os::UniqueFd fd = os::open_pidfd(pid);  // a zombie still has a pidfd (readable: it exited)
    CHECK((fd || errno == ENOSYS));
  }
  REQUIRE(::waitpid(pid, nullptr, 0) == pid);
  CHECK_FALSE(os::pid_exists(pid));
  CHECK_FALSE(os::proc_stat(pid));
  const os::UniqueFd gone = os::open_pidfd(pid);
  CHECK_FALSE(gone);
  CHECK((errno == ESRCH || errno == ENOSYS));
}

TEST_CASE("os kit: host identity") {
  const auto host = os::host_name();
  REQUIRE(host);
  CHECK_FALSE(host->empty());
  CHECK(os::boot_id().size() == 36);  // a UUID
}

TEST_CASE("os kit: safe names are A-Z a-z 0-9 . _ -") {
  CHECK(os::all_name_chars("run-1_a.B9"));
  CHECK(os::all_name_chars(""));
  for (const char* bad : {"a/b", "a b", "tcp://x", "a%", "a\n"}) CHECK_FALSE(os::all_name_chars(bad));
  CHECK_FALSE(os::is_name_char(':'));
}
