#include "fastrun/runtime/store/owner.h"

#include <unistd.h>

#include <sstream>

#include <fmt/format.h>

#include "fastrun/runtime/os/host.h"
#include "fastrun/runtime/os/process.h"

namespace fastrun::store_owner {

std::uint64_t start_time_of(std::int64_t pid) {
  const auto stat = os::proc_stat(pid);
  return stat ? stat->start_time : 0;
}

std::string boot_id() {
  const std::string id = os::boot_id();
  return id.empty() ? "unknown" : id;
}

std::string host_name() { return os::host_name().value_or("unknown"); }

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
