#pragma once
// Subcommands of fastrun-bench register themselves here, one file per subject:
//   static fastrun::bench::Registration reg{"store", "rendezvous store throughput", &run_store,
//                                           "  --seconds S   ...\n"};
// `options` is what `fastrun-bench SUBJECT --help` prints (main.cpp answers --help for every
// subject, so no subject parses it).
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
  std::string options;  // one line per option, with its default
};

std::vector<Subcommand>& registry();

struct Registration {
  Registration(std::string name, std::string help, Entry run, std::string options) {
    registry().push_back({std::move(name), std::move(help), run, std::move(options)});
  }
};

}  // namespace fastrun::bench
