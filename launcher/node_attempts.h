#pragma once
// A multi-node job with restarts (docs/launching.md, "Restarts"): every node runs the same
// attempts, one at a time, and the count is the job's, kept in node 0's launcher store (which
// lives for the whole job), not each node's own — a launcher cannot rejoin under its node rank
// (node_rendezvous.h refuses it) and so cannot earn restarts of its own (torchrun's
// pytorch/pytorch#108158).
//
// Attempt n: node 0 hosts a new TCP store for the ranks (a fresh namespace: nothing of attempt
// n-1 is seen) and publishes its address; each node watches the others under the attempt's own
// keys (node_watch.h) and runs its ranks (Supervisor, one attempt). When the attempt ends on a
// node, node 0 gives the verdict once it knows the attempt's outcome everywhere: "end" (every
// node succeeded; or the failure is final — a signal to a launcher, a lost node; or no restart
// is left) or "restart". On "restart" every node waits the back-off (restarts.h), removes its
// node's segments, and meets the others in the attempt's start round before starting its ranks.
//
// Elastic membership (--nnodes MIN:MAX, docs/multinode.md): attempt 0 runs on the nodes there at
// the end of the last call (node_rendezvous.h). A lost node (its heartbeat stopped) is not final
// while MIN nodes are left. Node 0 then leaves out every other node whose pulse stood still too
// (node_pulse.h: nodes lost together), publishes attempt n+1's members (their --node-rank,
// ascending) and says "resize"; the next attempt starts at once on them, renumbered
// 0..K-1 in that order (node 0 stays node 0), its ranks contiguous in node order. A resize does
// not count against --max-restarts: it is the machine, not the program, that failed, and the
// job can only shrink MAX - MIN times. Fewer than MIN left: the job ends, recorded under
// fastrun/launcher/stopped naming the lost nodes and MIN, so that every node says why.
// A launcher started again with a lost node's --node-rank (node_rendezvous.h) asks to join under
// launcher_keys::joining(k); node 0's watch sees it while its ranks run and stops the attempt
// (a "joining" record); node 0 takes every waiting node whose pulse moves into the next
// attempt's members, up to MAX, and tells each one that attempt's number (joining(k)/admitted).
// Also a "resize". A node that arrived after the last call asks the same way.
//
// Keys in the launcher store, attempt n's under fastrun/launcher/attempt/<n>/:
//   store        the address of attempt n's rank store (set by node 0)
//   members      attempt n's nodes, e.g. "0,1" (set by node 0 before a "resize" verdict on n-1)
//   watch/...    attempt n's node watch (failure, heartbeats, done, acks)
//   start/...    the round every node passes before starting attempt n's ranks (n > 0)
//   skip         node 0 gave up on attempt n's start round: a member was lost before it (its
//                pulse stood still); attempt n+1's members, set first, are the nodes left
//   verdict      node 0's decision once attempt n ended everywhere: "restart", "resize" or "end"
//   left/<k>     node k read "end" (node 0 keeps the store up until then, or 5 s)
// and fastrun/launcher/stopped: a signal to a launcher once its ranks were gone (a NodeFailure
// record), which ends the job at the next wait of every node.
// Every wait has a deadline naming who did not arrive, except the wait for the verdict: it lasts
// as long as node 0's ranks run (node 0's own failure, or its loss, ends it).
#include "fastrun/launcher/node_rendezvous.h"
#include "fastrun/launcher/supervisor.h"

namespace fastrun::launcher {

// Runs the job's attempts on this node (options.job.max_restarts > 0 or plan.elastic(); `options.nodes`,
// `failure_store` and `job.store_address` are set here per attempt) and returns the launcher's
// exit code: 0 when an attempt succeeded on every node, else the code of the first failure of
// the last attempt (128 + signal after a signal to a launcher). Throws what the store throws
// when node 0 is lost between attempts.
int run_node_attempts(NodeRendezvous& rendezvous, const NodePlan& plan, SupervisorOptions options);

}  // namespace fastrun::launcher
