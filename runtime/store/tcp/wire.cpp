#include "fastrun/runtime/store/tcp/wire.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace fastrun::tcp_wire {
namespace {

// Reads fields from one frame body; every read checks the bytes that remain first.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t remaining() const { return size_ - pos_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  std::uint8_t u8(const char* what) {
    if (!need(1, what)) return 0;
    return data_[pos_++];
  }
  std::uint16_t u16(const char* what) {
    if (!need(2, what)) return 0;
    std::uint16_t v = static_cast<std::uint16_t>(data_[pos_] | (data_[pos_ + 1] << 8));
    pos_ += 2;
    return v;
  }
  std::uint32_t u32(const char* what) {
    if (!need(4, what)) return 0;
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | data_[pos_ + static_cast<std::size_t>(i)];
    pos_ += 4;
    return v;
  }
  std::int64_t i64(const char* what) {
    if (!need(8, what)) return 0;
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | data_[pos_ + static_cast<std::size_t>(i)];
    pos_ += 8;
    return static_cast<std::int64_t>(v);
  }
  // A length-prefixed field of at most `limit` bytes, appended to `out`.
  template <typename Out>
  void blob(Out& out, std::size_t limit, const char* what) {
    const std::uint32_t n = u32(what);
    if (failed()) return;
    if (n > limit) return fail(fmt::format("{} of {} bytes exceeds the limit of {} bytes", what, n, limit));
    if (!need(n, what)) return;
    out.assign(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
  }
  void key_list(std::vector<std::string>& keys, const Limits& limits) {
    const std::uint32_t n = u32("key count");
    if (failed()) return;
    if (n > limits.max_keys) return fail(fmt::format("{} keys exceed the limit of {} per request", n, limits.max_keys));
    // Each key takes at least its 4-byte length: a count the body cannot hold is rejected
    // before reserving anything.
    if (n > remaining() / 4) return fail(fmt::format("key count {} does not fit in {} remaining bytes", n, remaining()));
    keys.resize(n);
    for (auto& k : keys) {
      blob(k, limits.max_key, "key");
      if (failed()) return;
    }
  }
  void finish() {
    if (!failed() && remaining() != 0) fail(fmt::format("{} unexpected trailing bytes", remaining()));
  }

 private:
  bool need(std::size_t n, const char* what) {
    if (failed()) return false;
    if (remaining() < n) {
      fail(fmt::format("truncated {}: needs {} bytes, {} left", what, n, remaining()));
      return false;
    }
    return true;
  }

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string error_;
};

class Writer {
 public:
  Writer() { out_.resize(kHeaderBytes); }
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) {
    out_.push_back(static_cast<std::uint8_t>(v));
    out_.push_back(static_cast<std::uint8_t>(v >> 8));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t s) {
    const auto v = static_cast<std::uint64_t>(s);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  template <typename Range>
  void blob(const Range& r) {
    u32(static_cast<std::uint32_t>(r.size()));
    out_.insert(out_.end(), r.begin(), r.end());
  }
  void reserve(std::size_t n) { out_.reserve(kHeaderBytes + n); }
  Bytes finish() {
    const auto body = static_cast<std::uint32_t>(out_.size() - kHeaderBytes);
    for (std::size_t i = 0; i < 4; ++i) out_[i] = static_cast<std::uint8_t>(body >> (8 * i));
    return std::move(out_);
  }

 private:
  Bytes out_;
};

bool known_op(std::uint8_t op) { return op >= 1 && op <= 11; }
bool known_status(std::uint8_t s) { return s <= 8; }

}  // namespace

std::optional<std::vector<int>> arrival_missing(const Bytes& record, std::uint32_t participants) {
  if (participants < 1 || participants > kMaxParticipants || record.size() != arrival_record_size(participants))
    return std::nullopt;
  Cursor c(record.data(), record.size());
  if (c.u32("participants") != participants) return std::nullopt;
  std::vector<int> missing;
  for (std::uint32_t r = 0; r < participants; ++r)
    if ((record[kArrivalHeader + r / 8] & (1u << (r % 8))) == 0) missing.push_back(static_cast<int>(r));
  return missing;
}

