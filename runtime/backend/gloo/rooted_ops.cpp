#include "fastrun/runtime/backend/gloo/rooted_ops.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gloo/alltoall.h>
#include <gloo/gather.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include "fastrun/runtime/process_group/pair_counts.h"
#include "fastrun/runtime/process_group/rank_name.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::gloo_backend {
namespace {

std::uint8_t* bytes(const BufferView& b, std::size_t elements = 0) {
  // Gloo only reads inputs; its API takes non-const pointers. An empty buffer may be null:
  // gloo wants an address all the same.
  static std::uint8_t empty;
  if (!b.data) return &empty;
  return static_cast<std::uint8_t*>(b.data) + elements * dtype_size(b.dtype);
}

}  // namespace

void run_reduce(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, int root, std::uint32_t tag,
                Duration timeout) {
  const auto n = static_cast<std::size_t>(ctx->size);
  std::vector<std::uint8_t> gathered(ctx->rank == root ? n * b.bytes() : 0);
  ::gloo::GatherOptions o(ctx);
  o.setInput<std::uint8_t>(bytes(b), b.bytes());
  if (ctx->rank == root) o.setOutput<std::uint8_t>(gathered.data(), gathered.size());
  o.setRoot(root);
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::gather(o);
  if (ctx->rank != root) return;
  std::vector<const void*> srcs(n);
  for (std::size_t p = 0; p < n; ++p) srcs[p] = gathered.data() + p * b.bytes();
  kernels::reduce(b.dtype, op, b.data, nullptr, srcs.data(), ctx->size, b.count);
}

void run_gather(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                std::uint32_t tag, Duration timeout) {
  ::gloo::GatherOptions o(ctx);
  o.setInput<std::uint8_t>(bytes(input), input.bytes());
  if (ctx->rank == root) o.setOutput<std::uint8_t>(bytes(output), output.bytes());
  o.setRoot(root);
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::gather(o);
}

void run_scatter(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                 std::uint32_t tag, Duration timeout) {
  ::gloo::ScatterOptions o(ctx);
  if (ctx->rank == root) {
    std::vector<std::uint8_t*> blocks;
    for (int p = 0; p < ctx->size; ++p) blocks.push_back(bytes(input, static_cast<std::size_t>(p) * output.count));
    o.setInputs<std::uint8_t>(blocks, output.bytes());
  }
  o.setOutput<std::uint8_t>(bytes(output), output.bytes());
  o.setRoot(root);
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::scatter(o);
}

void run_all_to_all(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output,
                    std::uint32_t tag, Duration timeout) {
  ::gloo::AlltoallOptions o(ctx);
  o.setInput<std::uint8_t>(bytes(input), input.bytes());
  o.setOutput<std::uint8_t>(bytes(output), output.bytes());
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::alltoall(o);
}

