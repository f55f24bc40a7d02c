#include "fastrun/runtime/process_group/in_flight.h"

#include <utility>

namespace fastrun {

void InFlightOps::prune_locked() {
  // ended() is the op's own cheap check (an atomic or its own short lock), never a wait.
  std::erase_if(weak_, [](const std::weak_ptr<InFlightOp>& w) {
    auto op = w.lock();
    return !op || op->ended();
  });
  std::erase_if(strong_, [](const std::shared_ptr<InFlightOp>& op) { return op->ended(); });
}

void InFlightOps::add(const std::shared_ptr<InFlightOp>& op, Hold hold) {
  std::lock_guard lock(mutex_);
  prune_locked();
  if (hold == Hold::weak) weak_.push_back(op);
  else strong_.push_back(op);
}

void InFlightOps::prune() {
  std::lock_guard lock(mutex_);
  prune_locked();
}

std::size_t InFlightOps::size() {
  std::lock_guard lock(mutex_);
  return weak_.size() + strong_.size();
}

std::vector<std::shared_ptr<InFlightOp>> InFlightOps::snapshot() {
  std::vector<std::shared_ptr<InFlightOp>> ops;
  std::lock_guard lock(mutex_);
  ops.reserve(weak_.size() + strong_.size());
  for (const auto& w : weak_)
    if (auto op = w.lock()) ops.push_back(std::move(op));
  ops.insert(ops.end(), strong_.begin(), strong_.end());
  return ops;
}

void InFlightOps::fail_all(const std::exception_ptr& error) {
  for (const auto& op : snapshot()) op->fail_from_outside(error);
}

}  // namespace fastrun
