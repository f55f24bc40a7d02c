#pragma once
// Number flags for CLI11 programs of this tree (fastrun-bench, the examples, test programs): one
// declaration per flag, with its help and its range, read by the runtime's one checked parser
// (text/number.h). CLI11's own conversion reads "010" as 8 and wraps "-5" into an unsigned type.
//   CLI::App app("collectives on N self-forked ranks", "fastrun-bench shm");
//   fastrun::flags::integer(app, "--nproc", a.nproc, "ranks to fork", 1, 256);
//   fastrun::flags::decimal(app, "--seconds", a.seconds, "per row", 0.01, 3600);
//   fastrun::flags::parse(app, argc, argv);   // --help: prints the flags and exits 0
// Built in the tree only (target fastrun_number_flags); nothing installed includes it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/text/split.h"

namespace fastrun::flags {

// --name N: the whole text an integer from min to max, else a ConfigError
// "--name='abc' is not valid: expected an integer from 1 to 256". The help shows the default.
template <class Int>
CLI::Option* integer(CLI::App& app, const std::string& name, Int& into, const std::string& help, std::int64_t min,
                     std::int64_t max) {
  return app
      .add_option_function<std::string>(
          name, [&into, name, min, max](const std::string& v) { into = static_cast<Int>(text::parse_integer(name, v, min, max)); },
          help)
      ->type_name("INT")
      ->default_str(std::to_string(into));
}

// --name 2,4,8: comma-separated integers, each from min to max as integer() reads one; the help
// shows the default list.
inline CLI::Option* integer_list(CLI::App& app, const std::string& name, std::vector<int>& into, const std::string& help,
                                 std::int64_t min, std::int64_t max) {
  std::string shown;
  for (int v : into) shown += (shown.empty() ? "" : ",") + std::to_string(v);
  return app
      .add_option_function<std::string>(
          name,
          [&into, name, min, max](const std::string& v) {
            into.clear();
            for (const std::string_view field : text::split(v, ','))
              into.push_back(static_cast<int>(text::parse_integer(name, field, min, max)));
          },
          help)
      ->type_name("LIST")
      ->default_str(shown);
}

// --name X: the whole text a number from min to max (5, 0.5, 1e3), else a ConfigError naming it.
inline CLI::Option* decimal(CLI::App& app, const std::string& name, double& into, const std::string& help, double min,
                            double max) {
  return app
      .add_option_function<std::string>(
          name,
          [&into, name, min, max](const std::string& v) {
            const auto x = text::to_decimal(v);
            if (!x || *x < min || *x > max)
              throw ConfigError(fmt::format("{}='{}' is not valid: expected a number from {} to {}", name, v, min, max));
            into = *x;
          },
          help)
      ->type_name("NUM")
      ->default_str(fmt::format("{}", into));
}

// --name SIZE: a byte count, 4096, 4K, 64M or 1G (K, M, G also as KiB, MiB, GiB), from min to
// 1 TiB, else a ConfigError naming the flag and the text.
template <class Int>
CLI::Option* byte_count(CLI::App& app, const std::string& name, Int& into, const std::string& help, std::int64_t min,
                        const std::string& shown) {
  return app
      .add_option_function<std::string>(
          name,
          [&into, name, min](const std::string& v) {
            constexpr std::int64_t kMax = std::int64_t{1} << 40;
            const std::size_t digits = v.find_first_not_of("0123456789");
            const std::string unit = digits == std::string::npos ? "" : v.substr(digits);
            std::int64_t mul = 0;
            if (unit.empty()) mul = 1;
            else if (unit == "K" || unit == "KiB") mul = std::int64_t{1} << 10;
            else if (unit == "M" || unit == "MiB") mul = std::int64_t{1} << 20;
            else if (unit == "G" || unit == "GiB") mul = std::int64_t{1} << 30;
            const auto n = text::to_integer(v.substr(0, digits), 0, kMax);
            if (mul == 0 || !n || *n * mul < min || *n * mul > kMax)
              throw ConfigError(fmt::format("{}='{}' is not valid: expected a byte count from {} to 1T, like 4096, "
                                            "4K, 64M or 1G",
                                            name, v, min));
            into = static_cast<Int>(*n * mul);
          },
          help)
      ->type_name("SIZE")
      ->default_str(shown);
}

// --name WORD: one of `choices` (CLI11 names the flag, the word and the choices when it is not).
inline CLI::Option* choice(CLI::App& app, const std::string& name, std::string& into, const std::string& help,
                           const std::vector<std::string>& choices) {
  return app.add_option(name, into, help)->check(CLI::IsMember(choices))->capture_default_str();
}

// argv[0] is the program (or subject). --help prints the flags and ends the program with 0, as
// nothing has started yet; a bad flag or value is a ConfigError naming it.
// A flag given twice takes its last value, as the hand-written loops did and as scripts that append
// an override to a default command line expect (CLI11's default is an error).
inline void parse(CLI::App& app, int argc, char** argv) {
  for (CLI::Option* o : app.get_options()) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("{} (see {} --help)", e.what(), app.get_name()));
  }
}

}  // namespace fastrun::flags
