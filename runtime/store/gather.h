#pragma once
// Rendezvous rounds on any Store, linear in the participants (docs/stores.md, "Rounds").
//
// A round of `size` participants under `prefix`: each one adds its own bit to its group's
// counter (a gather first sets its value); the last to arrive publishes one release key that
// every participant waits on. Nobody waits on, checks or reads N keys, so the store sees O(N)
// requests and O(N) work per round (waiting on all N arrival keys, the pattern this replaces, is
// N requests naming N keys: O(N²) server work, 2.9–8.3 s for 4,096 tcp clients). A barrier
// costs a participant 2 requests (add, wait), a gather 4 (set, add, wait, get); a barrier
// without a poll is one Store::arrive instead (tcp://: 1 request, see store_round_barrier).
//
// Two levels, so that the participant that arrives last does not read N values in a row:
// participants are split into groups of `group_size` (default ⌈√N⌉, at most 62: a group's
// arrivals are the bits of one 64-bit counter) consecutive ranks; the last arriver of a group
// (the one whose add completed the bits) publishes the group's aggregate (a gather only) and
// counts the group in; the last group to complete publishes the release key (for a gather,
// every group's aggregate in one value). The critical path is about √N + N/√N requests.
//
// Keys (all under `prefix`; a prefix names one round and is used once — a new round, attempt or
// generation takes a new prefix, so keys a previous round left behind are never read; a reused
// one shows as a bit that carries, and fails with StoreError):
//   <prefix>/<rank>          participant <rank>'s value (a gather only)
//   <prefix>/g/<k>/arrived   group k's arrivals: bit i = participant k·group_size + i
//   <prefix>/g/<k>           group k's values (a gather only)
//   <prefix>/count           complete groups
//   <prefix>/all             the release (for a gather: every value, in rank order)
//
// Timeouts and failures: with a `poll`, the wait on the release key is cut into slices
// (round_slice) and `poll` runs between them (it may throw to abandon the round, e.g. when the
// job recorded a failure); without one it is one wait. At the deadline the groups' counters are
// read once (~2N/group_size requests) to name the participants that never arrived.
#include <functional>
#include <string>
#include <vector>

#include "fastrun/runtime/store/store.h"

namespace fastrun {

struct RoundOptions {
  std::string prefix;  // names the round; used once per store
  int rank = 0;        // this participant, 0..size-1
  int size = 1;
  Duration timeout = Store::kDefaultTimeout;
  int group_size = 0;  // 0: ⌈√size⌉
  // Between wait slices; may throw to abandon the round. `missing` reads the groups' counters
  // (~2√N requests: call it only to build a message).
  std::function<void(const std::function<std::vector<int>()>& missing)> poll;
  // At the deadline, with the participants that never arrived; must throw. Unset: a TimeoutError
  // "<store>: round '<prefix>' timed out after T s: K of N participants never arrived: [..]".
  std::function<void(const std::vector<int>& missing)> on_timeout;
};

// Every participant's value, in rank order (this participant's own included). Each value is
// published once and read once by the last arriver of its group; the aggregate is read once by
// every participant (bytes: N × the sum of the values, what an all-gather needs).
std::vector<Bytes> store_all_gather(Store& store, const RoundOptions& round, const Bytes& mine);

// The same round with nothing to exchange: returns once every participant arrived. Without a
// `poll` it is one Store::arrive under `prefix` (tcp://: one request per participant, see
// store.h), so round_missing does not apply to it; with one, the round above.
void store_round_barrier(Store& store, const RoundOptions& round);

// Store::arrive's portable default: the round above with nothing to exchange, returning the
// participants that never arrived at the timeout instead of throwing.
std::vector<int> round_arrive(Store& store, const std::string& prefix, int rank, int size, Duration timeout);

// The participants of the round under `prefix` that have not arrived (from the groups' counters;
// none once the round is released).
std::vector<int> round_missing(Store& store, const std::string& prefix, int size, int group_size = 0);

// How long one wait slice lasts for a round of `size` with a `poll` (50 ms up to 200
// participants, growing with N to 2 s at 8,000: a slice that ends costs a tcp waiter 3 requests
// and the poll's, so N waiters cost the server ~4N per slice). Without a poll the wait is one.
Duration round_slice(int size);

}  // namespace fastrun
