#pragma once
// The environment registry (docs/environment.md; NCCL's param.h is the model).
// Every FASTRUN_* variable is declared exactly once, in variables.def (one line: its constant,
// name, type, default and one line of help); the constants below are generated from that list. Reading goes through the typed getters below: a malformed value is a
// ConfigError naming the variable, the value and the accepted form — never a silent default.
// `fastrun --help-env` prints help_text().
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/duration.h"

namespace fastrun::env {

enum class Type { string, integer, seconds, choice };

struct Variable {
  std::string_view name;
  Type type;
  std::string_view default_value;  // "" = no default (unset means "not given")
  std::string_view help;
  std::string_view choices = {};   // Type::choice: "a|b|c"
  std::int64_t min = INT64_MIN;    // Type::integer bounds, inclusive
  std::int64_t max = INT64_MAX;
};

// Type::seconds values: more than 0 (or from 0, for a variable declared with min 0: a wait that
// may be none), at most a day (as --kill-timeout). A timeout longer than that is a typo or an
// attempt at "never", which hides a hang for days.
inline constexpr double kMaxSeconds = 86400;

// --- the declarations: env::kRank, env::kTimeout, ... one per line of variables.def ---
#define FASTRUN_ENV_VARIABLE(constant, ...) extern const Variable constant;
#include "fastrun/runtime/env/variables.def"
#undef FASTRUN_ENV_VARIABLE

// Every declared variable, in the order of variables.def.
const std::vector<const Variable*>& all();
const Variable* find(std::string_view name);

// Raw value from the process environment, nullopt when unset (an empty value counts as set).
std::optional<std::string> raw(const Variable& v);

// Typed getters. get_*: the value, or the default when unset (ConfigError if there is neither).
// find_*: nullopt when unset and there is no default. All validate and name the variable.
std::string get_string(const Variable& v);
std::optional<std::string> find_string(const Variable& v);
std::int64_t get_int(const Variable& v);
std::optional<std::int64_t> find_int(const Variable& v);
double get_seconds(const Variable& v);
// A Type::seconds variable as a timeout (whole milliseconds, rounded up).
Duration get_timeout(const Variable& v);

// Validation without the environment (used by the getters and by tests).
std::int64_t parse_int(const Variable& v, std::string_view value);
double parse_seconds(const Variable& v, std::string_view value);
std::string parse_choice(const Variable& v, std::string_view value);

// Checks every declared variable that is set in the environment with its type's parser, except
// those `skip` names (a launcher skips what it overwrites for its ranks). ConfigError naming the
// first malformed one: how a launcher refuses, before anything starts, a value its ranks would
// refuse only after they started.
void check_environment(const std::vector<std::string>& skip = {});

// The table `fastrun --help-env` prints: name, type, default, help.
std::string help_text();

}  // namespace fastrun::env
