#include "fastrun/launcher/node_records.h"

#include <climits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/launcher/node_options.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/record.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/text/split.h"

namespace fastrun::launcher {

namespace {

int int_field(const record::Json& r, const std::string& key, const char* field, int lowest, int highest = INT_MAX) {
  const std::int64_t v = record::integer(r, key, field);
  if (v < lowest || v > highest)
    throw StoreError(fmt::format("{}: field '{}' of the record is {}; accepted: {} to {}", key, field, v, lowest, highest));
  return static_cast<int>(v);
}

}  // namespace

std::string encode(const NodeEntry& e) {
  record::Json r{{"ranks", e.ranks}, {"host", e.host}, {"pid", e.pid}};
  if (e.rank_master_port > 0) {
    r["rank_master_addr"] = e.rank_master_addr;
    r["rank_master_port"] = e.rank_master_port;
  }
  return r.dump();
}

NodeEntry decode_node_entry(int node_rank, const std::string& text) {
  const std::string key = launcher_keys::node(node_rank);
  const record::Json r = record::parse(key, text);
  NodeEntry e;
  e.ranks = int_field(r, key, "ranks", 0);
  e.host = record::text(r, key, "host");
  e.pid = static_cast<long>(record::integer(r, key, "pid"));
  if (r.contains("rank_master_port")) {
    e.rank_master_addr = record::text(r, key, "rank_master_addr");
    e.rank_master_port = int_field(r, key, "rank_master_port", 1, 65535);
  }
  return e;
}

std::string encode(const NodeFailure& f) {
  record::Json r{{"exit_code", f.exit_code}, {"node", f.node}, {"why", f.why}};
  if (f.final) r["final"] = true;
  if (f.lost) r["lost"] = true;
  if (f.joining) r["joining"] = true;
  return r.dump();
}

NodeFailure decode_node_failure(const std::string& text) {
  const std::string key = launcher_keys::kNodeFailure;
  const record::Json r = record::parse(key, text);
  NodeFailure f;
  f.exit_code = int_field(r, key, "exit_code", INT_MIN);
  f.node = int_field(r, key, "node", -1);  // -1: the store-only launcher (node_watch.h)
  f.why = record::text(r, key, "why");
  for (auto [field, flag] : {std::pair{"final", &f.final}, std::pair{"lost", &f.lost}, std::pair{"joining", &f.joining}}) {
    const auto it = r.find(field);
    if (it == r.end()) continue;
    if (!it->is_boolean())
      throw StoreError(fmt::format("{}: field '{}' of the record is {}; accepted: true or false", key, field, it->dump()));
    *flag = it->get<bool>();
  }
  return f;
}

std::string encode_members(const std::vector<int>& members) { return fmt::format("{}", fmt::join(members, ",")); }

std::vector<int> decode_members(const std::string& key, const std::string& text) {
  std::vector<int> out;
  for (const std::string_view field : text::split(text, ',')) {
    const auto v = text::to_integer(field, 0, kMaxNodes - 1);
    if (!v) throw StoreError(fmt::format("{}: '{}' is not a list of node ranks (accepted: e.g. 0,1,3)", key, text));
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

}  // namespace fastrun::launcher
