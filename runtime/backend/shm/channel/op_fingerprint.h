#pragma once
// Each rank's fingerprint of the op it runs, left in the segment where its peers compare it.
//
// Why: ranks that issue different collectives (10 elements against 20, float32 against float64,
// all_reduce against broadcast) would otherwise meet at the same step numbers, read each other's
// regions as if they held the same op, and finish with exit 0 and wrong results. The channel
// already meets every peer in shared memory for every op, so the check costs no exchange of its
// own: one 72-byte write per collective, and one 64-byte compare per peer the first time this
// rank waits on it in the op (FASTRUN_DEBUG=sequence's all-gather per op stays the full check:
// it also covers the ops made of point-to-point messages, which never meet on the channel and
// leave nothing here; by default those are compared only when a wait stalls, shm_backend.h's
// op_check_).
//
// Protocol (the step protocol is channel.h's):
//   1. begin_op: a rank writes the op's Fingerprint (op_record.h: name, dtype, count, root,
//      reduce op, op number) into its slot (first % S) tagged with `first`, the op's first step,
//      before it publishes that step (the step store is seq_cst, so the slot is visible to anyone
//      who saw the step).
//   2. A rank compares peer p's slot only once it saw p reach a step >= `first` of its own op
//      (its waits), so p has left its fingerprint for that step if p began an op there. A tag
//      other than `first` means p's op began elsewhere: that is a mismatch too (p's earlier op
//      took a different number of steps), and the message names the op p was in at that step.
//   3. A slot is rewritten only when its owner begins an op S = 2R steps later. A peer is never
//      that far ahead of a rank that has reached `first`: before it writes a region at step k it
//      waits until every rank reached k - R + kMaxReadLag (before_write), its non-writing steps
//      (barrier, broadcast receivers, reduce's root) wait for someone that waited for us within
//      two steps, and a rank compares by its first wait, at most kMaxReadLag steps past `first`.
//      So a slot read in step 2 is the peer's op at `first`, not a later one; the words are
//      still read through atomics, since after a mismatch the ranks are out of step.
//   4. On a mismatch the rank throws ConfigError with the sequence mode's message; the group
//      runtime marks the group failed and aborts the channel, and a peer that sees the abort
//      while waiting compares first, so it reports the mismatch rather than "left the group".
//      A rank whose op never waits on the mismatching peer (a reduce's non-roots, a broadcast's
//      other receivers) finishes its op and fails at its next one, on the abort.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fastrun/runtime/backend/shm/channel/layout.h"
#include "fastrun/runtime/process_group/op_record.h"
#include "fastrun/runtime/process_group/sequence_check.h"

namespace fastrun::shm {

class OpFingerprints {
 public:
  // `base`: the mapped segment; `global_ranks` and `group` name the ranks in messages.
  OpFingerprints(std::byte* base, const Layout& layout, int rank, std::vector<int> global_ranks, std::string group);

  // Step 1: this rank's op, which begins at step `first`.
  void leave(std::uint32_t first, const Fingerprint& op);
  // Step 2: whether `peer`, seen at a step >= `first`, began the same op at `first`.
  bool same_op(int peer) const;
  // The mismatch message over this rank and `peers` (each seen at a step >= `first`), or ""
  // when they all began this rank's op there.
  std::string mismatch(const std::vector<int>& peers) const;

 private:
  FingerprintSlot& slot(int rank, std::uint32_t step) const;
  // The op `peer` was in at step `first_`: the slot it began last at or before that step.
  Fingerprint op_at_first(int peer) const;

  std::byte* base_;
  Layout layout_;
  int rank_;
  std::vector<int> global_ranks_;
  std::string group_;
  std::uint32_t first_ = 0;
  Fingerprint mine_;
};

}  // namespace fastrun::shm
