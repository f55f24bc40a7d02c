#include "fastrun/launcher/cli.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/job_resources.h"
#include "fastrun/launcher/node_attempts.h"
#include "fastrun/launcher/node_rendezvous.h"
#include "fastrun/launcher/node_watch.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/launcher/stale_cleanup.h"
#include "fastrun/launcher/supervisor.h"
#include "fastrun/runtime/backend/gloo/gloo_host.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/version.h"

namespace fastrun::launcher {
namespace {

// An action flag (--help, --cleanup, ...) ends the parse where it stands, as if it were alone.
struct ActionChosen {
  CliArgs::Action action;
};

// The options, one declaration each: names, value name, help, and what a value does (its checks
// included). They run as they are met (trigger_on_parse), so the first bad one is reported; the
// usage text is made from these declarations.
class Flags {
 public:
  Flags(CLI::App& app, CliArgs& out) : app_(app), out_(out) {
    value("--devices", "LIST|all", "one rank per GPU; LIST = indices into the visible GPUs, e.g. 0,2,3",
          [this](const std::string& v) { out_.job.devices = v; });
    value("--nproc", "N", "N ranks without GPUs", [this](const std::string& v) {
      const std::string accepted = fmt::format("give a number of ranks from 1 to {}", kMaxRanks);
      out_.job.nproc = text::parse_flag_int("--nproc", v, accepted);
      if (out_.job.nproc < 1 || out_.job.nproc > kMaxRanks) throw ConfigError(fmt::format("--nproc {}: {}", v, accepted));
    });
    value("--log-dir", "DIR", "file rank r's output in DIR/<run-id>/rank-<r>/{stdout,stderr}.log",
          [this](const std::string& v) {
            if (v.empty()) throw ConfigError("--log-dir is empty; give a directory");
            out_.job.log_dir = v;
          });
    value("--run-id", "ID", "the job's id (default: generated); exported as FASTRUN_RUN_ID",
          [this](const std::string& v) {
            check_run_id(v);
            out_.job.run_id = v;
          });
    value("--output", "MODE",
          "what ranks other than 0 show: all (default), only_error (their\n"
          "stderr only), ignore; log files keep everything",
          [this](const std::string& v) { out_.job.output = parse_output_mode(v); });
    flag("--tag-output", "prefix terminal lines with \"[rank r] \"", [this] { out_.job.tag_output = true; });
    value("--bind", "MODE",
          "where each rank runs (docs/binding.md): none (default: where the\n"
          "launcher may), numa (CPUs and memory of its GPU's NUMA node),\n"
          "core (cores of that node of its own)",
          [this](const std::string& v) { out_.job.bind = parse_bind_mode(v, "--bind"); });
    flag("--report-bindings",
         "print each rank's GPU, PCI address, NUMA node, CPUs and memory\n"
         "policy to stderr before the ranks start",
         [this] { out_.job.report_bindings = true; });
    value("--kill-timeout", "SECS", "grace between SIGTERM and SIGKILL when stopping ranks (default 5)",
          [this](const std::string& v) {
            out_.job.kill_timeout = text::parse_flag_seconds("--kill-timeout", v);
            if (!(out_.job.kill_timeout >= 0 && out_.job.kill_timeout <= 86400))
              throw ConfigError(fmt::format("--kill-timeout {}: give seconds from 0 to 86400", out_.job.kill_timeout));
          });
    value("--stall-report", "SECS",
          "name the ranks a collective has waited for SECS seconds (default\n"
          "30, or FASTRUN_STALL_REPORT); 0: off. Stops nothing",
          [this](const std::string& v) {
            out_.job.stall_report = text::parse_flag_int(
                "--stall-report", v,
                fmt::format("give whole seconds from 1 to {}, or 0 for no stall report", kMaxStallReport));
          });
    // The node flags' ranges depend on each other and on the engine's variables: plan_nodes checks them.
    value("--nnodes", "N|MIN:MAX",
          "the job spans N nodes, one fastrun per node (docs/multinode.md);\n"
          "MIN:MAX: it goes on without lost nodes while MIN are left",
          [this](const std::string& v) { parse_nnodes(v, out_.job.node); });
    value("--last-call", "SECS",
          "with --nnodes MIN:MAX: once MIN nodes are there, start the job on\n"
          "those present after SECS more seconds (default 30, or\n"
          "FASTRUN_LAST_CALL; at once when MAX are there)",
          [this](const std::string& v) {
            const double s = text::parse_flag_seconds("--last-call", v);
            if (!(s >= 0 && s <= 86400)) throw ConfigError(fmt::format("--last-call {}: give seconds from 0 to 86400", v));
            out_.job.node.last_call = s;
          });
    value("--node-rank", "K", "this node's index, 0..N-1; node 0 hosts the job's store",
          [this](const std::string& v) {
            out_.job.node.node_rank =
                text::parse_flag_int("--node-rank", v, "give a node rank from 0 to the number of nodes - 1");
          });
    value("--master-addr", "HOST", "node 0's address, reachable from every node",
          [this](const std::string& v) { out_.job.node.master_addr = v; });
    value("--master-port", "PORT",
          "the port node 0 hosts the job's store on\n"
          "(under srun or mpirun all four come from the engine; docs/multinode.md)",
          [this](const std::string& v) {
            out_.job.node.master_port = text::parse_flag_int("--master-port", v, "give a port from 1 to 65535");
          });
    flag("--store-only",
         "host the job's store and coordinate its nodes, start no ranks\n"
         "and no PROGRAM: every compute node, node 0 included, may then be\n"
         "lost (with --nnodes, --master-addr, --master-port; docs/multinode.md)",
         [this] { out_.job.node.store_only = true; });
    flag("--external-store",
         "on every compute node: a fastrun --store-only at --master-addr\n"
         "--master-port hosts the job's store; node 0 connects to it too",
         [this] { out_.job.node.external_store = true; });
    value("--max-restarts", "N",
          "after a failed attempt, stop its ranks and start the job again,\n"
          "up to N times (default 0: the first failure ends the job;\n"
          "docs/launching.md, \"Restarts\")",
          [this](const std::string& v) {
            constexpr const char* accepted = "give a number of restarts of 0 or more";
            const int n = text::parse_flag_int("--max-restarts", v, accepted);
            if (n < 0) throw ConfigError(fmt::format("--max-restarts {}: {}", v, accepted));
            out_.job.max_restarts = n;
          });
    flag("--keep-background",
         "leave running what ranks started in the background; by default\n"
         "it is stopped when the job ends (SIGTERM, then SIGKILL)",
         [this] { out_.job.keep_background = true; });
    action("--cleanup", "remove /dev/shm segments of jobs whose launcher died, and exit", CliArgs::Action::cleanup);
    action("-h,--help", "this text", CliArgs::Action::help);
    action("--version", "fastrun's version", CliArgs::Action::version);
    action("--help-env", "the environment variables fastrun reads and sets", CliArgs::Action::help_env);
  }

