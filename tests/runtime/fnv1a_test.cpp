// The one FNV-1a (hash/fnv1a.h): the published test vectors, its three entry points agree, and
// the start value of the stored formats (file store checksums, shm store key hashes, DDP's layout
// fingerprints) stays what it was.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "fastrun/runtime/hash/fnv1a.h"

using namespace fastrun::hash;

TEST_CASE("fnv1a gives the published 64-bit FNV-1a vectors", "[hash]") {
  CHECK(fnv1a("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a("foobar") == 0x85944171f73967e8ull);
  static_assert(fnv1a("a") == 0xaf63dc4c8601ec8cull);  // usable at compile time
  const std::string foobar = "foobar";
  CHECK(fnv1a_bytes(foobar.data(), foobar.size()) == 0x85944171f73967e8ull);
  CHECK(fnv1a_bytes(nullptr, 0) == kFnv1aBasis);
}

TEST_CASE("fnv1a continues a hash across pieces", "[hash]") {
  CHECK(fnv1a("bar", fnv1a("foo")) == fnv1a("foobar"));
  CHECK(fnv1a_bytes("bar", 3, fnv1a_bytes("foo", 3)) == 0x85944171f73967e8ull);
  // Bytes above 0x7f are hashed as unsigned (a signed char would sign-extend into the xor).
  const unsigned char high[] = {0xff, 0x80};
  CHECK(fnv1a(std::string_view("\xff\x80", 2)) == fnv1a_bytes(high, sizeof high));
}

TEST_CASE("fnv1a_le64 hashes a value's bytes least significant first", "[hash]") {
  const std::uint64_t v = 0x0102030405060708ull;
  const std::array<unsigned char, 8> le{0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  CHECK(fnv1a_le64(v) == fnv1a_bytes(le.data(), le.size()));
  CHECK(fnv1a_le64(v, fnv1a_le64(1)) != fnv1a_le64(1, fnv1a_le64(v)));  // order matters
  CHECK(fnv1a_le64(0) != kFnv1aBasis);
}

TEST_CASE("the stored formats keep their own start value", "[hash]") {
  // The file store's logs, the shm store's segments and DDP's layout check are written with
  // kFormatBasis (not the standard basis): a change would make another build's logs unreadable
  // and its keys unfindable.
  CHECK(kFormatBasis == 0x14650fb0739d0383ull);
  CHECK(fnv1a("", kFormatBasis) == 0x14650fb0739d0383ull);
  CHECK(fnv1a("a", kFormatBasis) == 0x44bd8ad473cd9906ull);
  CHECK(fnv1a("foobar", kFormatBasis) == 0x88fad7c0a8ff07f2ull);
}
