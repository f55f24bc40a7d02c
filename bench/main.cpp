// fastrun-bench SUBJECT [options]: dispatches to the registered subjects; answers --help (the
// subject list) itself, and each subject its own SUBJECT --help (bench_registry.h).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "bench_registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun::bench {
std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> entries;
  return entries;
}
}  // namespace fastrun::bench

int main(int argc, char** argv) {
  using namespace fastrun::bench;
  auto& subs = registry();
  std::sort(subs.begin(), subs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  auto usage = [&](std::FILE* out) {
    std::string text = "usage: fastrun-bench SUBJECT [options]\nsubjects:\n";
    for (auto& s : subs) text += fmt::format("  {:<12} {}\n", s.name, s.help);
    std::fputs(text.c_str(), out);
  };
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (auto& s : subs) {
    if (s.name != argv[1]) continue;
    try {
      return s.run(argc - 1, argv + 1);
    } catch (const fastrun::ConfigError& e) {
      std::fprintf(stderr, "fastrun-bench %s: %s\n", argv[1], e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fastrun-bench %s: error: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "fastrun-bench: unknown subject '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
