// Parsing the command line (pure).
#include <set>

#include <catch2/catch.hpp>

#include "fastrun/launcher/cli.h"
#include "fastrun/launcher/job_config.h"
#include "fastrun/runtime/error.h"

using fastrun::ConfigError;
using fastrun::launcher::CliArgs;
using fastrun::launcher::parse_cli;
using Strings = std::vector<std::string>;

TEST_CASE("cli parses options and keeps PROGRAM's arguments untouched", "[launcher][cli]") {
  auto a = parse_cli({"--nproc", "3", "--tag-output", "--output=only_error", "--kill-timeout", "0.5", "--log-dir",
                      "/tmp/x", "--run-id", "job-1", "./prog", "--nproc", "", "--"});
  CHECK(a.action == CliArgs::Action::run);
  CHECK(a.job.nproc == 3);
  CHECK(a.job.tag_output);
  CHECK(a.job.output == fastrun::launcher::OutputMode::only_error);
  CHECK(a.job.kill_timeout == 0.5);
  CHECK(a.job.log_dir == "/tmp/x");
  CHECK(a.job.run_id == "job-1");
  CHECK(a.program == Strings{"./prog", "--nproc", "", "--"});

  auto b = parse_cli({"--devices", "0,1", "--", "--weird-name", "x"});
  CHECK(b.job.devices == std::optional<std::string>("0,1"));
  CHECK(b.program == Strings{"--weird-name", "x"});

  CHECK(parse_cli({"--help"}).action == CliArgs::Action::help);
  CHECK(parse_cli({"--version"}).action == CliArgs::Action::version);
  CHECK(parse_cli({"--help-env"}).action == CliArgs::Action::help_env);
  CHECK(parse_cli({"--cleanup"}).action == CliArgs::Action::cleanup);
  CHECK(parse_cli({"-h"}).action == CliArgs::Action::help);
  CHECK(parse_cli({"--nproc", "2", "--help", "--bogus"}).action == CliArgs::Action::help);  // where it stands

  // "-" is a word, not an option; a later --nproc wins; PROGRAM's own --help is its own.
  auto c = parse_cli({"--nproc=4", "--nproc", "5", "--keep-background", "-", "--help"});
  CHECK(c.job.nproc == 5);
  CHECK(c.job.keep_background);
  CHECK(c.program == Strings{"-", "--help"});
  auto d = parse_cli({"--nproc", "1", "--kill-timeout=0", "--nnodes", "2", "--node-rank=1", "--master-addr", "h",
                      "--master-port", "29500", "--log-dir", "-d", "p", "--", "x"});
  CHECK(d.job.kill_timeout == 0);
  CHECK(d.job.node.nnodes == 2);
  CHECK_FALSE(d.job.node.min_nnodes);  // a fixed set of nodes, as before MIN:MAX existed
  auto e = parse_cli({"--nproc", "1", "--nnodes", "2:4", "p"});
  CHECK(e.job.node.min_nnodes == 2);
  CHECK(e.job.node.nnodes == 4);
  CHECK_FALSE(e.job.node.last_call);  // FASTRUN_LAST_CALL, else 30 s (plan_nodes)
  CHECK(parse_cli({"--nproc", "1", "--nnodes", "2:4", "--last-call", "2.5", "p"}).job.node.last_call == 2.5);
  CHECK_FALSE(parse_cli({"--nproc", "1", "--nnodes", "1:3", "--nnodes", "3", "p"}).job.node.min_nnodes);  // the last wins
  CHECK(d.job.node.node_rank == 1);
  CHECK(d.job.node.master_addr == "h");
  CHECK(d.job.node.master_port == 29500);
  CHECK(d.job.log_dir == "-d");  // a value, even one that looks like an option
  CHECK(d.program == Strings{"p", "--", "x"});
}

