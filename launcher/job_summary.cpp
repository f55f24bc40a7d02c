#include "fastrun/launcher/job_summary.h"

#include <signal.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "fastrun/launcher/exit_status.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/process_group/op_record.h"

namespace fastrun::launcher {

JobSummary summarize(const AttemptOutcome& o) {
  JobSummary s;
  JobResult& result = s.result;
  std::string& text = s.text;
  const int spawned = o.world_size - o.first_rank;
  const auto global = [&](int r) { return o.rank_offset + r; };
  if (o.launcher_signal) {
    result.exit_code = 128 + o.launcher_signal;
    result.stop_signal = o.launcher_signal;
    const std::string why = o.launcher_signal == SIGPIPE ? std::string("the output was closed (SIGPIPE)")
                                                         : "got " + signal_name(o.launcher_signal);
    text += fmt::format("fastrun: {}; stopped {} rank{}\n", why, spawned, spawned == 1 ? "" : "s");
  } else if (o.first_failure) {
    const AttemptOutcome::Failure& f = *o.first_failure;
    result.exit_code = status_exit_code(f.status);
    result.failed_rank = f.rank;
    std::string hint = status_hint(f.status);
    if (!hint.empty()) hint = " (" + hint + ")";
    text += fmt::format("fastrun: rank {} (pid {}){} {}{}; stopped the other ranks\n", global(f.rank), f.pid, o.where,
                        describe_status(f.status), hint);
    // A rank's own account of the failure (e.g. an op timeout naming the rank that did not
    // arrive) when one was recorded before the launcher's generic one.
    if (!f.recorded.empty() && f.recorded != fmt::format("rank {}: {}", global(f.rank), describe_status(f.status)))
      text += fmt::format("fastrun: the job's first recorded failure: {}\n", f.recorded);
    text += f.log_dir.empty() ? std::string("fastrun: its output was not filed (use --log-dir DIR to keep it)\n")
                              : fmt::format("fastrun: logs: {}/stdout.log, {}/stderr.log\n", f.log_dir, f.log_dir);
    if (!f.record.empty()) text += fmt::format("fastrun: its failure record: {}\n", f.record);
    if (const auto& c = f.last_collective) {
      // Where the rank was is the first question about a crash or a hang in the middle of training.
      const std::string op = fmt::format("{} on group '{}'", describe_numbered(c->op), c->group);
      text += c->state == "in_progress"
                  ? fmt::format("fastrun: rank {} was in {}\n", global(f.rank), op)
                  : fmt::format("fastrun: rank {}'s last collective: {} ({})\n", global(f.rank), op, c->state);
    }
    if (!f.stderr_tail.empty()) {
      text += fmt::format("fastrun: last lines of rank {}'s stderr:\n", global(f.rank));
      for (const std::string& line : f.stderr_tail) text += "  | " + line + "\n";
    }
  } else if (!o.spawn_error.empty()) {
    result.exit_code = 1;
    text += "fastrun: " + o.spawn_error + "\n";
  }
  if (o.remote) {
    // The job's first failure was on another node (or node 0 is gone): every node exits with it.
    result.exit_code = o.remote->exit_code;
    result.stop_signal = 0;
    // A node that came back (--nnodes MIN:MAX) stops the attempt without anything having failed.
    // Node -1: the store-only launcher (node_watch.h), which has no ranks of its own to fail.
    const std::string what = o.remote->joining    ? "the job grows"
                             : o.remote->node < 0 ? "the job was stopped"
                                                  : fmt::format("the job failed on node {}", o.remote->node);
    text = fmt::format("fastrun: {}: {}; stopped this node's {} rank{}\n", what, o.remote->why, spawned,
                       spawned == 1 ? "" : "s") +
           text;
  }
  if (o.first_failure) {
    for (int r : o.left_unjoined)
      text += fmt::format("fastrun: rank {} had ended cleanly before it joined, so the ranks joining failed\n", r);
  }
  if (!o.sigkilled.empty() && !text.empty()) {
    std::string list;
    for (int r : o.sigkilled) list += (list.empty() ? "" : ", ") + std::to_string(global(r));
    const char* plural = o.sigkilled.size() == 1 ? "" : "s";
    if (o.second_signal) {
      text += fmt::format("fastrun: {} while stopping the job: rank{} {} got SIGKILL at once\n",
                          signal_name(o.second_signal), plural, list);
    } else {
      text += fmt::format("fastrun: rank{} {} did not stop within --kill-timeout {} s and got SIGKILL\n", plural, list,
                          o.kill_timeout);
    }
  }
  // With restarts, which attempt failed and whether another follows (docs/launching.md, "Restarts").
  if (o.max_restarts > 0 && !o.launcher_signal && result.exit_code != 0) {
    const int left = o.max_restarts - (o.attempt - o.resized_attempts);
    text = (left > 0 ? fmt::format("fastrun: attempt {} of the job failed ({} of --max-restarts {} left)\n", o.attempt,
                                   left, o.max_restarts)
                     : fmt::format("fastrun: attempt {} of the job failed, the last one --max-restarts {} allows\n",
                                   o.attempt, o.max_restarts)) +
           text;
  }
  if (o.stopped_leftovers)
    text += "fastrun: stopped the processes the ranks left running (--keep-background keeps them)\n";
  return s;
}

}  // namespace fastrun::launcher
