// The nccl backend's point-to-point, rooted and all-to-all ops (nccl_backend.h): grouped
// ncclSend/ncclRecv for everything but reduce (ncclReduce). Argument checks are the shared ones
// (process_group/shape_check.h), worded as on every backend.
#include <fmt/format.h>

#include "fastrun/runtime/backend/nccl/nccl_backend.h"
#include "fastrun/runtime/backend/nccl/nccl_types.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/shape_check.h"

namespace fastrun::nccl {
namespace {

BufferView block(const BufferView& b, std::size_t first, std::size_t count) {
  return BufferView{static_cast<char*>(b.data) + first * dtype_size(b.dtype), count, b.dtype, b.device};
}
P2POp send_op(const BufferView& b, int peer) { return P2POp{P2POp::Kind::send, b, peer, 0}; }
P2POp recv_op(const BufferView& b, int peer) { return P2POp{P2POp::Kind::recv, b, peer, 0}; }

}  // namespace

WorkHandle NcclBackend::issue_p2p(const Op& call, std::optional<OpDesc> desc, const std::string& detail,
                                   std::vector<P2POp> ops) {
  return issue(call, std::move(desc), detail, [ops = std::move(ops)](ncclComm_t comm, cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    for (const P2POp& p : ops) {
      const ncclDataType_t type = to_nccl(p.buffer.dtype);
      r = p.kind == P2POp::Kind::send ? ncclSend(p.buffer.data, p.buffer.count, type, p.peer, comm, s)
                                      : ncclRecv(p.buffer.data, p.buffer.count, type, p.peer, comm, s);
      if (r != ncclSuccess) {
        (void)ncclGroupEnd();
        return r;
      }
    }
    return ncclGroupEnd();
  });
}

WorkHandle NcclBackend::send(const Op& call, BufferView buffer, int peer, const SendOptions& options) {
  require_device(buffer, "send", "send");
  check_peer(op_where("send", name_), peer, options.tag, rank_, size_);
  return issue_p2p(call, std::nullopt, fmt::format("{} to rank {}", describe_view(buffer), peer),
                   {P2POp{P2POp::Kind::send, buffer, peer, options.tag}});
}

WorkHandle NcclBackend::recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) {
  require_device(buffer, "recv", "recv");
  check_peer(op_where("recv", name_), peer, options.tag, rank_, size_);
  return issue_p2p(call, std::nullopt, fmt::format("{} from rank {}", describe_view(buffer), peer),
                   {P2POp{P2POp::Kind::recv, buffer, peer, options.tag}});
}

WorkHandle NcclBackend::batch_send_recv(const Op& call, const std::vector<P2POp>& ops) {
  for (const P2POp& op : ops) require_device(op.buffer, "batch_send_recv", op.kind == P2POp::Kind::send ? "send" : "recv");
  check_p2p_batch(op_where("batch_send_recv", name_), ops, rank_, size_);
  return issue_p2p(call, std::nullopt, fmt::format("{} ops", ops.size()), ops);
}

WorkHandle NcclBackend::reduce(const Op& call, BufferView buffer, const ReduceOptions& options) {
  require_device(buffer, "reduce", "in-place");
  check_root(op_where("reduce", name_), options.root, size_);
  const ncclDataType_t type = to_nccl(buffer.dtype);
  const ncclRedOp_t op = to_nccl(options.op);
  const int root = options.root;
  return issue(call, op_desc("reduce", buffer).with_root(root).with_reduce(options.op),
               fmt::format("{}, {}, root {}", describe_view(buffer), reduce_op_name(options.op), root),
               [=](ncclComm_t comm, cudaStream_t s) {
                 return ncclReduce(buffer.data, buffer.data, buffer.count, type, op, root, comm, s);
               });
}

WorkHandle NcclBackend::gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) {
  const int root = options.root;
  require_device(input, "gather", "input");
  if (rank_ == root) require_device(output, "gather", "output");
  check_gather_shapes(op_where("gather", name_), input, output, root, rank_, size_);
  std::vector<P2POp> ops;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p) {
      const BufferView slot = block(output, static_cast<std::size_t>(p) * input.count, input.count);
      if (p == root) {  // the root's own block: a send to itself inside the group call
        ops.push_back(send_op(input, p));
        ops.push_back(recv_op(slot, p));
      } else {
        ops.push_back(recv_op(slot, p));
      }
    }
  } else {
    ops.push_back(send_op(input, root));
  }
  return issue_p2p(call, op_desc("gather", input).with_root(root),
                   fmt::format("{} per rank, root {}", describe_view(input), root), std::move(ops));
}

WorkHandle NcclBackend::scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) {
  const int root = options.root;
  require_device(output, "scatter", "output");
  if (rank_ == root) require_device(input, "scatter", "input");
  check_scatter_shapes(op_where("scatter", name_), input, output, root, rank_, size_);
  std::vector<P2POp> ops;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p) {
      ops.push_back(send_op(block(input, static_cast<std::size_t>(p) * output.count, output.count), p));
      if (p == root) ops.push_back(recv_op(output, p));
    }
  } else {
    ops.push_back(recv_op(output, root));
  }
  return issue_p2p(call, op_desc("scatter", output).with_root(root),
                   fmt::format("{} per rank, root {}", describe_view(output), root), std::move(ops));
}

WorkHandle NcclBackend::all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions&) {
  require_device(input, "all_to_all", "input");
  require_device(output, "all_to_all", "output");
  check_all_to_all_shapes(op_where("all_to_all", name_), input, output, size_);
  const std::size_t n = input.count / static_cast<std::size_t>(size_);
  std::vector<P2POp> ops;
  for (int p = 0; p < size_; ++p) {
    ops.push_back(send_op(block(input, static_cast<std::size_t>(p) * n, n), p));
    ops.push_back(recv_op(block(output, static_cast<std::size_t>(p) * n, n), p));
  }
  return issue_p2p(call, op_desc("all_to_all", input), describe_view(input), std::move(ops));
}

WorkHandle NcclBackend::all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts,
                                         BufferView output, const std::vector<std::size_t>& recv_counts,
                                         const AllToAllOptions&) {
  require_device(input, "all_to_allv", "input");
  require_device(output, "all_to_allv", "output");
  check_all_to_allv_shapes(op_where("all_to_allv", name_), input, send_counts, output, recv_counts,
                           rank_, size_);
  std::vector<P2POp> ops;
  std::size_t in_at = 0, out_at = 0;
  for (int p = 0; p < size_; ++p) {
    const auto q = static_cast<std::size_t>(p);
    ops.push_back(send_op(block(input, in_at, send_counts[q]), p));
    ops.push_back(recv_op(block(output, out_at, recv_counts[q]), p));
    in_at += send_counts[q];
    out_at += recv_counts[q];
  }
  return issue_p2p(call, op_desc("all_to_allv"),
                   fmt::format("{} in, {} out", describe_view(input), describe_view(output)), std::move(ops));
}

}  // namespace fastrun::nccl
