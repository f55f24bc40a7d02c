#pragma once
// PyTorch from Python, for tests that check fastrun against the real thing (docs/torchrun.md):
// Debian's python3-torch (1.13) under /usr/bin/python3 (a python3 earlier on PATH, e.g.
// pyenv's, may have no torch); FASTRUN_TEST_TORCH_PYTHON names another interpreter (a path
// without torch shows the skips). Tests that need it call torch_python_available() and, when
// false, skip with skip.h's marker.
//
// torch 2.x, whose TCPStore speaks another protocol (runtime/store/c10d/c10d_protocol.h), comes
// from a venv made by tools/install-torch2.sh: its python is FASTRUN_TORCH2_PYTHON from the
// environment, else the CMake cache variable of the same name (compiled in as
// FASTRUN_TORCH2_PYTHON_DEFAULT), else the script's default venv. torch2_python_available()
// says whether it is there; the 2.x cases skip with no_torch2_reason() when not.
//
// TorchStoreServer: a real torch.distributed.TCPStore server (is_master=True) on 127.0.0.1 and a
// free port, in a python child: torch 1.13's, or torch 2.x's libuv or legacy one (TorchServer).
// It lives until the object is destroyed: then its stdin closes, it exits, and it is reaped
// (SIGKILL after 5 s); PR_SET_PDEATHSIG kills it should the test process die first. It is a
// HostedStore, so the store conformance suite can use it.
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

#ifndef FASTRUN_TORCH2_PYTHON_DEFAULT
#define FASTRUN_TORCH2_PYTHON_DEFAULT ""
#endif

