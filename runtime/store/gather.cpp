#include "fastrun/runtime/store/gather.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun {
namespace {

// A group's arrivals are bits of one 64-bit counter (each member adds its own bit), so a group
// has at most 62 members: the sum stays positive with room for one carry to show a reuse.
constexpr int kMaxGroup = 62;

int group_size_for(int size, int requested) {
  const int want = requested > 0 ? requested : static_cast<int>(std::ceil(std::sqrt(static_cast<double>(size))));
  return std::clamp(want, 1, kMaxGroup);
}

std::string round_rank_key(const std::string& prefix, int r) { return fmt::format("{}/{}", prefix, r); }
std::string round_group_key(const std::string& prefix, int k) { return fmt::format("{}/g/{}", prefix, k); }
std::string round_arrived_key(const std::string& prefix, int k) { return fmt::format("{}/g/{}/arrived", prefix, k); }
std::string round_count_key(const std::string& prefix) { return prefix + "/count"; }
std::string round_all_key(const std::string& prefix) { return prefix + "/all"; }

// An aggregate is the values in rank order, each as a u32 little-endian length and its bytes,
// so the aggregates of consecutive groups concatenate into the aggregate of their union.
void append_value(Bytes& out, const Bytes& v) {
  const auto n = static_cast<std::uint32_t>(v.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), v.begin(), v.end());
}

std::vector<Bytes> split_values(const Store& store, const std::string& prefix, const Bytes& all, int size) {
  std::vector<Bytes> out;
  out.reserve(static_cast<std::size_t>(size));
  std::size_t p = 0;
  while (p < all.size()) {
    if (all.size() - p < 4) break;
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(all[p + static_cast<std::size_t>(i)]) << (8 * i);
    p += 4;
    if (all.size() - p < n) break;
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(p), all.begin() + static_cast<std::ptrdiff_t>(p + n));
    p += n;
  }
  if (p != all.size() || static_cast<int>(out.size()) != size)
    throw StoreError(fmt::format("{}: round '{}': the gathered value under '{}' is malformed ({} bytes, {} of {} "
                                 "values readable): two jobs sharing one store, or a prefix used twice?",
                                 store.describe(), prefix, round_all_key(prefix), all.size(), out.size(), size));
  return out;
}

// A counter past its participants (or a bit that carried) means a second round under the same
// prefix, or one participant arriving twice: its keys (and the first round's release) are
// stale, so fail now rather than read them or hang.
[[noreturn]] void throw_reused(const Store& store, const std::string& prefix, const std::string& key, std::int64_t n,
                               const std::string& expected) {
  throw StoreError(fmt::format("{}: round '{}': '{}' reads {} after this arrival, expected {}: the prefix was used by "
                               "an earlier round, or a participant arrived twice (each round, attempt or generation "
                               "needs a fresh prefix)",
                               store.describe(), prefix, key, n, expected));
}

[[noreturn]] void default_timeout(const Store& store, const RoundOptions& round, const std::vector<int>& missing) {
  if (missing.empty())
    throw TimeoutError(fmt::format("{}: round '{}' timed out after {:.3g} s although all {} participants arrived: "
                                   "the last arriver of a group stopped before releasing the round",
                                   store.describe(), round.prefix, std::chrono::duration<double>(round.timeout).count(),
                                   round.size));
  throw TimeoutError(fmt::format("{}: round '{}' timed out after {:.3g} s: {} of {} participants never arrived: [{}]; "
                                 "raise FASTRUN_TIMEOUT to wait longer",
                                 store.describe(), round.prefix, std::chrono::duration<double>(round.timeout).count(),
                                 missing.size(), round.size, fmt::join(missing, ", ")));
}

