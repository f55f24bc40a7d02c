#include "fastrun/runtime/store/store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/gather.h"

namespace fastrun {

void throw_wait_timeout(const Store& store, const std::vector<std::string>& missing, std::size_t total_keys,
                        Duration timeout) {
  throw TimeoutError(fmt::format("{}: timed out after {:.3g} s waiting for keys [{}] ({} of {} missing); "
                                 "raise FASTRUN_TIMEOUT to wait longer",
                                 store.describe(), timeout.count() / 1000.0, fmt::join(missing, ", "),
                                 missing.size(), total_keys));
}

std::vector<int> Store::arrive(const std::string& key, int rank, int participants, Duration timeout) {
  return round_arrive(*this, key, rank, participants, timeout);
}

void store_barrier(Store& store, const std::string& name, int participants, Duration timeout) {
  const std::string count_key = name + "/count";
  const std::string done_key = name + "/done";
  if (store.add(count_key, 1) == participants) store.set(done_key, to_bytes("1"));
  try {
    store.wait({done_key}, timeout);
  } catch (const TimeoutError&) {
    // Say how many arrived: that is what the user needs to find the missing ones.
    const std::int64_t arrived = store.add(count_key, 0);
    throw TimeoutError(fmt::format("{}: barrier '{}' timed out after {:.3g} s: {} of {} participants arrived",
                                   store.describe(), name, timeout.count() / 1000.0, arrived, participants));
  }
}

}  // namespace fastrun
