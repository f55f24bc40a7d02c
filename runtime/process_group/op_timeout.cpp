#include "fastrun/runtime/process_group/op_timeout.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fastrun {

std::string op_timeout_message(const OpTimeout& t) {
  std::string text = fmt::format("{}: {} timed out after {:.3g} s", t.label, t.op,
                                 std::chrono::duration<double>(t.waited).count());
  if (!t.waiting_for.empty()) text += fmt::format(": still waiting for [{}]", fmt::join(t.waiting_for, ", "));
  if (!t.detail.empty()) text += fmt::format(" ({})", t.detail);
  text += "; a peer may be stuck or issuing a different collective or send/recv (raise FASTRUN_OP_TIMEOUT, or "
          "pass a longer timeout to wait(), if it is legitimately slow)";
  return text;
}

}  // namespace fastrun
