#include "fastrun/runtime/backend/gloo/rooted_ops.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <gloo/alltoall.h>
#include <gloo/types.h>

#include "fastrun/runtime/backend/gloo/kept_until_exit.h"
#include "fastrun/runtime/backend/gloo/sized_messages.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::gloo_backend {
namespace {

// An empty buffer may be null: gloo wants an address all the same (and memcpy a non-null one,
// even for 0 bytes).
std::uint8_t* or_empty(void* data) {
  static std::uint8_t empty;
  return data ? static_cast<std::uint8_t*>(data) : &empty;
}

// Gloo only reads inputs; its API takes non-const pointers.
std::uint8_t* bytes(const BufferView& b, std::size_t elements = 0) {
  return or_empty(b.data) + elements * dtype_size(b.dtype);
}

// Fails the op on the receiving rank when a message had another length (sized_messages.h).
void throw_if_wrong(const std::vector<WrongLength>& wrong, const char* op, std::size_t element_size,
                    const std::vector<int>& global_ranks) {
  const std::string text = describe_wrong_lengths(wrong, element_size, global_ranks);
  if (!text.empty())
    throw std::runtime_error(fmt::format("{} (every message of a gloo {} carries its length; this rank's output is "
                                         "incomplete, and the group is unusable)",
                                         text, op));
}

// Every rank's `chunk` bytes at `in` into the root's `out`, in rank order (Gloo's gather.cc,
// with lengths).
void gather_bytes(const std::shared_ptr<::gloo::Context>& ctx, std::uint8_t* in, std::size_t chunk,
                  std::uint8_t* out, int root, std::uint32_t tag, Duration timeout, const char* op,
                  std::size_t element_size, const std::vector<int>& global_ranks) {
  SizedMessages m(ctx, ::gloo::kGatherSlotPrefix, tag, timeout);
  auto& in_buffer = m.buffer(in, chunk);
  if (ctx->rank != root) {
    m.send(in_buffer, root, 0, chunk);
    m.wait();
    return;
  }
  const auto n = static_cast<std::size_t>(ctx->size);
  out = or_empty(out);  // a reduce of 0 elements gathers into an empty vector
  auto& out_buffer = m.buffer(out, n * chunk);
  for (std::size_t p = 0; p < n; ++p)
    if (p != static_cast<std::size_t>(root)) m.recv(out_buffer, static_cast<int>(p), p * chunk, chunk);
  std::memcpy(out + static_cast<std::size_t>(root) * chunk, in, chunk);
  m.wait();
  throw_if_wrong(m.wrong_lengths(), op, element_size, global_ranks);
}

}  // namespace

void run_reduce(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, int root, std::uint32_t tag,
                Duration timeout, const std::vector<int>& global_ranks) {
  const auto n = static_cast<std::size_t>(ctx->size);
  // Kept, as the messages are, when the gather ends by an exception (sized_messages.h).
  auto kept = std::make_shared<std::vector<std::uint8_t>>(ctx->rank == root ? n * b.bytes() : 0);
  std::vector<std::uint8_t>& gathered = *kept;
  keeping_on_throw(kept, [&] {
    gather_bytes(ctx, bytes(b), b.bytes(), gathered.data(), root, tag, timeout, "reduce", dtype_size(b.dtype),
                 global_ranks);
  });
  if (ctx->rank != root) return;
  std::vector<const void*> srcs(n);
  for (std::size_t p = 0; p < n; ++p) srcs[p] = gathered.data() + p * b.bytes();
  kernels::reduce(b.dtype, op, b.data, nullptr, srcs.data(), ctx->size, b.count);
}

void run_gather(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                std::uint32_t tag, Duration timeout, const std::vector<int>& global_ranks) {
  gather_bytes(ctx, bytes(input), input.bytes(), ctx->rank == root ? bytes(output) : nullptr, root, tag, timeout,
               "gather", dtype_size(input.dtype), global_ranks);
}

