#include "fastrun/runtime/backend/gloo/rooted_ops.h"

#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/gather.h>
#include <gloo/scatter.h>

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
                     const std::vector<std::size_t>& recv_counts, std::uint32_t tag, Duration timeout) {
  const std::size_t esize = dtype_size(input.dtype);
  std::vector<std::int64_t> send_bytes, recv_bytes;
  for (std::size_t c : send_counts) send_bytes.push_back(static_cast<std::int64_t>(c * esize));
  for (std::size_t c : recv_counts) recv_bytes.push_back(static_cast<std::int64_t>(c * esize));
  ::gloo::AlltoallvOptions o(ctx);
  o.setInput<std::uint8_t>(bytes(input), send_bytes);
  o.setOutput<std::uint8_t>(bytes(output), recv_bytes);
  o.setTag(tag);
  o.setTimeout(timeout);
  ::gloo::alltoallv(o);
}

}  // namespace fastrun::gloo_backend