TEST_CASE("cli usage lists each option once with its help", "[launcher][cli]") {
  const std::string usage = fastrun::launcher::usage_text();
  for (const char* line : {"\n  --devices LIST|all     one rank per GPU", "\n  --nproc N              N ranks without GPUs",
                           "\n  --kill-timeout SECS    grace between SIGTERM and SIGKILL",
                           "\n  --output MODE          what ranks other than 0 show: all (default), only_error (their\n"
                           "                         stderr only), ignore",
                           "\n  -h, --help             this text", "\n  --help-env             the environment",
                           "\n  --cleanup              remove /dev/shm", "2 for a usage error.\n"}) {
    CAPTURE(line);
    CHECK(usage.find(line) != std::string::npos);
  }
  CHECK(usage.find("--nproc") == usage.rfind("--nproc N"));
}

TEST_CASE("cli rejects bad input with a message naming it", "[launcher][cli]") {
  const std::vector<std::pair<Strings, std::string>> rows = {
      {{"--nproc", "0", "p"}, "--nproc 0"},
      {{"--nproc", "abc", "p"}, "'abc'"},
      {{"--nproc"}, "needs a value"},
      {{"--bogus", "p"}, "'--bogus'"},
      {{"--nproc", "2"}, "PROGRAM is missing"},
      {{"p"}, "--devices"},
      {{"--nproc", "2", "--output", "some", "p"}, "'some'"},
      {{"--nproc", "2", "--run-id", "a/b", "p"}, "'a/b'"},
      {{"--nproc", "2", "--kill-timeout", "-1", "p"}, "--kill-timeout"},
      {{"--nproc", "2", "--kill-timeout", "soon", "p"}, "'soon'"},
      {{"--nproc", "2", "--tag-output=yes", "p"}, "--tag-output takes no value (got 'yes')"},
      {{"--help=please"}, "--help takes no value (got 'please')"},
      {{"--nproc", "2", "--master-port"}, "--master-port needs a value; see fastrun --help"},
      {{"--nproc", "2", "--nnodes", "x", "p"}, "--nnodes 'x': expected a whole number"},
      {{"--nproc", " 3", "p"}, "--nproc ' 3': expected a whole number"},
      {{"--nproc", "+3", "p"}, "--nproc '+3': expected a whole number"},
      {{"--nproc", "99999999999", "p"}, "--nproc 99999999999: give a number of ranks from 1 to 4096"},
      {{"--nproc", "-99999999999", "p"}, "--nproc -99999999999: give a number of ranks from 1 to 4096"},
      {{"--nproc", "4097", "p"}, "--nproc 4097: give a number of ranks from 1 to 4096"},
      {{"--nproc", "2", "--max-restarts", "99999999999", "p"}, "--max-restarts 99999999999: give a number of restarts"},
      {{"--nproc", "2", "--stall-report", "99999999999", "p"}, "--stall-report 99999999999: give whole seconds from 1 "
                                                                "to 86400, or 0 for no stall report"},
      {{"--nproc", "2", "--kill-timeout", "nan", "p"}, "--kill-timeout 'nan': expected seconds"},
      {{"--nproc", "2", "--last-call", "-1", "p"}, "--last-call"},
      {{"--nproc", "2", "--last-call", "86401", "p"}, "--last-call 86401: give seconds from 0 to 86400"},
      {{"--nproc", "2", "--log-dir", "", "p"}, "--log-dir is empty"},
      {{"--nproc", "2", "-x", "p"}, "unknown option '-x'; see fastrun --help"},
      {{"--bogus", "--nproc", "2", "p"}, "unknown option '--bogus'"},
      {{"--nproc", "2", "--"}, "PROGRAM is missing"},
  };
  for (const auto& [args, needle] : rows) {
    CAPTURE(args);
    try {
      parse_cli(args);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  }
}

TEST_CASE("generated run ids are unique and valid", "[launcher][cli]") {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = fastrun::launcher::generate_run_id();
    fastrun::launcher::check_run_id(id);
    ids.insert(id);
  }
  CHECK(ids.size() == 1000);
}
