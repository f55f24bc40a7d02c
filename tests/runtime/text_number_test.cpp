// Numbers from text: the whole text is the number, in range, or it is refused (text/number.h).
#include <catch2/catch.hpp>

#include <string>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

using fastrun::text::parse_flag_int;
using fastrun::text::parse_flag_seconds;
using fastrun::text::parse_integer;
using fastrun::text::to_decimal;
using fastrun::text::to_integer;

TEST_CASE("to_integer takes the whole text and the range, nothing else", "[text]") {
  CHECK(to_integer("0") == 0);
  CHECK(to_integer("-7") == -7);
  CHECK(to_integer("9223372036854775807") == INT64_MAX);
  CHECK(to_integer("65535", 0, 65535) == 65535);
  // What strtol/atoi/stoi read as a number or a prefix of one.
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10", "1.0", "1e3", "--1", "9223372036854775808", "abc"}) {
    CAPTURE(bad);
    CHECK_FALSE(to_integer(bad).has_value());
  }
  CHECK_FALSE(to_integer("65536", 0, 65535).has_value());
  CHECK_FALSE(to_integer("-1", 0, 65535).has_value());
  CHECK(to_integer("010") == 10);  // decimal, never octal
}

TEST_CASE("parse_integer names the variable, the text and the range", "[text]") {
  CHECK(parse_integer("X", "12", 1, 16) == 12);
  CHECK_THROWS_WITH(parse_integer("FASTRUN_X", "2x", 1, 16),
                    "FASTRUN_X='2x' is not valid: expected an integer from 1 to 16");
  CHECK_THROWS_WITH(parse_integer("--n", "0", 1), "--n='0' is not valid: expected an integer >= 1");
  CHECK_THROWS_WITH(parse_integer("N", "", INT64_MIN, 5), "N='' is not valid: expected an integer <= 5");
  CHECK_THROWS_AS(parse_integer("N", "x"), fastrun::ConfigError);
}

TEST_CASE("to_decimal takes a finite number written whole", "[text]") {
  CHECK(to_decimal("5") == 5.0);
  CHECK(to_decimal("0.5") == 0.5);
  CHECK(to_decimal("1e3") == 1000.0);
  CHECK(to_decimal("-2.5") == -2.5);
  for (const char* bad : {"", " 5", "5 ", "+5", "5s", "inf", "nan", "1e999", "0x1p3", "."}) {
    CAPTURE(bad);
    CHECK_FALSE(to_decimal(bad).has_value());
  }
}

TEST_CASE("parse_flag_int and parse_flag_seconds answer in the flag's words", "[text]") {
  const char* ranks = "give a number of ranks from 1 to 4096";
  CHECK(parse_flag_int("--nproc", "4", ranks) == 4);
  CHECK(parse_flag_int("--node-rank", "-1", "give a node rank") == -1);  // the range is the caller's to check
  CHECK(parse_flag_int("--n", "2147483647", "") == INT32_MAX);
  CHECK_THROWS_WITH(parse_flag_int("--nproc", "two", ranks), "--nproc 'two': expected a whole number");
  CHECK_THROWS_WITH(parse_flag_int("--nproc", "+3", ranks), "--nproc '+3': expected a whole number");
  CHECK_THROWS_WITH(parse_flag_int("--nproc", "-", ranks), "--nproc '-': expected a whole number");
  // A whole number is answered with what the flag accepts, however large.
  CHECK_THROWS_WITH(parse_flag_int("--nproc", "2147483648", ranks), "--nproc 2147483648: " + std::string(ranks));
  CHECK_THROWS_WITH(parse_flag_int("--nproc", "-99999999999999999999999", ranks),
                    "--nproc -99999999999999999999999: " + std::string(ranks));
  CHECK(parse_flag_seconds("--kill-timeout", "0.5") == 0.5);
  CHECK_THROWS_WITH(parse_flag_seconds("--kill-timeout", "nan"), "--kill-timeout 'nan': expected seconds, e.g. 5 or 0.5");
  CHECK_THROWS_AS(parse_flag_seconds("--kill-timeout", ""), fastrun::ConfigError);
}
