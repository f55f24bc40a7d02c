#include "fastrun/runtime/store/tcp/table.h"
#include "fastrun/runtime/text/number.h"

#include <string>

#include <fmt/format.h>

namespace fastrun::tcp_store {

std::optional<std::int64_t> parse_decimal(const Bytes& text) {
  return text::to_integer(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
}

bool Table::set(const std::string& key, Bytes value) {
  auto [it, created] = map_.try_emplace(key);
  it->second = std::move(value);
  return created;
}

const Bytes* Table::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

Table::AddResult Table::add(const std::string& key, std::int64_t delta) {
  AddResult r;
  std::int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    const auto parsed = parse_decimal(it->second);
    if (!parsed) {
      r.error = fmt::format("add on key '{}': its value ({} bytes) is not a decimal 64-bit integer", key,
                            it->second.size());
      return r;
    }
    current = *parsed;
  }
  if (__builtin_add_overflow(current, delta, &r.value)) {
    r.error = fmt::format("add on key '{}': {} + {} overflows a 64-bit integer", key, current, delta);
    return r;
  }
  const std::string text = std::to_string(r.value);
  r.created = set(key, Bytes(text.begin(), text.end()));
  return r;
}

namespace {

std::uint32_t record_u32(const Bytes& b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + static_cast<std::size_t>(i)];
  return v;
}

void set_record_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

Table::ArriveResult Table::arrive(const std::string& key, std::uint32_t rank, std::uint32_t participants) {
  ArriveResult r;
  if (participants < 1 || participants > tcp_wire::kMaxParticipants || rank >= participants) {
    r.error = fmt::format("arrive on key '{}': rank {} of {} participants is out of range; accepted: 1 to {} "
                          "participants, rank 0 to participants-1",
                          key, rank, participants, tcp_wire::kMaxParticipants);
    return r;
  }
  const std::size_t size = tcp_wire::arrival_record_size(participants);
  auto it = map_.find(key);
  if (it == map_.end()) {
    Bytes record(size, 0);
    set_record_u32(record, 0, participants);
    it = map_.emplace(key, std::move(record)).first;
    r.created = true;
  }
  Bytes& record = it->second;
  if (record.size() != size || record_u32(record, 0) != participants) {
    r.error = fmt::format("arrive on key '{}' for {} participants: the key holds {} bytes that are not an arrival "
                          "record for {} participants (a key set by another call, or another participant count)",
                          key, participants, record.size(), participants);
    return r;
  }
  std::uint8_t& byte = record[tcp_wire::kArrivalHeader + rank / 8];
  const auto bit = static_cast<std::uint8_t>(1u << (rank % 8));
  if (byte & bit) {
    r.error = fmt::format("arrive on key '{}': rank {} already arrived (the key was used by an earlier round, or a "
                          "participant arrived twice: each round needs a fresh key)",
                          key, rank);
    return r;
  }
  byte = static_cast<std::uint8_t>(byte | bit);
  r.arrived = record_u32(record, 4) + 1;
  set_record_u32(record, 4, r.arrived);
  return r;
}

Table::CompareSetResult Table::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  CompareSetResult r;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) {  // c10d: absent + non-empty expected returns expected, sets nothing
      r.value = expected;
      return r;
    }
    r.value = desired;
    r.created = set(key, std::move(desired));
    return r;
  }
  if (it->second == expected) it->second = std::move(desired);
  r.value = it->second;
  return r;
}

}  // namespace fastrun::tcp_store
