#include "fastrun/runtime/process_group/op_record.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace fastrun {

std::string describe(const OpDesc& d) {
  std::string args;
  if (d.has_buffer)
    args = d.count >= 0 ? fmt::format("{} x {}", dtype_name(d.dtype), d.count) : std::string(dtype_name(d.dtype));
  const auto add = [&](const std::string& s) { args += (args.empty() ? "" : ", ") + s; };
  if (d.reduce >= 0) add(std::string(reduce_op_name(static_cast<ReduceOp>(d.reduce))));
  if (d.root >= 0) add(fmt::format("{} {}", d.point_to_point ? "peer" : "root", d.root));
  return fmt::format("{}({})", d.op, args);
}

std::string describe_numbered(const OpDesc& d) {
  return fmt::format("{}op #{} {}", d.point_to_point ? "p2p " : "", d.seq, describe(d));
}

// A count word that says "a buffer whose count is each rank's own" (all_to_allv).
constexpr std::int64_t kCountPerRank = -2;

// Layout: [0] seq, [1] count (-1: no buffer; kCountPerRank), [2] dtype, [3] root, [4] reduce, [5..7] the name.
static_assert(Fingerprint::kNameBytes == 3 * sizeof(std::int64_t));

Fingerprint fingerprint(const OpDesc& d) {
  Fingerprint f;
  f.words[0] = d.seq;
  f.words[1] = !d.has_buffer ? -1 : d.count_per_rank ? kCountPerRank : d.count;
  f.words[2] = d.has_buffer ? static_cast<std::int64_t>(d.dtype) : -1;
  f.words[3] = d.root;
  f.words[4] = d.reduce;
  // Straight into the zeroed words (names are short; keep a NUL): one copy per op, not two.
  std::memcpy(&f.words[5], d.op.view().data(), std::min(d.op.view().size(), Fingerprint::kNameBytes - 1));
  return f;
}

OpDesc from_fingerprint(const Fingerprint& f) {
  OpDesc d;
  d.seq = f.words[0];
  d.has_buffer = f.words[1] >= 0 || f.words[1] == kCountPerRank;
  d.count_per_rank = f.words[1] == kCountPerRank;
  d.count = f.words[1] >= 0 ? f.words[1] : d.count_per_rank ? -1 : 0;
  if (d.has_buffer) d.dtype = static_cast<DType>(f.words[2]);
  d.root = static_cast<int>(f.words[3]);
  d.reduce = static_cast<int>(f.words[4]);
  char name[Fingerprint::kNameBytes + 1] = {};
  std::memcpy(name, &f.words[5], Fingerprint::kNameBytes);
  d.op = OpName::intern(name);
  return d;
}

bool operator==(const Fingerprint& a, const Fingerprint& b) { return a.words == b.words; }

}  // namespace fastrun
