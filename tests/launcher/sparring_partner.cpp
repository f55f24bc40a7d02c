// The launcher's sparring partner: a rank program whose behaviour the tests choose with flags,
// applied in order. `--on R ACTION...` applies the one following action only on rank R, and
// `--on-attempt N ACTION...` only in attempt N (FASTRUN_RESTART_COUNT, 0 when unset); both may
// precede one action.
//   --self N | --self-devices LIST   first flag only: fastrun::launch_self with nproc N / devices
//   --self-log-dir DIR  --self-tag  --self-output MODE  --self-kill-timeout S  --self-run-id ID
//   --self-bind MODE  --self-max-restarts N
//   --exit N            exit with code N
//   --crash segv|abort|kill  die by SIGSEGV / SIGABRT / SIGKILL
//   --sleep S           sleep S seconds (fractions allowed)
//   --ignore-term       ignore SIGTERM from now on
//   --usr1-exit N       exit with code N on SIGUSR1
//   --trap-signals FILE append the name of each SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2 received to
//                       FILE ("%r" = rank), one per line; exit 128+signal after the first three
//   --lines N LEN       print N lines of exactly LEN bytes (+ '\n') to stdout: "r<rank>-<i>-xxx..."
//   --out TEXT / --err TEXT      TEXT + '\n' to stdout / stderr ("%r" = rank, also in --partial)
//   --echo-stdin        read stdin to its end and print "stdin[<rank>]: <what came>" to stdout
//   --partial TEXT      TEXT without newline to stdout, flushed
//   --dump FILE         write argv and environment, length-prefixed ("<len>:<bytes>\n"); "%r" in
//                       FILE becomes the rank
//   --pidfile FILE      write the pid ("%r" = rank)
//   --sigstate FILE     write the SigIgn and SigBlk lines of /proc/self/status ("%r" = rank): the
//                       dispositions and mask the rank started with
//   --placement FILE    write the Cpus_allowed_list line of /proc/self/status and "policy: <P>",
//                       the memory policy numa_maps shows for the stack ("%r" = rank): where
//                       the rank runs and where its memory goes
//   --throw TEXT        throw std::runtime_error(TEXT) out of main (std::terminate)
//   --uncaught          from now on an error of --join/--world-barrier/--world-allreduce is not
//                       caught: it leaves main (std::terminate), as in a program without try/catch
//   --background FILE   start `sleep 30` in the background (not waited for), write its pid to FILE
//   --barrier           pass a barrier of all ranks through FASTRUN_STORE (10 s timeout)
//   --wait-failure      wait (10 s) for the failure key in the store, print it to stderr, exit 7
//   --allreduce         join the job, all-reduce (rank + 1) over the world group, print
//                       "allreduce <sum> <backend>" and "layout rank R of N local L of M node K from
//                       SOURCE" (exit 8 when the sum is wrong)
//   --join              fastrun::join(), print "joined rank R of W from SOURCE" to stdout; on an
//                       error print it to stderr and exit 67. The context lives until main
//                       returns (the README's shape: join, then leave)
//   --world-barrier     a barrier on the joined world (after --join; exit 67 on an error)
//   --world-allreduce   an all-reduce of 4 floats on the joined world (after --join; exit 67 on an
//                       error, printing it to stderr)
//   --shm-leftover      create /dev/shm/fastrun-<run-id>@leftover-<rank> and leave it
//   --rest              stop reading flags (the remaining arguments are only data)
// The actions are CLI11 options that run as they are read (trigger_on_parse), so they run in the
// order given. A missing or bad value, or an unknown flag, exits 64 naming it.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <functional>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "fastrun/launcher/self_launch.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/tools/flags/number_flags.h"

extern char** environ;

