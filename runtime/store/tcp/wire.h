#pragma once
// The tcp:// store's wire format (docs/stores-tcp.md). Pure code: bytes in, messages or an error
// out, no sockets and no logging, so the decoders can be fuzzed in isolation
// (tests/store/tcp_wire_fuzz_test.cpp, tests/store/tcp_wire_fuzzer.cc).
//
// Every message is a frame: a u32 little-endian body length, then the body. A request body is
// one opcode byte followed by its fields; a reply body is one status byte followed by its
// fields. Fields: u32 (LE), i64 (LE, two's complement), str/blob = u32 length + raw bytes,
// key list = u32 count + that many str. Nothing is ever allocated from a length before that
// length has been checked against the limits and against the bytes actually present.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace fastrun::tcp_wire {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint32_t kMagic = 0x46535452;  // "FSTR": first field of HELLO
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 4;

enum class Op : std::uint8_t {
  hello = 1,        // u32 magic, u16 version, str token        -> ok | auth_failed
  set = 2,          // str key, blob value                      -> ok
  get = 3,          // str key                                  -> value | not_found (never blocks)
  add = 4,          // str key, i64 delta                       -> integer | error
  compare_set = 5,  // str key, blob expected, blob desired     -> value
  wait = 6,         // key list                                 -> ready (when all exist)
  cancel_wait = 7,  // (nothing)                                -> canceled (after ready if it raced)
  check = 8,        // key list                                 -> flags (one byte per key)
  delete_key = 9,   // str key                                  -> integer (1 removed, 0 absent)
  num_keys = 10,    // (nothing)                                -> integer
  // str key, u32 rank, u32 participants -> ready (once all `participants` arrived) | error.
  // Marks `rank` arrived in the arrival record under `key` (arrival_record below) and parks
  // like a wait until the last one arrives; the client withdraws it with cancel_wait. Not in
  // c10d's protocol: fastrun's own server and client only.
  arrive = 11,
};

// The value an arrive leaves under its key: u32 participants, u32 arrived (both LE), then one
// bit per participant (bit r%8 of byte r/8), so that a client whose arrive timed out reads
// the key once (get) to name the ranks that never arrived.
inline constexpr std::uint32_t kMaxParticipants = 1u << 22;  // a 512 KiB record
inline constexpr std::size_t kArrivalHeader = 8;
inline std::size_t arrival_record_size(std::uint32_t participants) { return kArrivalHeader + (participants + 7) / 8; }

enum class Status : std::uint8_t {
  ok = 0,
  value = 1,        // blob
  not_found = 2,
  integer = 3,      // i64
  ready = 4,
  canceled = 5,
  flags = 6,        // u32 count + count bytes (0/1)
  error = 7,        // str message; the request failed, the connection stays usable
  auth_failed = 8,  // the server closes the connection after this
};

struct Limits {
  std::size_t max_key = 8 * 1024;                  // bytes per key (c10d's libuv server: 8 KiB)
  std::size_t max_value = 64ull * 1024 * 1024;     // bytes per value; >= 16 MiB + margin
  std::size_t max_keys = 128 * 1024;               // keys per wait/check request
  std::size_t max_token = 512;                     // bytes of the HELLO token
  // Largest frame an authenticated client may send: compare_set carries two values and a key.
  std::size_t max_frame() const { return 2 * max_value + max_key + 64; }
  // Largest frame before authentication: a HELLO and nothing else.
  std::size_t max_hello_frame() const { return max_token + 16; }
};

struct Request {
  Op op{};
  std::string key;                // set, get, add, compare_set, delete_key
  Bytes value;                    // set: value; compare_set: expected
  Bytes desired;                  // compare_set
  std::int64_t delta = 0;         // add
  std::uint32_t rank = 0;         // arrive
  std::uint32_t participants = 0; // arrive
  std::vector<std::string> keys;  // wait, check
  std::uint32_t magic = 0;        // hello
  std::uint16_t version = 0;      // hello
  std::string token;              // hello
};

struct Reply {
  Status status{};
  Bytes value;                    // value
  std::int64_t integer = 0;       // integer
  std::vector<bool> flags;        // flags
  std::string message;            // error
};

// A decoding failure: what was wrong, for the log line / exception.
struct DecodeError {
  std::string message;
};

template <typename T>
using Decoded = std::variant<T, DecodeError>;

// Decodes one frame body (without its length header). Never throws, never allocates more than
// the body size allows, and rejects trailing bytes.
Decoded<Request> decode_request(const std::uint8_t* body, std::size_t size, const Limits& limits);
Decoded<Reply> decode_reply(const std::uint8_t* body, std::size_t size, const Limits& limits);

// Encoders: each returns a complete frame (header included).
Bytes encode_request(const Request& request);
Bytes encode_reply(const Reply& reply);
// Shortcuts for the replies without payload / with one field.
Bytes encode_status(Status status);
Bytes encode_value_reply(const Bytes& value);
Bytes encode_integer_reply(std::int64_t value);
Bytes encode_error_reply(std::string_view message);

// Splits a byte stream into frame bodies. The frame limit is checked against the header before
// any body byte is buffered, and the body buffer grows only with bytes actually received, so a
// header claiming 4 GiB costs nothing. Single-threaded, like the connection that owns it.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_frame) : max_frame_(max_frame) {}
  // The limit applies from the next header on (raised after a successful HELLO).
  void set_max_frame(std::size_t max_frame) { max_frame_ = max_frame; }

  // Called with each complete body; return false to stop consuming (the rest is discarded:
  // the caller is about to close the connection).
  using Sink = std::function<bool(const std::uint8_t* body, std::size_t size)>;
  // Feeds `size` bytes. Returns an error when a header exceeds the limit (the stream is then
  // unusable), nullopt otherwise.
  std::optional<DecodeError> feed(const std::uint8_t* data, std::size_t size, const Sink& sink);
  // True when bytes of an unfinished frame are buffered (an EOF now is a truncation).
  bool mid_frame() const { return header_fill_ > 0 || in_body_; }
  // Bytes reserved for the unfinished body (tests assert it tracks what arrived, not what a
  // header claimed).
  std::size_t buffered_capacity() const { return body_.capacity(); }

 private:
  std::size_t max_frame_;
  std::uint8_t header_[kHeaderBytes] = {};
  std::size_t header_fill_ = 0;
  bool in_body_ = false;
  std::size_t body_size_ = 0;
  Bytes body_;
};

// The ranks an arrival record (kArrivalHeader) has no bit for; nullopt when `record` is not
// one for `participants`.
std::optional<std::vector<int>> arrival_missing(const Bytes& record, std::uint32_t participants);

std::string_view op_name(Op op);

}  // namespace fastrun::tcp_wire
