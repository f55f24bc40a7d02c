// fastrun-bench store: throughput and rendezvous time of every store kind, with real
// processes (fork) on this machine. Prints a table; asserts nothing.
//   set+get/s   one set + one get of a 32-byte value per round trip, 1 and 4 client processes
//   add/s       4 processes incrementing ONE key (contended)
//   rdv N       N pre-connected processes, released at once: each sets its key and waits for
//               all N keys; time from release to the last one done (spawn+connect in brackets)
// With file:// measured, the file store and torch.distributed.FileStore (bench/torch_filestore.py,
// when a python3 here imports torch) then run two set+get mixes in the same run, and the ratios
// are printed: "rewrite" (the table's mix: 64 keys per process, set again and again) and "fresh"
// (every set is of a new key, as a rendezvous sets its keys; the two stores differ most there).
// tcp:// is included when host_store("tcp://127.0.0.1:0") works in this build.
// --clients 1024,4096 measures one TCP store at scale instead: N connections, held by --procs
// processes of N/procs threads (one connection each), doing the same set-then-wait-all
// rendezvous and then set+get for --seconds.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_registry.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/tools/flags/number_flags.h"
#include "fastrun/tools/store_host/store_in_child_process.h"
#include "torch_filestore.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/gather.h"
#include "fastrun/runtime/store/runtime_dir.h"
#include "fastrun/runtime/store/tcp/server.h"

namespace fastrun::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Forked children, each running body(i) -> a double reported through one pipe. Always reaped:
// collect() kills stragglers after its limit, and so does the destructor.
class Children {
 public:
  Children(int n, const std::function<double(int)>& body) {
    if (::pipe(fds_) != 0) throw_errno("pipe", errno);
    std::fflush(nullptr);
    for (int i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds_[0]);
        Msg msg{i, -1};
        try {
          msg.r = body(i);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench child %d: %s\n", i, e.what());
        }
        if (::write(fds_[1], &msg, sizeof msg) != static_cast<ssize_t>(sizeof msg)) ::_exit(2);
        ::_exit(0);
      }
      if (pid < 0) {
        std::fprintf(stderr, "fork failed after %d children: %s\n", i, std::strerror(errno));
        break;
      }
      pids_.push_back(pid);
    }
    ::close(fds_[1]);
    results_.assign(static_cast<std::size_t>(n), -1);
  }
  ~Children() { reap(true); }
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;

  // The reports in child order (-1 for a child that failed or did not report in time).
  std::vector<double> collect(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::size_t got = 0;
    Msg msg{};
    while (got < pids_.size() && Clock::now() < deadline) {
      const ssize_t r = ::read(fds_[0], &msg, sizeof msg);
      if (r != static_cast<ssize_t>(sizeof msg)) break;
      results_[static_cast<std::size_t>(msg.i)] = msg.r;
      ++got;
    }
    reap(got < pids_.size());
    return results_;
  }

 private:
  struct Msg {
    int i;
    double r;
  };
  void reap(bool kill) {
    for (pid_t p : pids_) {
      if (kill) ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    pids_.clear();
    if (fds_[0] >= 0) ::close(fds_[0]);
    fds_[0] = -1;
  }
  int fds_[2] = {-1, -1};
  std::vector<pid_t> pids_;
  std::vector<double> results_;
};

// Every kind hosted for the clients to come; tcp:// in a process of its own, since the clients
// are forked from this one (tools/store_host/store_in_child_process.h says why).
std::unique_ptr<HostedStore> host_for_bench(const std::string& address, const StoreOptions& options) {
  if (parse_store_address(address).kind == StoreAddress::Kind::tcp)
    return std::make_unique<tools::StoreInChildProcess>([&] { return host_store(address, options); },
                                                        options.timeout);
  return host_store(address, options);
}

StoreOptions client_options(const HostedStore& h) {
  StoreOptions o;
  o.token = h.token();
  o.timeout = 60s;
  return o;
}

