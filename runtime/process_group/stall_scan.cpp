#include "fastrun/runtime/process_group/stall_scan.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fastrun::stall {
namespace {

double seconds(std::int64_t from_ns, std::int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e9; }

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ","));
}

// What a late member last did on the group, from its flight record's board entries.
std::string last_op_text(const SlotView& m, std::int64_t now_ns) {
  if (m.begun.seq == 0) return "no collective on this group yet";
  std::string text;
  if (m.ended.seq > 0)
    text = fmt::format("last {} {} {:.1f} s ago", describe_numbered(m.ended), m.ended_ok ? "completed" : "failed",
                       seconds(m.ended_ns, now_ns));
  if (m.begun.seq != m.ended.seq)
    text += fmt::format("{}began {} {:.1f} s ago, its end not recorded", text.empty() ? "" : "; ",
                        describe_numbered(m.begun), seconds(m.begun_ns, now_ns));
  return text;
}

}  // namespace

std::string group_display_name(const std::string& key) {
  const auto hash = key.rfind('#');
  return hash == std::string::npos || key.substr(hash) == "#1" ? key.substr(0, hash) : key;
}

std::optional<LastCollective> last_collective(const std::vector<SlotView>& slots) {
  const SlotView* last = nullptr;
  for (const auto& s : slots) {
    if (s.begun.seq > 0 && (!last || s.begun_ns > last->begun_ns)) last = &s;
  }
  if (!last) return std::nullopt;
  LastCollective out{group_display_name(last->group), last->begun, "in_progress"};
  if (last->ended.seq >= last->begun.seq) out.state = last->ended_ok ? "completed" : "failed";
  return out;
}

std::vector<Stall> find_stalls(const std::vector<SlotView>& board, std::int64_t now_ns, double threshold_s) {
  std::map<std::string, std::vector<const SlotView*>> groups;
  for (const auto& s : board) groups[s.group].push_back(&s);
  std::vector<Stall> out;
  for (auto& [key, members] : groups) {
    std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->global_rank < b->global_rank; });
    std::int64_t n = 0;
    for (const auto* m : members) n = std::max(n, m->begun.seq);
    if (n == 0) continue;
    Stall s;
    s.group = key;
    s.group_size = members.front()->group_size;
    s.on_board = static_cast<int>(members.size());
    std::int64_t since = 0;
    for (const auto* m : members) {
      if (m->begun.seq < n) {
        s.late.push_back(*m);
      } else if (m->ended.seq < n) {
        if (s.waiting.empty() || m->begun_ns < since) {
          since = m->begun_ns;
          s.op = m->begun;
        }
        s.waiting.push_back(m->global_rank);
      }
    }
    if (s.waiting.empty()) continue;
    s.waited_s = seconds(since, now_ns);
    if (s.waited_s < threshold_s) continue;
    if (s.late.empty() && s.on_board >= s.group_size) continue;  // everyone here is in it: a slow op
    out.push_back(std::move(s));
  }
  return out;
}

std::string report_line(const Stall& s, std::int64_t now_ns, const std::string& node) {
  std::string head = fmt::format("fastrun: stall{} on group '{}': {}: ", node, group_display_name(s.group),
                                 describe_numbered(s.op));
  const std::string waited = fmt::format("{} {} waited {:.1f} s", ranks_text(s.waiting),
                                         s.waiting.size() == 1 ? "has" : "have", s.waited_s);
  if (s.late.empty()) {
    const int elsewhere = s.group_size - s.on_board;
    return head + fmt::format("{}; the group's other {} rank{} {} on other nodes, whose launchers name any that has not "
                              "arrived (nothing is stopped: the op fails at FASTRUN_OP_TIMEOUT)",
                              waited, elsewhere, elsewhere == 1 ? "" : "s", elsewhere == 1 ? "is" : "are");
  }
  std::vector<int> late;
  std::string doing;
  for (const auto& m : s.late) {
    late.push_back(m.global_rank);
    doing += fmt::format("; rank {}: {}", m.global_rank, last_op_text(m, now_ns));
  }
  head += fmt::format("{} {} not arrived, {}{}", ranks_text(late), late.size() == 1 ? "has" : "have", waited, doing);
  if (s.on_board < s.group_size)
    head += fmt::format("; {} more rank{} of the group on other nodes", s.group_size - s.on_board,
                        s.group_size - s.on_board == 1 ? "" : "s");
  return head + " (nothing is stopped: the op fails at FASTRUN_OP_TIMEOUT)";
}

std::string StallLog::update(const std::vector<SlotView>& board, std::int64_t now_ns, double threshold_s) {
  std::string out;
  // 1. Stalls reported before that are over: the late members have arrived (or, when they were
  //    on other nodes, the waiting ones are through the op), or the group is gone from the board.
  for (auto it = open_.begin(); it != open_.end();) {
    bool over = true;
    for (const auto& m : board) {
      if (m.group != it->first) continue;
      const bool late = m.begun.seq < it->second.seq;
      const bool waiting = m.begun.seq == it->second.seq && m.ended.seq < it->second.seq;
      if (late || (!it->second.late_here && waiting)) over = false;
    }
    if (!over) {
      ++it;
      continue;
    }
    out += fmt::format("fastrun: stall over{} on group '{}': {} went on after {:.1f} s\n", node_,
                       group_display_name(it->first), it->second.op, seconds(it->second.since_ns, now_ns));
    it = open_.erase(it);
  }
  // 2. New stalls: reported once each.
  for (const Stall& s : find_stalls(board, now_ns, threshold_s)) {
    auto it = open_.find(s.group);
    if (it != open_.end() && it->second.seq == s.op.seq) continue;
    open_[s.group] = Reported{s.op.seq, describe_numbered(s.op), now_ns - static_cast<std::int64_t>(s.waited_s * 1e9),
                              !s.late.empty()};
    out += report_line(s, now_ns, node_) + "\n";
  }
  return out;
}

}  // namespace fastrun::stall
