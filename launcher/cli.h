#pragma once
// The `fastrun` command line: parsing (pure, tested) and the whole program (cli_main).
#include <string>
#include <vector>

#include "fastrun/launcher/job_config.h"

namespace fastrun::launcher {

struct CliArgs {
  enum class Action { run, help, version, help_env, cleanup };
  Action action = Action::run;
  JobOptions job;
  std::vector<std::string> program;  // PROGRAM and its ARGS, byte for byte
};

// Options come before PROGRAM ("--name value" or "--name=value"); the first other word, or
// whatever follows "--", is PROGRAM. Throws ConfigError for an unknown option, a missing or bad
// value, or a missing PROGRAM.
CliArgs parse_cli(const std::vector<std::string>& args);

std::string usage_text();

// The program: returns the launcher's exit status (docs/launching.md, "Failure"; 2 for usage errors).
int cli_main(int argc, char** argv);

}  // namespace fastrun::launcher
