#pragma once
// The trainers' failure hook for tests: --kill-at STEP:RANK[:ATTEMPT][,...] makes rank RANK raise
// SIGKILL before global step STEP — in attempt ATTEMPT only (FASTRUN_RESTART_COUNT under
// fastrun --max-restarts), or in every attempt without it. SIGKILL, not an exit: a rank lost to
// the OOM killer or a dead node gets no clean-up either. Several entries kill in several
// attempts, so that one run can be restarted more than once at steps a test picks.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/text/split.h"

namespace fastrun_examples {

struct KillAt {
  std::int64_t step = 0;
  std::int64_t rank = 0;
  std::int64_t attempt = -1;  // -1: every attempt
};

// "40:1" or "40:1:0", comma-separated; a ConfigError names the entry and the form accepted.
inline std::vector<KillAt> parse_kill_plan(const std::string& text) {
  std::vector<KillAt> plan;
  if (text.empty()) return plan;
  for (const std::string_view entry : fastrun::text::split(text, ',')) {
    const auto parts = fastrun::text::split(entry, ':');
    if (parts.size() < 2 || parts.size() > 3)
      throw fastrun::ConfigError(fmt::format("--kill-at '{}': expected STEP:RANK or STEP:RANK:ATTEMPT, "
                                             "comma-separated (e.g. 40:1:0)",
                                             entry));
    KillAt k;
    k.step = fastrun::text::parse_integer("--kill-at STEP", parts[0], 0, std::int64_t{1} << 40);
    k.rank = fastrun::text::parse_integer("--kill-at RANK", parts[1], 0, 1 << 20);
    if (parts.size() == 3) k.attempt = fastrun::text::parse_integer("--kill-at ATTEMPT", parts[2], 0, 1 << 20);
    plan.push_back(k);
  }
  return plan;
}

// Called before each global step.
inline void kill_if_planned(const std::vector<KillAt>& plan, std::uint64_t step, int rank, std::int64_t attempt) {
  for (const KillAt& k : plan)
    if (static_cast<std::uint64_t>(k.step) == step && k.rank == rank && (k.attempt < 0 || k.attempt == attempt)) {
      std::fflush(nullptr);
      std::raise(SIGKILL);
    }
}

}  // namespace fastrun_examples
