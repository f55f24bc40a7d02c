#include "fastrun/runtime/backend/gloo/transport_failure.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <gloo/common/logging.h>

#include "fastrun/runtime/text/number.h"

namespace fastrun::gloo_backend {
namespace {

struct Registry {
  std::mutex mutex;
  std::set<pid_t> transport_threads;
  std::map<int, std::function<void(const std::string&)>> listeners;
  int next_id = 1;
  std::terminate_handler previous = nullptr;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the handler may run during exit
  return *r;
}

[[noreturn]] void on_terminate() {
  Registry& r = registry();
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  bool ours;
  {
    std::lock_guard lock(r.mutex);
    ours = r.transport_threads.count(self) > 0;
  }
  if (ours) {
    if (std::exception_ptr e = std::current_exception()) {
      std::string what;
      try {
        std::rethrow_exception(e);
      } catch (const ::gloo::EnforceNotMet& err) {
        what = err.what();
      } catch (...) {
      }
      if (!what.empty()) {
        std::map<int, std::function<void(const std::string&)>> listeners;
        {
          std::lock_guard lock(r.mutex);
          listeners = r.listeners;
        }
        for (auto& [id, listener] : listeners) listener(what);
        for (;;) std::this_thread::sleep_for(std::chrono::hours(24));  // parked, see the header
      }
    }
  }
  if (r.previous) r.previous();
  std::abort();
}

}  // namespace

std::set<pid_t> current_threads() {
  std::set<pid_t> tids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    if (const auto tid = text::to_integer(e.path().filename().string(), 1, INT32_MAX)) tids.insert(static_cast<pid_t>(*tid));
  }
  return tids;
}

std::set<pid_t> adopt_transport_threads(const std::set<pid_t>& before) {
  Registry& r = registry();
  std::set<pid_t> adopted;
  for (pid_t t : current_threads())
    if (!before.count(t)) adopted.insert(t);
  std::lock_guard lock(r.mutex);
  r.transport_threads.insert(adopted.begin(), adopted.end());
  static std::once_flag once;
  std::call_once(once, [&] { r.previous = std::set_terminate(&on_terminate); });
  return adopted;
}

bool is_current_thread_in(const std::set<pid_t>& threads) {
  return threads.count(static_cast<pid_t>(::syscall(SYS_gettid))) > 0;
}

int listen_for_transport_failure(std::function<void(const std::string&)> listener) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const int id = r.next_id++;
  r.listeners.emplace(id, std::move(listener));
  return id;
}

void stop_listening(int id) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.listeners.erase(id);
}

}  // namespace fastrun::gloo_backend
