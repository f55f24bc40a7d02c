#include "bench_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

extern char** environ;

namespace fastrun::bench {

double now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void write_stamp(const std::string& path) {
  const std::string t = fmt::format("{:.6f}\n", now_ms());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    (void)!::write(fd, t.data(), t.size());
    ::close(fd);
  }
}

double read_stamp(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  double t = -1;
  if (f) {
    if (std::fscanf(f, "%lf", &t) != 1) t = -1;
    std::fclose(f);
  }
  return t;
}

pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env, bool quiet_stderr,
            const std::string& err_to) {
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
    if (!err_to.empty()) {
      const int err = ::open(err_to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
    }
    ::execvpe(a[0], a.data(), e.data());  // PATH lookup for an --on-node prefix (nsenter, ssh)
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::string find_fastrun(const std::string& given, const std::string& subject) {
  if (!given.empty()) return given;
  const auto dir = std::filesystem::path(self_exe()).parent_path();
  for (const auto& c : {dir / "fastrun", dir / ".." / "tools" / "fastrun"})
    if (std::filesystem::exists(c)) return c.string();
  throw ConfigError(fmt::format("{}: cannot find the fastrun binary; pass --fastrun PATH", subject));
}

}  // namespace fastrun::bench
