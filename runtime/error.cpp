#include "fastrun/runtime/error.h"

#include <cstring>

#include <fmt/format.h>

namespace fastrun {

void throw_errno(const std::string& what, int errno_value) {
  throw Error(fmt::format("{}: {} (errno {})", what, std::strerror(errno_value), errno_value));
}

}  // namespace fastrun
