#include "fastrun/runtime/store/owner.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace fastrun::store_owner {

std::uint64_t start_time_of(std::int64_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(in, text)) return 0;
  // The command name (field 2) is in parentheses and may contain spaces: count after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return 0;
  }
  try {
    return std::stoull(field);
  } catch (...) {
    return 0;
  }
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "unknown" : id;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

Identity self() {
  static const Identity id = [] {
    Identity i;
    i.pid = ::getpid();
    i.start_time = start_time_of(i.pid);
    i.boot_id = boot_id();
    i.host = host_name();
    return i;
  }();
  Identity i = id;
  i.pid = ::getpid();  // after fork(), the cached identity is the parent's
  if (i.pid != id.pid) i.start_time = start_time_of(i.pid);
  return i;
}

Liveness liveness(const Identity& creator) {
  if (creator.host != host_name()) return Liveness::unknown;
  if (creator.boot_id != boot_id()) return Liveness::dead;
  const std::uint64_t now = start_time_of(creator.pid);
  if (now == 0 || now != creator.start_time) return Liveness::dead;
  return Liveness::alive;
}

std::string serialize(const Identity& id) {
  return fmt::format("{} {} {} {}", id.host, id.pid, id.start_time, id.boot_id);
}

bool parse(const std::string& text, Identity& out) {
  std::istringstream in(text);
  Identity id;
  if (!(in >> id.host >> id.pid >> id.start_time >> id.boot_id)) return false;
  out = id;
  return true;
}

}  // namespace fastrun::store_owner
