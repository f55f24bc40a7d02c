#include "fastrun/runtime/process_group/failure_watch.h"

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/backend.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun {

FailureWatch::FailureWatch(const std::shared_ptr<Store>& job_store) {
  if (job_store) store_ = job_store->clone();
}

std::optional<std::string> FailureWatch::poll(bool force) {
  std::lock_guard lock(mutex_);
  if (seen_ || !store_) return seen_;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_poll_ < kPollInterval) return std::nullopt;
  last_poll_ = now;
  try {
    if (store_->check({kFailureKey})) seen_ = to_string(store_->get(kFailureKey, std::chrono::seconds(5)));
  } catch (const std::exception& e) {
    log::debug("failure watch: cannot read '{}': {}", kFailureKey, e.what());
  }
  return seen_;
}

void FailureWatch::publish(const std::string& text) noexcept {
  std::lock_guard lock(mutex_);
  if (!store_) return;
  try {
    record_failure(*store_, text);
  } catch (const std::exception& e) {
    log::warn("cannot record the failure '{}' in the job store: {}", text, e.what());
  }
}

}  // namespace fastrun
