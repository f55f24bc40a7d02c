#include "fastrun/runtime/ddp/layout_check.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/hash/fnv1a.h"

namespace fastrun::ddp {
namespace {

std::int64_t encode_kind(const ParamLayout& p) {
  return static_cast<std::int64_t>(p.dtype) | (static_cast<std::int64_t>(p.device) << 8);
}

std::int64_t layout_hash(const std::vector<ParamLayout>& params) {
  std::uint64_t h = hash::kFormatBasis;  // FNV-1a over the 64-bit fields
  for (auto& p : params) {
    h = hash::fnv1a_le64(p.count, h);
    h = hash::fnv1a_le64(static_cast<std::uint64_t>(encode_kind(p)), h);
  }
  return static_cast<std::int64_t>(h);
}

// All-gathers `local` on `device`: in host memory, or staged through CUDA device memory (as
// PyTorch's DDP checks shapes with device tensors on an NCCL group).
std::vector<std::int64_t> all_gather_i64(Backend& group, std::vector<std::int64_t> local, Duration timeout,
                                         DeviceKind device) {
  std::vector<std::int64_t> out(local.size() * static_cast<std::size_t>(group.size()));
  if (device == DeviceKind::cpu) {
    group.all_gather(view_of(local.data(), local.size()), view_of(out.data(), out.size()))->wait(timeout);
    return out;
  }
  const std::size_t in_bytes = local.size() * sizeof(std::int64_t), out_bytes = out.size() * sizeof(std::int64_t);
  FlatBuffer in(in_bytes, device), gathered(out_bytes, device);
  copy_to_device(in.data(), local.data(), in_bytes);
  group.all_gather(BufferView{in.data(), local.size(), DType::int64, device},
                   BufferView{gathered.data(), out.size(), DType::int64, device})
      ->wait(timeout);
  copy_to_host(out.data(), gathered.data(), out_bytes);
  return out;
}

std::string describe_entry(std::int64_t count, std::int64_t kind) {
  if (count < 0) return "absent";
  ParamLayout p{static_cast<std::size_t>(count), static_cast<DType>(kind & 0xff),
                static_cast<DeviceKind>(kind >> 8)};
  return describe_layout(p);
}

}  // namespace

std::string describe_layout(const ParamLayout& p) {
  return fmt::format("{} x {} on {}", p.count, dtype_name(p.dtype), p.device == DeviceKind::cpu ? "cpu" : "cuda");
}

void verify_same_layout(Backend& group, const std::vector<ParamLayout>& params,
                        const std::vector<std::string>& names, Duration timeout) {
  const int size = group.size();
  if (size == 1) return;
  // The nccl backend takes device buffers only: stage the check's host data through device
  // memory there (on every rank, whatever device its parameters are on, so that a rank whose
  // parameters are on another device is still named, not left waiting).
  const DeviceKind device = group.backend_name() == "nccl" ? DeviceKind::cuda : DeviceKind::cpu;
  // 1. (number of parameters, hash of the layout) from every rank.
  auto summary = all_gather_i64(group, {static_cast<std::int64_t>(params.size()), layout_hash(params)}, timeout, device);
  bool same = true;
  std::int64_t max_n = 0;
  for (int r = 0; r < size; ++r) {
    same = same && summary[2 * r] == summary[0] && summary[2 * r + 1] == summary[1];
    max_n = std::max(max_n, summary[2 * r]);
  }
  if (same) return;

  // 2. The full layouts, padded to the longest, to name the first difference.
  const auto width = static_cast<std::size_t>(1 + 2 * max_n);
  std::vector<std::int64_t> local(width, -1);
  local[0] = static_cast<std::int64_t>(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    local[1 + 2 * i] = static_cast<std::int64_t>(params[i].count);
    local[2 + 2 * i] = encode_kind(params[i]);
  }
  auto all = all_gather_i64(group, std::move(local), timeout, device);
  auto at = [&](int r, std::size_t k) { return all[static_cast<std::size_t>(r) * width + k]; };

  for (std::size_t i = 0; i < static_cast<std::size_t>(max_n); ++i) {
    std::map<std::string, std::vector<int>> versions;  // description -> ranks
    for (int r = 0; r < size; ++r) versions[describe_entry(at(r, 1 + 2 * i), at(r, 2 + 2 * i))].push_back(r);
    if (versions.size() == 1) continue;
    std::string what;
    for (auto& [desc, ranks] : versions)
      what += fmt::format("{}{} on ranks [{}]", what.empty() ? "" : ", ", desc, fmt::join(ranks, ", "));
    throw ConfigError(fmt::format(
        "DDP set-up on rank {}: ranks registered different parameters: parameter {} ('{}' here) is {}; "
        "every rank must register the same parameters, in the same order, with the same sizes and dtypes",
        group.rank(), i, i < names.size() ? names[i] : std::string("absent"), what));
  }
  std::vector<std::string> counts;
  for (int r = 0; r < size; ++r) counts.push_back(fmt::format("rank {}: {}", r, at(r, 0)));
  throw ConfigError(fmt::format("DDP set-up on rank {}: ranks registered different numbers of parameters ({})",
                                group.rank(), fmt::join(counts, ", ")));
}

}  // namespace fastrun::ddp
