// fastrun-bench allreduce-mpi [--nproc N] [--min 4K] [--max 256M] [--rounds R] [--mpi PATH|none]
//                             [--pattern back-to-back|single|both] [--bind default|core|none]
// fastrun's shm all-reduce against Open MPI's MPI_Allreduce, measured in the same run, against
// this machine's memory bound (docs/benchmarks.md, "All-reduce against Open MPI").
//
// Each round runs the whole size sweep on fastrun (N ranks forked here, shm backend) and then on
// Open MPI (`mpirun -np N fastrun-mpi-allreduce`, bench/mpi/), so the two alternate within the
// same minute; a row shows the median of the rounds for each. The MPI program is built only when
// CMake finds MPI, and the MPI columns are left out when it or mpirun is missing.
//
// Two patterns (allreduce_pattern.h), both by default, each side by side with Open MPI timed the
// same way: calls back to back (a DDP step), and the OSU pattern, a barrier then one timed call
// (a training loop's occasional metric all-reduce).
//
// The bound (issue 16's model): every rank reads the N inputs and writes the sum, (N + 1) * S
// bytes per rank (6 S in all for 2 ranks), at the rate N threads move `c = a + b` on arrays far
// past the last-level cache (4 x its size each, memory_rate.h). A row's `bound` is that time over
// the measured one. `at size` repeats it with the rate on arrays of S bytes, the op's own size,
// which says whether the op's data is served from the caches (a rate well above the first) and
// how close the op comes to what the memory does at that size.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "allreduce_pattern.h"
#include "bench_registry.h"
#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "fastrun/tools/flags/number_flags.h"
#include "forked_group.h"
#include "memory_rate.h"

#ifndef FASTRUN_MPI_ALLREDUCE_BENCH
#define FASTRUN_MPI_ALLREDUCE_BENCH ""
#endif

namespace fastrun::bench {
namespace {

using Clock = std::chrono::steady_clock;
using pattern::iterations_for;
using pattern::median;
using pattern::single_calls_for;

// The patterns' names in the programs' output lines ("b2b <bytes> <seconds>"), in table order.
constexpr const char* kBackToBack = "b2b";
constexpr const char* kSingle = "single";

struct Args {
  int nproc = 2;
  std::size_t min = 4 << 10;
  std::size_t max = 256 << 20;
  int rounds = 3;
  std::size_t bound_mib = 0;  // per array of the c = a + b measurement; 0 = 4 x the last-level cache
  std::string mpi = FASTRUN_MPI_ALLREDUCE_BENCH;  // "" = not built
  bool mpi_malloc_raised = true;                  // Open MPI runs with glibc's mmap and trim thresholds raised
  std::string pattern = "both";                   // back-to-back, single or both
  // default: each as it runs by default (fastrun's ranks unbound, mpirun binds to cores);
  // core: both bound, rank r to the r-th allowed CPU; none: neither.
  std::string bind = "default";
  bool wants(const char* kind) const {
    return pattern == "both" || pattern == (kind == kBackToBack ? "back-to-back" : "single");
  }
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("shm all-reduce against Open MPI (same run) and the memory bound", "fastrun-bench allreduce-mpi");
  flags::integer(app, "--nproc", a.nproc, "ranks", 2, 1024);
  flags::byte_count(app, "--min", a.min, "smallest message, bytes with K/M/G suffix", 4, "4K");
  flags::byte_count(app, "--max", a.max, "largest message, doubling from --min", 4, "256M");
  flags::integer(app, "--rounds", a.rounds, "alternating fastrun / Open MPI rounds; rows are medians", 1, 1000);
  app.add_option("--mpi", a.mpi, "PATH|none: the MPI program (default: bench/mpi's build, when MPI was found)");
  app.add_option_function<std::string>(
         "--mpi-malloc", [&a](const std::string& v) { a.mpi_malloc_raised = v == "raised"; },
         "glibc's mmap/trim thresholds for Open MPI")
      ->check(CLI::IsMember({"raised", "default"}))
      ->type_name("raised|default")
      ->default_str("raised");
  flags::choice(app, "--pattern", a.pattern,
                "calls timed back to back, single calls after a barrier (the OSU pattern; median of up to 100), or "
                "both side by side",
                {"back-to-back", "single", "both"});
  flags::choice(app, "--bind", a.bind,
                "default: each as by default (fastrun's ranks unbound, Open MPI's bound to cores); core: both bound, "
                "rank r to the r-th CPU; none: neither",
                {"default", "core", "none"});
  flags::integer(app, "--bound-mib", a.bound_mib,
                 "MiB per array of the past-the-caches c = a + b rate (default 4 x the last-level cache, within 1/6 "
                 "of MemAvailable)",
                 1, 1 << 20)
      ->default_str("");
  flags::parse(app, argc, argv);
  if (a.min > a.max) throw ConfigError(fmt::format("--min {} / --max {}: need min <= max", a.min, a.max));
  if (a.mpi == "none") a.mpi = "-";  // left out on request
  return a;
}

// Bytes per array of the past-the-caches rate: 4 x the last-level cache (at least 64 MiB), but
// the three arrays within half the available memory (the machine is shared).
std::size_t bound_array_bytes(const Args& a) {
  if (a.bound_mib > 0) return a.bound_mib << 20;
  std::size_t bytes = std::max<std::size_t>(4 * last_level_cache_bytes(), std::size_t{64} << 20);
  if (const std::size_t avail = available_memory_bytes(); avail > 0) bytes = std::min(bytes, avail / 6);
  return bytes;
}

// c = a + b over arrays of `bytes`: passes enough for about 192 MiB moved per batch, best of 3.
double add_rate_at(int threads, std::size_t bytes) {
  const int passes = static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / bytes, 1, 100000));
  return add_rate(threads, bytes, passes, 3);
}

