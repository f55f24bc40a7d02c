#pragma once
// Byte buffers for object serialization: little-endian fixed-width integers, length-prefixed
// containers. A ByteReader never reads past its end: it throws SerializationError saying what
// it was reading and where.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "fastrun/runtime/error.h"

namespace fastrun {

static_assert(std::endian::native == std::endian::little,
              "fastrun's object serialization writes host little-endian values");

class SerializationError : public Error {
 public:
  using Error::Error;
};

class ByteWriter {
 public:
  void raw(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void value(T v) {
    raw(&v, sizeof v);
  }
  void size(std::size_t n) { value<std::uint64_t>(n); }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t n) : data_(data), end_(n) {}

  void raw(void* out, std::size_t n, const char* what) {
    need(n, what);
    if (n == 0) return;  // an empty string's data() may be null: memcpy must not see it
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
  }
  template <class T>
    requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  T value(const char* what = "a number") {
    T v;
    raw(&v, sizeof v, what);
    return v;
  }
  // A container length; refuses lengths that cannot fit in what is left (corrupt input).
  std::size_t size(std::size_t min_element_bytes, const char* what) {
    const auto n = value<std::uint64_t>(what);
    if (min_element_bytes > 0 && n > remaining() / min_element_bytes)
      throw SerializationError(fmt_error(what, "length " + std::to_string(n) + " exceeds the bytes left"));
    return static_cast<std::size_t>(n);
  }
  std::size_t remaining() const { return end_ - pos_; }
  std::size_t position() const { return pos_; }

 private:
  void need(std::size_t n, const char* what) const {
    if (n > remaining())
      throw SerializationError(fmt_error(what, "needs " + std::to_string(n) + " bytes, " +
                                                   std::to_string(remaining()) + " left"));
  }
  std::string fmt_error(const char* what, const std::string& why) const {
    return std::string("reading ") + what + " at byte " + std::to_string(pos_) + " of " + std::to_string(end_) +
           ": " + why;
  }
  const std::uint8_t* data_;
  std::size_t pos_ = 0;
  std::size_t end_;
};

}  // namespace fastrun
