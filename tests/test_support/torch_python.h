#pragma once
// PyTorch from Python, for tests that check fastrun against the real thing (docs/torchrun.md):
// Debian's python3-torch under /usr/bin/python3 (a python3 earlier on PATH, e.g. pyenv's, may
// have no torch); FASTRUN_TEST_TORCH_PYTHON names another interpreter (a path without torch
// shows the skips). Tests that need it call torch_python_available() and, when false, skip with
// skip.h's marker.
//
// TorchStoreServer: a real torch.distributed.TCPStore server (is_master=True) on 127.0.0.1 and a
// free port, in a /usr/bin/python3 child. It lives until the object is destroyed: then its stdin
// closes, it exits, and it is reaped (SIGKILL after 5 s); PR_SET_PDEATHSIG kills it should the
// test process die first. It is a HostedStore, so the store conformance suite can use it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "fastrun/runtime/store/factory.h"

namespace fastrun::test {

inline const char* torch_python() {
  const char* p = std::getenv("FASTRUN_TEST_TORCH_PYTHON");
  return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}

// True when torch_python() finds the torch package (found without importing it: ~30 ms).
inline bool torch_python_available() {
  static const bool available = [] {
    if (::access(torch_python(), X_OK) != 0) return false;
    const std::string cmd = std::string(torch_python()) +
                            " -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(\"torch\") is None)'"
                            " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  return available;
}

// The skip reason of a case that needs torch.
inline std::string no_torch_reason() {
  return std::string(torch_python()) + " has no torch (Debian: apt-get install python3-torch)";
}

class TorchStoreServer final : public HostedStore {
 public:
  explicit TorchStoreServer(std::chrono::seconds start_timeout = std::chrono::seconds(60)) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("TorchStoreServer: pipe2 failed");
    const pid_t parent = ::getpid();
    const char* python = torch_python();  // before fork: the child makes only async-signal-safe calls
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("TorchStoreServer: fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      const char* script =
          "import datetime, sys\n"
          "import torch.distributed as d\n"
          "s = d.TCPStore('127.0.0.1', 0, is_master=True, timeout=datetime.timedelta(seconds=60),"
          " wait_for_workers=False)\n"
          "print(s.port, flush=True)\n"
          "sys.stdin.read()\n";
      ::execl(python, python, "-c", script, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    // Read the port line, within start_timeout (importing torch takes a few seconds).
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + start_timeout;
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out[0], POLLIN, 0};
      char buf[64];
      ssize_t n = 0;
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0 || (n = ::read(out[0], buf, sizeof buf)) <= 0)
        break;
      line.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    port_ = std::atoi(line.c_str());
    if (port_ <= 0) {
      stop();
      throw std::runtime_error("TorchStoreServer: " + std::string(torch_python()) +
                               " did not start a torch.distributed.TCPStore (no port printed)");
    }
  }
  ~TorchStoreServer() override { stop(); }
  TorchStoreServer(const TorchStoreServer&) = delete;
  TorchStoreServer& operator=(const TorchStoreServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const override { return "c10d://127.0.0.1:" + std::to_string(port_); }
  std::string token() const override { return ""; }
  std::unique_ptr<Store> connect() override {
    StoreOptions o;
    o.timeout = std::chrono::seconds(20);
    return connect_store(address(), o);
  }

 private:
  void stop() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
    if (pid_ <= 0) return;
    for (int i = 0; i < 500; ++i) {  // 5 s to leave on its own
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

}  // namespace fastrun::test