// One round; `gather` says whether the values travel (else the aggregates are a marker byte).
// Returns the release key's value as this participant got it (or built it).
Bytes run_round(Store& store, const RoundOptions& round, const Bytes& mine, bool gather) {
  if (round.size < 1 || round.rank < 0 || round.rank >= round.size)
    throw ConfigError(fmt::format("round '{}': rank {} of {} is out of range", round.prefix, round.rank, round.size));
  const std::string& prefix = round.prefix;
  const Deadline deadline(round.timeout);
  const Bytes marker = to_bytes("1");
  const int b = group_size_for(round.size, round.group_size);
  const int groups = (round.size + b - 1) / b;
  const int k = round.rank / b;
  const int lo = k * b, hi = std::min(lo + b, round.size);

  // 1. Arrive: a gather's value first, then this participant's bit in its group's counter
  // (the bits are what a timeout reads to name the missing).
  if (gather) store.set(round_rank_key(prefix, round.rank), mine);
  const std::int64_t bit = std::int64_t{1} << (round.rank - lo);
  const std::int64_t full = (std::int64_t{1} << (hi - lo)) - 1;
  const std::int64_t arrived = store.add(round_arrived_key(prefix, k), bit);
  if ((arrived & bit) == 0 || arrived > full)
    throw_reused(store, prefix, round_arrived_key(prefix, k), arrived, fmt::format("at most {}", full));
  if (arrived == full) {
    // 2. Last of the group: every member's value was set before its add, so these reads find
    // their keys at once.
    Bytes agg = marker;
    if (gather) {
      agg.clear();
      for (int r = lo; r < hi; ++r)
        append_value(agg, r == round.rank ? mine : store.get(round_rank_key(prefix, r), deadline.left()));
    }
    if (groups == 1) {
      store.set(round_all_key(prefix), agg);
      return agg;
    }
    if (gather) store.set(round_group_key(prefix, k), agg);
    const std::int64_t done = store.add(round_count_key(prefix), 1);
    if (done > groups) throw_reused(store, prefix, round_count_key(prefix), done, fmt::format("at most {}", groups));
    if (done == groups) {
      // 3. Last group: the release, with every group's aggregate in group order.
      Bytes all;
      if (gather) {
        for (int j = 0; j < groups; ++j) {
          if (j == k) {
            all.insert(all.end(), agg.begin(), agg.end());
          } else {
            const Bytes g = store.get(round_group_key(prefix, j), deadline.left());
            all.insert(all.end(), g.begin(), g.end());
          }
        }
      } else {
        all = marker;
      }
      store.set(round_all_key(prefix), all);
      return all;
    }
  }

  // 4. Wait for the release (in slices when there is something to poll between them: each
  // slice that ends costs a tcp waiter 3 requests, so none are cut without a reason), then read
  // it once.
  const Duration slice = round.poll ? round_slice(round.size) : Duration::max();
  const auto missing = [&] { return round_missing(store, prefix, round.size, round.group_size); };
  for (;;) {
    if (deadline.passed()) {
      const std::vector<int> who = missing();
      if (round.on_timeout) round.on_timeout(who);
      default_timeout(store, round, who);
    }
    try {
      store.wait({round_all_key(prefix)}, std::min<Duration>(slice, deadline.left()));
      break;
    } catch (const TimeoutError&) {
      // The slice ended: poll, then wait again (or report at the deadline).
    }
    if (round.poll) round.poll(missing);
  }
  return gather ? store.get(round_all_key(prefix), deadline.left()) : marker;
}

}  // namespace

Duration round_slice(int size) {
  const auto per = std::chrono::microseconds(250) * std::max(size, 1);
  return std::clamp<Duration>(Duration(per), std::chrono::milliseconds(50), std::chrono::seconds(2));
}

std::vector<Bytes> store_all_gather(Store& store, const RoundOptions& round, const Bytes& mine) {
  return split_values(store, round.prefix, run_round(store, round, mine, /*gather=*/true), round.size);
}

void store_round_barrier(Store& store, const RoundOptions& round) {
  // A poll needs the wait cut into slices, which one arrive cannot be (a second arrive of the
  // same rank is a reused key): those rounds keep the add + wait form.
  if (round.poll) {
    run_round(store, round, {}, /*gather=*/false);
    return;
  }
  const std::vector<int> missing = store.arrive(round.prefix, round.rank, round.size, round.timeout);
  if (missing.empty()) return;
  if (round.on_timeout) round.on_timeout(missing);
  default_timeout(store, round, missing);
}

std::vector<int> round_arrive(Store& store, const std::string& prefix, int rank, int size, Duration timeout) {
  // The round reports its missing participants through on_timeout, which must throw: carry
  // them out in a type nothing else catches. None missing (the last arriver of a group stopped
  // before releasing) is not a list to return: the round's own TimeoutError says so.
  struct Missing {
    std::vector<int> who;
  };
  RoundOptions round;
  round.prefix = prefix;
  round.rank = rank;
  round.size = size;
  round.timeout = timeout;
  round.on_timeout = [](const std::vector<int>& who) {
    if (!who.empty()) throw Missing{who};
  };
  try {
    run_round(store, round, {}, /*gather=*/false);
  } catch (Missing& m) {
    return std::move(m.who);
  }
  return {};
}

std::vector<int> round_missing(Store& store, const std::string& prefix, int size, int group_size) {
  std::vector<int> missing;
  if (store.check({round_all_key(prefix)})) return missing;
  const int b = group_size_for(size, group_size);
  for (int lo = 0, k = 0; lo < size; lo += b, ++k) {
    const std::string key = round_arrived_key(prefix, k);
    std::int64_t bits = 0;
    // Not a number: nobody's bit can be trusted (0).
    if (store.check({key})) bits = text::to_integer(to_string(store.get(key, std::chrono::seconds(1)))).value_or(0);
    for (int r = lo; r < std::min(lo + b, size); ++r)
      if ((bits & (std::int64_t{1} << (r - lo))) == 0) missing.push_back(r);
  }
  return missing;
}

}  // namespace fastrun

namespace fastrun {

void store_barrier(Store& store, const std::string& name, int rank, int participants, Duration timeout) {
  RoundOptions round;
  round.prefix = name;
  round.rank = rank;
  round.size = participants;
  round.timeout = timeout;
  round.on_timeout = [&](const std::vector<int>& missing) {
    if (missing.empty()) return;  // the default message says what that means
    throw TimeoutError(fmt::format("{}: barrier '{}' timed out after {:.3g} s: {} of {} participants never arrived: "
                                   "ranks [{}]; raise FASTRUN_TIMEOUT to wait longer",
                                   store.describe(), name, std::chrono::duration<double>(timeout).count(),
                                   missing.size(), participants, fmt::join(missing, ", ")));
  };
  store_round_barrier(store, round);
}

}  // namespace fastrun
