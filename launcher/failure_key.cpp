#include "fastrun/launcher/failure_key.h"

#include <chrono>
#include <climits>
#include <exception>
#include <string_view>

#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/text/number.h"

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

std::optional<int> FailureKey::blamed_rank(const std::string& record) {
  static constexpr std::string_view prefix = "rank ";
  const auto colon = record.find(':');
  if (record.rfind(prefix, 0) != 0 || colon == std::string::npos) return std::nullopt;
  const auto rank = text::to_integer(std::string_view(record).substr(prefix.size(), colon - prefix.size()), 0, INT_MAX);
  if (!rank) return std::nullopt;
  return static_cast<int>(*rank);
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
