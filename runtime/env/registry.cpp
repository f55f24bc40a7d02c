#include "fastrun/runtime/env/registry.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::env {
namespace {

const char* type_name(Type t) {
  switch (t) {
    case Type::string: return "string";
    case Type::integer: return "integer";
    case Type::seconds: return "seconds";
    case Type::choice: return "choice";
  }
  return "?";
}

std::string accepted_form(const Variable& v) {
  switch (v.type) {
    case Type::string: return "any string";
    case Type::integer: return text::integer_range(v.min, v.max);
    case Type::seconds:
      return v.min == 0 ? fmt::format("a number of seconds from 0 to {} (e.g. 30 or 0.5)", kMaxSeconds)
                        : fmt::format("a number of seconds > 0 and <= {} (e.g. 30 or 0.5)", kMaxSeconds);
    case Type::choice: return fmt::format("one of {}", v.choices);
  }
  return "?";
}

[[noreturn]] void reject(const Variable& v, std::string_view value) {
  throw ConfigError(fmt::format("{}='{}' is not valid: expected {}", v.name, value, accepted_form(v)));
}

std::optional<std::string_view> value_or_default(const Variable& v, const std::optional<std::string>& value) {
  if (value) return std::string_view(*value);
  if (!v.default_value.empty()) return v.default_value;
  return std::nullopt;
}

}  // namespace

const Variable* find(std::string_view name) {
  for (const Variable* v : all())
    if (v->name == name) return v;
  return nullptr;
}

std::optional<std::string> raw(const Variable& v) {
  const char* value = std::getenv(std::string(v.name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::int64_t parse_int(const Variable& v, std::string_view value) {
  if (auto n = text::to_integer(value, v.min, v.max)) return *n;
  reject(v, value);
}

double parse_seconds(const Variable& v, std::string_view value) {
  const auto s = text::to_decimal(value);
  if (!s || *s < 0 || (*s == 0 && v.min != 0) || *s > kMaxSeconds) reject(v, value);
  return *s;
}

std::string parse_choice(const Variable& v, std::string_view value) {
  std::string_view rest = v.choices;
  while (!rest.empty()) {
    auto bar = rest.find('|');
    std::string_view option = rest.substr(0, bar);
    if (option == value) return std::string(value);
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  reject(v, value);
}

std::optional<std::string> find_string(const Variable& v) {
  auto r = raw(v);  // keep it alive: value_or_default returns a view into it
  auto value = value_or_default(v, r);
  if (!value) return std::nullopt;
  if (v.type == Type::choice) return parse_choice(v, *value);
  return std::string(*value);
}

std::string get_string(const Variable& v) {
  auto value = find_string(v);
  if (!value) throw ConfigError(fmt::format("{} is not set: expected {}", v.name, accepted_form(v)));
  return *value;
}

std::optional<std::int64_t> find_int(const Variable& v) {
  auto r = raw(v);
  auto value = value_or_default(v, r);
  if (!value) return std::nullopt;
  return parse_int(v, *value);
}

std::int64_t get_int(const Variable& v) {
  auto value = find_int(v);
  if (!value) throw ConfigError(fmt::format("{} is not set: expected {}", v.name, accepted_form(v)));
  return *value;
}

double get_seconds(const Variable& v) {
  auto r = raw(v);
  auto value = value_or_default(v, r);
  if (!value) throw ConfigError(fmt::format("{} is not set: expected {}", v.name, accepted_form(v)));
  return parse_seconds(v, *value);
}

Duration get_timeout(const Variable& v) { return std::chrono::duration<double>(get_seconds(v)); }

void check_environment(const std::vector<std::string>& skip) {
  for (const Variable* v : all()) {
    if (std::find(skip.begin(), skip.end(), v->name) != skip.end()) continue;
    const auto value = raw(*v);
    if (!value) continue;
    switch (v->type) {
      case Type::string: break;
      case Type::integer: parse_int(*v, *value); break;
      case Type::seconds: parse_seconds(*v, *value); break;
      case Type::choice: parse_choice(*v, *value); break;
    }
  }
}

std::string help_text() {
  std::string out = "fastrun environment variables (type, default):\n";
  for (const Variable* v : all()) {
    std::string type = type_name(v->type);
    if (v->type == Type::choice) type = std::string(v->choices);
    out += fmt::format("  {:<26} {:<22} default: {}\n      {}\n", v->name, type,
                       v->default_value.empty() ? "(unset)" : v->default_value, v->help);
  }
  return out;
}

}  // namespace fastrun::env