// Back to back: the slowest rank's mean per call.
double back_to_back(Backend& g, const BufferView& v) {
  const int iters = iterations_for(v.bytes());
  g.barrier()->wait();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) g.all_reduce(v)->wait();
  double t = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  g.all_reduce(BufferView{&t, 1, DType::float64}, {ReduceOp::max})->wait();
  return t;
}

// The OSU pattern: barrier, one timed call; the median over calls of the slowest rank's time.
double single(Backend& g, const BufferView& v) {
  std::vector<double> t(static_cast<std::size_t>(single_calls_for(v.bytes())));
  for (double& ti : t) {
    g.barrier()->wait();
    const auto t0 = Clock::now();
    g.all_reduce(v)->wait();
    ti = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  g.all_reduce(BufferView{t.data(), t.size(), DType::float64}, {ReduceOp::max})->wait();
  return median(t);
}

// One rank of the fastrun sweep; rank 0 writes "<pattern> <bytes> <seconds>" lines to `out`.
void fastrun_rank(const Args& a, int rank, const std::string& address, const std::string& run_id, int out) {
  auto g = forked_group("shm", rank, a.nproc, address, run_id);
  if (a.bind == "core") pin_to_cpu(rank);
  // One buffer for every size, as the OSU benchmarks allocate theirs (allreduce_pattern.h).
  std::vector<float> whole(a.max / sizeof(float));
  for (std::size_t bytes = a.min; bytes <= a.max; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    std::fill(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(count), 1.0f + static_cast<float>(rank));
    const BufferView v{whole.data(), count, DType::float32};
    g->all_reduce(v)->wait();  // warm-up
    for (const char* kind : {kBackToBack, kSingle}) {
      if (!a.wants(kind)) continue;
      const double t = kind == kBackToBack ? back_to_back(*g, v) : single(*g, v);
      if (rank != 0) continue;
      const std::string line = fmt::format("{} {} {:.9f}\n", kind, bytes, t);
      if (::write(out, line.data(), line.size()) < 0) throw_errno("allreduce-mpi: write", errno);
    }
  }
  g->barrier()->wait();
}

// Per pattern ("b2b", "single"), per size: the seconds of each round.
using Results = std::map<std::string, std::map<std::size_t, std::vector<double>>>;

// Reads "<pattern> <bytes> <seconds>" lines from `fd` until EOF into `into[pattern][bytes]`.
void read_results(int fd, Results& into) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    char kind[16] = {};
    unsigned long long bytes = 0;
    double secs = 0;
    if (std::sscanf(line.c_str(), "%15s %llu %lf", kind, &bytes, &secs) == 3) into[kind][bytes].push_back(secs);
  }
}

