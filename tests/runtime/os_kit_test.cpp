// runtime/os/: the OS kit every layer uses for fds, process liveness, host identity, safe names
// and whole-buffer I/O. Real processes and pipes, no mocks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/fd_control.h"
#include "fastrun/runtime/os/full_io.h"
#include "fastrun/runtime/os/futex.h"
#include "fastrun/runtime/os/poll_until.h"
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

TEST_CASE("os kit: UniqueFd's move-assignment closes the fd it held, and release gives one up") {
  int a[2], b[2];
  REQUIRE(::pipe(a) == 0);
  REQUIRE(::pipe(b) == 0);
  os::UniqueFd keep(a[0]), a_write(a[1]), b_read(b[0]);
  os::UniqueFd target(b[1]);
  target = std::move(a_write);  // b[1] is closed now; target owns a[1]
  CHECK(::fcntl(b[1], F_GETFD) == -1);
  CHECK(target.get() == a[1]);
  const int raw = target.release();
  CHECK_FALSE(target);
  CHECK(::fcntl(raw, F_GETFD) != -1);  // released, so not closed
  ::close(raw);
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

TEST_CASE("os kit: checked fcntl and dup2 do their job and name a bad fd in the error") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  os::UniqueFd r(p[0]), w(p[1]);
  CHECK((::fcntl(r.get(), F_GETFL) & O_NONBLOCK) == 0);
  os::set_nonblocking(r.get(), "test pipe");
  CHECK((os::checked_fcntl(r.get(), F_GETFL) & O_NONBLOCK) != 0);
  char c = 0;
  CHECK(::read(r.get(), &c, 1) == -1);  // non-blocking now: an empty pipe answers EAGAIN at once
  CHECK(errno == EAGAIN);

  // dup2 makes a second fd for the same pipe: what is written through it arrives.
  os::UniqueFd spare(::dup(r.get()));
  REQUIRE(spare);
  os::checked_dup2(w.get(), spare.get(), "the spare");
  REQUIRE(os::write_all(spare.get(), "y", 1));
  CHECK(::read(r.get(), &c, 1) == 1);
  CHECK(c == 'y');

  // A closed fd: the error names the call, the fd, what it was for and the errno text.
  const int closed = w.release();
  ::close(closed);
  const std::string fd_text = "fd " + std::to_string(closed);
  CHECK_THROWS_WITH(os::checked_fcntl(closed, F_SETFL, O_NONBLOCK, "rank 3's stdout pipe"),
                    Catch::Contains("fcntl(" + fd_text + ", F_SETFL) (rank 3's stdout pipe)") &&
                        Catch::Contains("Bad file descriptor (errno 9)"));
  CHECK_THROWS_AS(os::set_nonblocking(closed), Error);
  CHECK_THROWS_WITH(os::checked_dup2(closed, spare.get()),
                    Catch::Contains("dup2(" + fd_text + " onto fd") && Catch::Contains("(errno 9)"));
}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

TEST_CASE("os kit: poll_until returns at once when ready, and when it becomes ready") {
  int calls = 0;
  const auto t0 = Clock::now();
  CHECK(os::poll_until(Clock::now() + std::chrono::seconds(10), {std::chrono::seconds(5), std::chrono::seconds(5)},
                       [&] { return ++calls > 0; }));
  CHECK(calls == 1);
  CHECK(seconds_since(t0) < 4.0);  // the first check needs no sleep (a 5 s one would show)

  calls = 0;
  CHECK(os::poll_until(Clock::now() + std::chrono::seconds(30),
                       {std::chrono::microseconds(100), std::chrono::milliseconds(1)}, [&] { return ++calls == 5; }));
  CHECK(calls == 5);
}

TEST_CASE("os kit: poll_until gives up at the deadline, its sleeps doubling and never past it") {
  // Doubling from 10 ms capped at 80 ms: 10+20+40+80+80 = 230 ms of sleep before a sixth check,
  // so 200 ms allow at most 6 checks (a busy machine only sleeps longer, so fewer).
  int calls = 0;
  auto t0 = Clock::now();
  CHECK_FALSE(os::poll_until(t0 + std::chrono::milliseconds(200),
                             {std::chrono::milliseconds(10), std::chrono::milliseconds(80)}, [&] {
                               ++calls;
                               return false;
                             }));
  CHECK(seconds_since(t0) >= 0.2);
  CHECK(calls <= 6);

  // A sleep longer than what is left is cut at the deadline (jittered too).
  t0 = Clock::now();
  CHECK_FALSE(os::poll_until(t0 + std::chrono::milliseconds(50),
                             {std::chrono::seconds(20), std::chrono::seconds(20), true}, [] { return false; }));
  CHECK(seconds_since(t0) >= 0.05);
  CHECK(seconds_since(t0) < 10.0);

  // A deadline already past: one look, no sleep.
  calls = 0;
  CHECK_FALSE(os::poll_until(Clock::now() - std::chrono::seconds(1), {std::chrono::seconds(20), std::chrono::seconds(20)},
                             [&] { return ++calls < 0; }));
  CHECK(calls == 1);

  // The check may end the wait with its own error.
  CHECK_THROWS_WITH(os::poll_until(Clock::now() + std::chrono::seconds(10),
                                   {std::chrono::milliseconds(1), std::chrono::milliseconds(1)},
                                   []() -> bool { throw std::runtime_error("lock file vanished"); }),
                    "lock file vanished");
}

TEST_CASE("os kit: futex_wait sleeps until woken, times out, and returns at once on a changed word") {
  std::atomic<std::uint32_t> word{0};
  auto t0 = Clock::now();
  CHECK_FALSE(os::futex_wait(word, 0, std::chrono::milliseconds(50)));  // nobody wakes it
  CHECK(seconds_since(t0) >= 0.05);
  CHECK_FALSE(os::futex_wait(word, 0, std::chrono::nanoseconds(0)));   // no time: no sleep

  t0 = Clock::now();
  CHECK(os::futex_wait(word, 1, std::chrono::seconds(20)));  // the word is not 1: look again at once
  CHECK(seconds_since(t0) < 10.0);

  std::atomic<bool> sleeping{false};
  std::thread waker([&] {
    while (!sleeping.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    word.store(1);
    os::futex_wake_all(word);
  });
  t0 = Clock::now();
  sleeping.store(true);
  while (word.load() == 0) os::futex_wait(word, 0, std::chrono::seconds(20));
  waker.join();
  CHECK(seconds_since(t0) < 10.0);  // woken, not timed out
}

TEST_CASE("os kit: a futex wake reaches a sleeper in another process (a shared, not private, futex)") {
  // Two words in memory shared with a child: the child says it is about to sleep on `word`,
  // then sleeps on it for up to 20 s; a private futex would never see the parent's wake.
  void* mem = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* words = static_cast<std::uint32_t*>(mem);
  std::uint32_t& word = words[0];
  std::uint32_t& ready = words[1];
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const auto start = Clock::now();
    std::atomic_ref<std::uint32_t>(ready).store(1);
    while (std::atomic_ref<std::uint32_t>(word).load() == 0 && Clock::now() - start < std::chrono::seconds(20))
      os::futex_wait(word, 0, std::chrono::seconds(20));
    ::_exit(Clock::now() - start < std::chrono::seconds(15) ? 0 : 1);
  }
  while (std::atomic_ref<std::uint32_t>(ready).load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it fall asleep
  std::atomic_ref<std::uint32_t>(word).store(1);
  os::futex_wake_all(word);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::munmap(mem, 4096);
}