// Client c of `clients` (c = process * threads + thread) runs body(c) in each of `threads`
// threads of each of `procs` forked processes; a process reports the sum (or, for times, the
// max) over its threads, or -1 when any of them failed.
Children clients_in(int procs, int threads, bool sum, const std::function<double(int)>& body) {
  return Children(procs, [&, threads, sum](int p) {
    if (threads == 1) return body(p);
    std::vector<double> out(static_cast<std::size_t>(threads), -1);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          out[static_cast<std::size_t>(t)] = body(p * threads + t);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench client %d: %s\n", p * threads + t, e.what());
        }
      });
    for (auto& th : pool) th.join();
    double r = 0;
    for (double x : out) {
      if (x < 0) return -1.0;
      r = sum ? r + x : std::max(r, x);
    }
    return r;
  });
}

// Operations per second summed over procs x threads clients, each running `op` for `seconds`.
double rate(HostedStore& hosted, int procs, double seconds, const std::string& round,
            const std::function<void(Store&, int, std::uint64_t)>& op, int threads = 1) {
  auto control = hosted.connect();
  const std::string go = round + "/go";
  const int clients = procs * threads;
  Children kids = clients_in(procs, threads, /*sum=*/true, [&](int i) {
    auto s = connect_store(hosted.address(), client_options(hosted));
    if (s->add(round + "/ready", 1) == clients) s->set(round + "/all-ready", {});
    s->wait({go}, 120s);
    // Clock reads every 16 ops when each client has a core to itself; with thousands of clients
    // a round of 16 can outlast the whole window, so they read it after every op, and each
    // divides by the time it actually ran.
    const int batch = threads == 1 ? 16 : 1;
    std::uint64_t n = 0;
    const double start = now_s(), end = start + seconds;
    double t = start;
    while (t < end) {
      for (int k = 0; k < batch; ++k) op(*s, i, n++);
      t = now_s();
    }
    return static_cast<double>(n) / (t - start);
  });
  control->wait({round + "/all-ready"}, 120s);
  control->set(go, {});
  const auto results = kids.collect(std::chrono::seconds(static_cast<long>(seconds) + 60));
  double total = 0;
  for (double r : results) {
    if (r < 0) return -1;  // a client failed: no figure rather than a low one
    total += r;
  }
  return total;
}

// How the clients of a rendezvous meet, once released:
//   keys     each sets its key and waits for all N keys (what join did before: O(N²) server work)
//   barrier  store_barrier with its rank: one Store::arrive (tcp://: one request, answered when the
//            last client arrives)
//   round    the add + wait round store_barrier was before (runtime/store/gather.h, round_arrive:
//            add its bit to its group's counter, wait on one release key; 2 requests, O(N))
//   arrive   Store::arrive called directly (what barrier does, without its wrapper)
//   gather   store_all_gather of a 16-byte value: the same round, and every client gets all N values
//   release  nothing: the floor of the figure (the store waking N waiters on "go", and the threads
//            getting to run)
enum class Pattern { keys, barrier, gather, release, round, arrive };
constexpr const char* kPatternNames[] = {"keys", "barrier", "gather", "release", "round", "arrive"};

