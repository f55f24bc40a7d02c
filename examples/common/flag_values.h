#pragma once
// Flag values of the example trainers (train_mlp, torch_train): a value that is not entirely a
// number of the accepted kind is an std::invalid_argument naming the flag and the value.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fastrun_examples {

inline std::uint64_t to_u64(std::string_view flag, const std::string& v) {
  std::size_t used = 0;
  std::uint64_t x = 0;
  try {
    if (!v.empty() && v[0] != '-') x = std::stoull(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size())
    throw std::invalid_argument(fmt::format("{} '{}': expected a non-negative integer", flag, v));
  return x;
}

inline double to_nonnegative_double(std::string_view flag, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !(x >= 0))
    throw std::invalid_argument(fmt::format("{} '{}': expected a non-negative number", flag, v));
  return x;
}

}  // namespace fastrun_examples
