// Fields of a list flag: n separators make n + 1 fields, empty ones kept (text/split.h).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/text/split.h"

using fastrun::text::split;
using Fields = std::vector<std::string_view>;

TEST_CASE("split keeps every field in order", "[text]") {
  CHECK(split("2,4,8", ',') == Fields{"2", "4", "8"});
  CHECK(split("40:1:0", ':') == Fields{"40", "1", "0"});
  CHECK(split("one", ',') == Fields{"one"});
  CHECK(split("a:b,c", ',') == Fields{"a:b", "c"});  // only the one separator
}

TEST_CASE("split keeps empty fields for the field parser to refuse", "[text]") {
  CHECK(split("", ',') == Fields{""});
  CHECK(split(",", ',') == Fields{"", ""});
  CHECK(split("1,,2", ',') == Fields{"1", "", "2"});
  CHECK(split("1,", ',') == Fields{"1", ""});
  CHECK(split(",1", ',') == Fields{"", "1"});
}

TEST_CASE("split returns views into the text it was given", "[text]") {
  const std::string text = "ab,cd";
  const auto fields = split(text, ',');
  REQUIRE(fields.size() == 2);
  CHECK(fields[1].data() == text.data() + 3);
}
