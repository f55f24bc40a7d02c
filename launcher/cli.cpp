#include "fastrun/launcher/cli.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/node_rendezvous.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/launcher/stale_cleanup.h"
#include "fastrun/launcher/supervisor.h"
#include "fastrun/runtime/backend/gloo_host.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log.h"
#include "fastrun/runtime/version.h"

namespace fastrun::launcher {
namespace {

int parse_int_value(const std::string& option, const std::string& v) {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    throw ConfigError(fmt::format("{} '{}': expected a whole number", option, v));
  }
  return n;
}

double parse_seconds_value(const std::string& option, const std::string& v) {
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size()) {
    throw ConfigError(fmt::format("{} '{}': expected seconds, e.g. 5 or 0.5", option, v));
  }
  return s;
}

// A multi-node launcher whose ranks are done: node 0 keeps the job's store up until every node
// is done (or one fails, whose code it then exits with); after a failure, until the others saw it.
int finish_node(NodeWatch& watch, int exit_code) {
  if (exit_code != 0) {
    watch.finish_failure();
    return exit_code;
  }
  if (auto failure = watch.finish_success()) {
    std::fprintf(stderr, "fastrun: the job failed on node %d: %s\n", failure->node, failure->why.c_str());
    return failure->exit_code;
  }
  return 0;
}

}  // namespace

std::string usage_text() {
  return fmt::format(
      "usage: fastrun [options] [--] PROGRAM [ARGS...]\n"
      "Runs PROGRAM as a job of ranks on this machine (or, with --nnodes, on one node of several),\n"
      "one process per rank.\n\n"
      "  --devices LIST|all     one rank per GPU; LIST = indices into the visible GPUs, e.g. 0,2,3\n"
      "  --nproc N              N ranks without GPUs\n"
      "  --log-dir DIR          file rank r's output in DIR/<run-id>/rank-<r>/{{stdout,stderr}}.log\n"
      "  --run-id ID            the job's id (default: generated); exported as FASTRUN_RUN_ID\n"
      "  --output MODE          what ranks other than 0 show: all (default), only_error (their\n"
      "                         stderr only), ignore; log files keep everything\n"
      "  --tag-output           prefix terminal lines with \"[rank r] \"\n"
      "  --bind MODE            where each rank runs (docs/binding.md): none (default: where the\n"
      "                         launcher may), numa (CPUs and memory of its GPU's NUMA node),\n"
      "                         core (cores of that node of its own)\n"
      "  --report-bindings      print each rank's GPU, PCI address, NUMA node, CPUs and memory\n"
      "                         policy to stderr before the ranks start\n"
      "  --kill-timeout SECS    grace between SIGTERM and SIGKILL when stopping ranks (default 5)\n"
      "  --nnodes N             the job spans N nodes, one fastrun per node (docs/multinode.md)\n"
      "  --node-rank K          this node's index, 0..N-1; node 0 hosts the job's store\n"
      "  --master-addr HOST     node 0's address, reachable from every node\n"
      "  --master-port PORT     the port node 0 hosts the job's store on\n"
      "                         (under srun or mpirun all four come from the engine; docs/multinode.md)\n"
      "  --keep-background      leave running what ranks started in the background; by default\n"
      "                         it is stopped when the job ends (SIGTERM, then SIGKILL)\n"
      "  --cleanup              remove /dev/shm segments of jobs whose launcher died, and exit\n"
      "  --help, --version      this text; fastrun's version\n"
      "  --help-env             the environment variables fastrun reads and sets\n\n"
      "Exit status: 0 when every rank exits 0; else the first failing rank's code (128+N for\n"
      "signal N); 130/143/129 after SIGINT/SIGTERM/SIGHUP; 141 when the output was closed\n"
      "(`fastrun ... | head`: the job is stopped); 2 for a usage error.\n");
}

