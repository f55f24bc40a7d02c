// Channel's comparison of the peers' ops with this rank's (op_fingerprint.h): once per op and
// peer, right after a wait saw the peer reach a step of the op.
#include "fastrun/runtime/backend/shm/channel/channel.h"
#include "fastrun/runtime/error.h"

namespace fastrun::shm {

void Channel::compare_op(int peer) {
  if (!fingerprints_.same_op(peer)) throw_mismatch();
  compared_[static_cast<std::size_t>(peer)] = op_first_;
}

void Channel::compare_op_all() {
  for (int p = 0; p < info_.size; ++p)
    if (p != info_.rank && compared_[static_cast<std::size_t>(p)] != op_first_ && !fingerprints_.same_op(p))
      throw_mismatch();
  all_compared_ = op_first_;
}

void Channel::check_arrived_ops() {
  if (op_first_ == 0) return;
  for (int p = 0; p < info_.size; ++p)
    if (p != info_.rank && reached(p, op_first_) && !fingerprints_.same_op(p)) throw_mismatch();
}

void Channel::throw_mismatch() {
  // Every peer whose fingerprint for this op is readable, for a message that names them all.
  std::vector<int> arrived;
  for (int p = 0; p < info_.size; ++p)
    if (p != info_.rank && reached(p, op_first_)) arrived.push_back(p);
  throw ConfigError(fingerprints_.mismatch(arrived));  // the sequence mode's words (sequence_check.h)
}

}  // namespace fastrun::shm