// The release happens once every child is connected and waiting on "go" (not timed); then
// the clients meet as `pattern` says. Returns {seconds from release to the last done,
// seconds from the first fork to the last done}.
std::pair<double, double> rendezvous(HostedStore& hosted, int procs, const std::string& round, int threads = 1,
                                     Pattern pattern = Pattern::keys) {
  constexpr auto kLimit = 300s;  // the keys pattern at 16,384 clients takes minutes
  auto control = hosted.connect();
  const double t_spawn = now_s();
  const int clients = procs * threads;
  std::vector<std::string> keys;
  for (int r = 0; r < clients; ++r) keys.push_back(fmt::format("{}/rank/{}", round, r));
  const std::string go = round + "/go";
  Children kids = clients_in(procs, threads, /*sum=*/false, [&](int i) {
    auto s = connect_store(hosted.address(), client_options(hosted));
    if (s->add(round + "/ready", 1) == clients) s->set(round + "/all-ready", {});
    s->wait({go}, 120s);
    if (pattern == Pattern::keys) {
      s->set(keys[static_cast<std::size_t>(i)], to_bytes("1"));
      s->wait(keys, kLimit);
    } else if (pattern == Pattern::barrier) {
      store_barrier(*s, round + "/barrier", i, clients, kLimit);
    } else if (pattern == Pattern::round) {
      if (!round_arrive(*s, round + "/round", i, clients, kLimit).empty()) throw StoreError("bench: round timed out");
    } else if (pattern == Pattern::arrive) {
      if (!s->arrive(round + "/arrive", i, clients, kLimit).empty()) throw StoreError("bench: arrive timed out");
    } else if (pattern == Pattern::gather) {
      RoundOptions r;
      r.prefix = round + "/gather";
      r.rank = i;
      r.size = clients;
      r.timeout = kLimit;
      if (store_all_gather(*s, r, Bytes(16, 'v')).size() != static_cast<std::size_t>(clients))
        throw StoreError("bench: gathered the wrong number of values");
    }
    return now_s();
  });
  control->wait({round + "/all-ready"}, 120s);
  const double t_go = now_s();
  control->set(go, {});
  const auto results = kids.collect(kLimit + 60s);
  double last = 0;
  bool ok = true;
  for (double r : results) {
    ok = ok && r > 0;
    last = std::max(last, r);
  }
  if (!ok) return {-1, -1};
  return {last - t_go, last - t_spawn};
}

