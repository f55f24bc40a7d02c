// The state format: pinned text, field-by-field mismatch errors, corrupt input.
#include <catch2/catch.hpp>

#include "fastrun/samplers/samplers.h"

using namespace fastrun::samplers;
using Catch::Contains;

TEST_CASE("state strings are pinned", "[samplers][state]") {
  RandomSampler a(10, true, 42);
  a.set_epoch(2);
  a.set_distributed(2, 0, true);
  a.next();
  CHECK(a.state() ==
        R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":2,"consumed":2,"seed":42,"shuffle":true})");
  CHECK(SequentialSampler(5).state() == R"({"format":"fastrun.sampler/1","kind":"SequentialSampler","n":5,"epoch":0,"consumed":0})");
  CHECK(LazyRandomSampler(7, 3).state() ==
        R"({"format":"fastrun.sampler/1","kind":"LazyRandomSampler","n":7,"epoch":0,"consumed":0,"seed":3})");
  CHECK(SortedSampler({1, 2}).state().find(R"("kind":"SortedSampler","n":2,"epoch":0,"consumed":0,"lengths_hash":)") !=
        std::string::npos);
  CHECK(RandomBatchSampler(9, 4, false, true, 1).state() ==
        R"({"format":"fastrun.sampler/1","kind":"RandomBatchSampler","n":9,"epoch":0,"consumed":0,"seed":1,"shuffle":false,"batch_size":4,"drop_last":true})");
}

TEST_CASE("restoring into another kind or another n names the field", "[samplers][state][errors]") {
  RandomSampler a(10, true, 1);
  CHECK_THROWS_WITH(SequentialSampler(10).load_state(a.state()),
                    Contains("'kind' is 'RandomSampler'") && Contains("SequentialSampler"));
  CHECK_THROWS_WITH(RandomSampler(11).load_state(a.state()),
                    Contains("field 'n' is 10 in the state but 11 in this sampler"));
  CHECK_THROWS_WITH(SortedSampler({1, 2, 3}).load_state(SortedSampler({1, 2, 4}).state()),
                    Contains("field 'lengths_hash'"));
  CHECK_THROWS_WITH(RandomBatchSampler(10, 2).load_state(a.state()), Contains("'kind' is 'RandomSampler'"));
  CHECK_THROWS_WITH(LazyRandomSampler(10).load_state(a.state()), Contains("LazyRandomSampler"));
}

TEST_CASE("the state's seed and shuffle win over the constructor's", "[samplers][state]") {
  RandomSampler a(30, true, 1);
  RandomSampler b(30, false, 2);
  b.load_state(a.state());
  CHECK(b.shuffle());
  CHECK(b.seed() == 1);
  CHECK(b.take_all() == a.take_all());
}

TEST_CASE("corrupt states are clear errors and change nothing", "[samplers][state][errors]") {
  RandomSampler a(10, true, 1);
  const std::string good = a.state();
  for (const std::string& bad : {
           std::string(""),
           std::string("{"),
           std::string("not json"),
           good.substr(0, good.size() - 1),
           good + "x",
           std::string(R"({"format":"fastrun.sampler/2","kind":"RandomSampler","n":10,"epoch":0,"consumed":0,"seed":1,"shuffle":true})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":11,"seed":1,"shuffle":true})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":-1,"seed":1,"shuffle":true})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":1,"shuffle":true})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":1,"seed":"1","shuffle":true})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":99999999999999999999999,"epoch":0})"),
           std::string(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"n":10})"),
       }) {
    INFO(bad);
    RandomSampler b(10, true, 7);
    b.set_epoch(4);
    CHECK_THROWS_AS(b.load_state(bad), SamplerError);
    CHECK(b.seed() == 7);
    CHECK(b.epoch() == 4);
  }
  CHECK_THROWS_WITH(RandomSampler(10).load_state(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":1,"shuffle":true})"),
                    Contains("lacks the field 'seed'"));
  CHECK_THROWS_WITH(RandomSampler(10).load_state("garbage"), Contains("corrupt sampler state") && Contains("offset 0"));
  CHECK_THROWS_WITH(RandomSampler(10).load_state(R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,"consumed":11,"seed":1,"shuffle":true})"),
                    Contains("consumed = 11 exceeds n = 10"));
}

