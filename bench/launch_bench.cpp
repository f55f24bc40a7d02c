// fastrun-bench launch: what starting a job costs, beside the floor.
//   job:   `fastrun --nproc N fastrun-bench launch --as-rank barrier` — every rank starts, passes
//          one barrier through the job's shm store, exits; the launcher creates and removes the
//          store, relays output and reaps.
//   floor: a minimal launcher (this process) forks and execs N copies of
//          `fastrun-bench launch --as-rank noop` and reaps them: the same binary, so the same
//          dynamic-loading cost, with no store, no pipes, no supervision.
//   fail:  from a rank's failure (its last timestamp before _exit(1)) to the launcher's exit,
//          when the other ranks honour SIGTERM.
// Options: --ranks 2,4,8,16,32  --reps 7  --fastrun PATH (default: next to this binary, or
// ../tools/fastrun in a build tree). Medians are printed; nothing is asserted.
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"

extern char** environ;

namespace fastrun::bench {
namespace {

double now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

// The rank side: noop | barrier | fail (barrier, then rank 0 records the time and exits 1 while
// the others sleep until stopped).
int as_rank(const std::string& mode) {
  if (mode == "noop") return 0;
  auto store = connect_store(std::getenv("FASTRUN_STORE"));
  const int world = std::atoi(std::getenv("FASTRUN_WORLD_SIZE"));
  store_barrier(*store, "bench/launch", world, std::chrono::seconds(60));
  if (mode == "barrier") return 0;
  if (std::atoi(std::getenv("FASTRUN_RANK")) == 0) {
    const std::string t = fmt::format("{:.6f}\n", now_ms());
    const int fd = ::open(std::getenv("BENCH_LAUNCH_FAIL_FILE"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, t.data(), t.size());
      ::close(fd);
    }
    ::_exit(1);
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}

// Starts argv with stdout (and, quiet_stderr, stderr) on /dev/null.
pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            bool quiet_stderr = false) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    if (quiet_stderr) ::dup2(null, 2);
    ::execve(a[0], a.data(), e.data());
    ::_exit(127);
  }
  return pid;
}

int reap(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

double floor_ms(const std::string& exe, int n) {
  const double t0 = now_ms();
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) pids.push_back(start({exe, "launch", "--as-rank", "noop"}, {}));
  for (pid_t p : pids) reap(p);
  return now_ms() - t0;
}

double job_ms(const std::string& fastrun, const std::string& exe, int n) {
  const double t0 = now_ms();
  const int code = reap(start({fastrun, "--nproc", std::to_string(n), exe, "launch", "--as-rank", "barrier"}, {}));
  const double dt = now_ms() - t0;
  if (code != 0) throw Error(fmt::format("fastrun job of {} ranks exited {}", n, code));
  return dt;
}

double fail_ms(const std::string& fastrun, const std::string& exe, int n, const std::string& file) {
  const pid_t pid = start({fastrun, "--nproc", std::to_string(n), "--output", "ignore", exe, "launch", "--as-rank",
                           "fail"},
                          {"BENCH_LAUNCH_FAIL_FILE=" + file}, /*quiet_stderr=*/true);
  const int code = reap(pid);
  const double end = now_ms();
  if (code != 1) throw Error(fmt::format("failing job of {} ranks exited {} (expected 1)", n, code));
  std::FILE* f = std::fopen(file.c_str(), "r");
  double t = 0;
  if (!f || std::fscanf(f, "%lf", &t) != 1) throw Error("the failing rank left no timestamp in " + file);
  std::fclose(f);
  return end - t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_launch(int argc, char** argv) {
  std::vector<int> ranks = {2, 4, 8, 16, 32};
  int reps = 7;
  std::string fastrun;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--as-rank" && i + 1 < argc) return as_rank(argv[i + 1]);
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--fastrun" && i + 1 < argc) {
      fastrun = argv[++i];
    } else if (a == "--ranks" && i + 1 < argc) {
      ranks.clear();
      for (const char* p = argv[++i]; *p;) {
        ranks.push_back(std::atoi(p));
        p = std::strchr(p, ',');
        if (!p) break;
        ++p;
      }
    } else {
      throw ConfigError(fmt::format("launch: unknown option '{}'; accepted: --ranks 2,4,8 --reps N --fastrun PATH", a));
    }
  }
  const std::string exe = self_exe();
  const auto dir = std::filesystem::path(exe).parent_path();
  if (fastrun.empty()) {
    for (const auto& c : {dir / "fastrun", dir / ".." / "tools" / "fastrun"}) {
      if (std::filesystem::exists(c)) {
        fastrun = c.string();
        break;
      }
    }
  }
  if (fastrun.empty()) throw ConfigError("launch: cannot find the fastrun binary; pass --fastrun PATH");
  const std::string fail_file = fmt::format("/tmp/fastrun-bench-fail-{}", ::getpid());

  std::printf("fastrun-bench launch: medians of %d runs (ms); floor = fork+exec+reap of N bare copies of the rank "
              "binary\n",
              reps);
  std::printf("%5s %10s %10s %8s %12s %6s %14s\n", "ranks", "floor", "job", "ratio", "target", "ok", "fail->exit");
  for (int n : ranks) {
    std::vector<double> f, j, x;
    floor_ms(exe, n);  // warm the page cache
    for (int r = 0; r < reps; ++r) {
      f.push_back(floor_ms(exe, n));
      j.push_back(job_ms(fastrun, exe, n));
      x.push_back(fail_ms(fastrun, exe, n, fail_file));
    }
    const double fm = median(f), jm = median(j), xm = median(x);
    const double target = 1.5 * fm + 5.0;
    std::printf("%5d %10.2f %10.2f %8.2f %12.2f %6s %14.2f\n", n, fm, jm, jm / fm, target, jm <= target ? "yes" : "NO",
                xm);
    std::fflush(stdout);
  }
  std::filesystem::remove(fail_file);
  return 0;
}

Registration reg{"launch", "job start-up vs fork/exec floor, and failure-to-exit time", &run_launch,
                 "  --ranks LIST     rank counts to time, comma-separated (default 2,4,8,16,32)\n"
                 "  --reps N         repetitions per rank count; the median is shown (default 7)\n"
                 "  --fastrun PATH   the launcher to time (default: the fastrun next to this binary)\n"};

}  // namespace
}  // namespace fastrun::bench
