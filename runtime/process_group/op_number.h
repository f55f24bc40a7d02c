#pragma once
// Who numbers an op: the Group (group.h), once, where the user calls it. Collectives are op #1,
// #2, ... of their group (equal on every member), point-to-point ops "p2p op #1", ... apart; the
// flight record, the stall board, FASTRUN_DEBUG=sequence and the backend's own messages
// ("all_reduce #7", shm's op check, gloo's tags and stall check, nccl's records) all show that
// one number.
//
// The number travels down with the call, not through every backend signature: Group::forward
// holds an OpNumberScope on the issuing thread while it issues op #k (the sequence check's
// exchange included: it is part of op #k), and whatever numbers an op below (GroupRuntime's
// op_number(), which nccl uses too) takes the number from there. A backend used bare, without a
// Group (its own tests, the Group's CPU companion outside an op), has no number given and counts
// its own ops.
#include <cstdint>

namespace fastrun {

class OpNumberScope {
 public:
  explicit OpNumberScope(std::uint64_t seq);
  ~OpNumberScope();
  OpNumberScope(const OpNumberScope&) = delete;
  OpNumberScope& operator=(const OpNumberScope&) = delete;

 private:
  std::uint64_t outer_;  // restored on exit (a scope inside another: the companion's own op)
};

// The number of the op this thread is issuing, as its Group gave it; 0: none given.
std::uint64_t given_op_number();

}  // namespace fastrun