void run_scatter(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                 std::uint32_t tag, Duration timeout, const std::vector<int>& global_ranks) {
  SizedMessages m(ctx, ::gloo::kScatterSlotPrefix, tag, timeout);
  const std::size_t chunk = output.bytes();
  auto& out_buffer = m.buffer(bytes(output), chunk);
  if (ctx->rank != root) {
    m.recv(out_buffer, root, 0, chunk);
    m.wait();
    throw_if_wrong(m.wrong_lengths(), "scatter", dtype_size(output.dtype), global_ranks);
    return;
  }
  const auto n = static_cast<std::size_t>(ctx->size);
  auto& in_buffer = m.buffer(bytes(input), n * chunk);
  for (std::size_t p = 0; p < n; ++p)
    if (p != static_cast<std::size_t>(root)) m.send(in_buffer, static_cast<int>(p), p * chunk, chunk);
  std::memcpy(bytes(output), bytes(input) + static_cast<std::size_t>(root) * chunk, chunk);
  m.wait();
}

void run_broadcast(const std::shared_ptr<::gloo::Context>& ctx, BufferView buffer, int root, std::uint32_t tag,
                   Duration timeout, const std::vector<int>& global_ranks) {
  // Gloo's binomial tree (broadcast.cc), with virtual ranks where the root is 0: in round i the
  // ranks that have the data (vrank < 2^i) send to vrank + 2^i. A rank receives once, checks
  // the length, then forwards; one that fails leaves its subtree waiting, and they learn of
  // the failure from the group (GroupRuntime's op_failed hook), not at the op timeout.
  SizedMessages m(ctx, ::gloo::kBroadcastSlotPrefix, tag, timeout);
  const auto n = static_cast<std::size_t>(ctx->size);
  const std::size_t vrank = (static_cast<std::size_t>(ctx->rank) + n - static_cast<std::size_t>(root)) % n;
  auto& data = m.buffer(bytes(buffer), buffer.bytes());
  const auto real = [&](std::size_t v) { return static_cast<int>((v + static_cast<std::size_t>(root)) % n); };
  std::size_t have = 1;  // vranks below `have` hold the data after each round
  for (; have < n; have *= 2) {
    if (vrank >= have && vrank < 2 * have) {  // this rank's round to receive, from vrank - have
      m.recv(data, real(vrank - have), 0, buffer.bytes());
      m.wait();
      throw_if_wrong(m.wrong_lengths(), "broadcast", dtype_size(buffer.dtype), global_ranks);
    } else if (vrank < have && vrank + have < n) {
      m.send(data, real(vrank + have), 0, buffer.bytes());
    }
  }
  m.wait();
}

void run_all_to_all(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output,
                    std::uint32_t tag, Duration timeout) {
  auto o = std::make_unique<::gloo::AlltoallOptions>(ctx);
  o->setInput<std::uint8_t>(bytes(input), input.bytes());
  o->setOutput<std::uint8_t>(bytes(output), output.bytes());
  o->setTag(tag);
  o->setTimeout(timeout);
  run_collective(std::move(o), &::gloo::alltoall);
}

