#pragma once
// PyTorch c10d TCPStore's wire protocol, as spoken by the server inside torchrun's agent
// (TORCHELASTIC_USE_AGENT_STORE=True) and by torch.distributed.TCPStore(is_master=True).
// Studied from PyTorch's TCPStore.cpp / TCPStoreBackend.cpp / TCPStoreLibUvBackend.cpp and
// checked byte for byte against Debian's python3-torch 1.13 server (tests/store/c10d_client_test.cpp).
//
// Framing (every version): one command byte, then its arguments in native byte order (every
// supported host is little-endian): strings and byte blobs are a u64 length + the bytes, counts
// are u64, integers int64. A c10d client puts "/" in front of every user key (TCPStore's
// keyPrefix_), so keys set here read the same from Python's TCPStore, and vice versa.
//
// The protocol changed in three steps; they are NOT compatible with each other:
//   1. torch 1.x ("legacy", what this client speaks; Debian bookworm ships 1.13, checked
//      against its server): commands SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5
//      GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8. No handshake, no APPEND/MULTI_GET/MULTI_SET,
//      no CANCEL_WAIT: a client whose WAIT times out must drop the connection (the server
//      forgets a closed socket's waits). The server is one thread; an unknown command or a
//      GET of a missing key makes it close that client's connection.
//   2. Early 2.x revisions put a 32-bit magic number (0x3C85F7CE) in front of EVERY request
//      and silently skip a request without it; WATCH_KEY is gone and APPEND, MULTI_GET,
//      MULTI_SET and CANCEL_WAIT (answered by WAIT_CANCELED=1) are added.
//   3. Later 2.x (the libuv server is the default from 2.4): the magic moves into a
//      VALIDATE=0 command sent once per connection, so every command number shifts
//      (SET=1 COMPARE_SET=2 GET=3 ADD=4 CHECK=5 WAIT=6 GETNUMKEYS=7 DELETE_KEY=8 APPEND=9
//      MULTI_GET=10 MULTI_SET=11 CANCEL_WAIT=12); newer ones add PING=13 (echoes a nonce,
//      sent right after VALIDATE) and QUEUE_PUSH/POP/LEN. A WAIT that times out is cancelled
//      with CANCEL_WAIT, tolerating a STOP_WAITING that raced ahead of WAIT_CANCELED.
// Replies are the same in all three: SET/APPEND/MULTI_SET none; GET/COMPARE_SET a blob; ADD,
// GETNUMKEYS and DELETE_KEY an int64; CHECK one byte (READY=0, NOT_READY=1); WAIT one byte
// STOP_WAITING=0 once every key exists. compare_set follows c10d's rules (store.h); a 1.13
// server wakes waiters on set and add but NOT on compare_set (checked; c10d_client.h copes).
//
// A 1.x client reaching a 2.x server (or the reverse) gets no sensible answer; this client
// probes with a CHECK of no keys when it connects and says so when the answer is wrong.
#include <cstdint>
#include <string>
#include <vector>

namespace fastrun::c10d_wire {

// torch 1.x command bytes.
enum class Command : std::uint8_t {
  set = 0,
  compare_set = 1,
  get = 2,
  add = 3,
  check = 4,
  wait = 5,
  num_keys = 6,
  // watch_key = 7 (not used: deprecated, gone in 2.x)
  delete_key = 8,
};

constexpr std::uint8_t kReady = 0;         // CHECK reply
constexpr std::uint8_t kNotReady = 1;      // CHECK reply
constexpr std::uint8_t kStopWaiting = 0;   // WAIT reply

// The key prefix every c10d client adds to user keys.
inline constexpr const char* kKeyPrefix = "/";

const char* command_name(Command c);

// One request, built field by field.
class Request {
 public:
  explicit Request(Command c) : command_(c) { bytes_.push_back(static_cast<std::uint8_t>(c)); }
  Request& blob(const void* data, std::size_t size);
  Request& string(const std::string& s) { return blob(s.data(), s.size()); }
  Request& bytes(const std::vector<std::uint8_t>& b) { return blob(b.data(), b.size()); }
  Request& u64(std::uint64_t v);
  Request& i64(std::int64_t v);
  Command command() const { return command_; }
  const std::vector<std::uint8_t>& data() const { return bytes_; }

 private:
  Command command_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace fastrun::c10d_wire
