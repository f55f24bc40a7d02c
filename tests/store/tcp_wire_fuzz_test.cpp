// The tcp:// store's decoders under random and mutated input: they must never crash, never
// buffer more than the bytes that arrived, and report an error for anything malformed.
// (A libFuzzer target over the same functions: tcp_wire_fuzzer.cc.)
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <utility>

#include "fastrun/runtime/store/tcp/wire.h"

namespace w = fastrun::tcp_wire;

namespace {

std::vector<w::Request> sample_requests() {
  std::vector<w::Request> out;
  w::Request hello;
  hello.op = w::Op::hello;
  hello.magic = w::kMagic;
  hello.version = w::kVersion;
  hello.token = "secret-token";
  out.push_back(hello);
  w::Request set;
  set.op = w::Op::set;
  set.key = "rank/3";
  set.value = {1, 2, 3, 0, 255};
  out.push_back(set);
  w::Request get;
  get.op = w::Op::get;
  get.key = "k";
  out.push_back(get);
  w::Request add;
  add.op = w::Op::add;
  add.key = "counter";
  add.delta = -42;
  out.push_back(add);
  w::Request cas;
  cas.op = w::Op::compare_set;
  cas.key = "c";
  cas.value = {'a'};
  cas.desired = {'b', 'c'};
  out.push_back(cas);
  w::Request wait;
  wait.op = w::Op::wait;
  wait.keys = {"a", "", "ccc"};
  out.push_back(wait);
  w::Request check = wait;
  check.op = w::Op::check;
  out.push_back(check);
  w::Request cancel;
  cancel.op = w::Op::cancel_wait;
  out.push_back(cancel);
  w::Request del;
  del.op = w::Op::delete_key;
  del.key = "gone";
  out.push_back(del);
  w::Request num;
  num.op = w::Op::num_keys;
  out.push_back(num);
  w::Request arrive;
  arrive.op = w::Op::arrive;
  arrive.key = "round/7";
  arrive.rank = 4097;
  arrive.participants = 0x01020304;
  out.push_back(arrive);
  return out;
}

// Decodes a request body and checks the invariants that must hold for ANY input.
void decode_any(const w::Bytes& body, const w::Limits& limits) {
  auto d = w::decode_request(body.data(), body.size(), limits);
  if (auto* r = std::get_if<w::Request>(&d)) {
    // A decoded request never holds more than the body carried.
    std::size_t total = r->key.size() + r->value.size() + r->desired.size() + r->token.size();
    for (const auto& k : r->keys) total += k.size();
    REQUIRE(total <= body.size());
    REQUIRE(r->keys.size() <= body.size() / 4);
  } else {
    REQUIRE_FALSE(std::get<w::DecodeError>(d).message.empty());
  }
  auto rep = w::decode_reply(body.data(), body.size(), limits);
  if (auto* r = std::get_if<w::Reply>(&rep)) {
    REQUIRE(r->value.size() + r->message.size() + r->flags.size() <= body.size());
  } else {
    REQUIRE_FALSE(std::get<w::DecodeError>(rep).message.empty());
  }
}

// The body of `frame` decoded by `decode` (decode_request or decode_reply), which must succeed.
template <typename T>
T decode_frame(const w::Bytes& frame, w::Decoded<T> (*decode)(const std::uint8_t*, std::size_t, const w::Limits&)) {
  auto d = decode(frame.data() + w::kHeaderBytes, frame.size() - w::kHeaderBytes, w::Limits{});
  REQUIRE(std::holds_alternative<T>(d));
  return std::get<T>(d);
}

}  // namespace

TEST_CASE("tcp wire: every request round-trips", "[store][tcp][wire]") {
  for (const auto& r : sample_requests()) {
    const auto back = decode_frame(w::encode_request(r), w::decode_request);
    CHECK(back.op == r.op);
    CHECK(back.key == r.key);
    CHECK(back.value == r.value);
    CHECK(back.desired == r.desired);
    CHECK(back.delta == r.delta);
    CHECK(back.keys == r.keys);
    CHECK(back.token == r.token);
    CHECK(back.rank == r.rank);
    CHECK(back.participants == r.participants);
  }
}

