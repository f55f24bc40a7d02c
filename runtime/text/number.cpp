#include "fastrun/runtime/text/number.h"

#include <charconv>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::text {

std::optional<std::int64_t> to_integer(std::string_view text, std::int64_t min, std::int64_t max) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < min || n > max)
    return std::nullopt;
  return n;
}

std::string integer_range(std::int64_t min, std::int64_t max) {
  const bool no_max = max == INT64_MAX;
  if (min != INT64_MIN && !no_max) return fmt::format("an integer from {} to {}", min, max);
  if (min != INT64_MIN) return fmt::format("an integer >= {}", min);
  if (!no_max) return fmt::format("an integer <= {}", max);
  return "an integer";
}

std::int64_t parse_integer(std::string_view name, std::string_view text, std::int64_t min, std::int64_t max) {
  if (auto n = to_integer(text, min, max)) return *n;
  throw ConfigError(fmt::format("{}='{}' is not valid: expected {}", name, text, integer_range(min, max)));
}

std::optional<double> to_decimal(std::string_view text) {
  double d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(d)) return std::nullopt;
  return d;
}

int parse_flag_int(std::string_view flag, std::string_view text, std::string_view accepted) {
  if (auto n = to_integer(text, INT_MIN, INT_MAX)) return static_cast<int>(*n);
  const std::string_view digits = text.substr(!text.empty() && text[0] == '-' ? 1 : 0);
  const bool whole = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (whole) throw ConfigError(fmt::format("{} {}: {}", flag, text, accepted));
  throw ConfigError(fmt::format("{} '{}': expected a whole number", flag, text));
}

double parse_flag_seconds(std::string_view flag, std::string_view text) {
  if (auto s = to_decimal(text)) return *s;
  throw ConfigError(fmt::format("{} '{}': expected seconds, e.g. 5 or 0.5", flag, text));
}

}  // namespace fastrun::text
