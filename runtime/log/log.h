#pragma once
// Rank-tagged logging through fmt (its variables: docs/environment.md). Cheap when off: the
// level check happens before any formatting. Lines go to stderr as
//   [fastrun <host>:<pid> rank 3] <level>: message
// The level comes from FASTRUN_LOG_LEVEL (error, warn, info, debug); the rank tag is set once
// the rank is known (set_log_rank), so launcher lines read "[fastrun host:pid launcher]".
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fastrun::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

Level level();
void set_level(Level level);
// Tag for every following line: "rank 3", "launcher", ...
void set_tag(std::string tag);
void set_rank(int rank);

void write(Level level, std::string_view message);

inline bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::error)) write(Level::error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace fastrun::log
