#include "fastrun/runtime/process_group/no_sync.h"

#include <pthread.h>

#include <atomic>

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun {
namespace {
// -1: no guard/setter active, the level is FASTRUN_NO_SYNC.
std::atomic<int> g_override{-1};
// FASTRUN_NO_SYNC, parsed once per process (-1: not read yet). A forked child reads its own
// environment again (the atfork handler forgets the parent's value), as a fastNLP child would.
std::atomic<int> g_env_level{-1};

int env_level() {
  int l = g_env_level.load(std::memory_order_acquire);
  if (l >= 0) return l;
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { g_env_level.store(-1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  l = static_cast<int>(env::get_int(env::kNoSync));  // ConfigError names a malformed value; not cached
  g_env_level.store(l, std::memory_order_release);
  return l;
}

void check_level(int level) {
  if (level < 0 || level > 2)
    throw ConfigError(fmt::format("no-sync level {} is not valid: expected 0 (normal), 1 (no barriers) or 2 "
                                  "(every collective local), as FASTRUN_NO_SYNC",
                                  level));
}
}  // namespace

int no_sync_level() {
  const int l = g_override.load(std::memory_order_acquire);
  if (l >= 0) return l;
  return env_level();
}

void set_no_sync_level(int level) {
  check_level(level);
  g_override.store(level, std::memory_order_release);
}

int exchange_no_sync_override(int level) {
  if (level != -1) check_level(level);
  return g_override.exchange(level, std::memory_order_acq_rel);
}

}  // namespace fastrun
