#pragma once
// Subcommands of fastrun-bench register themselves here, one file per subject:
//   static fastrun::bench::Registration reg{"store", "rendezvous store throughput", &run_store};
// A subject reads its flags with CLI11 (tools/flags/number_flags.h), which answers
// `fastrun-bench SUBJECT --help` from the flags' declarations.
// Each prints a table to stdout; none asserts timings (targets are read off the tables).
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fastrun::bench {

using Entry = int (*)(int argc, char** argv);  // argv[0] is the subcommand name

struct Subcommand {
  std::string name;
  std::string help;
  Entry run;
};

std::vector<Subcommand>& registry();

struct Registration {
  Registration(std::string name, std::string help, Entry run) {
    registry().push_back({std::move(name), std::move(help), run});
  }
};

}  // namespace fastrun::bench
