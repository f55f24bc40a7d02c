#include "fastrun/runtime/os/host.h"

#include <unistd.h>

#include <fstream>

namespace fastrun::os {

std::optional<std::string> host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return std::nullopt;
  return std::string(buf);
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace fastrun::os
