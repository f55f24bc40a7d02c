#pragma once
// What a job is, once its options are checked: the options both entry points share (the CLI
// and launch_self), and prepare_job(), which validates them and fixes every per-job choice
// (run id, seed, device plan) before anything starts.
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/job_binding.h"
#include "fastrun/launcher/device_plan.h"
#include "fastrun/launcher/node_options.h"

namespace fastrun::launcher {

enum class OutputMode { all, only_error, ignore };

// The stall report's threshold is whole seconds in [0, kMaxStallReport]; 0 turns it off.
inline constexpr int kMaxStallReport = 86400;
// The most ranks one launcher starts (--nproc, --devices).
inline constexpr int kMaxRanks = 4096;

// The user's options, as typed (CLI flags or SelfLaunchOptions).
struct JobOptions {
  int nproc = 0;              // 0 = not given
  std::optional<std::string> devices;  // "0,2,3" | "all"; nullopt = not given
  std::string log_dir;
  OutputMode output = OutputMode::all;
  bool tag_output = false;
  double kill_timeout = 5.0;
  std::string run_id;         // "" = generate
  bool keep_background = false;  // leave what ranks started running after the job (leftovers.h)
  NodeOptions node;           // --nnodes, --node-rank, --master-addr, --master-port
  std::optional<BindMode> bind;  // --bind; nullopt = FASTRUN_BIND (default none)
  bool report_bindings = false;  // --report-bindings (or FASTRUN_REPORT_BINDINGS=1)
  std::optional<int> max_restarts;  // --max-restarts; nullopt = FASTRUN_MAX_RESTARTS (default 0)
  std::optional<int> stall_report;  // --stall-report SECONDS; nullopt = FASTRUN_STALL_REPORT (default 30)
};

// This node's share of the job. One node: the defaults (global = local). Several nodes: filled
// by the node rendezvous (node_rendezvous.h) before the first rank starts.
struct NodeShare {
  int nnodes = 1;
  int node_rank = 0;
  int rank_offset = 0;          // global rank of this node's local rank 0
  int world_size = 0;           // ranks of the whole job; 0 = this node's (one node)
  std::string host;             // this node's host name, for messages ("" on one node)
  std::string store_token;      // FASTRUN_STORE_TOKEN for the ranks ("" = shm store, none needed)
  std::string gloo_host;        // FASTRUN_GLOO_HOST for the ranks ("" = the user's or the default)
};

// Everything fixed before the first rank starts.
struct JobConfig {
  int world_size = 1;
  std::optional<DevicePlan> devices;  // nullopt: CPU ranks, whose CUDA_VISIBLE_DEVICES is ""
  std::string user_visible_devices;   // CPU ranks: the user's CUDA_VISIBLE_DEVICES, for USER_...
  std::string run_id;
  std::string seed;           // FASTRUN_GLOBAL_SEED, equal on every rank
  std::string store_address;  // shm://<run-id>, i.e. /dev/shm/fastrun-<run-id>
  std::string log_dir;        // DIR/<run-id> ("" = no files)
  OutputMode output = OutputMode::all;
  bool tag_output = false;
  double kill_timeout = 5.0;
  NodeShare node;
  // MASTER_ADDR/MASTER_PORT for the ranks' own use (a c10d env:// init): a port that was free
  // on the master host when the job started; 0 = not set.
  std::string rank_master_addr = "127.0.0.1";
  int rank_master_port = 0;
  int global_world_size() const { return node.world_size > 0 ? node.world_size : world_size; }
  bool keep_background = false;
  JobBinding binding;         // each local rank's CPUs and memory node (docs/binding.md)
  // Restarts (docs/launching.md, "Restarts"): how many attempts may follow a failed one, and
  // the attempt this configuration is for (FASTRUN_RESTART_COUNT; the supervisor sets it).
  int max_restarts = 0;
  int attempt = 0;
  // Attempts before this one that followed a change of nodes (--nnodes MIN:MAX, node_attempts.h):
  // they do not count against max_restarts.
  int resized_attempts = 0;
  int stall_report_s = 30;    // the stall report's threshold (stall_watch.h); 0 = off
};

// Validates `options` against the process environment and fixes the job's choices. Throws
// ConfigError (naming the option, the value and what is accepted) before anything starts.
// Creates nothing: log directories are made by the supervisor.
JobConfig prepare_job(const JobOptions& options);

// "all" | "only_error" | "ignore"; ConfigError otherwise.
OutputMode parse_output_mode(const std::string& value);

// A run id unique even for jobs started in the same millisecond: UTC time to the microsecond,
// the pid and 32 random bits, e.g. "20261129-170812-123456-p4242-9f3a01bc".
std::string generate_run_id();
// Run ids name files and /dev/shm segments: 1-64 characters of [A-Za-z0-9._-], not starting with
// '.' or '-'. ConfigError otherwise.
void check_run_id(const std::string& run_id);

}  // namespace fastrun::launcher