namespace {

int g_usr1_code = 0;
void on_usr1(int) { ::_exit(g_usr1_code); }

// --trap-signals: proves which signal reached the rank (a SIGKILL by PDEATHSIG records nothing).
int g_trap_fd = -1;
void on_trapped(int sig) {
  const char* name = sig == SIGINT ? "INT\n" : sig == SIGTERM ? "TERM\n" : sig == SIGHUP ? "HUP\n"
                     : sig == SIGUSR1 ? "USR1\n" : "USR2\n";
  if (::write(g_trap_fd, name, std::strlen(name)) < 0) ::_exit(70);
  if (sig != SIGUSR1 && sig != SIGUSR2) ::_exit(128 + sig);
}

std::string with_rank(std::string s, int rank) {
  const auto p = s.find("%r");
  if (p != std::string::npos) s.replace(p, 2, std::to_string(rank));
  return s;
}

void put(std::FILE* f, const char* s) {
  const std::size_t n = std::strlen(s);
  std::fprintf(f, "%zu:", n);
  std::fwrite(s, 1, n, f);
  std::fputc('\n', f);
}

// fastrun's rank, else an external launcher's (srun, mpirun: the runtime's own reading); -1 alone.
int env_rank() {
  for (const char* name : {"FASTRUN_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
    if (std::getenv(name)) return fastrun::global_rank();
  return -1;
}

// Ends the program with `code` from inside an action (main returns it).
struct Exit {
  int code;
};

// --rest: the flags end here.
struct Rest {};

}  // namespace

int main(int argc, char** argv) {
  namespace flags = fastrun::flags;
  int rank = env_rank();
  CLI::App app("the launcher's sparring partner", "sparring_partner");
  app.set_help_flag();

  // --self N | --self-devices LIST, first: the job starts before the first action.
  fastrun::SelfLaunchOptions self;
  bool self_pending = false;
  const bool self_first = argc > 2 && (std::strcmp(argv[1], "--self") == 0 || std::strcmp(argv[1], "--self-devices") == 0);
  auto start_self = [&] {
    if (!self_pending) return;
    self_pending = false;
    try {
      rank = fastrun::launch_self(argc, argv, self);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "launch_self failed: %s\n", e.what());
      throw Exit{2};
    }
  };
  // Read as they come, like the actions (trigger_on_parse): the job starts at the first action.
  auto on_parse = [](CLI::Option* o) { o->trigger_on_parse()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast); };
  if (self_first) {
    self_pending = true;
    on_parse(flags::integer(app, "--self", self.nproc, "start N CPU ranks with launch_self", 1, 4096));
    on_parse(app.add_option("--self-devices", self.devices, "... or one rank per device of LIST"));
    on_parse(app.add_option("--self-log-dir", self.log_dir, "launch_self's log_dir"));
    on_parse(app.add_flag("--self-tag", self.tag_output, "launch_self's tag_output"));
    on_parse(app.add_option("--self-output", self.output, "launch_self's output"));
    on_parse(flags::decimal(app, "--self-kill-timeout", self.kill_timeout, "launch_self's kill_timeout", 0, 86400));
    on_parse(app.add_option("--self-run-id", self.run_id, "launch_self's run_id"));
    on_parse(app.add_option("--self-bind", self.bind, "launch_self's bind"));
    // Any whole number: launch_self itself must refuse a negative one.
    on_parse(app.add_option_function<std::string>("--self-max-restarts", [&](const std::string& v) {
      self.max_restarts = static_cast<int>(fastrun::text::parse_integer("--self-max-restarts", v, INT_MIN, INT_MAX));
    }, "launch_self's max_restarts"));
  }

  // `--on R` and `--on-attempt N` apply to the one action after them.
  int only_on = -1;
  int only_attempt = -1;
  const int attempt = static_cast<int>(fastrun::env::find_int(fastrun::env::kRestartCount).value_or(0));
  auto active = [&] {
    start_self();
    const bool yes = (only_on < 0 || only_on == rank) && (only_attempt < 0 || only_attempt == attempt);
    only_on = -1;
    only_attempt = -1;
    return yes;
  };
  // An action without a value, and one with a value (its text; "%r" becomes the rank where the
  // help says so).
  auto action = [&](const std::string& name, const std::string& help, std::function<void()> run) {
    on_parse(app.add_flag_callback(name, [&active, run] {
      if (active()) run();
    }, help));
  };
  auto action_with = [&](const std::string& name, const std::string& help,
                         std::function<void(const std::string&)> run) {
    on_parse(app.add_option_function<std::string>(name, [&active, run](const std::string& v) {
      if (active()) run(v);
    }, help));
  };
  auto number = [](const char* name, const std::string& v) { return static_cast<int>(fastrun::text::parse_integer(name, v, INT_MIN, INT_MAX)); };

