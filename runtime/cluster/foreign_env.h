#pragma once
// Reading the variables other launchers set (torchrun, Slurm, Open MPI): not in fastrun's
// registry, but validated the same way, so a malformed value is a ConfigError naming it.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace fastrun::cluster {

std::optional<std::string> getenv_opt(const char* name);

// nullopt when unset; ConfigError naming the variable when not an integer in [min, max].
std::optional<std::int64_t> foreign_int64(const char* name, std::int64_t min, std::int64_t max = INT64_MAX);
std::optional<int> foreign_int(const char* name, int min, int max = INT32_MAX);

// The first of `names` that is set: its name, or nullptr when none is.
const char* first_set(std::initializer_list<const char*> names);

}  // namespace fastrun::cluster
