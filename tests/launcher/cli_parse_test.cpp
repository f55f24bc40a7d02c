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
      {{"--nproc", "2", "--tag-output=yes", "p"}, "takes no value"},
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
