#pragma once
// 64-bit FNV-1a (Fowler/Noll/Vo): the one hash of the tree for checksums and keys that live in
// files and shared memory — the file store's record checksum, the shm store's key hash, DDP's
// parameter-layout fingerprint. Fast, byte-at-a-time, no table; not for anything an adversary
// chooses. The values are part of those formats: a change here changes them.
// Header-only and dependent on nothing, so every folder may use it without a layering cycle.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fastrun::hash {

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;  // the hash of no bytes
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ull;
// Where the file store's checksums, the shm store's key hashes and DDP's layout fingerprints
// start: the standard basis with its last decimal digit lost (14695981039346656037 / 10), as
// they were first written. Any nonzero start hashes as well; this one stays because it is in
// their formats: a log, a segment or a rank of another build must compute the same values.
inline constexpr std::uint64_t kFormatBasis = 1469598103934665603ull;

// Continues `h` over one byte.
constexpr std::uint64_t fnv1a_byte(std::uint8_t byte, std::uint64_t h) { return (h ^ byte) * kFnv1aPrime; }

// Continues `h` (kFnv1aBasis to start) over `n` bytes at `data`. Named apart from fnv1a(text, h):
// as an overload, fnv1a("key", h) would pick this one and read h bytes.
inline std::uint64_t fnv1a_bytes(const void* data, std::size_t n, std::uint64_t h = kFnv1aBasis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = fnv1a_byte(p[i], h);
  return h;
}

// Continues `h` over the characters of `text`.
constexpr std::uint64_t fnv1a(std::string_view text, std::uint64_t h = kFnv1aBasis) {
  for (char c : text) h = fnv1a_byte(static_cast<unsigned char>(c), h);
  return h;
}

// Continues `h` over the 8 bytes of `v`, least significant first whatever the host's byte order
// (so a value hashes alike on every host).
constexpr std::uint64_t fnv1a_le64(std::uint64_t v, std::uint64_t h = kFnv1aBasis) {
  for (int i = 0; i < 8; ++i) h = fnv1a_byte(static_cast<std::uint8_t>(v >> (8 * i)), h);
  return h;
}

}  // namespace fastrun::hash
