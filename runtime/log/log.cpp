#include "fastrun/runtime/log/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/os/host.h"

namespace fastrun::log {
namespace {

std::atomic<int> g_level{-1};  // -1: not read from the environment yet
std::mutex g_mutex;            // guards g_tag and serialises whole lines
std::string g_tag = "process";

Level level_from_env() {
  const std::string name = env::get_string(env::kLogLevel);
  if (name == "error") return Level::error;
  if (name == "warn") return Level::warn;
  if (name == "info") return Level::info;
  return Level::debug;  // the registry already rejected anything else
}

const char* level_name(Level l) {
  switch (l) {
    case Level::error: return "error";
    case Level::warn: return "warn";
    case Level::info: return "info";
    case Level::debug: return "debug";
  }
  return "?";
}

}  // namespace

Level level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(level_from_env());
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<Level>(l);
}

void set_level(Level l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }

void set_tag(std::string tag) {
  std::lock_guard lock(g_mutex);
  g_tag = std::move(tag);
}

void set_rank(int rank) { set_tag(fmt::format("rank {}", rank)); }

void write(Level l, std::string_view message) {
  static const std::string host = os::host_name().value_or("?");
  std::lock_guard lock(g_mutex);
  // One fprintf per line so lines from threads of one process never interleave.
  std::string line = fmt::format("[fastrun {}:{} {}] {}: {}\n", host, getpid(), g_tag, level_name(l), message);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace fastrun::log
