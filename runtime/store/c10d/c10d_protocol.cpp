#include "fastrun/runtime/store/c10d/c10d_protocol.h"

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fastrun::c10d_wire {

// c10d writes integers in the host's order; every host it runs on is little-endian, and so
// must we be to read them.
static_assert(std::endian::native == std::endian::little, "the c10d wire format is little-endian");

namespace {

// torch2's numbers of the commands 1.x has too: VALIDATE=0 took the front, WATCH_KEY=7 left
// (so DELETE_KEY keeps 8).
constexpr std::uint8_t kTorch2Validate = 0;
constexpr std::uint8_t kTorch2Ping = 13;
constexpr std::uint8_t kTorch2NumKeys = 7;

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  std::uint8_t raw[sizeof v];
  std::memcpy(raw, &v, sizeof v);
  out.insert(out.end(), raw, raw + sizeof v);
}

}  // namespace

std::uint8_t command_byte(Dialect dialect, Command command) {
  const bool one = dialect == Dialect::torch1;
  switch (command) {
    case Command::set: return one ? 0 : 1;
    case Command::compare_set: return one ? 1 : 2;
    case Command::get: return one ? 2 : 3;
    case Command::add: return one ? 3 : 4;
    case Command::check: return one ? 4 : 5;
    case Command::wait: return one ? 5 : 6;
    case Command::num_keys: return one ? 6 : 7;
    case Command::delete_key: return 8;
    case Command::multi_get:
    case Command::multi_set:
    case Command::cancel_wait:
      if (one) throw std::logic_error(std::string("c10d: ") + command_name(command) + " does not exist in torch 1.x");
      return command == Command::multi_get ? 10 : command == Command::multi_set ? 11 : 12;
  }
  throw std::logic_error("c10d: unknown command");
}

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
    case Command::multi_get: return "MULTI_GET";
    case Command::multi_set: return "MULTI_SET";
    case Command::cancel_wait: return "CANCEL_WAIT";
  }
  return "?";
}

const char* dialect_name(Dialect d) { return d == Dialect::torch1 ? "torch 1.x" : "torch 2.x"; }

std::vector<std::uint8_t> torch2_validate() {
  std::vector<std::uint8_t> out{kTorch2Validate};
  put_u32(out, kValidationMagic);
  return out;
}

std::vector<std::uint8_t> torch2_hello() {
  auto out = torch2_validate();
  out.push_back(kTorch2Ping);
  put_u32(out, kHelloNonce);
  out.push_back(kTorch2NumKeys);
  out.push_back(kTorch2NumKeys);
  return out;
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