// Every status, through both the specific encoders and encode_reply, with values that catch a
// decoder dropping a byte or the high bits of an integer.
TEST_CASE("tcp wire: replies round-trip", "[store][tcp][wire]") {
  std::vector<std::pair<w::Reply, w::Bytes>> cases;
  const auto reply = [](w::Status status) {
    w::Reply r;
    r.status = status;
    return r;
  };
  for (const w::Bytes& v : {w::Bytes{}, w::Bytes{9}, w::Bytes{9, 8, 0, 255}}) {
    w::Reply r = reply(w::Status::value);
    r.value = v;
    cases.emplace_back(r, w::encode_value_reply(v));
  }
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{-7}, std::int64_t{0x0102030405060708},
                         std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
    w::Reply r = reply(w::Status::integer);
    r.integer = i;
    cases.emplace_back(r, w::encode_integer_reply(i));
  }
  for (const std::string& m : {std::string("nope"), std::string("x"), std::string()}) {
    w::Reply r = reply(w::Status::error);
    r.message = m;
    cases.emplace_back(r, w::encode_error_reply(m));
  }
  for (w::Status s : {w::Status::ok, w::Status::not_found, w::Status::ready, w::Status::canceled,
                      w::Status::auth_failed})
    cases.emplace_back(reply(s), w::encode_status(s));
  for (const std::vector<bool>& f : {std::vector<bool>{}, std::vector<bool>{true, false, true},
                                     std::vector<bool>{false}}) {
    w::Reply r = reply(w::Status::flags);
    r.flags = f;
    cases.emplace_back(r, w::encode_reply(r));
  }
  const std::size_t specific = cases.size();
  for (std::size_t i = 0; i < specific; ++i) cases.emplace_back(cases[i].first, w::encode_reply(cases[i].first));

  for (const auto& [sent, frame] : cases) {
    CAPTURE(static_cast<int>(sent.status), sent.integer, sent.message, sent.value.size(), sent.flags.size());
    const auto back = decode_frame(frame, w::decode_reply);
    CHECK(back.status == sent.status);
    CHECK(back.value == sent.value);
    CHECK(back.integer == sent.integer);
    CHECK(back.flags == sent.flags);
    CHECK(back.message == sent.message);
  }
}

TEST_CASE("tcp wire: malformed requests are errors", "[store][tcp][wire]") {
  w::Limits limits;
  limits.max_key = 16;
  limits.max_value = 64;
  const auto err = [&](const w::Bytes& body) {
    auto d = w::decode_request(body.data(), body.size(), limits);
    REQUIRE(std::holds_alternative<w::DecodeError>(d));
    return std::get<w::DecodeError>(d).message;
  };
  CHECK_THAT(err({}), Catch::Contains("empty"));
  CHECK_THAT(err({200}), Catch::Contains("unknown opcode 200"));
  CHECK_THAT(err({2, 0xff, 0xff, 0xff, 0xff}), Catch::Contains("exceeds the limit"));  // 4 GiB key
  CHECK_THAT(err({2, 3, 0, 0, 0, 'a'}), Catch::Contains("truncated"));
  CHECK_THAT(err({6, 0xff, 0xff, 0xff, 0x0f}), Catch::Contains("keys"));  // absurd key count
  CHECK_THAT(err({10, 0}), Catch::Contains("trailing"));
  CHECK_THAT(err({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}), Catch::Contains("magic"));
  // A value just over the cap.
  w::Request set;
  set.op = w::Op::set;
  set.key = "k";
  set.value.assign(65, 'x');
  const auto frame = w::encode_request(set);
  CHECK_THAT(err(w::Bytes(frame.begin() + 4, frame.end())), Catch::Contains("value of 65 bytes"));
}

