// The launcher's sparring partner: a rank program whose behaviour the tests choose with flags,
// applied in order. `--on R ACTION...` applies the one following action only on rank R.
//   --self N | --self-devices LIST   first flag only: fastrun::launch_self with nproc N / devices
//   --self-log-dir DIR  --self-tag  --self-output MODE  --self-kill-timeout S  --self-run-id ID
//   --self-bind MODE
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
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fastrun/launcher/self_launch.h"
#include "fastrun/runtime/context.h"
#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/process_group/process_group.h"
#include "fastrun/runtime/store/factory.h"

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

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  int rank = env_rank();
  if (argc > 2 && (std::strcmp(argv[1], "--self") == 0 || std::strcmp(argv[1], "--self-devices") == 0)) {
    fastrun::SelfLaunchOptions opt;
    if (std::strcmp(argv[1], "--self") == 0) opt.nproc = std::atoi(argv[2]);
    else opt.devices = argv[2];
    i = 3;
    while (i + 1 < argc || (i < argc && std::strcmp(argv[i], "--self-tag") == 0)) {
      const std::string a = argv[i];
      if (a == "--self-log-dir") opt.log_dir = argv[i + 1], i += 2;
      else if (a == "--self-output") opt.output = argv[i + 1], i += 2;
      else if (a == "--self-kill-timeout") opt.kill_timeout = std::atof(argv[i + 1]), i += 2;
      else if (a == "--self-run-id") opt.run_id = argv[i + 1], i += 2;
      else if (a == "--self-bind") opt.bind = argv[i + 1], i += 2;
      else if (a == "--self-tag") opt.tag_output = true, i += 1;
      else break;
    }
    try {
      rank = fastrun::launch_self(argc, argv, opt);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "launch_self failed: %s\n", e.what());
      return 2;
    }
  }
  int only_on = -1;
  bool uncaught = false;  // --uncaught
  std::shared_ptr<fastrun::Context> ctx;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sparring_partner: %s needs a value\n", a.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--rest") break;
    if (a == "--on") {
      only_on = std::atoi(next());
      continue;
    }
    const bool active = only_on < 0 || only_on == rank;
    only_on = -1;
    if (a == "--exit") {
      const int code = std::atoi(next());
      if (active) std::exit(code);
    } else if (a == "--crash") {
      const std::string how = next();
      if (active) {
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
      }
    } else if (a == "--sleep") {
      const double s = std::atof(next());
      if (active) std::this_thread::sleep_for(std::chrono::duration<double>(s));
    } else if (a == "--ignore-term") {
      if (active) ::signal(SIGTERM, SIG_IGN);
    } else if (a == "--usr1-exit") {
      const int code = std::atoi(next());
      if (active) {
        g_usr1_code = code;
        ::signal(SIGUSR1, on_usr1);
      }
    } else if (a == "--trap-signals") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        g_trap_fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
        if (g_trap_fd < 0) return 65;
        struct sigaction sa {};
        sa.sa_handler = on_trapped;
        sa.sa_flags = SA_RESTART;
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
      }
    } else if (a == "--lines") {
      const long n = std::atol(next());
      const long len = std::atol(next());
      if (active) {
        std::string line;
        for (long k = 0; k < n; ++k) {
          line = "r" + std::to_string(rank) + "-" + std::to_string(k) + "-";
          line.resize(static_cast<std::size_t>(len), 'x');
          line += '\n';
          std::fwrite(line.data(), 1, line.size(), stdout);
        }
        std::fflush(stdout);
      }
    } else if (a == "--out" || a == "--err") {
      const std::string text_s = with_rank(next(), rank);
      const char* text = text_s.c_str();
      if (active) {
        std::FILE* f = a == "--out" ? stdout : stderr;
        std::fprintf(f, "%s\n", text);
        std::fflush(f);
      }
    } else if (a == "--echo-stdin") {
      if (active) {
        std::string in;
        char buf[4096];
        for (ssize_t n; (n = ::read(0, buf, sizeof buf)) > 0;) in.append(buf, static_cast<std::size_t>(n));
        std::printf("stdin[%d]: %s\n", rank, in.c_str());
        std::fflush(stdout);
      }
    } else if (a == "--partial") {
      const std::string text_s = with_rank(next(), rank);
      const char* text = text_s.c_str();
      if (active) {
        std::fputs(text, stdout);
        std::fflush(stdout);
      }
    } else if (a == "--dump") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        std::FILE* f = std::fopen(file.c_str(), "wb");
        if (!f) return 65;
        std::fprintf(f, "argc %d\n", argc);
        for (int k = 0; k < argc; ++k) put(f, argv[k]);
        for (char** e = environ; *e; ++e) put(f, *e);
        std::fclose(f);
      }
    } else if (a == "--pidfile") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        std::FILE* f = std::fopen(file.c_str(), "w");
        if (!f) return 65;
        std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
        std::fclose(f);
      }
    } else if (a == "--sigstate") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        std::FILE* in = std::fopen("/proc/self/status", "r");
        std::FILE* out = std::fopen(file.c_str(), "w");
        if (!in || !out) return 65;
        char line[256];
        while (std::fgets(line, sizeof line, in)) {
          if (std::strncmp(line, "SigIgn:", 7) == 0 || std::strncmp(line, "SigBlk:", 7) == 0) std::fputs(line, out);
        }
        std::fclose(in);
        std::fclose(out);
      }
    } else if (a == "--placement") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        std::FILE* status = std::fopen("/proc/self/status", "r");
        std::FILE* maps = std::fopen("/proc/self/numa_maps", "r");
        std::FILE* out = std::fopen(file.c_str(), "w");
        if (!status || !out) return 65;
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
      }
    } else if (a == "--throw") {
      const char* text = next();
      if (active) throw std::runtime_error(text);
    } else if (a == "--uncaught") {
      if (active) uncaught = true;
    } else if (a == "--background") {
      const std::string file = with_rank(next(), rank);
      if (active) {
        const pid_t child = ::fork();
        if (child == 0) {
          ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
          ::_exit(127);
        }
        std::FILE* f = std::fopen(file.c_str(), "w");
        if (!f || child < 0) return 65;
        std::fprintf(f, "%d\n", static_cast<int>(child));
        std::fclose(f);
      }
    } else if (a == "--barrier" || a == "--wait-failure") {
      if (!active) continue;
      try {
        auto store = fastrun::connect_store(std::getenv("FASTRUN_STORE"));
        if (a == "--barrier") {
          fastrun::store_barrier(*store, "sparring/barrier", std::atoi(std::getenv("FASTRUN_WORLD_SIZE")),
                                 std::chrono::seconds(10));
        } else {
          const auto v = store->get(fastrun::kFailureKey, std::chrono::seconds(10));
          std::fprintf(stderr, "saw failure: %s\n", fastrun::to_string(v).c_str());
          std::exit(7);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sparring_partner: %s: %s\n", a.c_str(), e.what());
        return 66;
      }
    } else if (a == "--allreduce") {
      if (!active) continue;
      try {
        auto ctx = fastrun::join();
        double v = ctx->rank() + 1;
        ctx->world().all_reduce(fastrun::view_of(&v, 1))->wait();
        const int n = ctx->world_size();
        std::printf("allreduce %g %s\nlayout rank %d of %d local %d of %d node %d from %s\n", v,
                    ctx->world().backend_name().c_str(), ctx->rank(), n, ctx->local_rank(), ctx->local_world_size(),
                    ctx->node_rank(), ctx->source().c_str());
        std::fflush(stdout);
        if (v != n * (n + 1) / 2.0) return 8;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sparring_partner: --allreduce: %s\n", e.what());
        return 66;
      }
    } else if (a == "--join" || a == "--world-barrier" || a == "--world-allreduce") {
      if (!active) continue;
      try {
        if (a == "--join") {
          ctx = fastrun::join();
          std::printf("joined rank %d of %d from %s\n", ctx->rank(), ctx->world_size(), ctx->source().c_str());
          std::fflush(stdout);
        } else if (a == "--world-barrier") {
          ctx->world().barrier()->wait();
        } else {
          float v[4] = {1, 2, 3, 4};
          ctx->world().all_reduce(fastrun::view_of(v, 4))->wait();
        }
      } catch (const std::exception& e) {
        if (uncaught) throw;
        std::fprintf(stderr, "sparring_partner: %s: %s\n", a.c_str(), e.what());
        return 67;
      }
    } else if (a == "--shm-leftover") {
      if (active) {
        const std::string name = std::string("/dev/shm/fastrun-") + std::getenv("FASTRUN_RUN_ID") + "@leftover-" +
                                 std::to_string(rank);
        const int fd = ::open(name.c_str(), O_CREAT | O_WRONLY, 0600);
        if (fd >= 0) ::close(fd);
      }
    } else {
      std::fprintf(stderr, "sparring_partner: unknown flag '%s'\n", a.c_str());
      return 64;
    }
  }
  return 0;
}
