#pragma once
// A record fastrun keeps in its store (a rank's PeerInfo, a node's entry and failure): a
// one-line JSON object that only fastrun reads, so that a host name, device or reason with a
// tab or a newline in it reads back whole. Private (not installed): it includes nlohmann-json.
// Writers build an ordered_json (the fields in the order a reader of a store dump expects);
// readers parse it here, and every bad record or field is a StoreError naming the store key,
// the field and what is accepted.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace fastrun::record {

using Json = nlohmann::ordered_json;

// The object in `text`, the value of store key `key`; StoreError when it is not one.
Json parse(const std::string& key, const std::string& text);

// Field `field` of record `r` (the value of `key`): StoreError when it is missing or of another type.
std::string text(const Json& r, const std::string& key, const char* field);
std::int64_t integer(const Json& r, const std::string& key, const char* field);

}  // namespace fastrun::record
