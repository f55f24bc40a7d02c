#include "fastrun/runtime/cluster/foreign_env.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::cluster {

std::optional<std::string> getenv_opt(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

std::optional<std::int64_t> foreign_int64(const char* name, std::int64_t min, std::int64_t max) {
  auto v = getenv_opt(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || errno != 0 || end != v->c_str() + v->size() || parsed < min || parsed > max)
    throw ConfigError(max >= INT32_MAX
                          ? fmt::format("{}='{}' is not valid: expected an integer >= {}", name, *v, min)
                          : fmt::format("{}='{}' is not valid: expected an integer from {} to {}", name, *v, min, max));
  return parsed;
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
