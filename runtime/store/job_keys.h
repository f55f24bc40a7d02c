#pragma once
// The job-level keys that the launcher, join() and the backends share in the job's unprefixed
// store, declared once here so that no layer includes another's header to learn a key's name.
// Layout: fastrun/failure, fastrun/peer/<rank>, fastrun/join/<generation>/<rank>, fastrun/flight/..., and the
// launchers' own keys under fastrun/launcher/.
#include <cstdint>
#include <string>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

// Marks a failed rank. Value: "rank N: reason". The first failure recorded wins.
inline constexpr const char* kFailureKey = "fastrun/failure";

// What a rank publishes about itself when it joins (runtime/process_group/peer_info.h).
std::string peer_key(int global_rank);
// The join of round `generation` is one all-gather round under this prefix (runtime/store/gather.h);
// a rank's arrival key in it (its PeerInfo) is join_arrival_key.
std::string join_round_prefix(int generation);
std::string join_arrival_key(int generation, int global_rank);
// Flight-record dumps (process_group/flight_recorder.h): a counter a timing-out rank increments
// to ask every rank what it is doing, and where rank R answers request n.
inline constexpr const char* kFlightRequestKey = "fastrun/flight/request";
std::string flight_answer_key(std::int64_t request, int global_rank);

// Sets `key` to `value` unless it already holds a value (compare_set with an empty
// expectation), and returns the value the key holds afterwards: `value` when this call was
// first, the earlier writer's otherwise. Throws what the store throws.
std::string set_if_absent(Store& store, const std::string& key, const std::string& value);

// Records "why" (already "rank N: reason") under kFailureKey; the first writer wins, so a
// rank's own reason is not overwritten by the launcher's generic one. Throws what the store throws.
std::string record_failure(Store& store, const std::string& why);

// The launchers' keys in a multi-node job (launcher/node_rendezvous.cpp, launcher/node_watch.cpp).
namespace launcher_keys {
inline constexpr const char* kRunId = "fastrun/launcher/run-id";
inline constexpr const char* kRankMaster = "fastrun/launcher/rank-master";
inline constexpr const char* kSeed = "fastrun/launcher/seed";
// The launchers' round (runtime/store/gather.h): node k's entry under "<kNodesRound>/k".
inline constexpr const char* kNodesRound = "fastrun/launcher/nodes";
// A node's failure as the node watch records it (first writer wins, like kFailureKey).
inline constexpr const char* kNodeFailure = "fastrun/launcher/failure";
// node 0's --max-restarts: every node must run the job with the same.
inline constexpr const char* kMaxRestarts = "fastrun/launcher/max-restarts";
// node 0's --nnodes as MIN:MAX: every node must run the job with the same.
inline constexpr const char* kNnodes = "fastrun/launcher/nnodes";
// A job with restarts (launcher/node_attempts.h): attempt n's keys go under attempt(n); a signal
// to a launcher between two attempts is recorded under kJobStopped and ends the job.
inline constexpr const char* kJobStopped = "fastrun/launcher/stopped";
std::string attempt(int n);
std::string node(int node_rank);
std::string heartbeat(int node_rank);
std::string done(int node_rank);
std::string ack(int node_rank);
// Elastic membership (--nnodes MIN:MAX): a launcher that comes back while the job runs asks to
// join under joining(k) (k: its --node-rank) and waits for an attempt whose members name it.
std::string joining(int node_rank);
// A counter node k > 0 of an elastic job bumps for as long as its launcher lives, attempts and
// waits to join included (launcher/node_pulse.h): node 0 tells the live nodes from the lost ones.
std::string pulse(int node_rank);
}  // namespace launcher_keys

}  // namespace fastrun