std::string_view op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::set: return "set";
    case Op::get: return "get";
    case Op::add: return "add";
    case Op::compare_set: return "compare_set";
    case Op::wait: return "wait";
    case Op::cancel_wait: return "cancel_wait";
    case Op::check: return "check";
    case Op::delete_key: return "delete_key";
    case Op::num_keys: return "num_keys";
    case Op::arrive: return "arrive";
  }
  return "?";
}

Decoded<Request> decode_request(const std::uint8_t* body, std::size_t size, const Limits& limits) {
  Cursor c(body, size);
  Request r;
  const std::uint8_t op = c.u8("opcode");
  if (c.failed()) return DecodeError{"empty request frame"};
  if (!known_op(op)) return DecodeError{fmt::format("unknown opcode {}", op)};
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::hello:
      r.magic = c.u32("magic");
      r.version = c.u16("version");
      if (!c.failed() && r.magic != kMagic)
        c.fail(fmt::format("bad magic 0x{:08x} (not a fastrun tcp store client)", r.magic));
      else if (!c.failed() && r.version != kVersion)
        c.fail(fmt::format("protocol version {} (this server speaks {})", r.version, kVersion));
      c.blob(r.token, limits.max_token, "token");
      break;
    case Op::set:
      c.blob(r.key, limits.max_key, "key");
      c.blob(r.value, limits.max_value, "value");
      break;
    case Op::get:
    case Op::delete_key:
      c.blob(r.key, limits.max_key, "key");
      break;
    case Op::add:
      c.blob(r.key, limits.max_key, "key");
      r.delta = c.i64("delta");
      break;
    case Op::arrive:
      c.blob(r.key, limits.max_key, "key");
      r.rank = c.u32("rank");
      r.participants = c.u32("participants");
      break;
    case Op::compare_set:
      c.blob(r.key, limits.max_key, "key");
      c.blob(r.value, limits.max_value, "expected value");
      c.blob(r.desired, limits.max_value, "desired value");
      break;
    case Op::wait:
    case Op::check:
      c.key_list(r.keys, limits);
      break;
    case Op::cancel_wait:
    case Op::num_keys:
      break;
  }
  c.finish();
  if (c.failed()) return DecodeError{fmt::format("{} request: {}", op_name(r.op), c.error())};
  return r;
}

Decoded<Reply> decode_reply(const std::uint8_t* body, std::size_t size, const Limits& limits) {
  Cursor c(body, size);
  Reply r;
  const std::uint8_t status = c.u8("status");
  if (c.failed()) return DecodeError{"empty reply frame"};
  if (!known_status(status)) return DecodeError{fmt::format("unknown reply status {}", status)};
  r.status = static_cast<Status>(status);
  switch (r.status) {
    case Status::value:
      c.blob(r.value, limits.max_value, "value");
      break;
    case Status::integer:
      r.integer = c.i64("integer");
      break;
    case Status::flags: {
      const std::uint32_t n = c.u32("flag count");
      if (c.failed()) break;
      if (n > limits.max_keys || n != c.remaining()) {
        c.fail(fmt::format("flag count {} does not match {} remaining bytes", n, c.remaining()));
        break;
      }
      r.flags.reserve(n);
      for (std::uint32_t i = 0; i < n; ++i) r.flags.push_back(c.u8("flag") != 0);
      break;
    }
    case Status::error:
      c.blob(r.message, 64 * 1024, "error message");
      break;
    case Status::ok:
    case Status::not_found:
    case Status::ready:
    case Status::canceled:
    case Status::auth_failed:
      break;
  }
  c.finish();
  if (c.failed()) return DecodeError{fmt::format("reply: {}", c.error())};
  return r;
}

