#include "fastrun/launcher/failure_key.h"

#include <charconv>
#include <chrono>
#include <exception>
#include <string_view>

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

std::optional<int> FailureKey::blamed_rank(const std::string& record) {
  static constexpr std::string_view prefix = "rank ";
  if (record.rfind(prefix, 0) != 0) return std::nullopt;
  int rank = 0;
  const char* first = record.data() + prefix.size();
  const char* last = record.data() + record.size();
  const auto [end, error] = std::from_chars(first, last, rank);
  if (error != std::errc() || end == first || end == last || *end != ':') return std::nullopt;
  return rank;
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
