#include "fastrun/samplers/state.h"

#include <cctype>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

StateWriter::StateWriter(std::string_view kind) {
  text_ = "{";
  add_str("format", kStateFormat);
  add_str("kind", kind);
}

void StateWriter::key(std::string_view k) {
  if (text_.size() > 1) text_ += ',';
  text_ += '"';
  text_ += k;
  text_ += "\":";
}

StateWriter& StateWriter::add_u64(std::string_view k, std::uint64_t v) {
  key(k);
  text_ += std::to_string(v);
  return *this;
}

StateWriter& StateWriter::add_bool(std::string_view k, bool v) {
  key(k);
  text_ += v ? "true" : "false";
  return *this;
}

// Keys and string values are identifiers we choose ([A-Za-z0-9_./]); no escaping is needed.
StateWriter& StateWriter::add_str(std::string_view k, std::string_view v) {
  key(k);
  text_ += '"';
  text_ += v;
  text_ += '"';
  return *this;
}

StateWriter& StateWriter::add_array(std::string_view k, const std::vector<std::uint64_t>& v) {
  key(k);
  text_ += '[';
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) text_ += ',';
    text_ += std::to_string(v[i]);
  }
  text_ += ']';
  return *this;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  [[noreturn]] void fail(const std::string& what) const {
    std::string excerpt = s_.substr(pos_ > 20 ? pos_ - 20 : 0, 40);
    throw SamplerError("corrupt sampler state: " + what + " at offset " + std::to_string(pos_) + " (near '" +
                       excerpt + "'); accepted: the one-line JSON object written by state()");
  }
  void ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    ws();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') fail("escapes are not used in sampler states");
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  std::uint64_t number() {
    ws();
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
      fail("expected an unsigned integer");
    std::uint64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const auto d = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (v > (UINT64_MAX - d) / 10) fail("integer larger than 2^64-1");
      v = v * 10 + d;
      ++pos_;
    }
    return v;
  }
  bool literal(std::string_view word) {
    ws();
    if (s_.compare(pos_, word.size(), word) == 0) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  bool at_end() {
    ws();
    return pos_ == s_.size();
  }

 private:
  const std::string& s_;
  std::size_t pos_ = 0;
};

}  // namespace

StateReader::StateReader(const std::string& text, std::string_view expected_kind) {
  Parser p(text);
  p.expect('{');
  if (!p.peek('}')) {
    for (;;) {
      std::string key = p.string();
      p.expect(':');
      Value v{};
      if (p.peek('"')) {
        v.type = Value::Type::str;
        v.text = p.string();
      } else if (p.peek('[')) {
        v.type = Value::Type::array;
        p.expect('[');
        if (!p.peek(']')) {
          for (;;) {
            v.items.push_back(p.number());
            if (p.peek(']')) break;
            p.expect(',');
          }
        }
        p.expect(']');
      } else if (p.literal("true")) {
        v.type = Value::Type::boolean;
        v.number = 1;
      } else if (p.literal("false")) {
        v.type = Value::Type::boolean;
        v.number = 0;
      } else {
        v.type = Value::Type::u64;
        v.number = p.number();
      }
      if (values_.count(key)) p.fail("duplicate key '" + key + "'");
      values_.emplace(key, std::move(v));
      if (p.peek('}')) break;
      p.expect(',');
    }
  }
  p.expect('}');
  if (!p.at_end()) p.fail("trailing characters after the object");
  kind_ = str("kind");
  const std::string format = str("format");
  if (format != kStateFormat)
    throw SamplerError("sampler state has format '" + format + "'; accepted: '" + std::string(kStateFormat) + "'");
  if (kind_ != expected_kind)
    throw SamplerError("sampler state field 'kind' is '" + kind_ + "' but this sampler is a " +
                       std::string(expected_kind) + " (a state restores only into a sampler of the same kind)");
}

const StateReader::Value& StateReader::get(const std::string& key, Value::Type type, const char* type_name) const {
  auto it = values_.find(key);
  if (it == values_.end())
    throw SamplerError("sampler state " + (kind_.empty() ? std::string() : "of kind " + kind_ + " ") +
                       "lacks the field '" + key + "' (accepted: the keys listed in docs/samplers.md)");
  if (it->second.type != type)
    throw SamplerError("sampler state field '" + key + "' is not " + type_name);
  return it->second;
}

std::uint64_t StateReader::u64(const std::string& key) const {
  return get(key, Value::Type::u64, "an unsigned integer").number;
}
bool StateReader::boolean(const std::string& key) const {
  return get(key, Value::Type::boolean, "true or false").number != 0;
}
std::string StateReader::str(const std::string& key) const { return get(key, Value::Type::str, "a string").text; }
std::vector<std::uint64_t> StateReader::array(const std::string& key) const {
  return get(key, Value::Type::array, "an array of unsigned integers").items;
}

void StateReader::require_equal(const std::string& key, std::uint64_t actual, std::string_view why) const {
  const std::uint64_t saved = u64(key);
  if (saved != actual)
    throw SamplerError("cannot restore " + kind_ + " state: field '" + key + "' is " + std::to_string(saved) +
                       " in the state but " + std::to_string(actual) + " in this sampler (" + std::string(why) + ")");
}

}  // namespace fastrun::samplers
