#include "fastrun/runtime/store/record.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::record {

namespace {

const Json& field_of(const Json& r, const std::string& key, const char* field, const char* accepted) {
  const auto it = r.find(field);
  if (it == r.end())
    throw StoreError(fmt::format("{}: the record '{}' has no field '{}' (accepted: {})", key, r.dump(), field, accepted));
  return *it;
}

}  // namespace

Json parse(const std::string& key, const std::string& text) {
  Json r;
  try {
    r = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw StoreError(fmt::format("{}: malformed record '{}' ({}); accepted: a JSON object written by fastrun", key, text,
                                 e.what()));
  }
  if (!r.is_object())
    throw StoreError(fmt::format("{}: the record '{}' is a JSON {}; accepted: a JSON object written by fastrun", key,
                                 text, r.type_name()));
  return r;
}

std::string text(const Json& r, const std::string& key, const char* field) {
  const Json& v = field_of(r, key, field, "a string");
  if (!v.is_string())
    throw StoreError(fmt::format("{}: field '{}' of the record is {}; accepted: a string", key, field, v.dump()));
  return v.get<std::string>();
}

std::int64_t integer(const Json& r, const std::string& key, const char* field) {
  const Json& v = field_of(r, key, field, "an integer");
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX))
    throw StoreError(fmt::format("{}: field '{}' of the record is {}; accepted: an integer", key, field, v.dump()));
  return v.get<std::int64_t>();
}

}  // namespace fastrun::record