TEST_CASE("tcp wire: random and mutated frames never crash the decoders", "[store][tcp][wire][fuzz]") {
  std::mt19937_64 rng(0xF457);  // fixed seed: failures reproduce
  w::Limits limits;
  limits.max_key = 64;
  limits.max_value = 4096;
  limits.max_keys = 32;
  const auto samples = sample_requests();
  std::uniform_int_distribution<int> byte(0, 255);
  for (int iter = 0; iter < 20000; ++iter) {
    w::Bytes body;
    const int mode = iter % 4;
    if (mode == 0) {  // pure noise, biased to small sizes
      body.resize(static_cast<std::size_t>(rng() % (iter % 97 == 0 ? 5000 : 64)));
      for (auto& b : body) b = static_cast<std::uint8_t>(byte(rng));
    } else {  // a valid request, then mutated / truncated / extended
      const w::Bytes frame = w::encode_request(samples[rng() % samples.size()]);
      body.assign(frame.begin() + w::kHeaderBytes, frame.end());
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips && !body.empty(); ++f) {
        const std::size_t at = rng() % body.size();
        switch (rng() % 4) {
          case 0: body[at] = static_cast<std::uint8_t>(byte(rng)); break;
          case 1: body[at] = 0xff; break;  // huge lengths
          case 2: body.resize(at); break;  // truncation
          case 3: body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(byte(rng))); break;
        }
      }
    }
    decode_any(body, limits);
  }
}

TEST_CASE("tcp wire: the frame reader splits streams and bounds its buffer", "[store][tcp][wire][fuzz]") {
  std::mt19937_64 rng(7);
  const auto samples = sample_requests();
  w::Bytes stream;
  std::vector<w::Bytes> expected;
  for (int i = 0; i < 200; ++i) {
    const w::Bytes frame = w::encode_request(samples[rng() % samples.size()]);
    expected.emplace_back(frame.begin() + 4, frame.end());
    stream.insert(stream.end(), frame.begin(), frame.end());
  }
  // Fed in random chunk sizes, the same frames come out.
  w::FrameReader reader(1 << 20);
  std::vector<w::Bytes> got;
  std::size_t pos = 0;
  while (pos < stream.size()) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 50, stream.size() - pos);
    const auto err = reader.feed(stream.data() + pos, n, [&](const std::uint8_t* b, std::size_t s) {
      got.emplace_back(b, b + s);
      return true;
    });
    REQUIRE_FALSE(err);
    pos += n;
  }
  CHECK_FALSE(reader.mid_frame());
  CHECK(got == expected);

  SECTION("a header over the limit is an error before any body byte is buffered") {
    w::FrameReader r(1000);
    const std::uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
    const auto err = r.feed(huge, sizeof huge, [](const std::uint8_t*, std::size_t) { return true; });
    REQUIRE(err);
    CHECK_THAT(err->message, Catch::Contains("exceeds the limit"));
    CHECK(r.buffered_capacity() == 0);
  }
  SECTION("a header under the limit reserves only what arrived") {
    w::FrameReader r(64u << 20);
    const std::uint8_t head[] = {0x00, 0x00, 0x00, 0x03, 1, 2, 3};  // claims 48 MiB, sends 3 bytes
    REQUIRE_FALSE(r.feed(head, sizeof head, [](const std::uint8_t*, std::size_t) { return true; }));
    CHECK(r.mid_frame());
    CHECK(r.buffered_capacity() < 4096);
  }
  SECTION("random streams: errors or frames, never a crash") {
    w::Limits limits;
    limits.max_value = 4096;
    for (int iter = 0; iter < 3000; ++iter) {
      w::FrameReader r(limits.max_frame());
      w::Bytes noise(static_cast<std::size_t>(rng() % 300));
      for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
      if (iter % 2 == 0 && noise.size() >= 4) noise[3] = 0;  // plausible lengths half of the time
      std::size_t fed = 0;
      while (fed < noise.size()) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 40, noise.size() - fed);
        const auto err = r.feed(noise.data() + fed, n, [&](const std::uint8_t* b, std::size_t s) {
          decode_any(w::Bytes(b, b + s), limits);
          return true;
        });
        fed += n;
        if (err) break;
        REQUIRE(r.buffered_capacity() <= 2 * fed + 64);
      }
    }
  }
}
