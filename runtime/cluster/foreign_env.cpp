#include "fastrun/runtime/cluster/foreign_env.h"

#include <cstdlib>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::cluster {

std::optional<std::string> getenv_opt(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<std::int64_t> foreign_int64(const char* name, std::int64_t min, std::int64_t max) {
  auto v = getenv_opt(name);
  if (!v) return std::nullopt;
  return text::parse_integer(name, *v, min, max);
}

std::optional<int> foreign_int(const char* name, int min, int max) {
  auto v = foreign_int64(name, min, max);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

const char* first_set(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (std::getenv(n)) return n;
  return nullptr;
}

}  // namespace fastrun::cluster