 private:
  void value(const std::string& name, const std::string& value_name, const std::string& help,
             std::function<void(const std::string&)> set) {
    app_.add_option_function<std::string>(name, std::move(set), help)
        ->type_name(value_name)
        ->trigger_on_parse()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  void flag(const std::string& name, const std::string& help, std::function<void()> set) {
    app_.add_flag_callback(name, std::move(set), help)->disable_flag_override()->trigger_on_parse();
  }
  void action(const std::string& name, const std::string& help, CliArgs::Action a) {
    flag(name, help, [a] { throw ActionChosen{a}; });
  }

  CLI::App& app_;
  CliArgs& out_;
};

// "  --output MODE          what ranks ...": names and value name, then the help from column 25;
// a help's further lines are indented to that column.
std::string option_lines(const CLI::App& app) {
  std::string lines;
  for (const CLI::Option* o : app.get_options()) {
    std::string left = fmt::format("{}", fmt::join(CLI::detail::split(o->get_name(false, true), ','), ", "));
    if (!o->get_type_name().empty()) left += " " + o->get_type_name();
    std::string help = o->get_description();
    for (std::size_t nl = help.find('\n'); nl != std::string::npos; nl = help.find('\n', nl + 1))
      help.insert(nl + 1, std::string(25, ' '));
    lines += fmt::format("  {:<22} {}\n", left, help);
  }
  return lines;
}

// What CLI11 reports in its own words, said in fastrun's: which option, and what is accepted.
[[noreturn]] void rethrow_in_our_words(const CLI::ParseError& e, const std::vector<std::string>& args) {
  const std::string what = e.what();
  // "tag-output was given a disallowed flag override": a flag given as --name=value.
  if (const auto at = what.find(" was given a disallowed flag override"); at != std::string::npos) {
    const std::string name = "--" + what.substr(0, at);
    for (const std::string& a : args)
      if (a.rfind(name + "=", 0) == 0)
        throw ConfigError(fmt::format("{} takes no value (got '{}')", name, a.substr(name.size() + 1)));
  }
  // "--nproc: 1 required TEXT missing": a value option at the end of the line.
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && what.rfind("--", 0) == 0)
    throw ConfigError(fmt::format("{} needs a value; see fastrun --help", what.substr(0, what.find(':'))));
  throw ConfigError(fmt::format("{}; see fastrun --help", what));
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

// --store-only starts no ranks: what would say how many or which program is a usage error, and
// so is a flag about ranks it would otherwise ignore (their output, placement, stopping).
void check_store_only_args(const CLI::App& app, const CliArgs& out, std::vector<std::string> rest) {
  const std::string& given = out.job.node.store_only_from;  // the flag or FASTRUN_STORE_ONLY=1
  for (const char* name : {"--log-dir", "--output", "--tag-output", "--bind", "--report-bindings", "--kill-timeout",
                           "--stall-report", "--keep-background"}) {
    if (app.count(name) > 0)
      throw ConfigError(fmt::format("{} with {}: the store-only launcher starts no ranks, so {} would do "
                                    "nothing here; give it to the compute nodes' fastrun (with --external-store)",
                                    given, name, name));
  }
  if (out.job.nproc != 0 || out.job.devices)
    throw ConfigError(fmt::format("{} with {}: the store-only launcher starts no ranks; give --nproc or "
                                  "--devices to the compute nodes' fastrun (with --external-store)",
                                  given, out.job.devices ? "--devices " + *out.job.devices
                                                         : "--nproc " + std::to_string(out.job.nproc)));
  if (!rest.empty() && rest[0] == "--") rest.erase(rest.begin());
  if (!rest.empty())
    throw ConfigError(fmt::format("{} with PROGRAM '{}': the store-only launcher starts no program; "
                                  "give it to the compute nodes' fastrun (with --external-store)",
                                  given, fmt::join(rest, " ")));
}

}  // namespace

std::string usage_text() {
  CliArgs unused;
  CLI::App app;
  app.set_help_flag();
  Flags flags(app, unused);
  return "usage: fastrun [options] [--] PROGRAM [ARGS...]\n"
         "Runs PROGRAM as a job of ranks on this machine (or, with --nnodes, on one node of several),\n"
         "one process per rank.\n\n" +
         option_lines(app) +
         "\nExit status: 0 when every rank exits 0; else the first failing rank's code (128+N for\n"
         "signal N); 130/143/129 after SIGINT/SIGTERM/SIGHUP; 141 when the output was closed\n"
         "(`fastrun ... | head`: the job is stopped); 2 for a usage error.\n";
}

CliArgs parse_cli(const std::vector<std::string>& args) {
  CliArgs out;
  CLI::App app;
  app.set_help_flag();   // --help is an action of ours (Flags)
  app.prefix_command();  // the first word that is no option or value, and all after it, are left over
  Flags flags(app, out);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
    app.parse(reversed);
  } catch (const ActionChosen& chosen) {
    out.action = chosen.action;
    return out;
  } catch (const CLI::ParseError& e) {
    rethrow_in_our_words(e, args);
  }
  // Left over: PROGRAM and its ARGS, or "--" and them, after any unknown options met on the way.
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest[0] != "--" && rest[0].size() >= 2 && rest[0][0] == '-')
    throw ConfigError(fmt::format("unknown option '{}'; see fastrun --help", rest[0]));
  store_apart_from_env(out.job.node);
  if (out.job.node.store_only) {
    check_store_only_args(app, out, rest);
    return out;
  }
  if (out.job.nproc == 0 && !out.job.devices) {
    throw ConfigError("give --devices LIST|all (one rank per GPU) or --nproc N (CPU ranks); see fastrun --help");
  }
  if (!rest.empty() && rest[0] == "--") rest.erase(rest.begin());
  if (rest.empty()) throw ConfigError("PROGRAM is missing; usage: fastrun [options] [--] PROGRAM [ARGS...]");
  out.program = std::move(rest);
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
    if (!nodes.store_only) exec_path = resolve_program(args.program[0]);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Anything else that fails before a rank starts (a system call, the topology's load): said
    // as below, not an abort out of main.
    std::fprintf(stderr, "fastrun: %s\n", e.what());
    return 1;
  }
  // 2. Signals: blocked here, before any thread exists, and read by the supervisor's signalfd.
  const sigset_t handled = Supervisor::handled_signals();
  pthread_sigmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // for the launcher only: every rank starts with default dispositions (spawn.h)
  try {
    if (nodes.store_only) {
      // The job's store and coordinator, no ranks (docs/multinode.md, "A store outside the job").
      log::set_tag("launcher");
      NodeRendezvous rendezvous(nodes, env::get_timeout(env::kTimeout));
      rendezvous.agree(job, args.job);
      SupervisorOptions so;
      so.job = job;
      so.handle_signals = true;
      return run_node_attempts(rendezvous, nodes, std::move(so));
    }
    // 3. Several nodes: meet the other launchers through node 0's store (docs/multinode.md).
    std::unique_ptr<NodeRendezvous> rendezvous;
    if (nodes.multi_node()) {
      log::set_tag("launcher");
      rendezvous = std::make_unique<NodeRendezvous>(
          nodes, env::get_timeout(env::kTimeout));
      rendezvous->agree(job, args.job);
    }
    // Watching the other nodes starts at once: node 0 counts this node's heartbeats from here.
    // With restarts each attempt has a watch of its own (node_attempts.h).
    const bool node_restarts = rendezvous && (job.max_restarts > 0 || nodes.elastic() || nodes.external_store);
    std::unique_ptr<NodeWatch> watch;
    if (rendezvous && !node_restarts)
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
    if (!rendezvous) so.renew_store = [&resources] { return resources.renew_store(); };
    log::set_tag("launcher");
    if (job.binding.report)
      std::fputs(binding_report(job.binding, job.node.rank_offset, own_affinity()).c_str(), stderr);
    log::info("run {}: {} rank{}, store {}, devices {}, logs {}, restarts {}", job.run_id, job.world_size,
              job.world_size == 1 ? "" : "s", job.store_address,
              job.devices ? fmt::format("{}", fmt::join(job.devices->rank_devices, ",")) : std::string("not pinned"),
              job.log_dir.empty() ? std::string("not filed") : job.log_dir, job.max_restarts);
    // 5. Run; this thread (main) lives as long as the ranks, as PR_SET_PDEATHSIG requires.
    if (node_restarts) {
      const int code = run_node_attempts(*rendezvous, nodes, std::move(so));
      resources.release();
      return code;
    }
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
