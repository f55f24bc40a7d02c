#include "fastrun/runtime/backend/hier/chain_all_reduce.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::hier {

BufferView slice(const BufferView& b, std::size_t first, std::size_t count) {
  BufferView s = b;
  s.data = static_cast<std::uint8_t*>(b.data) + first * dtype_size(b.dtype);
  s.count = count;
  return s;
}

namespace {

// Receive and accumulator space: ops run one at a time on the backend's comm thread, so one
// buffer per thread is never shared, and a training loop does not fault in fresh pages per call.
std::vector<std::uint8_t>& scratch(int which, std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buffers[2];
  auto& b = buffers[which];
  if (b.size() < bytes) b.resize(bytes);
  return b;
}

// The leaders' part (step 2 of chain_all_reduce.h). `local` holds this node's inputs back to
// back (count elements each, group rank order); the result lands in `buffer`.
void leader_chain(const ChainParts& p, BufferView buffer, const std::uint8_t* local, ReduceOp op,
                  const Deadline& deadline) {
  const NodeLayout& l = *p.layout;
  const int k = l.my_node, last = l.nodes() - 1;
  const std::size_t esize = dtype_size(buffer.dtype), count = buffer.count;
  const std::size_t chunk = std::max<std::size_t>(1, kChainChunkBytes / esize);
  const std::size_t chunks = (count + chunk - 1) / chunk;
  const int nlocal = l.count[static_cast<std::size_t>(k)];
  const ReduceOp fold = op == ReduceOp::avg ? ReduceOp::sum : op;  // avg divides once, at the end
  constexpr int kChainTag = 0, kReturnTag = 1;
  BufferView acc{scratch(1, buffer.bytes()).data(), count, buffer.dtype, DeviceKind::cpu};

  // Post every receive first (they match in order per peer and tag), so the sender never waits.
  std::vector<WorkHandle> chain_in(chunks), back_in(chunks), sends;
  const int return_from = k == 0 ? last : k - 1;
  const bool forwards_result = k < last - 1;  // node K-2 is the return path's end
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t first = c * chunk, n = std::min(chunk, count - first);
    if (k > 0) chain_in[c] = p.leaders->recv(slice(acc, first, n), k - 1, RecvOptions{kChainTag});
    if (k < last) back_in[c] = p.leaders->recv(slice(buffer, first, n), return_from, RecvOptions{kReturnTag});
  }
  std::vector<const void*> srcs(static_cast<std::size_t>(nlocal) + 1);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t first = c * chunk, n = std::min(chunk, count - first);
    BufferView a = slice(acc, first, n);
    std::size_t s = 0;
    if (k > 0) {
      chain_in[c]->wait(deadline.left());
      srcs[s++] = a.data;
    }
    for (int r = 0; r < nlocal; ++r) srcs[s++] = local + (static_cast<std::size_t>(r) * count + first) * esize;
    kernels::reduce(buffer.dtype, fold, a.data, nullptr, srcs.data(), static_cast<int>(s), n);
    if (k < last) {
      sends.push_back(p.leaders->send(a, k + 1, SendOptions{kChainTag}));
      continue;
    }
    if (op == ReduceOp::avg) kernels::divide(buffer.dtype, a.data, n, p.group_size);
    std::memcpy(slice(buffer, first, n).data, a.data, n * esize);
    sends.push_back(p.leaders->send(a, 0, SendOptions{kReturnTag}));
  }
  if (k < last) {
    for (std::size_t c = 0; c < chunks; ++c) {
      back_in[c]->wait(deadline.left());
      if (forwards_result) {
        const std::size_t first = c * chunk, n = std::min(chunk, count - first);
        sends.push_back(p.leaders->send(slice(buffer, first, n), k + 1, SendOptions{kReturnTag}));
      }
    }
  }
  for (auto& w : sends) w->wait(deadline.left());
}

}  // namespace

void chain_all_reduce(const ChainParts& p, BufferView buffer, ReduceOp op, Duration timeout) {
  const Deadline deadline(timeout);
  const NodeLayout& l = *p.layout;
  const int nlocal = l.count[static_cast<std::size_t>(l.my_node)];
  // 1. this node's inputs, at the leader (a copy even for one rank: the result lands in `buffer`).
  std::uint8_t* local = nullptr;
  if (l.leader()) {
    auto& gathered = scratch(0, buffer.bytes() * static_cast<std::size_t>(nlocal));
    local = gathered.data();
    BufferView out{local, buffer.count * static_cast<std::size_t>(nlocal), buffer.dtype, DeviceKind::cpu};
    if (p.node)
      p.node->gather(buffer, out, GatherOptions{0})->wait(deadline.left());
    else
      std::memcpy(local, buffer.data, buffer.bytes());
  } else {
    p.node->gather(buffer, BufferView{nullptr, 0, buffer.dtype, DeviceKind::cpu}, GatherOptions{0})
        ->wait(deadline.left());
  }
  // 2. across nodes, leaders only.
  if (l.leader()) leader_chain(p, buffer, local, op, deadline);
  // 3. the result, from each leader to its node.
  if (p.node) p.node->broadcast(buffer, BroadcastOptions{0})->wait(deadline.left());
}

}  // namespace fastrun::hier
