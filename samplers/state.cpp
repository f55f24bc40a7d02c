#include "fastrun/samplers/state.h"

#include <set>

#include <nlohmann/json.hpp>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

using nlohmann::json;

// The writer appends each key and value as nlohmann dumps them (compact, escaped), in the order
// they are added: the bytes are those of the hand-written writer this replaced, so a state
// saved today reads in an older fastrun and the pinned fixtures (tests/samplers/fixtures) match.
StateWriter::StateWriter(std::string_view kind) {
  text_ = "{";
  add_str("format", kStateFormat);
  add_str("kind", kind);
}

void StateWriter::key(std::string_view k) {
  if (text_.size() > 1) text_ += ',';
  text_ += json(std::string(k)).dump();
  text_ += ':';
}

StateWriter& StateWriter::add_u64(std::string_view k, std::uint64_t v) {
  key(k);
  text_ += json(v).dump();
  return *this;
}

StateWriter& StateWriter::add_bool(std::string_view k, bool v) {
  key(k);
  text_ += json(v).dump();
  return *this;
}

StateWriter& StateWriter::add_str(std::string_view k, std::string_view v) {
  key(k);
  text_ += json(std::string(v)).dump();
  return *this;
}

StateWriter& StateWriter::add_array(std::string_view k, const std::vector<std::uint64_t>& v) {
  key(k);
  text_ += json(v).dump();
  return *this;
}

namespace {

constexpr const char* kAccepted = "accepted: the one-line JSON object written by state()";
constexpr const char* kAcceptedValues =
    "accepted: an unsigned integer up to 2^64-1, true or false, a string, or an array of unsigned integers";

// The object's text, failing on malformed JSON (with where and what nlohmann saw), on a value
// that is not an object, and on a key given twice (nlohmann would keep the last one silently).
json parse_object(const std::string& text) {
  std::set<std::string> keys;
  const json::parser_callback_t no_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second)
      throw SamplerError("corrupt sampler state: duplicate key '" + parsed.get<std::string>() + "'; " + kAccepted);
    return true;
  };
  json doc;
  try {
    doc = json::parse(text, no_duplicates);
  } catch (const json::parse_error& e) {
    // nlohmann's byte is 1-based (the last character read); the offset is 0-based.
    const std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    const std::string excerpt = text.substr(at > 20 ? at - 20 : 0, 40);
    std::string why = e.what();
    if (const auto bracket = why.find("] "); bracket != std::string::npos) why.erase(0, bracket + 2);
    throw SamplerError("corrupt sampler state at offset " + std::to_string(at) + " (near '" + excerpt + "'): " + why +
                       "; " + kAccepted);
  }
  if (!doc.is_object())
    throw SamplerError(std::string("corrupt sampler state: a JSON ") + doc.type_name() + ", not an object; " + kAccepted);
  return doc;
}

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

StateReader::StateReader(const std::string& text, std::string_view expected_kind) {
  const json doc = parse_object(text);
  for (const auto& [key, item] : doc.items()) {
    Value v{};
    if (item.is_number_unsigned()) {
      v.type = Value::Type::u64;
      v.number = item.get<std::uint64_t>();
    } else if (item.is_boolean()) {
      v.type = Value::Type::boolean;
      v.number = item.get<bool>() ? 1 : 0;
    } else if (item.is_string()) {
      v.type = Value::Type::str;
      v.text = item.get<std::string>();
    } else if (item.is_array()) {
      v.type = Value::Type::array;
      for (std::size_t i = 0; i < item.size(); ++i) {
        if (!item[i].is_number_unsigned())
          throw SamplerError("corrupt sampler state: field '" + key + "' item " + std::to_string(i) + " is " +
                             shown(item[i]) + "; accepted: unsigned integers up to 2^64-1");
        v.items.push_back(item[i].get<std::uint64_t>());
      }
    } else {
      // A negative number, a fraction or one past 2^64-1 (nlohmann reads that as a double), null, an object.
      throw SamplerError("corrupt sampler state: field '" + key + "' is " + shown(item) + "; " + kAcceptedValues);
    }
    values_.emplace(key, std::move(v));
  }
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
