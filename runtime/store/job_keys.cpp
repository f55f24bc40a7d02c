#include "fastrun/runtime/store/job_keys.h"

#include <fmt/format.h>

namespace fastrun {

std::string peer_key(int global_rank) { return fmt::format("fastrun/peer/{}", global_rank); }

std::string join_round_prefix(int generation) { return fmt::format("fastrun/join/{}", generation); }

std::string join_arrival_key(int generation, int global_rank) {
  return fmt::format("{}/{}", join_round_prefix(generation), global_rank);
}

std::string flight_answer_key(std::int64_t request, int global_rank) {
  return fmt::format("fastrun/flight/{}/{}", request, global_rank);
}

std::string set_if_absent(Store& store, const std::string& key, const std::string& value) {
  return to_string(store.compare_set(key, {}, to_bytes(value)));
}

std::string record_failure(Store& store, const std::string& why) { return set_if_absent(store, kFailureKey, why); }

namespace launcher_keys {
std::string attempt(int n) { return fmt::format("fastrun/launcher/attempt/{}", n); }
std::string node(int node_rank) { return fmt::format("fastrun/launcher/node/{}", node_rank); }
std::string joining(int node_rank) { return fmt::format("fastrun/launcher/joining/{}", node_rank); }
std::string pulse(int node_rank) { return fmt::format("fastrun/launcher/pulse/{}", node_rank); }
std::string heartbeat(int node_rank) { return fmt::format("fastrun/launcher/heartbeat/{}", node_rank); }
std::string done(int node_rank) { return fmt::format("fastrun/launcher/done/{}", node_rank); }
std::string ack(int node_rank) { return fmt::format("fastrun/launcher/ack/{}", node_rank); }
}  // namespace launcher_keys

}  // namespace fastrun