  on_parse(app.add_option_function<std::string>("--on", [&](const std::string& v) {
    start_self();
    only_on = number("--on", v);
  }, "apply the next action only on rank R"));
  on_parse(app.add_option_function<std::string>("--on-attempt", [&](const std::string& v) {
    start_self();
    only_attempt = number("--on-attempt", v);
  }, "apply the next action only in attempt N (FASTRUN_RESTART_COUNT)"));
  action_with("--exit", "exit with code N", [&](const std::string& v) { std::exit(number("--exit", v)); });
  action_with("--crash", "die by SIGSEGV (segv), SIGABRT (abort) or SIGKILL (kill)", [](const std::string& how) {
    std::fflush(nullptr);
    if (how == "abort") std::abort();
    if (how == "kill") ::raise(SIGKILL);
    // Default action through the raw syscall: a sanitizer's SIGSEGV handler (ASan/TSan
    // intercept sigaction) would otherwise turn the crash into "exit 1".
    struct {
      void* handler;
      unsigned long flags;
      void* restorer;
      unsigned long mask;
    } dfl{};
    ::syscall(SYS_rt_sigaction, SIGSEGV, &dfl, nullptr, sizeof dfl.mask);
    ::syscall(SYS_tgkill, ::getpid(), ::gettid(), SIGSEGV);
  });
  action_with("--sleep", "sleep S seconds (fractions allowed)", [](const std::string& v) {
    const auto s = fastrun::text::to_decimal(v);
    if (!s || *s < 0) throw fastrun::ConfigError("--sleep '" + v + "': expected seconds");
    std::this_thread::sleep_for(std::chrono::duration<double>(*s));
  });
  action("--stop", "stop with SIGSTOP until someone sends SIGCONT", [] {
    std::fflush(nullptr);
    ::raise(SIGSTOP);
  });
  action("--ignore-term", "ignore SIGTERM from now on", [] { ::signal(SIGTERM, SIG_IGN); });
  action_with("--usr1-exit", "exit with code N on SIGUSR1", [&](const std::string& v) {
    g_usr1_code = number("--usr1-exit", v);
    ::signal(SIGUSR1, on_usr1);
  });
  action_with("--trap-signals", "append the name of each signal received to FILE (%r)", [&](const std::string& v) {
    const std::string file = with_rank(v, rank);
    g_trap_fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
    if (g_trap_fd < 0) throw Exit{65};
    struct sigaction sa {};
    sa.sa_handler = on_trapped;
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
  });
  on_parse(app.add_option_function<std::vector<std::string>>("--lines", [&](const std::vector<std::string>& v) {
    if (!active()) return;
    const int n = number("--lines", v[0]), len = number("--lines", v[1]);
    std::string line;
    for (int k = 0; k < n; ++k) {
      line = "r" + std::to_string(rank) + "-" + std::to_string(k) + "-";
      line.resize(static_cast<std::size_t>(len), 'x');
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
    std::fflush(stdout);
  }, "print N lines of exactly LEN bytes (+ newline) to stdout")->expected(2));
  for (const char* name : {"--out", "--err"}) {
    std::FILE* f = name == std::string("--out") ? stdout : stderr;
    action_with(name, "TEXT (%r) and a newline to stdout / stderr", [&rank, f](const std::string& v) {
      std::fprintf(f, "%s\n", with_rank(v, rank).c_str());
      std::fflush(f);
    });
  }
  action("--echo-stdin", "print what came on stdin", [&] {
    std::string in;
    char buf[4096];
    for (ssize_t n; (n = ::read(0, buf, sizeof buf)) > 0;) in.append(buf, static_cast<std::size_t>(n));
    std::printf("stdin[%d]: %s\n", rank, in.c_str());
    std::fflush(stdout);
  });
  action_with("--partial", "TEXT (%r) without newline to stdout, flushed", [&](const std::string& v) {
    std::fputs(with_rank(v, rank).c_str(), stdout);
    std::fflush(stdout);
  });
  action_with("--dump", "write argv and the environment to FILE (%r)", [&](const std::string& v) {
    std::FILE* f = std::fopen(with_rank(v, rank).c_str(), "wb");
    if (!f) throw Exit{65};
    std::fprintf(f, "argc %d\n", argc);
    for (int k = 0; k < argc; ++k) put(f, argv[k]);
    for (char** e = environ; *e; ++e) put(f, *e);
    std::fclose(f);
  });
  action_with("--pidfile", "write the pid to FILE (%r)", [&](const std::string& v) {
    std::FILE* f = std::fopen(with_rank(v, rank).c_str(), "w");
    if (!f) throw Exit{65};
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  });
  action_with("--sigstate", "write the SigIgn and SigBlk lines of /proc/self/status to FILE (%r)",
              [&](const std::string& v) {
                std::FILE* in = std::fopen("/proc/self/status", "r");
                std::FILE* out = std::fopen(with_rank(v, rank).c_str(), "w");
                if (!in || !out) throw Exit{65};
                char line[256];
                while (std::fgets(line, sizeof line, in)) {
                  if (std::strncmp(line, "SigIgn:", 7) == 0 || std::strncmp(line, "SigBlk:", 7) == 0)
                    std::fputs(line, out);
                }
                std::fclose(in);
                std::fclose(out);
              });
  action_with("--placement", "write Cpus_allowed_list and the memory policy to FILE (%r)", [&](const std::string& v) {
    std::FILE* status = std::fopen("/proc/self/status", "r");
    std::FILE* maps = std::fopen("/proc/self/numa_maps", "r");
    std::FILE* out = std::fopen(with_rank(v, rank).c_str(), "w");
    if (!status || !out) throw Exit{65};
    char line[4096];
    while (std::fgets(line, sizeof line, status))
      if (std::strncmp(line, "Cpus_allowed_list:", 18) == 0) std::fputs(line, out);
    // numa_maps: "<address> <policy> ..." per mapping; a mapping without a policy of its own
    // shows the task's, which is what the launcher sets.
    std::string policy = "unknown";
    while (maps && std::fgets(line, sizeof line, maps)) {
      if (!std::strstr(line, "stack")) continue;
      const char* sp = std::strchr(line, ' ');
      if (sp) policy.assign(sp + 1, std::strcspn(sp + 1, " \n"));
    }
    std::fprintf(out, "policy: %s\n", policy.c_str());
    std::fclose(status);
    if (maps) std::fclose(maps);
    std::fclose(out);
  });
  action_with("--throw", "throw std::runtime_error(TEXT) out of main", [](const std::string& v) {
    throw std::runtime_error(v);
  });
  bool uncaught = false;
  action("--uncaught", "errors of --join/--world-barrier/--world-allreduce leave main", [&] { uncaught = true; });
  action_with("--background", "start `sleep 30` in the background, write its pid to FILE (%r)",
              [&](const std::string& v) {
                const pid_t child = ::fork();
                if (child == 0) {
                  ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
                  ::_exit(127);
                }
                std::FILE* f = std::fopen(with_rank(v, rank).c_str(), "w");
                if (!f || child < 0) throw Exit{65};
                std::fprintf(f, "%d\n", static_cast<int>(child));
                std::fclose(f);
              });
  // The store actions: an error is printed and exits 66.
  auto with_store = [&](const char* name, const char* help, std::function<void(fastrun::Store&)> run) {
    action(name, help, [name, run] {
             try {
               auto store = fastrun::connect_store(std::getenv("FASTRUN_STORE"));
               run(*store);
             } catch (const std::exception& e) {
               std::fprintf(stderr, "sparring_partner: %s: %s\n", name, e.what());
               throw Exit{66};
             }
           });
  };
  with_store("--barrier", "a barrier of all ranks through FASTRUN_STORE (10 s)", [](fastrun::Store& store) {
    fastrun::store_barrier(store, "sparring/barrier", static_cast<int>(fastrun::env::get_int(fastrun::env::kWorldSize)),
                           std::chrono::seconds(10));
  });
  with_store("--wait-failure", "wait (10 s) for the failure key, print it to stderr, exit 7", [](fastrun::Store& store) {
    const auto v = store.get(fastrun::kFailureKey, std::chrono::seconds(10));
    std::fprintf(stderr, "saw failure: %s\n", fastrun::to_string(v).c_str());
    throw Exit{7};
  });
  with_store("--until-failure", "wait (10 s) for the failure key, then go on", [](fastrun::Store& store) {
    (void)store.get(fastrun::kFailureKey, std::chrono::seconds(10));
  });
  // What a survivor records when its connection to a dying peer breaks (gloo_backend.cpp).
  with_store("--blame-rank-0", "record \"rank 0: process gone\" as the job's failure", [](fastrun::Store& store) {
    fastrun::record_failure(store, "rank 0: process gone (sparring_partner --blame-rank-0)");
  });
  action("--allreduce", "join, all-reduce (rank + 1), print the sum and the layout", [] {
    int wrong = 0;
    try {
      auto ctx = fastrun::join();
      double v = ctx->rank() + 1;
      ctx->world().all_reduce(fastrun::view_of(&v, 1))->wait();
      const int n = ctx->world_size();
      std::printf("allreduce %g %s\nlayout rank %d of %d local %d of %d node %d from %s\n", v,
                  ctx->world().backend_name().c_str(), ctx->rank(), n, ctx->local_rank(), ctx->local_world_size(),
                  ctx->node_rank(), ctx->source().c_str());
      std::fflush(stdout);
      wrong = v != n * (n + 1) / 2.0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sparring_partner: --allreduce: %s\n", e.what());
      throw Exit{66};
    }
    if (wrong) throw Exit{8};
  });
  // --join and what runs on the joined world: an error is printed and exits 67 (unless --uncaught).
  std::shared_ptr<fastrun::Context> ctx;
  auto on_world = [&](const char* name, const std::string& help, std::function<void()> run) {
    action(name, help, [&uncaught, name, run] {
      try {
        run();
      } catch (const std::exception& e) {
        if (uncaught) throw;
        std::fprintf(stderr, "sparring_partner: %s: %s\n", name, e.what());
        throw Exit{67};
      }
    });
  };
  on_world("--join", "fastrun::join(); print \"joined rank R of W from SOURCE\"", [&] {
    ctx = fastrun::join();
    std::printf("joined rank %d of %d from %s\n", ctx->rank(), ctx->world_size(), ctx->source().c_str());
    std::fflush(stdout);
  });
  on_world("--world-barrier", "a barrier on the joined world", [&] { ctx->world().barrier()->wait(); });
  on_world("--world-allreduce", "an all-reduce of 4 floats on the joined world", [&] {
    float v[4] = {1, 2, 3, 4};
    ctx->world().all_reduce(fastrun::view_of(v, 4))->wait();
  });
  on_world("--world-broadcast",
           "a broadcast from every rank in turn on the joined world, 5 and 300,000 floats,\n"
           "values checked; print \"broadcast ok BACKEND\"",
           [&] {
             const int n = ctx->world_size();
             for (const std::size_t count : {std::size_t{5}, std::size_t{300000}}) {
               std::vector<float> v(count);
               for (int root = 0; root < n; ++root) {
                 for (std::size_t i = 0; i < count; ++i)
                   v[i] = ctx->rank() == root ? static_cast<float>(root * 1000 + static_cast<int>(i % 1000)) : -1.0f;
                 ctx->world().broadcast(fastrun::view_of(v.data(), count), {root})->wait();
                 for (std::size_t i = 0; i < count; ++i)
                   if (v[i] != static_cast<float>(root * 1000 + static_cast<int>(i % 1000)))
                     throw std::runtime_error("broadcast of " + std::to_string(count) + " floats from rank " +
                                              std::to_string(root) + ": element " + std::to_string(i) + " is " +
                                              std::to_string(v[i]));
               }
             }
             std::printf("broadcast ok %s\n", ctx->world().backend_name().c_str());
             std::fflush(stdout);
           });
  on_world("--world-all-gather",
           "an all-gather on the joined world, 3 and 150,000 floats per rank, values checked;\n"
           "print \"all_gather ok BACKEND\"",
           [&] {
             const auto n = static_cast<std::size_t>(ctx->world_size());
             for (const std::size_t count : {std::size_t{3}, std::size_t{150000}}) {
               auto value = [](std::size_t rank, std::size_t i) { return static_cast<float>(rank * 1000 + i % 1000); };
               std::vector<float> in(count), out(count * n, -1.0f);
               for (std::size_t i = 0; i < count; ++i) in[i] = value(static_cast<std::size_t>(ctx->rank()), i);
               ctx->world().all_gather(fastrun::view_of(in.data(), count), fastrun::view_of(out.data(), out.size()))->wait();
               for (std::size_t j = 0; j < out.size(); ++j)
                 if (out[j] != value(j / count, j % count))
                   throw std::runtime_error("all_gather of " + std::to_string(count) + " floats: element " +
                                            std::to_string(j) + " is " + std::to_string(out[j]));
             }
             std::printf("all_gather ok %s\n", ctx->world().backend_name().c_str());
             std::fflush(stdout);
           });
  on_world("--world-device-refused",
           "all_reduce, broadcast and all_gather of a CUDA-tagged view on the joined world, each\n"
           "refused before it starts; then an all-reduce on the same group; print \"device refused BACKEND\"",
           [&] {
             float v[4] = {1, 2, 3, 4};
             std::vector<float> out(4 * static_cast<std::size_t>(ctx->world_size()));
             const auto device = fastrun::view_of(v, 4, fastrun::DeviceKind::cuda);
             const auto host_out = fastrun::view_of(out.data(), out.size());
             const std::pair<const char*, std::function<void()>> calls[] = {
                 {"all_reduce", [&] { ctx->world().all_reduce(device); }},
                 {"broadcast", [&] { ctx->world().broadcast(device, {0}); }},
                 {"all_gather", [&] { ctx->world().all_gather(device, host_out); }},
             };
             for (const auto& [op, call] : calls) {
               try {
                 call();
                 throw std::runtime_error(std::string(op) + " of a CUDA-tagged view was not refused");
               } catch (const fastrun::ConfigError& e) {
                 if (!std::strstr(e.what(), op) || !std::strstr(e.what(), "host memory only"))
                   throw std::runtime_error(std::string(op) + " refused in other words: " + e.what());
               }
             }
             ctx->world().all_reduce(fastrun::view_of(v, 4))->wait();  // the group is still usable
             if (v[0] != static_cast<float>(ctx->world_size())) throw std::runtime_error("all-reduce after the refusals");
             std::printf("device refused %s\n", ctx->world().backend_name().c_str());
             std::fflush(stdout);
           });
  action("--shm-leftover", "create /dev/shm/fastrun-<run-id>@leftover-<rank> and leave it", [&] {
    const std::string name =
        std::string("/dev/shm/fastrun-") + std::getenv("FASTRUN_RUN_ID") + "@leftover-" + std::to_string(rank);
    const int fd = ::open(name.c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) ::close(fd);
  });
  on_parse(app.add_flag_callback("--rest", [] { throw Rest{}; }, "stop reading flags: the rest is data"));

  try {
    app.parse(argc, argv);
    start_self();  // --self with no action after it
  } catch (const Exit& e) {
    return e.code;
  } catch (const Rest&) {
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sparring_partner: %s\n", e.what());
    return 64;
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "sparring_partner: %s\n", e.what());
    return 64;
  }
  return 0;
}