Bytes encode_request(const Request& r) {
  Writer w;
  w.reserve(16 + r.key.size() + r.value.size() + r.desired.size() + r.token.size());
  w.u8(static_cast<std::uint8_t>(r.op));
  switch (r.op) {
    case Op::hello:
      w.u32(r.magic);
      w.u16(r.version);
      w.blob(r.token);
      break;
    case Op::set:
      w.blob(r.key);
      w.blob(r.value);
      break;
    case Op::get:
    case Op::delete_key:
      w.blob(r.key);
      break;
    case Op::add:
      w.blob(r.key);
      w.i64(r.delta);
      break;
    case Op::arrive:
      w.blob(r.key);
      w.u32(r.rank);
      w.u32(r.participants);
      break;
    case Op::compare_set:
      w.blob(r.key);
      w.blob(r.value);
      w.blob(r.desired);
      break;
    case Op::wait:
    case Op::check:
      w.u32(static_cast<std::uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) w.blob(k);
      break;
    case Op::cancel_wait:
    case Op::num_keys:
      break;
  }
  return w.finish();
}

Bytes encode_reply(const Reply& r) {
  Writer w;
  w.reserve(16 + r.value.size() + r.flags.size() + r.message.size());
  w.u8(static_cast<std::uint8_t>(r.status));
  switch (r.status) {
    case Status::value: w.blob(r.value); break;
    case Status::integer: w.i64(r.integer); break;
    case Status::flags:
      w.u32(static_cast<std::uint32_t>(r.flags.size()));
      for (bool f : r.flags) w.u8(f ? 1 : 0);
      break;
    case Status::error: w.blob(r.message); break;
    default: break;
  }
  return w.finish();
}

Bytes encode_status(Status status) {
  Reply r;
  r.status = status;
  return encode_reply(r);
}

Bytes encode_value_reply(const Bytes& value) {
  Writer w;
  w.reserve(8 + value.size());
  w.u8(static_cast<std::uint8_t>(Status::value));
  w.blob(value);
  return w.finish();
}

Bytes encode_integer_reply(std::int64_t value) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(Status::integer));
  w.i64(value);
  return w.finish();
}

Bytes encode_error_reply(std::string_view message) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(Status::error));
  w.blob(message);
  return w.finish();
}

std::optional<DecodeError> FrameReader::feed(const std::uint8_t* data, std::size_t size, const Sink& sink) {
  std::size_t pos = 0;
  while (pos < size) {
    if (!in_body_) {
      const std::size_t take = std::min(kHeaderBytes - header_fill_, size - pos);
      std::memcpy(header_ + header_fill_, data + pos, take);
      header_fill_ += take;
      pos += take;
      if (header_fill_ < kHeaderBytes) break;
      header_fill_ = 0;
      body_size_ = static_cast<std::size_t>(header_[0]) | static_cast<std::size_t>(header_[1]) << 8 |
                   static_cast<std::size_t>(header_[2]) << 16 | static_cast<std::size_t>(header_[3]) << 24;
      if (body_size_ > max_frame_)
        return DecodeError{fmt::format("frame of {} bytes exceeds the limit of {} bytes", body_size_, max_frame_)};
      in_body_ = true;
      body_.clear();
      // Fast path: the whole body is in this chunk, hand it over without copying.
      if (size - pos >= body_size_) {
        in_body_ = false;
        const std::uint8_t* body = data + pos;
        pos += body_size_;
        if (!sink(body, body_size_)) return std::nullopt;
        continue;
      }
    }
    const std::size_t take = std::min(body_size_ - body_.size(), size - pos);
    body_.insert(body_.end(), data + pos, data + pos + take);
    pos += take;
    if (body_.size() == body_size_) {
      in_body_ = false;
      Bytes body = std::move(body_);
      body_ = Bytes();
      if (!sink(body.data(), body.size())) return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace fastrun::tcp_wire
