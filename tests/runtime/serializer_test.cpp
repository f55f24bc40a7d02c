// fastrun::serializer<T>: round trips of every built-in, nesting, user structs, and decode
// errors that say what went wrong.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "fastrun/runtime/objects/serializer.h"

namespace demo {
struct Stats {
  int step = 0;
  double loss = 0;
  std::vector<std::string> tags;
  std::optional<std::map<std::string, float>> extra;
  bool operator==(const Stats&) const = default;
};
FASTRUN_SERIALIZABLE(Stats, step, loss, tags, extra)
}  // namespace demo

namespace {
template <class T>
T round_trip(const T& v) {
  const auto bytes = fastrun::encode(v);
  return fastrun::decode<T>(bytes.data(), bytes.size());
}
}  // namespace

TEST_CASE("serializer round-trips built-in types", "[objects]") {
  CHECK(round_trip(42) == 42);
  CHECK(round_trip(-7LL) == -7LL);
  CHECK(round_trip(3.5) == 3.5);
  CHECK(round_trip(true) == true);
  CHECK(round_trip(std::string{}) == "");
  CHECK(round_trip(std::string("héllo\0x", 8)) == std::string("héllo\0x", 8));
  CHECK(round_trip(std::vector<float>{1, 2, 3}) == std::vector<float>{1, 2, 3});
  CHECK(round_trip(std::vector<bool>{true, false, true}) == std::vector<bool>{true, false, true});
  CHECK(round_trip(std::pair<int, std::string>{1, "a"}) == std::pair<int, std::string>{1, "a"});
  CHECK(round_trip(std::tuple<int, double, std::string>{1, 2.0, "c"}) ==
        std::tuple<int, double, std::string>{1, 2.0, "c"});
  CHECK(round_trip(std::optional<int>{}) == std::nullopt);
  CHECK(round_trip(std::optional<int>{5}) == 5);
  std::unordered_map<std::string, std::vector<int>> um{{"a", {1}}, {"b", {}}};
  CHECK(round_trip(um) == um);
}

TEST_CASE("serializer handles deep nesting and user structs", "[objects]") {
  std::map<std::string, std::vector<std::map<int, std::optional<std::pair<std::string, double>>>>> deep{
      {"x", {{{1, std::nullopt}, {2, std::make_pair(std::string("p"), 2.5)}}, {}}}, {"y", {}}};
  CHECK(round_trip(deep) == deep);
  demo::Stats s{7, 0.25, {"a", "bb"}, std::map<std::string, float>{{"lr", 0.1f}}};
  CHECK(round_trip(s) == s);
  std::vector<demo::Stats> many(3, s);
  CHECK(round_trip(many) == many);
}

TEST_CASE("decode errors say what was wrong", "[objects]") {
  auto bytes = fastrun::encode(std::string("hello"));
  SECTION("truncated") {
    bytes.pop_back();
    CHECK_THROWS_WITH(fastrun::decode<std::string>(bytes.data(), bytes.size()),
                      Catch::Contains("a string length") && Catch::Contains("exceeds the bytes left"));
  }
  SECTION("wrong version") {
    bytes[0] = 9;
    CHECK_THROWS_WITH(fastrun::decode<std::string>(bytes.data(), bytes.size()), Catch::Contains("version byte 9"));
  }
  SECTION("left-over bytes: a different type was sent") {
    auto v = fastrun::encode(std::vector<int>{1, 2, 3});
    CHECK_THROWS_WITH(fastrun::decode<std::int64_t>(v.data(), v.size()), Catch::Contains("left over"));
  }
  SECTION("absurd length") {
    auto v = fastrun::encode(std::vector<int>{1});
    v[1] = 0xff;  // length low byte
    v[8] = 0x7f;  // length high byte
    CHECK_THROWS_AS(fastrun::decode<std::vector<int>>(v.data(), v.size()), fastrun::SerializationError);
  }
}
