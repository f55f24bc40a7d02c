#pragma once
// Real-process harness for the shm backend tests: the parent hosts an shm:// store named after
// a fresh run id, forks N ranks, each builds its groups from a GroupSpec over that store and runs
// the body; the parent reaps every child within a deadline (SIGKILL on expiry; the deadline and
// the groups' default op timeout are scaled to the build, test_support/time_limits.h) and can SIGKILL
// one rank mid-run (left unreaped until the others finish, so a zombie must read as dead).
// A child reports failure through its exit code and a pipe carrying the error text (the
// processes are test::Children from test_support/children.h).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "test_support/children.h"
#include "test_support/time_limits.h"

namespace fastrun::shm_test {

// Raised by checks inside a rank; its text reaches the parent.
struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
void expect(bool ok, fmt::format_string<Args...> f, Args&&... args) {
  if (!ok) throw CheckFailed(fmt::format(f, std::forward<Args>(args)...));
}

inline std::unique_ptr<Backend> make_group(const GroupSpec& spec) { return backend::find("shm")(spec); }

struct Rank {
  int rank = 0;
  int size = 1;
  std::string run_id;
  std::shared_ptr<Store> store;  // the job's unprefixed store (also the failure store)

  // A group of `members` (global ranks, this rank among them) named `name`.
  std::unique_ptr<Backend> group(const std::string& name, std::vector<int> members,
                                      Duration op_timeout = test::scaled(std::chrono::seconds(30))) const {
    GroupSpec spec;
    spec.store = std::make_shared<PrefixStore>("group/" + name, store->clone());
    spec.size = static_cast<int>(members.size());
    spec.rank = -1;
    for (int i = 0; i < spec.size; ++i)
      if (members[static_cast<std::size_t>(i)] == rank) spec.rank = i;
    spec.global_ranks = std::move(members);
    spec.name = name;
    spec.run_id = run_id;
    spec.timeout = std::chrono::seconds(20);
    spec.op_timeout = op_timeout;
    spec.failure_store = store;
    return make_group(spec);
  }
  std::unique_ptr<Backend> world(Duration op_timeout = test::scaled(std::chrono::seconds(30))) const {
    std::vector<int> all;
    for (int i = 0; i < size; ++i) all.push_back(i);
    return group("world", all, op_timeout);
  }
};

struct Outcome {
  bool exited = false;    // exited normally (else killed or timed out)
  int code = -1;          // exit code when exited
  int signal = 0;         // terminating signal
  std::string error;      // the child's error text
};

struct RunOptions {
  std::chrono::milliseconds timeout{30000};  // in a normal build; run_ranks scales it
  int kill_rank = -1;                       // SIGKILL this rank ...
  std::chrono::milliseconds kill_after{0};  // ... this long after the start
};

inline std::string unique_run_id() {
  static std::atomic<int> counter{0};
  return fmt::format("shmtest{}x{}", ::getpid(), counter++);
}

// Entries of /dev/shm whose name contains `token`.
inline std::vector<std::string> shm_entries(const std::string& token) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(token) != std::string::npos) found.push_back(name);
  }
  return found;
}

// Runs `body` on n forked ranks; returns each rank's outcome. Leaves no child behind.
inline std::vector<Outcome> run_ranks(int n, const std::function<void(const Rank&)>& body, const RunOptions& opt = {},
                                      std::string* run_id_out = nullptr) {
  const std::string run_id = unique_run_id();
  if (run_id_out) *run_id_out = run_id;
  auto host = host_store("shm://" + run_id + "-store");
  const std::string address = host->address();
  test::Children children(/*capture_messages=*/true);  // destroyed before `host`
  for (int r = 0; r < n; ++r)
    children.spawn([&, r] {
      Rank rank{r, n, run_id, std::shared_ptr<Store>(connect_store(address))};
      body(rank);
      return 0;
    });
  test::WaitPlan plan;
  plan.kill_index = opt.kill_rank;
  plan.kill_after = opt.kill_after;
  std::vector<Outcome> out;
  for (auto& s : children.wait_all(test::scaled(opt.timeout), plan))
    out.push_back({s.exited, s.code, s.signal,
                   (s.timed_out ? "timed out (killed by the test harness)" : "") + std::move(s.message)});
  return out;
}

inline std::string describe(const std::vector<Outcome>& out) {
  std::string s;
  for (std::size_t r = 0; r < out.size(); ++r)
    s += fmt::format("rank {}: exited={} code={} signal={} error='{}'\n", r, out[r].exited, out[r].code,
                     out[r].signal, out[r].error);
  return s;
}

inline bool all_ok(const std::vector<Outcome>& out) {
  for (const auto& o : out)
    if (!o.exited || o.code != 0) return false;
  return true;
}

}  // namespace fastrun::shm_test
