#include "fastrun/launcher/failure_key.h"

#include <chrono>
#include <exception>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/store/job_keys.h"

namespace fastrun::launcher {

void FailureKey::set(const std::string& why) const {
  if (!store_) return;
  try {
    record_failure(*store_, why);
  } catch (const std::exception& e) {
    log::warn("could not set {} in the job's store: {}", kFailureKey, e.what());
  }
}

std::string FailureKey::recorded() const {
  if (!store_) return {};
  try {
    if (store_->check({kFailureKey})) return to_string(store_->get(kFailureKey, std::chrono::seconds(1)));
  } catch (const std::exception& e) {
    log::warn("could not read {} in the job's store: {}", kFailureKey, e.what());
  }
  return {};
}

bool FailureKey::known_unjoined(int r) const {
  if (!store_) return false;
  try {
    return !store_->check({peer_key(r)});
  } catch (const std::exception& e) {
    log::warn("could not read {} in the job's store: {}", peer_key(r), e.what());
    return false;
  }
}

}  // namespace fastrun::launcher
