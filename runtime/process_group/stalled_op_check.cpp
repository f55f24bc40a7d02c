#include "fastrun/runtime/process_group/stalled_op_check.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/process_group/sequence_check.h"

namespace fastrun {
namespace {

std::string key_of(int rank) { return fmt::format("op_check/{}", rank); }

Bytes encode(const std::vector<Fingerprint>& ops) {
  Bytes b(ops.size() * sizeof(Fingerprint::words));
  for (std::size_t i = 0; i < ops.size(); ++i)
    std::memcpy(b.data() + i * sizeof(Fingerprint::words), ops[i].words.data(), sizeof(Fingerprint::words));
  return b;
}

std::vector<Fingerprint> decode(const Bytes& b) {
  std::vector<Fingerprint> ops(b.size() / sizeof(Fingerprint::words));
  for (std::size_t i = 0; i < ops.size(); ++i)
    std::memcpy(ops[i].words.data(), b.data() + i * sizeof(Fingerprint::words), sizeof(Fingerprint::words));
  return ops;
}

const Fingerprint* find_seq(const std::vector<Fingerprint>& ops, std::int64_t seq) {
  for (const Fingerprint& f : ops)
    if (f.words[0] == seq) return &f;
  return nullptr;
}

}  // namespace

StalledOpCheck::StalledOpCheck(Store& store, int rank, int size, std::vector<int> global_ranks, std::string group)
    : store_(store.clone()),
      rank_(rank),
      size_(size),
      global_ranks_(std::move(global_ranks)),
      group_(std::move(group)) {
  store_->set_timeout(kStoreTimeout);
}

void StalledOpCheck::record(const OpDesc& op) { record(fingerprint(op)); }

void StalledOpCheck::record(const Fingerprint& op) {
  const std::uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any word changes
  const std::uint64_t n = recorded_.load(std::memory_order_relaxed);
  auto& words = ring_[n % kHistory].words;
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i)
    std::atomic_ref<std::int64_t>(words[i]).store(op.words[i], std::memory_order_relaxed);
  recorded_.store(n + 1, std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

// A copy taken while no record() was under way: read, then check that the version was even and
// did not move. A stalled op's ring is still; a retry happens only while a thread issues ops.
std::vector<Fingerprint> StalledOpCheck::recorded_ops() {
  for (;;) {
    const std::uint64_t before = version_.load(std::memory_order_acquire);
    if (before % 2 == 0) {
      const std::uint64_t n = std::min<std::uint64_t>(recorded_.load(std::memory_order_relaxed), kHistory);
      std::vector<Fingerprint> ops(n);
      for (std::size_t k = 0; k < n; ++k)
        for (std::size_t i = 0; i < Fingerprint::kWords; ++i)
          ops[k].words[i] = std::atomic_ref<std::int64_t>(ring_[k].words[i]).load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);  // the reads above before the look below
      if (version_.load(std::memory_order_relaxed) == before) return ops;
    }
    std::this_thread::yield();
  }
}

std::optional<std::string> StalledOpCheck::check() {
  std::lock_guard lock(mutex_);  // also serialises the store handle between waiting threads
  const std::vector<Fingerprint> mine = recorded_ops();
  try {
    store_->set(key_of(rank_), encode(mine));
    std::vector<std::vector<Fingerprint>> theirs(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && store_->check({key_of(p)}))
        theirs[static_cast<std::size_t>(p)] = decode(store_->get(key_of(p)));
    // The lowest op number that some peer issued differently.
    std::int64_t first_bad = -1;
    for (const Fingerprint& f : mine)
      for (const auto& ops : theirs)
        if (const Fingerprint* other = find_seq(ops, f.words[0]); other && !(*other == f))
          if (first_bad < 0 || f.words[0] < first_bad) first_bad = f.words[0];
    if (first_bad < 0) return std::nullopt;
    std::vector<RankOp> ops{{global_rank_at(rank_, global_ranks_), *find_seq(mine, first_bad)}};
    for (int p = 0; p < size_; ++p)
      if (const Fingerprint* f = find_seq(theirs[static_cast<std::size_t>(p)], first_bad))
        ops.push_back({global_rank_at(p, global_ranks_), *f});
    return describe_mismatch(ops, first_bad, group_,
                             "found out of step when the op stalled: a stalled wait compares the ranks' last ops "
                             "through the store; FASTRUN_DEBUG=sequence checks every op before it starts");
  } catch (const std::exception&) {
    return std::nullopt;  // no verdict: the op's own timeout still bounds the wait
  }
}

std::function<std::exception_ptr()> stalled_op_hook(std::shared_ptr<StalledOpCheck> check) {
  return [check = std::move(check)]() -> std::exception_ptr {
    if (auto text = check->check()) return std::make_exception_ptr(ConfigError(*text));
    return nullptr;
  };
}

}  // namespace fastrun
