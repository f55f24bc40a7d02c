#include "fastrun/runtime/backend/shm/channel/op_fingerprint.h"

#include <atomic>

#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun::shm {
namespace {

// A written slot's tag: the step with bit 32 set, so that step 0 (after the counter wrapped)
// differs from a slot never written.
constexpr std::uint64_t tag_of(std::uint32_t step) { return (std::uint64_t{1} << 32) | step; }

std::uint64_t load(std::uint64_t& w) { return std::atomic_ref<std::uint64_t>(w).load(std::memory_order_relaxed); }
std::int64_t load(std::int64_t& w) { return std::atomic_ref<std::int64_t>(w).load(std::memory_order_relaxed); }

Fingerprint read(FingerprintSlot& s) {
  Fingerprint f;
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i) f.words[i] = load(s.words[i]);
  return f;
}

}  // namespace

OpFingerprints::OpFingerprints(std::byte* base, const Layout& layout, int rank, std::vector<int> global_ranks,
                               std::string group)
    : base_(base), layout_(layout), rank_(rank), global_ranks_(std::move(global_ranks)), group_(std::move(group)) {}

FingerprintSlot& OpFingerprints::slot(int rank, std::uint32_t step) const {
  // A mask, not %: the slots are twice the ring, a power of two (a division per op otherwise).
  return *reinterpret_cast<FingerprintSlot*>(
      base_ + layout_.fingerprint_offset(static_cast<std::size_t>(rank), step & (layout_.fingerprint_slots() - 1)));
}

void OpFingerprints::leave(std::uint32_t first, const Fingerprint& op) {
  first_ = first;
  mine_ = op;
  FingerprintSlot& s = slot(rank_, first);
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i)
    std::atomic_ref<std::int64_t>(s.words[i]).store(op.words[i], std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(s.first_step).store(tag_of(first), std::memory_order_relaxed);
}

bool OpFingerprints::same_op(int peer) const {
  FingerprintSlot& s = slot(peer, first_);
  if (load(s.first_step) != tag_of(first_)) return false;
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i)
    if (load(s.words[i]) != mine_.words[i]) return false;
  return true;
}

Fingerprint OpFingerprints::op_at_first(int peer) const {
  FingerprintSlot& exact = slot(peer, first_);
  if (load(exact.first_step) == tag_of(first_)) return read(exact);
  // Out of step: the op it began last at or before `first_` (steps compare as int32 differences).
  FingerprintSlot* best = nullptr;
  std::int32_t best_age = 0;
  for (std::size_t i = 0; i < layout_.fingerprint_slots(); ++i) {
    FingerprintSlot& s =
        *reinterpret_cast<FingerprintSlot*>(base_ + layout_.fingerprint_offset(static_cast<std::size_t>(peer), i));
    const std::uint64_t tag = load(s.first_step);
    if (tag == 0) continue;
    const auto age = static_cast<std::int32_t>(first_ - static_cast<std::uint32_t>(tag));
    if (age >= 0 && (!best || age < best_age)) {
      best = &s;
      best_age = age;
    }
  }
  if (best) return read(*best);
  OpDesc unknown = op_desc("an op that began after this one");  // past the ring: only when far out of step
  unknown.seq = -1;
  return fingerprint(unknown);
}

std::string OpFingerprints::mismatch(const std::vector<int>& peers) const {
  std::vector<RankOp> ops{{global_rank_at(rank_, global_ranks_), mine_}};
  for (int p : peers) ops.push_back({global_rank_at(p, global_ranks_), op_at_first(p)});
  return describe_mismatch(ops, mine_.words[0], group_,
                           "the shm backend found the ranks out of step where they met in this op; every rank that "
                           "meets it stops here. FASTRUN_DEBUG=sequence checks every op before it starts");
}

}  // namespace fastrun::shm