namespace fastrun::test {

inline const char* torch_python() {
  const char* p = std::getenv("FASTRUN_TEST_TORCH_PYTHON");
  return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}

inline const char* torch2_python() {
  const char* p = std::getenv("FASTRUN_TORCH2_PYTHON");
  if (p != nullptr && *p != '\0') return p;
  if (*FASTRUN_TORCH2_PYTHON_DEFAULT != '\0') return FASTRUN_TORCH2_PYTHON_DEFAULT;
  return "/var/cache/fastrun/torch2-venv/bin/python";  // tools/install-torch2.sh's default
}

namespace detail {
// True when `python` runs `check` with exit status 0 (output discarded).
inline bool python_says_yes(const char* python, const char* check) {
  if (::access(python, X_OK) != 0) return false;
  const std::string cmd = std::string(python) + " -c '" + check + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}
}  // namespace detail

// True when torch_python() finds the torch package (found without importing it: ~30 ms).
inline bool torch_python_available() {
  static const bool available = detail::python_says_yes(
      torch_python(), "import importlib.util, sys; sys.exit(importlib.util.find_spec(\"torch\") is None)");
  return available;
}

// True when torch2_python() has a torch 2.x (its version read from the package metadata,
// without importing torch).
inline bool torch2_python_available() {
  static const bool available = detail::python_says_yes(
      torch2_python(), "import importlib.metadata as m, sys; sys.exit(int(m.version(\"torch\").split(\".\")[0]) != 2)");
  return available;
}

// The skip reason of a case that needs torch.
inline std::string no_torch_reason() {
  return std::string(torch_python()) + " has no torch (Debian: apt-get install python3-torch)";
}

inline std::string no_torch2_reason() {
  return std::string(torch2_python()) +
         " has no torch 2.x (make the venv with tools/install-torch2.sh; set FASTRUN_TORCH2_PYTHON or the CMake "
         "cache variable FASTRUN_TORCH2_PYTHON to its bin/python)";
}

// PyPI's torch 2.x warns on import when numpy is absent (the venv has none: TCPStore needs none),
// and its libuv server logs a stack trace for each request it refuses (a test makes one):
// keep the test output for what fails.
#define FASTRUN_TEST_QUIET_TORCH2                                                        \
  "import os, warnings; warnings.filterwarnings('ignore', 'Failed to initialize NumPy')\n" \
  "os.environ['TORCH_CPP_LOG_LEVEL'] = 'ERROR'\n"

// torch 2.x's servers (both) look up the peer's host name of every connection they accept, for
// a log line, on their one thread: a server listening on its own dual-stack socket sees
// ::ffff:127.0.0.1, which /etc/hosts does not name, and asks DNS. One lost reply stalls every
// client for the resolver's 5 s per try (a CI run saw 10.0 s, an strace here 5.0 s twice in one
// case). An IPv4 socket on 127.0.0.1, handed over with master_listen_fd, makes the peer
// 127.0.0.1, which /etc/hosts names.
#define FASTRUN_TEST_TORCH2_LISTEN                                                            \
  "import socket\n"                                                                           \
  "import torch.distributed as d\n"                                                           \
  "listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"                           \
  "listening.bind(('127.0.0.1', 0))\n"                                                        \
  "listening.listen(4096)\n"                                                                  \
  "port = listening.getsockname()[1]\n"

// Which TCPStore server a TorchStoreServer runs.
enum class TorchServer {
  torch1,         // torch_python(): Debian's torch 1.13
  torch2_libuv,   // torch2_python(), TCPStore(..., use_libuv=True): the default from 2.4
  torch2_legacy,  // torch2_python(), TCPStore(..., use_libuv=False)
};

inline const char* server_python(TorchServer s) { return s == TorchServer::torch1 ? torch_python() : torch2_python(); }
inline bool server_available(TorchServer s) {
  return s == TorchServer::torch1 ? torch_python_available() : torch2_python_available();
}
inline std::string no_server_reason(TorchServer s) {
  return s == TorchServer::torch1 ? no_torch_reason() : no_torch2_reason();
}
inline const char* server_name(TorchServer s) {
  switch (s) {
    case TorchServer::torch1: return "torch 1.13";
    case TorchServer::torch2_libuv: return "torch 2.x libuv";
    case TorchServer::torch2_legacy: return "torch 2.x legacy";
  }
  return "?";
}

class TorchStoreServer final : public HostedStore {
 public:
  explicit TorchStoreServer(TorchServer server = TorchServer::torch1,
                            std::chrono::seconds start_timeout = std::chrono::seconds(60))
      : server_(server) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("TorchStoreServer: pipe2 failed");
    const pid_t parent = ::getpid();
    // Before fork: the child makes only async-signal-safe calls.
    const char* python = server_python(server);
    // The 2.x script checks that the server is the one asked for (libuvBackend says which).
    const char* script =
        server == TorchServer::torch1
            ? "import datetime, sys\n"
              "import torch.distributed as d\n"
              "s = d.TCPStore('127.0.0.1', 0, is_master=True, timeout=datetime.timedelta(seconds=60),"
              " wait_for_workers=False)\n"
              "print(s.port, flush=True)\n"
              "sys.stdin.read()\n"
            : server == TorchServer::torch2_libuv
            ? "import datetime, sys\n" FASTRUN_TEST_QUIET_TORCH2 FASTRUN_TEST_TORCH2_LISTEN
              "s = d.TCPStore('127.0.0.1', port, is_master=True, timeout=datetime.timedelta(seconds=60),"
              " wait_for_workers=False, use_libuv=True, master_listen_fd=listening.fileno())\n"
              "assert s.libuvBackend\n"
              "print(s.port, flush=True)\n"
              "sys.stdin.read()\n"
            : "import datetime, sys\n" FASTRUN_TEST_QUIET_TORCH2 FASTRUN_TEST_TORCH2_LISTEN
              "s = d.TCPStore('127.0.0.1', port, is_master=True, timeout=datetime.timedelta(seconds=60),"
              " wait_for_workers=False, use_libuv=False, master_listen_fd=listening.fileno())\n"
              "assert not s.libuvBackend\n"
              "print(s.port, flush=True)\n"
              "sys.stdin.read()\n";
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("TorchStoreServer: fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
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
      throw std::runtime_error("TorchStoreServer: " + std::string(server_python(server_)) + " did not start the " +
                               server_name(server_) + " torch.distributed.TCPStore within " +
                               std::to_string(start_timeout.count()) + " s (no port printed)");
    }
  }
  ~TorchStoreServer() override { stop(); }
  TorchStoreServer(const TorchStoreServer&) = delete;
  TorchStoreServer& operator=(const TorchStoreServer&) = delete;

  int port() const { return port_; }
  TorchServer server() const { return server_; }
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

  TorchServer server_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

}  // namespace fastrun::test