TEST_CASE("states tolerate whitespace (hand-edited files)", "[samplers][state]") {
  RandomSampler b(10);
  b.load_state(" {\n \"format\" : \"fastrun.sampler/1\", \"kind\":\"RandomSampler\", \"n\": 10, \"epoch\": 1,"
               " \"consumed\": 3, \"seed\": 4, \"shuffle\": false }\n");
  CHECK(b.epoch() == 1);
  CHECK(b.consumed() == 3);
  CHECK(b.take_all() == std::vector<std::uint64_t>{3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("a bad field is named with what is accepted", "[samplers][state][errors]") {
  const std::string head = R"({"format":"fastrun.sampler/1","kind":"RandomSampler","n":10,"epoch":0,)";
  auto load = [&](const std::string& rest) { RandomSampler(10).load_state(head + rest); };
  // Mistyped: a string, a negative number, a fraction, one past 2^64-1, null, an object.
  CHECK_THROWS_WITH(load(R"("consumed":1,"seed":"1","shuffle":true})"), Contains("field 'seed' is not an unsigned integer"));
  CHECK_THROWS_WITH(load(R"("consumed":-1,"seed":1,"shuffle":true})"),
                    Contains("field 'consumed' is -1") && Contains("accepted: an unsigned integer up to 2^64-1"));
  CHECK_THROWS_WITH(load(R"("consumed":1.5,"seed":1,"shuffle":true})"), Contains("field 'consumed' is 1.5"));
  CHECK_THROWS_WITH(load(R"("consumed":18446744073709551616,"seed":1,"shuffle":true})"),
                    Contains("field 'consumed' is") && Contains("up to 2^64-1"));
  CHECK_THROWS_WITH(load(R"("consumed":null,"seed":1,"shuffle":true})"), Contains("field 'consumed' is null"));
  CHECK_THROWS_WITH(load(R"("consumed":{"a":1},"seed":1,"shuffle":true})"), Contains("field 'consumed' is {\"a\":1}"));
  CHECK_THROWS_WITH(load(R"("consumed":1,"seed":1,"shuffle":1})"), Contains("field 'shuffle' is not true or false"));
  // The largest value still reads (and is then refused for what it means, not for its type).
  CHECK_THROWS_WITH(load(R"("consumed":18446744073709551615,"seed":1,"shuffle":true})"),
                    Contains("consumed = 18446744073709551615 exceeds n = 10"));
  // Missing, duplicated, not an object, malformed.
  CHECK_THROWS_WITH(load(R"("consumed":1,"seed":1})"), Contains("lacks the field 'shuffle'"));
  CHECK_THROWS_WITH(load(R"("consumed":1,"seed":1,"seed":2,"shuffle":true})"), Contains("duplicate key 'seed'"));
  CHECK_THROWS_WITH(RandomSampler(10).load_state("[1,2]"), Contains("a JSON array, not an object"));
  CHECK_THROWS_WITH(RandomSampler(10).load_state(R"({"format":"fastrun.sampler/1",)"),
                    Contains("corrupt sampler state at offset") && Contains("accepted: the one-line JSON object"));
  // An array item that is not an unsigned integer names the field and the item.
  CHECK_THROWS_WITH(ReproduceBatchSampler([](std::uint64_t) { return std::vector<std::uint64_t>{0, 1}; }, 1)
                        .load_state(R"({"format":"fastrun.sampler/1","kind":"ReproduceBatchSampler","n":2,"epoch":0,)"
                                    R"("consumed":0,"batch_size":1,"drop_last":false,"index_list":[0,-1]})"),
                    Contains("field 'index_list' item 1 is -1"));
}

TEST_CASE("string values are escaped on write and unescaped on read", "[samplers][state]") {
  StateWriter w("Kind");
  w.add_str("path", "a\"b\\c\n");
  const std::string text = w.str();
  CHECK(text == R"({"format":"fastrun.sampler/1","kind":"Kind","path":"a\"b\\c\n"})");
  CHECK(StateReader(text, "Kind").str("path") == "a\"b\\c\n");
}
