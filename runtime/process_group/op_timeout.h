#pragma once
// The one message of an op that ran past its deadline, on every backend and from every waiter
// (shm's channel and p2p engine, gloo's transport, nccl's wait, set-up poll and watchdog, the
// comm thread's AsyncWork), so that a reader sees one shape wherever the op hung:
//   rank 5 in group 'g' (shm): all_reduce #7 timed out after 600 s: still waiting for [rank 1];
//   a peer may be stuck or issuing a different collective or send/recv (raise
//   FASTRUN_OP_TIMEOUT, or pass a longer timeout to wait(), if it is legitimately slow)
#include <string>
#include <vector>

#include "fastrun/runtime/duration.h"

namespace fastrun {

struct OpTimeout {
  std::string label;                 // the group's label: "rank R in group 'G' (backend)"
  std::string op;                    // the op and its number: "all_reduce #7"
  Duration waited{};                 // how long the waiter waited
  // What is still missing, when known: the peers that have not arrived (rank_name()), or the
  // transfers not done ("recv from rank 1 tag 0"). Empty: unknown.
  std::vector<std::string> waiting_for;
  std::string detail;                // what the transport adds ("the communicator was aborted", gloo's text)
};

std::string op_timeout_message(const OpTimeout& t);

}  // namespace fastrun
