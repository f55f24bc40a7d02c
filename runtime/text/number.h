#pragma once
// Numbers from text (FASTRUN_* and engine variables, flags, store records): the one place fastrun
// turns text into a number, so every reader is as strict as the others. The whole text must be
// the number: no sign other than '-', no spaces, nothing after it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fastrun::text {

// The whole of `text` as a base-10 integer from min to max, or nullopt (empty, not a number,
// trailing characters, out of range).
std::optional<std::int64_t> to_integer(std::string_view text, std::int64_t min = INT64_MIN,
                                       std::int64_t max = INT64_MAX);

// to_integer, or a ConfigError naming `name` (the variable or flag), the text and what is
// accepted: "NAME='abc' is not valid: expected an integer from 0 to 7".
std::int64_t parse_integer(std::string_view name, std::string_view text, std::int64_t min = INT64_MIN,
                           std::int64_t max = INT64_MAX);

// A command-line flag's value as an int, or a ConfigError in the flag's words, which fastrun's
// users and tests know: "--nproc 'two': expected a whole number". A whole number beyond int's
// range is answered with what the flag accepts, `accepted` ("--nproc 99999999999: give a number of
// ranks from 1 to 4096"); the flag's own range check, in the same words, follows at the caller.
int parse_flag_int(std::string_view flag, std::string_view text, std::string_view accepted);
// A flag's value as seconds (5, 0.5, 1e3), or "--kill-timeout 'soon': expected seconds, e.g. 5 or 0.5".
double parse_flag_seconds(std::string_view flag, std::string_view text);

// "an integer from 0 to 7", "an integer >= 1", "an integer": the accepted range in words.
std::string integer_range(std::int64_t min, std::int64_t max);

// The whole of `text` as a finite decimal number (e.g. 5, 0.5, 1e3), or nullopt.
std::optional<double> to_decimal(std::string_view text);

}  // namespace fastrun::text