std::string fmt_rate(double r) {
  if (r <= 0) return "failed";
  if (r >= 1e6) return fmt::format("{:.2f} M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f} k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

std::string fmt_time(std::pair<double, double> t) {
  if (t.first < 0) return "failed";
  return fmt::format("{:.1f} ms ({:.0f})", t.first * 1e3, t.second * 1e3);
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p <= list.size();) {
    const auto c = std::min(list.find(',', p), list.size());
    out.push_back(list.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

// One TCP store on 127.0.0.1 against each count of client connections in `clients`.
int store_at_scale(const std::vector<int>& clients, int procs, double seconds, const std::vector<Pattern>& patterns) {
  const std::uint64_t fds = tcp_store::raise_fd_limit();
  std::printf("fastrun-bench store --clients: one tcp store on 127.0.0.1, N connections held by %d processes of "
              "N/%d threads; open-file limit %llu; this machine (%ld CPUs); a fresh store per figure\n",
              procs, procs, static_cast<unsigned long long>(fds), ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("rdv: from the release to the last client done (with spawn + connect); keys = set, wait all N keys "
              "(the old pattern); barrier = store_barrier (one arrive); round = add + wait round (barrier before the arrive "
              "op); arrive = Store::arrive; gather = store_all_gather of 16 bytes; release = none (the floor: waking N "
              "waiters)\n");
  std::printf("%-7s | %-7s", "clients", "threads");
  for (Pattern p : patterns) std::printf(" | %-22s", fmt::format("rdv {}", kPatternNames[static_cast<int>(p)]).c_str());
  std::printf(" | %-16s\n", "set+get/s, all N");
  std::printf("%s\n", std::string(38 + 25 * patterns.size(), '-').c_str());
  for (int n : clients) {
    // The server holds one descriptor per client, and every process a share of them.
    if (fds < static_cast<std::uint64_t>(n) + 64)
      throw ConfigError(fmt::format("fastrun-bench store --clients {}: needs more than {} open files, the hard "
                                    "limit here (ulimit -Hn); accepted: at most {}",
                                    n, fds, fds > 64 ? fds - 64 : 0));
    const int threads = n / procs;
    StoreOptions o;
    o.timeout = 120s;
    std::vector<std::pair<double, double>> rdv;
    for (Pattern p : patterns) rdv.push_back(rendezvous(*host_for_bench("tcp://127.0.0.1:0", o), procs, "rdv", threads, p));
    if (seconds <= 0) {
      std::printf("%-7d | %-7d", procs * threads, threads);
      for (const auto& t : rdv) std::printf(" | %-22s", fmt_time(t).c_str());
      std::printf(" | %-16s\n", "-");
      std::fflush(stdout);
      continue;
    }
    auto hosted = host_for_bench("tcp://127.0.0.1:0", o);
    const Bytes value(32, 'v');
    const double r = rate(
        *hosted, procs, seconds, "sg",
        [&](Store& s, int i, std::uint64_t k) {
          const std::string key = fmt::format("c{}/k{}", i, k % 8);
          s.set(key, value);
          if (s.get(key, 10s).size() != value.size()) throw StoreError("bench: wrong value size");
        },
        threads);
    std::printf("%-7d | %-7d", procs * threads, threads);
    for (const auto& t : rdv) std::printf(" | %-22s", fmt_time(t).c_str());
    std::printf(" | %-16s\n", fmt_rate(r).c_str());
    std::fflush(stdout);
  }
  return 0;
}

// The file store beside torch's FileStore, in both set+get mixes (see the top of this file),
// alternating the two stores per mix so that a change of load hits both.
void compare_with_torch_filestore(HostedStore& file, double seconds, std::vector<std::string>& notes) {
  const Bytes value(32, 'v');
  std::printf("\nfile store beside torch.distributed.FileStore (set+get/s; same filesystem: %s)\n",
              runtime_dir().c_str());
  std::printf("%-8s | %-16s | %-16s | %-16s | %-16s | %-9s | %-9s\n", "mix", "file 1 proc", "torch 1 proc",
              "file 4 procs", "torch 4 procs", "ratio 1p", "ratio 4p");
  for (const std::string mix : {"rewrite", "fresh"}) {
    auto set_get = [&](Store& s, int i, std::uint64_t n) {
      const std::string key = mix == "fresh" ? fmt::format("{}/p{}/f{}", mix, i, n) : fmt::format("p{}/k{}", i, n % 64);
      s.set(key, value);
      if (s.get(key, 10s).size() != value.size()) throw StoreError("bench: wrong value size");
    };
    const double r1 = rate(file, 1, seconds, mix + "1", set_get);
    const double r4 = rate(file, 4, seconds, mix + "4", set_get);
    std::string why;
    // In the directory relative file:// stores use, so both measure the same filesystem.
    const auto torch = torch_filestore_rates(seconds, runtime_dir(), mix, why);
    if (torch.empty()) {
      notes.push_back("torch FileStore comparison skipped: " + why);
      return;
    }
    std::printf("%-8s | %-16s | %-16s | %-16s | %-16s | %-9s | %-9s\n", mix.c_str(), fmt_rate(r1).c_str(),
                fmt_rate(torch.at(1)).c_str(), fmt_rate(r4).c_str(), fmt_rate(torch.at(4)).c_str(),
                fmt::format("{:.2f}x", r1 / torch.at(1)).c_str(), fmt::format("{:.2f}x", r4 / torch.at(4)).c_str());
    std::fflush(stdout);
  }
}

int run_store(int argc, char** argv) {
  double seconds = 1.0;
  std::vector<std::string> kinds = {"shm", "file", "tcp"};
  std::vector<int> clients;
  int procs = 8;
  std::vector<Pattern> patterns = {Pattern::keys, Pattern::barrier};
  CLI::App app("rendezvous store throughput and rendezvous time (shm, file, tcp)", "fastrun-bench store");
  flags::decimal(app, "--seconds", seconds, "seconds per throughput figure; with --clients, 0 skips set+get", 0, 3600);
  app.add_option_function<std::string>("--kinds", [&kinds](const std::string& v) { kinds = split_commas(v); },
                                       "stores to measure, from shm,file,tcp")
      ->type_name("LIST")
      ->default_str("shm,file,tcp");
  app.add_option_function<std::string>(
         "--clients",
         [&clients](const std::string& v) {
           for (const auto& c : split_commas(v)) {
             const auto n = text::to_integer(c, 1, 65536);
             if (!n)
               throw ConfigError(fmt::format("--clients: '{}' is not a count; accepted: 1 to 65536, "
                                             "comma-separated",
                                             c));
             clients.push_back(static_cast<int>(*n));
           }
         },
         "instead: one tcp store against N connections each, e.g. 1024,4096")
      ->type_name("LIST");
  flags::integer(app, "--procs", procs,
                 "processes holding the --clients connections, as threads (each N is rounded down to a multiple)", 1,
                 256);
  app.add_option_function<std::string>(
         "--patterns",
         [&patterns](const std::string& v) {
           patterns.clear();
           for (const auto& name : split_commas(v)) {
             const auto* it = std::find(std::begin(kPatternNames), std::end(kPatternNames), name);
             if (it == std::end(kPatternNames))
               throw ConfigError(fmt::format("fastrun-bench store --patterns: unknown pattern '{}'; accepted: keys, "
                                             "barrier, gather, release, round, arrive (comma-separated)",
                                             name));
             patterns.push_back(static_cast<Pattern>(it - std::begin(kPatternNames)));
           }
         },
         "how the --clients meet, from keys,barrier,gather,release,round,arrive (keys,barrier: the old "
         "wait-for-all-N-keys beside store_barrier)")
      ->type_name("LIST")
      ->default_str("keys,barrier");
  flags::parse(app, argc, argv);
  if (!clients.empty()) {
    for (int& n : clients) n = std::max(procs, n - n % procs);  // whole threads per process
    return store_at_scale(clients, procs, seconds, patterns);
  }
  std::printf("fastrun-bench store: %.1f s per throughput figure, real processes, this machine (%ld CPUs)\n",
              seconds, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-5s | %-16s | %-11s | %-16s | %-14s | %-18s | %-18s\n", "store", "set+get/s 1 proc", "us/rt 1 proc",
              "set+get/s 4 proc", "add/s 4p 1 key", "rdv 32 (w/ spawn)", "rdv 256 (w/ spawn)");
  std::printf("%s\n", std::string(118, '-').c_str());
  std::vector<std::string> notes;
  std::unique_ptr<HostedStore> file_store;  // kept for the comparison with torch's FileStore
  for (const auto& kind : kinds) {
    std::string address;
    if (kind == "shm") address = fmt::format("shm://bench-{}", ::getpid());
    else if (kind == "file") address = fmt::format("file://bench-{}", ::getpid());
    else if (kind == "tcp") address = "tcp://127.0.0.1:0";
    else throw ConfigError(fmt::format("fastrun-bench store: unknown kind '{}'; accepted: shm, file, tcp", kind));
    std::unique_ptr<HostedStore> hosted;
    try {
      StoreOptions o;
      o.timeout = 60s;
      hosted = host_for_bench(address, o);
    } catch (const std::exception& e) {
      notes.push_back(fmt::format("{}: skipped: {}", kind, e.what()));
      continue;
    }
    const Bytes value(32, 'v');
    auto set_get = [&](Store& s, int i, std::uint64_t n) {
      const std::string key = fmt::format("p{}/k{}", i, n % 64);
      s.set(key, value);
      if (s.get(key, 10s).size() != value.size()) throw StoreError("bench: wrong value size");
    };
    const double r1 = rate(*hosted, 1, seconds, "sg1", set_get);
    const double r4 = rate(*hosted, 4, seconds, "sg4", set_get);
    const double a4 = rate(*hosted, 4, seconds, "add4", [](Store& s, int, std::uint64_t) { s.add("counter", 1); });
    const auto t32 = rendezvous(*hosted, 32, "rdv32");
    const auto t256 = rendezvous(*hosted, 256, "rdv256");
    std::printf("%-5s | %-16s | %-11s | %-16s | %-14s | %-18s | %-18s\n", kind.c_str(), fmt_rate(r1).c_str(),
                r1 > 0 ? fmt::format("{:.2f}", 1e6 / r1).c_str() : "-", fmt_rate(r4).c_str(), fmt_rate(a4).c_str(),
                fmt_time(t32).c_str(), fmt_time(t256).c_str());
    std::fflush(stdout);
    if (kind == "file") file_store = std::move(hosted);
  }
  if (file_store) compare_with_torch_filestore(*file_store, seconds, notes);
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

const Registration reg{"store", "rendezvous store throughput and rendezvous time (shm, file, tcp); file beside torch's FileStore "
                       "when python3-torch is installed",
                       &run_store};

}  // namespace
}  // namespace fastrun::bench
