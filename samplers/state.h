#pragma once
// The saved state of a sampler: one line of JSON, a flat object whose values are unsigned
// integers, booleans, strings or arrays of unsigned integers. The first two keys are always
// "format": "fastrun.sampler/1" and "kind": "<class name>"; the other keys are listed per
// sampler in docs/samplers.md. Readers ignore no key silently: a missing or mistyped key is an
// error naming it, and so is trailing garbage.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace fastrun::samplers {

inline constexpr std::string_view kStateFormat = "fastrun.sampler/1";

class StateWriter {
 public:
  explicit StateWriter(std::string_view kind);
  StateWriter& add_u64(std::string_view key, std::uint64_t v);
  StateWriter& add_bool(std::string_view key, bool v);
  StateWriter& add_str(std::string_view key, std::string_view v);
  StateWriter& add_array(std::string_view key, const std::vector<std::uint64_t>& v);
  std::string str() const { return text_ + "}"; }

 private:
  void key(std::string_view k);
  std::string text_;
};

class StateReader {
 public:
  // Parses `text`; throws SamplerError if it is not a sampler state, or if its kind is not
  // `expected_kind` (the message names both kinds).
  StateReader(const std::string& text, std::string_view expected_kind);

  std::uint64_t u64(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::string str(const std::string& key) const;
  std::vector<std::uint64_t> array(const std::string& key) const;
  bool has(const std::string& key) const { return values_.count(key) != 0; }

  // Throws SamplerError "field '<key>' is <saved> in the state but <actual> in this sampler"
  // when they differ; `why` says what must match.
  void require_equal(const std::string& key, std::uint64_t actual, std::string_view why) const;

 private:
  struct Value {
    enum class Type { u64, boolean, str, array } type;
    std::uint64_t number = 0;
    std::string text;
    std::vector<std::uint64_t> items;
  };
  const Value& get(const std::string& key, Value::Type type, const char* type_name) const;
  std::string kind_;
  std::map<std::string, Value> values_;
};

}  // namespace fastrun::samplers