int wait_all(const std::vector<pid_t>& pids) {
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    worst = std::max(worst, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return worst;
}

void fastrun_round(const Args& a, int round, Results& into) {
  const std::string run_id = fmt::format("armpi{}-{}", ::getpid(), round);
  auto host = host_store("shm://" + run_id + "-store");
  int fds[2];
  if (::pipe(fds) != 0) throw_errno("allreduce-mpi: pipe", errno);
  std::vector<pid_t> pids;
  for (int r = 0; r < a.nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw_errno("allreduce-mpi: fork", errno);
    if (pid == 0) {
      ::close(fds[0]);
      int code = 0;
      try {
        fastrun_rank(a, r, host->address(), run_id, fds[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "allreduce-mpi rank %d: %s\n", r, e.what());
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  ::close(fds[1]);
  read_results(fds[0], into);
  ::close(fds[0]);
  if (wait_all(pids) != 0) throw BackendError("allreduce-mpi: a fastrun rank failed (see above)");
}

void mpi_round(const Args& a, Results& into) {
  int fds[2];
  if (::pipe(fds) != 0) throw_errno("allreduce-mpi: pipe", errno);
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("allreduce-mpi: fork", errno);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    const std::string np = std::to_string(a.nproc), lo = std::to_string(a.min), hi = std::to_string(a.max);
    // --oversubscribe: more ranks than cores is allowed, as for fastrun; as root, mpirun wants
    // the explicit permission. Open MPI's defaults otherwise (shared-memory BTL with CMA).
    // Open MPI's all-reduce mallocs a scratch buffer of the message's size per call; past glibc's
    // mmap threshold each one is a fresh mmap whose pages fault in, and a freed top of the heap
    // is trimmed: raising both thresholds (the "MPI's best") keeps the buffer's pages.
    std::vector<std::string> argv_s = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", np};
    if (a.bind != "default") {
      argv_s.push_back("--bind-to");
      argv_s.push_back(a.bind);
    }
    if (a.mpi_malloc_raised)
      for (const char* v : {"MALLOC_MMAP_THRESHOLD_=4294967296", "MALLOC_TRIM_THRESHOLD_=4294967296"}) {
        argv_s.push_back("-x");
        argv_s.push_back(v);
      }
    for (const std::string& v : {a.mpi, lo, hi, std::string("1"), a.pattern}) argv_s.push_back(v);
    std::vector<char*> argv_c;
    for (auto& v : argv_s) argv_c.push_back(v.data());
    argv_c.push_back(nullptr);
    ::execvp("mpirun", argv_c.data());
    std::fprintf(stderr, "allreduce-mpi: cannot run mpirun: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  read_results(fds[0], into);
  ::close(fds[0]);
  if (wait_all({pid}) != 0) throw BackendError("allreduce-mpi: mpirun failed (see above); --mpi none leaves it out");
}

bool on_path(const char* program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p = path;
  for (std::size_t pos = 0; pos <= p.size();) {
    const std::size_t end = std::min(p.find(':', pos), p.size());
    if (::access((p.substr(pos, end - pos) + "/" + program).c_str(), X_OK) == 0) return true;
    pos = end + 1;
  }
  return false;
}

std::string human(std::size_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10)) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

int run(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (!backend::available("shm")) throw ConfigError("the shm backend is not built");
  std::string no_mpi;
  if (a.mpi == "-") no_mpi = "--mpi none";
  else if (a.mpi.empty()) no_mpi = "the MPI program was not built (CMake found no MPI; install libopenmpi-dev)";
  else if (::access(a.mpi.c_str(), X_OK) != 0) no_mpi = fmt::format("{} is missing", a.mpi);
  else if (!on_path("mpirun")) no_mpi = "mpirun is not on PATH (Debian: openmpi-bin)";
  if (!no_mpi.empty()) a.mpi.clear();
  const std::size_t llc = last_level_cache_bytes(), array_bytes = bound_array_bytes(a);
  // Before and after the rounds, the best counting: a shared machine's slow moment would
  // otherwise lower the bound below what the memory does.
  double rate = add_rate(a.nproc, array_bytes, 1, 3);
  std::map<std::size_t, double> rate_at;  // c = a + b on arrays of each size
  for (std::size_t bytes = a.min; bytes <= a.max; bytes *= 2) rate_at[bytes] = add_rate_at(a.nproc, bytes);
  Results ours, theirs;
  for (int r = 0; r < a.rounds; ++r) {
    fastrun_round(a, r, ours);
    if (!a.mpi.empty()) mpi_round(a, theirs);
  }
  rate = std::max(rate, add_rate(a.nproc, array_bytes, 1, 3));
  for (auto& [bytes, r] : rate_at) r = std::max(r, add_rate_at(a.nproc, bytes));
  std::vector<const char*> kinds;
  for (const char* kind : {kBackToBack, kSingle})
    if (a.wants(kind)) kinds.push_back(kind);
  const double n = a.nproc;
  fmt::print(
      "# all-reduce, float32 sum, {} ranks, in place: fastrun shm vs Open MPI, median of {} alternating rounds\n",
      a.nproc, a.rounds);
  if (a.wants(kBackToBack))
    fmt::print("# b2b: 3..2000 calls back to back (about 64 MiB in all), the slowest rank's mean per call\n");
  if (a.wants(kSingle))
    fmt::print(
        "# 1x: the OSU pattern, barrier then one timed call, the slowest rank's time, median of 100 calls "
        "(fewer from 32 MiB: 2 GiB in all, at least 8)\n");
  fmt::print(
      "# memory: c = a + b on {} threads, 3 arrays of {} MiB (last-level cache {} MiB): {:.1f} GB/s, 12 bytes "
      "per element; bound = {} bytes of traffic per byte reduced at that rate ({} times)\n",
      a.nproc, array_bytes >> 20, llc >> 20, rate / 1e9, a.nproc * (a.nproc + 1), kinds[0]);
  fmt::print("# at size: the same with c = a + b on arrays of the row's size (add GB/s)\n");
  fmt::print("# binding: {}\n", a.bind == "default"
                                    ? "each its default (fastrun's ranks unbound, Open MPI's bound to cores)"
                                : a.bind == "core" ? "both bound, rank r to the r-th allowed CPU"
                                                   : "neither bound");
  if (!no_mpi.empty()) fmt::print("# Open MPI left out: {}\n", no_mpi);
  else fmt::print("# Open MPI: glibc mmap/trim thresholds {}\n", a.mpi_malloc_raised ? "raised to 4 GiB" : "default");
  std::string head = fmt::format("# {:>8}", "size");
  for (const char* kind : kinds) {
    const char* k = kind == kBackToBack ? "b2b" : "1x";
    head += fmt::format(" {:>12} {:>12} {:>9}", fmt::format("{} fr(us)", k), fmt::format("{} mpi(us)", k), "mpi/fr");
  }
  fmt::print("{} {:>12} {:>7} {:>8} {:>8}\n", head, "busbw(GB/s)", "bound", "add GB/s", "at size");
  for (auto& [bytes, first] : ours[kinds[0]]) {
    std::string row = fmt::format("{:>10}", human(bytes));
    for (const char* kind : kinds) {
      const double t = median(ours[kind][bytes]);
      const auto it = theirs[kind].find(bytes);
      const bool mpi = it != theirs[kind].end();
      row +=
          fmt::format(" {:>12.1f} {:>12} {:>9}", t * 1e6, mpi ? fmt::format("{:.1f}", median(it->second) * 1e6) : "-",
                      mpi ? fmt::format("{:.2f}", median(it->second) / t) : "-");
    }
    const double t = median(first);
    const double busbw = static_cast<double>(bytes) / t / 1e9 * 2 * (n - 1) / n;
    const double bound = n * (n + 1) * static_cast<double>(bytes) / rate / t;
    const double near = rate_at[bytes];
    const double bound_at = n * (n + 1) * static_cast<double>(bytes) / near / t;
    fmt::print("{} {:>12.2f} {:>7.2f} {:>8.1f} {:>8.2f}\n", row, busbw, bound, near / 1e9, bound_at);
  }
  return 0;
}

const Registration reg{"allreduce-mpi",
                       "shm all-reduce against Open MPI (same run) and the memory bound (--nproc N --rounds R)", &run};

}  // namespace
}  // namespace fastrun::bench
