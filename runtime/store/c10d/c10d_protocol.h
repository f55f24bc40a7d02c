#pragma once
// PyTorch c10d TCPStore's wire protocol, as spoken by the server inside torchrun's agent
// (TORCHELASTIC_USE_AGENT_STORE=True) and by torch.distributed.TCPStore(is_master=True).
// Studied from PyTorch's TCPStore.cpp / TCPStoreBackend.cpp / TCPStoreLibUvBackend.cpp and
// checked against real servers: Debian's python3-torch 1.13, and PyPI's torch 2.x with both of
// its servers, libuv and legacy (tests/store/c10d_client_test.cpp, tools/install-torch2.sh).
//
// Framing (every version): one command byte, then its arguments in native byte order (every
// supported host is little-endian): strings and byte blobs are a u64 length + the bytes, counts
// are u64, integers int64. A c10d client puts "/" in front of every user key (TCPStore's
// keyPrefix_), so keys set here read the same from Python's TCPStore, and vice versa.
//
// The protocol changed in three steps; they are NOT compatible with each other. This client
// speaks the first and the third (Dialect):
//   1. torch 1.x (Dialect::torch1; Debian bookworm ships 1.13): SET=0 COMPARE_SET=1 GET=2
//      ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8. No handshake, no
//      MULTI_GET/MULTI_SET, no CANCEL_WAIT: a client whose WAIT times out must drop the
//      connection (the server forgets a closed socket's waits). The server is one thread with
//      blocking reads: a request cut short stalls it for every client, while a request it
//      cannot parse (unknown command, impossible length) makes it close that connection.
//   2. Early 2.x revisions put a 32-bit magic number in front of EVERY request. Not spoken.
//   3. Later 2.x (Dialect::torch2; the libuv server is the default from 2.4, the "legacy" one
//      is TCPStore(..., use_libuv=False)): a VALIDATE=0 command with the magic 0x3C85F7CE is
//      sent once, first, per connection (no reply), so every command number shifts: SET=1
//      COMPARE_SET=2 GET=3 ADD=4 CHECK=5 WAIT=6 GETNUMKEYS=7 DELETE_KEY=8 APPEND=9 MULTI_GET=10
//      MULTI_SET=11 CANCEL_WAIT=12 PING=13 (echoes a u32 nonce; what torch's own client sends
//      after VALIDATE). A WAIT is cancelled with CANCEL_WAIT, answered by WAIT_CANCELED=1, with
//      a STOP_WAITING that raced ahead of it possibly first. Without VALIDATE first the legacy
//      server closes the connection and the libuv one ignores the bytes (never answers). The
//      libuv server refuses keys over 8 KiB and values over 8 MiB (it closes the connection).
// Replies are the same in all: SET/MULTI_SET none; GET/COMPARE_SET a blob; MULTI_GET one blob
// per key; ADD, GETNUMKEYS and DELETE_KEY an int64; CHECK one byte (READY=0, NOT_READY=1);
// WAIT one byte STOP_WAITING=0 once every key exists. compare_set follows c10d's rules
// (store.h); the servers wake waiters on set and add but NOT on compare_set (c10d_client.h
// copes). A GET or MULTI_GET of a missing key makes every server close the connection.
//
// Telling the dialects apart in one round trip: torch2_hello() (VALIDATE + PING + 2 GETNUMKEYS).
// A 2.x server echoes the nonce (and answers the GETNUMKEYS). A 1.x server reads the hello as a
// SET whose key length is the magic plus the PING bytes; the nonce is chosen so that this length
// is >= 2^63, which no std::vector can hold: the server fails at once (no allocation, no read)
// and closes the connection. The client then reconnects and speaks 1.x (c10d_client.cpp).
// Sending 1.x's bytes first instead would leave a libuv server silent (it ignores a first
// command that is not VALIDATE). The two GETNUMKEYS make the hello 12 bytes, three whole
// 32-bit words: an early 2.x server skips each (none is its magic) and never waits for the rest
// of a word, which would stall its one thread. So no server is stalled by the hello, and the
// client can await the answer for the whole store timeout: a 2.x server that has just accepted
// many clients answers each first request only after the earlier ones (checked: 256 hellos at
// once took 25 s on the 2-core VM under load, libuv and legacy alike).
#include <cstdint>
#include <string>
#include <vector>

namespace fastrun::c10d_wire {

enum class Dialect : std::uint8_t { torch1, torch2 };

// A request, independent of the dialect's numbering.
enum class Command : std::uint8_t {
  set,
  compare_set,
  get,
  add,
  check,
  wait,
  num_keys,
  delete_key,
  multi_get,    // torch2 only
  multi_set,    // torch2 only
  cancel_wait,  // torch2 only
};

// The command's byte in `dialect`. A torch2-only command has none in torch1: calling it so is a
// bug of the client (std::logic_error).
std::uint8_t command_byte(Dialect dialect, Command command);
const char* command_name(Command c);
const char* dialect_name(Dialect d);  // "torch 1.x", "torch 2.x"

constexpr std::uint8_t kReady = 0;         // CHECK reply
constexpr std::uint8_t kNotReady = 1;      // CHECK reply
constexpr std::uint8_t kStopWaiting = 0;   // WAIT reply
constexpr std::uint8_t kWaitCanceled = 1;  // CANCEL_WAIT reply (torch2)

constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
// The hello's PING nonce. Its third byte is the top byte of the key length a 1.x server reads
// (see above): >= 0x80 makes that length >= 2^63.
constexpr std::uint32_t kHelloNonce = 0x66A5D710;
static_assert(((kHelloNonce >> 16) & 0xff) >= 0x80, "a 1.x server must read an impossible key length");

// The connection opening that finds the dialect: VALIDATE + magic, PING + kHelloNonce, then
// GETNUMKEYS twice (12 bytes). A torch2 server answers the 4 nonce bytes, then two int64.
std::vector<std::uint8_t> torch2_hello();
// The torch2 opening of a connection whose dialect is known already: VALIDATE + magic (no reply).
std::vector<std::uint8_t> torch2_validate();

// The key prefix every c10d client adds to user keys.
inline constexpr const char* kKeyPrefix = "/";

// The libuv server's limits (bigger ones make it close the connection).
constexpr std::size_t kLibuvMaxKey = 8 * 1024;
constexpr std::size_t kLibuvMaxValue = 8 * 1024 * 1024;

// One request, built field by field.
class Request {
 public:
  Request(Dialect d, Command c) : command_(c) { bytes_.push_back(command_byte(d, c)); }
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