void run_all_to_allv(const std::shared_ptr<::gloo::Context>& ctx, BufferView input,
                     const std::vector<std::size_t>& send_counts, BufferView output,
                     const std::vector<std::size_t>& recv_counts, std::uint32_t tag, Duration timeout,
                     bool lengths_first, const std::vector<int>& global_ranks) {
  const auto n = static_cast<std::size_t>(ctx->size);
  const auto me = static_cast<std::size_t>(ctx->rank);
  const std::size_t esize = dtype_size(input.dtype);
  std::vector<std::size_t> in_at(n), out_at(n);
  std::vector<std::uint64_t> sent(n), received(n);  // each message's length in bytes, by peer
  for (std::size_t p = 0, in = 0, out = 0; p < n; in += send_counts[p], out += recv_counts[p], ++p) {
    in_at[p] = in * esize;
    out_at[p] = out * esize;
    sent[p] = send_counts[p] * esize;
  }
  std::memcpy(bytes(output) + out_at[me], bytes(input) + in_at[me], send_counts[me] * esize);
  if (n == 1) return;
  auto in = ctx->createUnboundBuffer(bytes(input), input.bytes());
  auto out = ctx->createUnboundBuffer(bytes(output), output.bytes());
  auto sent_lengths = ctx->createUnboundBuffer(sent.data(), n * sizeof(std::uint64_t));
  // One buffer per peer: a Gloo buffer with several receives pending reports only the last
  // sender (tcp/unbound_buffer.cc), and the payload's receive needs to know whose length came.
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> length_from(n);
  const auto slot = ::gloo::Slot::build(::gloo::kAlltoallSlotPrefix, tag);
  const auto length_slot = ::gloo::Slot::build(kAllToAllvLengthSlotPrefix, tag);
  // Gloo's own order (alltoallv.cc): rank r sends to r+i while it receives from r-i. Each
  // length goes just before its payload.
  for (std::size_t i = 1; i < n; ++i) {
    const std::size_t to = (me + i) % n, from = (me + n - i) % n;
    sent_lengths->send(static_cast<int>(to), length_slot, to * sizeof(std::uint64_t), sizeof(std::uint64_t));
    in->send(static_cast<int>(to), slot, in_at[to], sent[to]);
    length_from[from] = ctx->createUnboundBuffer(&received[from], sizeof(std::uint64_t));
    length_from[from]->recv(static_cast<int>(from), length_slot);
    if (!lengths_first) out->recv(static_cast<int>(from), slot, out_at[from], recv_counts[from] * esize);
  }
  // Gloo sends a payload only once its receive is posted (tcp/pair.cc), so a receive posted for
  // the length that came never meets a longer message: a longer one goes to a scratch buffer.
  std::size_t into_output = lengths_first ? 0 : n - 1;
  std::vector<std::vector<std::uint8_t>> scratch;
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> into_scratch;
  for (std::size_t i = 1; i < n; ++i) {
    const std::size_t from = (me + n - i) % n;
    length_from[from]->waitRecv(timeout);
    if (!lengths_first) continue;
    if (received[from] <= recv_counts[from] * esize) {
      out->recv(static_cast<int>(from), slot, out_at[from], received[from]);
      ++into_output;
    } else {
      scratch.emplace_back(received[from]);
      into_scratch.push_back(ctx->createUnboundBuffer(scratch.back().data(), scratch.back().size()));
      into_scratch.back()->recv(static_cast<int>(from), slot);
    }
  }
  for (std::size_t i = 0; i < into_output; ++i) out->waitRecv(timeout);
  for (const auto& b : into_scratch) b->waitRecv(timeout);
  for (std::size_t i = 1; i < n; ++i) {
    sent_lengths->waitSend(timeout);
    in->waitSend(timeout);
  }
  // Gloo completes a receive with a shorter message as if it were whole: without the lengths a
  // rank sent fewer elements than its peer expects and both went on, the peer's output partly
  // unwritten. (A message longer than the receive posted for it fails Gloo's transport thread.)
  const char* const why =
      " (every message of a gloo all_to_allv carries its length; this rank's output is incomplete, and the group is "
      "unusable)";
  std::vector<PairCounts> known(n, PairCounts{std::vector<std::size_t>(n), {}});
  known[me].send[me] = send_counts[me];
  known[me].recv = recv_counts;
  for (std::size_t p = 0; p < n; ++p) {
    if (p == me) continue;
    if (received[p] % esize)  // not whole elements: the peer's dtype differs
      throw std::runtime_error(fmt::format("rank {} sends {} bytes to rank {}, which expects {} elements of {} bytes "
                                           "from it{}",
                                           global_rank_at(static_cast<int>(p), global_ranks), received[p],
                                           global_rank_at(ctx->rank, global_ranks), recv_counts[p], esize, why));
    known[p].send[me] = static_cast<std::size_t>(received[p] / esize);
  }
  const std::string pairs = describe_pair_mismatch(known, global_ranks);
  if (!pairs.empty()) throw std::runtime_error(pairs + why);
}

}  // namespace fastrun::gloo_backend