void run_all_to_allv(const std::shared_ptr<::gloo::Context>& ctx, BufferView input,
                     const std::vector<std::size_t>& send_counts, BufferView output,
                     const std::vector<std::size_t>& recv_counts, std::uint32_t tag, Duration timeout,
                     bool lengths_first, const std::vector<int>& global_ranks) {
  // Its own length messages, not SizedMessages': packing small messages would split a pair
  // whose counts disagree across kPackedBytes into two forms that never meet, and nothing would
  // name that stall (its count is each rank's own, so the stalled-op check finds no mismatch);
  // and over 2 MiB a receive is posted only once its length came (rooted_ops.h).
  const auto n = static_cast<std::size_t>(ctx->size);
  const auto me = static_cast<std::size_t>(ctx->rank);
  const std::size_t esize = dtype_size(input.dtype);
  // What Gloo's I/O thread may touch: kept until exit if the op ends by an exception
  // (kept_until_exit.h), as SizedMessages keeps its own.
  struct Messages {
    std::vector<std::uint64_t> sent, received;  // each message's length in bytes, by peer
    std::unique_ptr<::gloo::transport::UnboundBuffer> in, out, sent_lengths;
    // One buffer per peer: a Gloo buffer with several receives pending reports only the last
    // sender (tcp/unbound_buffer.cc), and the payload's receive needs to know whose length came.
    std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> length_from;
    std::vector<std::vector<std::uint8_t>> scratch;  // a message longer than its receive
    std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> into_scratch;
  };
  auto msg = std::make_shared<Messages>();
  Messages& m = *msg;
  std::vector<std::size_t> in_at(n), out_at(n);
  m.sent.resize(n);
  m.received.resize(n);
  for (std::size_t p = 0, in = 0, out = 0; p < n; in += send_counts[p], out += recv_counts[p], ++p) {
    in_at[p] = in * esize;
    out_at[p] = out * esize;
    m.sent[p] = send_counts[p] * esize;
  }
  std::memcpy(bytes(output) + out_at[me], bytes(input) + in_at[me], send_counts[me] * esize);
  if (n == 1) return;
  keeping_on_throw(msg, [&] {
    m.in = ctx->createUnboundBuffer(bytes(input), input.bytes());
    m.out = ctx->createUnboundBuffer(bytes(output), output.bytes());
    m.sent_lengths = ctx->createUnboundBuffer(m.sent.data(), n * sizeof(std::uint64_t));
    m.length_from.resize(n);
    const auto slot = ::gloo::Slot::build(::gloo::kAlltoallSlotPrefix, tag);
    const auto length_slot = ::gloo::Slot::build(kLengthSlotPrefix, tag);
    // Gloo's own order (alltoallv.cc): rank r sends to r+i while it receives from r-i. Each
    // length goes just before its payload: with lengths_first the receiver needs it first.
    for (std::size_t i = 1; i < n; ++i) {
      const std::size_t to = (me + i) % n, from = (me + n - i) % n;
      m.sent_lengths->send(static_cast<int>(to), length_slot, to * sizeof(std::uint64_t), sizeof(std::uint64_t));
      m.in->send(static_cast<int>(to), slot, in_at[to], m.sent[to]);
      m.length_from[from] = ctx->createUnboundBuffer(&m.received[from], sizeof(std::uint64_t));
      m.length_from[from]->recv(static_cast<int>(from), length_slot);
      if (!lengths_first) m.out->recv(static_cast<int>(from), slot, out_at[from], recv_counts[from] * esize);
    }
    // Gloo sends a payload only once its receive is posted (tcp/pair.cc), so a receive posted for
    // the length that came never meets a longer message: a longer one goes to a scratch buffer.
    std::size_t into_output = lengths_first ? 0 : n - 1;
    for (std::size_t i = 1; i < n; ++i) {
      const std::size_t from = (me + n - i) % n;
      m.length_from[from]->waitRecv(timeout);
      if (!lengths_first) continue;
      if (m.received[from] <= recv_counts[from] * esize) {
        m.out->recv(static_cast<int>(from), slot, out_at[from], m.received[from]);
        ++into_output;
      } else {
        m.scratch.emplace_back(m.received[from]);
        m.into_scratch.push_back(ctx->createUnboundBuffer(m.scratch.back().data(), m.scratch.back().size()));
        m.into_scratch.back()->recv(static_cast<int>(from), slot);
      }
    }
    for (std::size_t i = 0; i < into_output; ++i) m.out->waitRecv(timeout);
    for (const auto& b : m.into_scratch) b->waitRecv(timeout);
    for (std::size_t i = 1; i < n; ++i) {
      m.sent_lengths->waitSend(timeout);
      m.in->waitSend(timeout);
    }
  });
  // Gloo completes a receive with a shorter message as if it were whole: without the lengths a
  // rank sent fewer elements than its peer expects and both went on, the peer's output partly
  // unwritten. (A message longer than the receive posted for it fails Gloo's transport thread.)
  std::vector<WrongLength> wrong;
  for (std::size_t p = 0; p < n; ++p)
    if (p != me && m.received[p] != recv_counts[p] * esize)
      wrong.push_back({static_cast<int>(p), ctx->rank, m.received[p], recv_counts[p] * esize});
  throw_if_wrong(wrong, "all_to_allv", esize, global_ranks);
}

}  // namespace fastrun::gloo_backend
