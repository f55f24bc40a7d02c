#include "fastrun/runtime/process_group/group_health.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun {

int global_rank_of(const GroupSpec& spec) { return global_rank_at(spec.rank, spec.global_ranks); }

std::string group_label(const GroupSpec& spec, const std::string& backend) {
  return group_label(global_rank_of(spec), spec.name, backend);
}

GroupHealth::GroupHealth(const GroupSpec& spec, const std::string& backend, bool watch_peers)
    : label_(group_label(spec, backend)),
      global_rank_(global_rank_of(spec)),
      op_timeout_(spec.op_timeout),
      watch_(spec.failure_store ? std::make_shared<FailureWatch>(spec.failure_store) : nullptr) {
  if (watch_peers && spec.failure_store) {
    std::vector<int> ranks = spec.global_ranks;
    if (ranks.empty())
      for (int r = 0; r < spec.size; ++r) ranks.push_back(r);
    if (spec.peers) {
      for (int r : ranks)
        if (r >= 0 && r < static_cast<int>(spec.peers->size())) peers_.push_back((*spec.peers)[static_cast<std::size_t>(r)]);
    } else {
      peers_ = read_peer_infos(*spec.failure_store, ranks);
    }
  }
}

bool GroupHealth::fail(const std::exception_ptr& error, const std::string& why) {
  std::lock_guard lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return false;
  failure_ = why.empty() ? "unknown error" : why;
  error_ = error;
  failed_.store(true, std::memory_order_release);
  return true;
}

bool GroupHealth::fail(const std::string& why) { return fail(nullptr, why); }

bool GroupHealth::fail(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return fail(error, e.what());
  } catch (...) {
    return fail(error, std::string());
  }
}

std::string GroupHealth::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::exception_ptr GroupHealth::first_error() const {
  std::lock_guard lock(mutex_);
  if (error_ || failure_.empty()) return error_;
  return std::make_exception_ptr(BackendError(failure_));
}

BackendError GroupHealth::unusable(std::string_view op) const {
  return BackendError(
      fmt::format("{}: {} refused: the group is unusable after an earlier failure: {}", label_, op, failure()));
}

void GroupHealth::check_usable(std::string_view op) const {
  if (failed()) throw unusable(op);
}

std::optional<std::string> GroupHealth::recorded_failure(bool force) const {
  return watch_ ? watch_->poll(force) : std::nullopt;
}

void GroupHealth::publish(const std::string& reason) const {
  publish_as(fmt::format("rank {}: {}", global_rank_, reason));
}

void GroupHealth::publish_as(const std::string& text) const {
  if (watch_) watch_->publish(text);
}

std::vector<int> GroupHealth::dead_peers(Duration grace) const {
  if (peers_.empty()) return {};
  return dead_local_peers(peers_, grace);
}

}  // namespace fastrun
