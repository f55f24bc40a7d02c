#include "fastrun/launcher/device_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::launcher {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return parts;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_uuid_token(std::string_view t) {
  for (std::string_view prefix : {"GPU-", "MIG-"}) {
    if (t.size() > prefix.size() && t.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// What --devices accepts, for every message about its form.
constexpr const char* kAccepted =
    "give 'all' or indices into the visible GPUs (0, 1, ...) separated by commas; to pick GPUs by ordinal, "
    "GPU-<uuid> or MIG-<uuid>, list them in CUDA_VISIBLE_DEVICES and use --devices all";

}  // namespace

void check_device_spec(std::string_view spec) {
  if (spec == "all") return;
  if (spec.empty()) throw ConfigError(fmt::format("--devices is empty; {}", kAccepted));
  const auto parts = split_commas(spec);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string_view e = parts[i];
    if (e.empty()) throw ConfigError(fmt::format("--devices {}: entry {} is empty; {}", spec, i, kAccepted));
    if (e.front() == '-' && all_digits(e.substr(1))) {
      throw ConfigError(fmt::format("--devices {}: entry '{}' is negative; {}", spec, e, kAccepted));
    }
    if (is_uuid_token(e)) {
      // A token of CUDA_VISIBLE_DEVICES's form: say where it belongs rather than only "no".
      throw ConfigError(fmt::format("--devices {}: entry '{}' is a device UUID, not an index; set "
                                    "CUDA_VISIBLE_DEVICES={} and use --devices all ({})",
                                    spec, e, e, kAccepted));
    }
    if (!all_digits(e)) {
      throw ConfigError(fmt::format("--devices {}: entry '{}' is not a device index; {}", spec, e, kAccepted));
    }
  }
}

std::vector<std::string> parse_visible_devices(std::string_view value) {
  std::vector<std::string> tokens;
  if (trim(value).empty()) return tokens;  // set but empty: no device visible
  const auto parts = split_commas(value);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string_view t = trim(parts[i]);
    if (!all_digits(t) && !is_uuid_token(t)) {
      throw ConfigError(fmt::format(
          "CUDA_VISIBLE_DEVICES='{}': entry {} ('{}') is not a device; accepted entries are ordinals (0, 1, ...), "
          "GPU-<uuid> and MIG-<uuid>, separated by commas",
          value, i, t));
    }
    if (std::find(tokens.begin(), tokens.end(), t) != tokens.end()) {
      throw ConfigError(fmt::format("CUDA_VISIBLE_DEVICES='{}': device '{}' is listed twice", value, t));
    }
    tokens.emplace_back(t);
  }
  return tokens;
}

DevicePlan plan_devices(std::string_view spec, const std::optional<std::string>& cuda_visible_devices,
                        int physical_count) {
  // 1. The form of the list first: a typo ("gpu0") is named as such, whatever the machine has.
  check_device_spec(spec);

  // 2. The visible devices and where they came from (for messages).
  std::vector<std::string> visible;
  std::string source;
  DevicePlan plan;
  if (cuda_visible_devices) {
    visible = parse_visible_devices(*cuda_visible_devices);
    source = fmt::format("CUDA_VISIBLE_DEVICES={}", *cuda_visible_devices);
    plan.user_visible = *cuda_visible_devices;
    if (visible.empty()) {
      throw ConfigError(fmt::format("--devices {}: no GPU is visible (CUDA_VISIBLE_DEVICES='{}'); "
                                    "use --nproc N to start N ranks without GPUs",
                                    spec, *cuda_visible_devices));
    }
  } else {
    if (physical_count <= 0) {
      throw ConfigError(fmt::format("--devices {}: no GPU found on this machine (NVML and /proc/driver/nvidia/gpus "
                                    "report none); use --nproc N to start N ranks without GPUs",
                                    spec));
    }
    for (int i = 0; i < physical_count; ++i) {
      visible.push_back(std::to_string(i));
      plan.user_visible += (i ? "," : "") + std::to_string(i);
    }
    source = fmt::format("found on this machine, CUDA_VISIBLE_DEVICES unset");
  }
  const int n = static_cast<int>(visible.size());
  const std::string range = fmt::format("valid indices are 0..{} ({} device{} visible, {})", n - 1, n,
                                        n == 1 ? "" : "s", source);

  // 3. The user's list, in rank order (its form is checked: non-empty entries of digits).
  if (spec == "all") {
    plan.rank_devices = visible;
    return plan;
  }
  std::vector<int> chosen;
  for (const std::string_view e : split_commas(spec)) {
    const auto parsed = text::to_integer(e, 0, n - 1);
    if (!parsed) {
      throw ConfigError(fmt::format("--devices {}: entry {} is out of range; {}", spec, e, range));
    }
    const int index = static_cast<int>(*parsed);
    if (std::find(chosen.begin(), chosen.end(), index) != chosen.end()) {
      throw ConfigError(fmt::format("--devices {}: entry {} is listed twice; each device takes one rank ({})", spec,
                                    e, range));
    }
    chosen.push_back(index);
  }
  for (int index : chosen) plan.rank_devices.push_back(visible[static_cast<std::size_t>(index)]);
  return plan;
}

}  // namespace fastrun::launcher