CliArgs parse_cli(const std::vector<std::string>& args) {
  CliArgs out;
  std::size_t i = 0;
  bool saw_nproc = false;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // PROGRAM
    std::string name = a;
    std::optional<std::string> inline_value;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw ConfigError(fmt::format("{} needs a value; see fastrun --help", name));
      return args[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw ConfigError(fmt::format("{} takes no value (got '{}')", name, *inline_value));
    };
    if (name == "--help" || name == "-h") { no_value(); out.action = CliArgs::Action::help; return out; }
    if (name == "--version") { no_value(); out.action = CliArgs::Action::version; return out; }
    if (name == "--help-env") { no_value(); out.action = CliArgs::Action::help_env; return out; }
    if (name == "--cleanup") { no_value(); out.action = CliArgs::Action::cleanup; return out; }
    if (name == "--devices") {
      out.job.devices = value();
    } else if (name == "--nproc") {
      const std::string v = value();
      out.job.nproc = parse_int_value(name, v);
      saw_nproc = true;
      if (out.job.nproc < 1) throw ConfigError(fmt::format("--nproc {}: give a number of ranks of 1 or more", v));
    } else if (name == "--log-dir") {
      out.job.log_dir = value();
      if (out.job.log_dir.empty()) throw ConfigError("--log-dir is empty; give a directory");
    } else if (name == "--run-id") {
      out.job.run_id = value();
      check_run_id(out.job.run_id);
    } else if (name == "--output") {
      out.job.output = parse_output_mode(value());
    } else if (name == "--tag-output") {
      no_value();
      out.job.tag_output = true;
    } else if (name == "--keep-background") {
      no_value();
      out.job.keep_background = true;
    } else if (name == "--bind") {
      out.job.bind = parse_bind_mode(value(), name);
    } else if (name == "--report-bindings") {
      no_value();
      out.job.report_bindings = true;
    } else if (name == "--kill-timeout") {
      out.job.kill_timeout = parse_seconds_value(name, value());
      if (!(out.job.kill_timeout >= 0 && out.job.kill_timeout <= 86400))
        throw ConfigError(fmt::format("--kill-timeout {}: give seconds from 0 to 86400", out.job.kill_timeout));
    } else if (name == "--nnodes") {
      out.job.node.nnodes = parse_int_value(name, value());
    } else if (name == "--node-rank") {
      out.job.node.node_rank = parse_int_value(name, value());
    } else if (name == "--master-addr") {
      out.job.node.master_addr = value();
    } else if (name == "--master-port") {
      out.job.node.master_port = parse_int_value(name, value());
    } else {
      throw ConfigError(fmt::format("unknown option '{}'; see fastrun --help", a));
    }
  }
  if (!saw_nproc && !out.job.devices) {
    throw ConfigError("give --devices LIST|all (one rank per GPU) or --nproc N (CPU ranks); see fastrun --help");
  }
  if (i >= args.size()) throw ConfigError("PROGRAM is missing; usage: fastrun [options] [--] PROGRAM [ARGS...]");
  out.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

int cli_main(int argc, char** argv) {
  // 1. Parse and validate everything before anything starts: usage errors exit 2.
  CliArgs args;
  JobConfig job;
  NodePlan nodes;
  std::string exec_path;
  try {
    args = parse_cli(std::vector<std::string>(argv + 1, argv + argc));
    switch (args.action) {
      case CliArgs::Action::help: std::fputs(usage_text().c_str(), stdout); return 0;
      case CliArgs::Action::version: std::printf("fastrun %s\n", kVersion); return 0;
      case CliArgs::Action::help_env: std::fputs(env::help_text().c_str(), stdout); return 0;
      case CliArgs::Action::cleanup: return run_stale_cleanup(stdout, stderr);
      case CliArgs::Action::run: break;
    }
    nodes = plan_nodes(args.job.node);
    if (auto gloo_host = env::raw(env::kGlooHost)) resolve_gloo_host(*gloo_host);  // every rank would fail on it
    job = prepare_job(args.job);
    exec_path = resolve_program(args.program[0]);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 2;
  }
  // 2. Signals: blocked here, before any thread exists, and read by the supervisor's signalfd.
  const sigset_t handled = Supervisor::handled_signals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // for the launcher only: every rank starts with default dispositions (spawn.h)
  try {
    // 3. Several nodes: meet the other launchers through node 0's store (docs/multinode.md).
    std::unique_ptr<NodeRendezvous> rendezvous;
    if (nodes.multi_node()) {
      log::set_tag("launcher");
      rendezvous = std::make_unique<NodeRendezvous>(
          nodes, env::get_timeout(env::kTimeout));
      rendezvous->agree(job, args.job);
    }
    // Watching the other nodes starts at once: node 0 counts this node's heartbeats from here.
    std::unique_ptr<NodeWatch> watch;
    if (rendezvous)
      watch = std::make_unique<NodeWatch>(rendezvous->address(), rendezvous->token(), nodes.node_rank,
                                          rendezvous->hosts());
    // 4. Log directory and store; both released (store removed) whatever happens below.
    JobResources resources(job, rendezvous ? rendezvous->store() : nullptr);
    SupervisorOptions so;
    so.job = job;
    so.exec_path = exec_path;
    so.argv = args.program;
    so.handle_signals = true;
    so.adopt_orphans = true;
    so.rank0_stdin = ::isatty(0) ? -1 : 0;  // a terminal would stop a background rank (SIGTTIN)
    so.failure_store = resources.store();
    so.nodes = watch.get();
    so.janitor = resources.janitor();
    log::set_tag("launcher");
    if (job.binding.report)
      std::fputs(binding_report(job.binding, job.node.rank_offset, own_affinity()).c_str(), stderr);
    log::info("run {}: {} rank{}, store {}, devices {}, logs {}", job.run_id, job.world_size,
              job.world_size == 1 ? "" : "s", job.store_address,
              job.devices ? fmt::format("{}", fmt::join(job.devices->rank_devices, ",")) : std::string("not pinned"),
              job.log_dir.empty() ? std::string("not filed") : job.log_dir);
    // 5. Run; this thread (main) lives as long as the ranks, as PR_SET_PDEATHSIG requires.
    JobResult result = Supervisor(std::move(so)).run();
    if (watch) result.exit_code = finish_node(*watch, result.exit_code);
    resources.release();
    return result.exit_code;
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 128 + e.signal();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 1;
  }
}

}  // namespace fastrun::launcher
