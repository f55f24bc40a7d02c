#include "fastrun/runtime/store/c10d/c10d_protocol.h"

#include <bit>
#include <cstring>

namespace fastrun::c10d_wire {

// c10d writes integers in the host's order; every host it runs on is little-endian, and so
// must we be to read them.
static_assert(std::endian::native == std::endian::little, "the c10d wire format is little-endian");

const char* command_name(Command c) {
  switch (c) {
    case Command::set: return "SET";
    case Command::compare_set: return "COMPARE_SET";
    case Command::get: return "GET";
    case Command::add: return "ADD";
    case Command::check: return "CHECK";
    case Command::wait: return "WAIT";
    case Command::num_keys: return "GETNUMKEYS";
    case Command::delete_key: return "DELETE_KEY";
  }
  return "?";
}

Request& Request::u64(std::uint64_t v) {
  std::uint8_t raw[sizeof v];
  std::memcpy(raw, &v, sizeof v);
  bytes_.insert(bytes_.end(), raw, raw + sizeof v);
  return *this;
}

Request& Request::i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }

Request& Request::blob(const void* data, std::size_t size) {
  u64(size);
  const auto* p = static_cast<const std::uint8_t*>(data);
  bytes_.insert(bytes_.end(), p, p + size);
  return *this;
}

}  // namespace fastrun::c10d_wire
