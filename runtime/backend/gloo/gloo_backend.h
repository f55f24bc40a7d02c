#pragma once
// The `gloo` backend: CPU buffers, any number of nodes, on Debian's Gloo (5b14351) with only
// its function-style API (gloo::allreduce, broadcast, allgather, barrier): mixing in the class
// algorithms on one context was measured to slow gloo::allreduce to ~1 s per MiB at 3+ ranks.
//
// Set-up: one tcp device on FASTRUN_GLOO_HOST (127.0.0.1 by default), one full-mesh context
// rendezvoused through the group's store (already prefixed per group and generation).
// Only the algorithms live here: where an op runs, its number (gloo's tag), failures and Work
// handles are the group runtime's (process_group/group_runtime.h).
// Threading: every collective goes to the group's comm thread (FIFO, the issue order) and
// returns an AsyncWork at once; the caller's buffers must stay alive until wait() returns. A
// gloo op cannot be cancelled, so a small one runs on op-owned copies of the buffers (copied in
// and back on the comm thread, never after a wait() gave up), and a wait that gives up on a
// larger one returns only when the op has let go of the buffers (gloo_runtime_config).
// reduce_scatter: Gloo has no function-style reduce-scatter, so it is an allreduce of a copy of
// the input followed by a copy of this rank's block (2x the optimal traffic; documented).
// avg: sum, then divide by the group size (integer division for int32/int64).
// Failures: a Gloo IoException (a peer closed its socket) becomes a PeerFailure naming the
// dead rank (found through the pids published at join) and is recorded under kFailureKey so
// ranks not connected to the dead one fail too; a pending wait() also watches that key.
// After any failure the group is unusable: later calls throw the runtime's BackendError at once.
#include <memory>

#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::gloo_backend {

std::unique_ptr<Backend> make_gloo_backend(const GroupSpec& spec);

}  // namespace fastrun::gloo_backend
