#include "process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <set>
#include <sstream>
#include <stdexcept>

#include <catch2/catch.hpp>

#include "test_support/time_limits.h"

extern char** environ;

namespace fastrun::test {

Process::Process(std::vector<std::string> argv, std::map<std::string, std::optional<std::string>> env,
                 const std::filesystem::path& io_dir, const std::optional<SignalState>& signals) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  out_path_ = (io_dir / ("proc-" + std::to_string(n) + ".out")).string();
  err_path_ = (io_dir / ("proc-" + std::to_string(n) + ".err")).string();
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (!env.count(name)) envs.push_back(entry);
  }
  for (auto& [name, value] : env) {
    if (value) envs.push_back(name + "=" + *value);
  }
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  sigset_t mask;
  sigemptyset(&mask);
  if (signals) {
    for (int sig : signals->blocked) sigaddset(&mask, sig);
  }
  start_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    if (signals) {
      for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
      }
      for (int sig : signals->ignored) ::signal(sig, SIG_IGN);
    }
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out);
  ::close(err);
  ::close(in);
  REQUIRE(pid_ > 0);
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  REQUIRE(pidfd_ >= 0);
}

Process::~Process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  if (pidfd_ >= 0) ::close(pidfd_);
}

void Process::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<RunResult> Process::wait(std::chrono::milliseconds timeout) {
  pollfd p{pidfd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  RunResult res;
  ::waitpid(pid_, &res.status, 0);
  pid_ = -1;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  res.exit_code = WIFEXITED(res.status) ? WEXITSTATUS(res.status) : 128 + WTERMSIG(res.status);
  res.out = read_file(out_path_);
  res.err = read_file(err_path_);
  return res;
}

RunResult Process::finish(std::chrono::milliseconds timeout) {
  auto r = wait(timeout);
  if (!r) {
    ::kill(pid_, SIGKILL);
    FAIL("process " << pid_ << " did not finish within " << timeout.count() << " ms; stderr so far:\n"
                    << read_file(err_path_));
  }
  return *r;
}

RunResult run(std::vector<std::string> argv, std::map<std::string, std::optional<std::string>> env,
              std::chrono::milliseconds timeout) {
  TempDir io;
  Process p(std::move(argv), std::move(env), io.path());
  return p.finish(timeout);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool process_gone(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return true;
  std::string line;
  std::getline(f, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z' || line[close + 2] == 'X';
}

std::vector<pid_t> read_rank_pids(const std::filesystem::path& dir, int first, int last) {
  std::vector<pid_t> pids;
  for (int rank = first; rank < last; ++rank) {
    const auto f = dir / ("pid-" + std::to_string(rank));
    // A harness limit (time_limits.h): at load 12 a rank of a gloo job took over 5 s to get here.
    const auto deadline = std::chrono::steady_clock::now() + scaled(std::chrono::seconds(20));
    while (read_file(f).find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string text = read_file(f);
    INFO("pidfile " << f.string() << " holds '" << text << "'");
    REQUIRE(text.find('\n') != std::string::npos);
    pids.push_back(std::stoi(text));
  }
  return pids;
}

void wait_until_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (pid_t pid : pids)
    while (!process_gone(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

std::string wait_for_content(const std::filesystem::path& p, const std::string& expected,
                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text = read_file(p);
  while (text != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    text = read_file(p);
  }
  return text;
}

std::vector<std::string> shm_entries(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

Dump read_dump(const std::filesystem::path& p) {
  const std::string text = read_file(p);
  Dump d;
  std::size_t pos = text.find('\n');
  REQUIRE(pos != std::string::npos);
  const int argc = std::atoi(text.c_str() + 5);
  ++pos;
  int k = 0;
  while (pos < text.size()) {
    const std::size_t colon = text.find(':', pos);
    const std::size_t len = std::stoul(text.substr(pos, colon - pos));
    std::string item = text.substr(colon + 1, len);
    pos = colon + 1 + len + 1;
    if (k < argc) d.argv.push_back(item);
    else {
      const auto eq = item.find('=');
      d.env[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
    }
    ++k;
  }
  return d;
}

}  // namespace fastrun::test
