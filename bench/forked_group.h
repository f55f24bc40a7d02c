#pragma once
// Benches that fork their ranks themselves (no launcher): run_forked_ranks() hosts the store and
// forks the ranks; forked_group() is one rank's group: every rank connects to the store the
// parent hosts at `address`, and the group is "world" of `size` ranks.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::bench {

// Pins the calling rank to the r-th CPU it may run on (round robin), as mpirun binds its ranks
// to cores by default: caches stay warm and the ranks never share a core while another is idle.
inline void pin_to_cpu(int rank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<std::size_t>(rank) % cpus.size()], &one);
  ::sched_setaffinity(0, sizeof(one), &one);
}

inline std::unique_ptr<Backend> forked_group(const std::string& backend, int rank, int size,
                                                  const std::string& address, const std::string& run_id) {
  GroupSpec spec;
  std::shared_ptr<Store> store(connect_store(address));
  spec.store = std::make_shared<PrefixStore>("bench", store->clone());
  spec.rank = rank;
  spec.size = size;
  for (int i = 0; i < size; ++i) spec.global_ranks.push_back(i);
  spec.name = "world";
  spec.run_id = run_id;
  spec.failure_store = store;
  return backend::find(backend)(spec);
}

// Hosts a store named after `prefix` and this pid, forks `nproc` ranks that each run
// rank(r, store address, run id) and exit (1 when it threw, with the error on stderr), and reaps
// them. Returns 0 when every rank exited 0, else 1. Ctrl-C, SIGTERM or SIGHUP (the parent's or
// the whole process group's; those it was not started ignoring) stops the ranks and removes the
// store's segment before the bench dies of the same signal: the parent keeps the three blocked and takes them with sigtimedwait,
// from before the store exists (its threads inherit the mask), and its ranks unblock them; a rank
// still there 5 s after the stop is killed.
inline int run_forked_ranks(int nproc, const std::string& prefix,
                            const std::function<void(int, const std::string&, const std::string&)>& rank) {
  sigset_t stops, old;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    // One the bench was started ignoring stays ignored (nohup; a shell's background job's SIGINT).
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_IGN) sigaddset(&stops, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &stops, &old);
  int stopped_by = 0;
  std::chrono::steady_clock::time_point stopped_at;
  int rc = 0;
  {
    const std::string run_id = fmt::format("{}{}", prefix, ::getpid());
    auto host = host_store("shm://" + run_id + "-store");
    std::vector<pid_t> pids;
    for (int r = 0; r < nproc; ++r) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        int code = 0;
        try {
          rank(r, host->address(), run_id);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          code = 1;
        }
        std::fflush(nullptr);
        ::_exit(code);
      }
      if (pid < 0) rc = 1;
      else pids.push_back(pid);
    }
    while (!pids.empty()) {
      for (auto it = pids.begin(); it != pids.end();) {
        int status = 0;
        const pid_t done = ::waitpid(*it, &status, WNOHANG);
        if (done == 0) {
          ++it;
          continue;
        }
        if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
        it = pids.erase(it);
      }
      const timespec tick{0, 20 * 1000 * 1000};
      if (const int sig = ::sigtimedwait(&stops, nullptr, &tick); sig > 0) {
        if (!stopped_by) stopped_at = std::chrono::steady_clock::now();
        stopped_by = sig;
        for (pid_t pid : pids) ::kill(pid, sig);
      }
      if (stopped_by && std::chrono::steady_clock::now() - stopped_at > std::chrono::seconds(5))
        for (pid_t pid : pids) ::kill(pid, SIGKILL);  // a rank that ignores the stop (blocked in a wait)
    }
  }  // the store's segment is removed here
  if (stopped_by) std::signal(stopped_by, SIG_DFL);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);  // a pending copy of the stop, if any, ends the bench here
  if (stopped_by) ::raise(stopped_by);
  return rc;
}

}  // namespace fastrun::bench
