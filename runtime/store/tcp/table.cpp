#include "fastrun/runtime/store/tcp/table.h"
#include "fastrun/runtime/text/number.h"

#include <string>

#include <fmt/format.h>

namespace fastrun::tcp_store {

std::optional<std::int64_t> parse_decimal(const Bytes& text) {
  return text::to_integer(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
}

bool Table::set(const std::string& key, Bytes value) {
  auto [it, created] = map_.try_emplace(key);
  it->second = std::move(value);
  return created;
}

const Bytes* Table::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

Table::AddResult Table::add(const std::string& key, std::int64_t delta) {
  AddResult r;
  std::int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    const auto parsed = parse_decimal(it->second);
    if (!parsed) {
      r.error = fmt::format("add on key '{}': its value ({} bytes) is not a decimal 64-bit integer", key,
                            it->second.size());
      return r;
    }
    current = *parsed;
  }
  if (__builtin_add_overflow(current, delta, &r.value)) {
    r.error = fmt::format("add on key '{}': {} + {} overflows a 64-bit integer", key, current, delta);
    return r;
  }
  const std::string text = std::to_string(r.value);
  r.created = set(key, Bytes(text.begin(), text.end()));
  return r;
}

Table::CompareSetResult Table::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  CompareSetResult r;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) {  // c10d: absent + non-empty expected returns expected, sets nothing
      r.value = expected;
      return r;
    }
    r.value = desired;
    r.created = set(key, std::move(desired));
    return r;
  }
  if (it->second == expected) it->second = std::move(desired);
  r.value = it->second;
  return r;
}

}  // namespace fastrun::tcp_store
