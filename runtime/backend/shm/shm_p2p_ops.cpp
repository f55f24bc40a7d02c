// The shm backend's point-to-point, rooted and all-to-all ops (shm_backend.h). Argument checks
// come from process_group/shape_check.h, so every backend words a mistake the same way.
#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_progress.h"
#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"
#include "fastrun/runtime/process_group/shape_check.h"

namespace fastrun::shm {
namespace {

std::byte* at(const BufferView& b, std::size_t elements) {
  return static_cast<std::byte*>(b.data) + elements * dtype_size(b.dtype);
}
BufferView block(const BufferView& b, std::size_t first, std::size_t count) {
  return BufferView{at(b, first), count, b.dtype, b.device};
}

}  // namespace

void ShmBackend::start_p2p(const GroupSpec& spec, MailboxSetup mailboxes) {
  P2PEngine::Hooks hooks;
  hooks.check_peer = [this](int peer) {
    chan_->check_peer(peer, fmt::format("shm point-to-point on group '{}' rank {}", name_, rank_));
  };
  // The engine records its failures in the group's health itself (by shared_ptr: it may fail
  // while the runtime is being torn down, ~ShmBackend); the hook tells the peers.
  hooks.on_failure = [this] { chan_->abort(); };  // peers in a collective with us fail now too
  if (op_check_) hooks.stall_check = [check = op_check_] { return check->check(); };
  p2p_ = std::move(mailboxes).finish(spec, chan_->cpus(), chan_->yield_for(), runtime_->shared_health(),
                                     std::move(hooks));
  // No progress thread: a rank blocked in a collective moves pending messages (p2p_progress.h).
  if (p2p_) register_for_progress(p2p_);
  chan_->set_idle_hook(&progress_all_p2p);
}

// Through the runtime like any op (refused after a failure, numbered, labelled), then straight
// into the mailboxes on the caller's thread: the Work progresses when waited on or polled.
WorkHandle ShmBackend::post_p2p(const char* op, const Op& call, std::span<const P2POp> ops) {
  return runtime_->post(call, [&](std::uint64_t seq) { return p2p_->post(ops, op, seq); });
}

// Inline on the caller's thread whatever the size (bytes = 0 for run()), unless earlier ops are
// still queued on the comm thread: the messages move by single-copy reads and the waits poll,
// so the hand-off to the comm thread would only add its latency (measured: a 256 KiB
// all_to_all on 2 ranks took several times Open MPI's through the comm thread). The local
// block is copied after the messages are posted, while the peers copy theirs out of (or into)
// this rank's buffers, not before, when they would wait for it.
// Its own op body, as run() makes one (the op recorded, then the work). Inline (the usual case)
// it refers to the messages where the caller built them; only a body queued behind other ops
// takes them with it.
WorkHandle ShmBackend::run_p2p(const char* what, const Op& call, const OpDesc& op, P2POps&& ops, LocalCopy local,
                               P2POps&& after) {
  const Fingerprint f = fingerprint(op);
  return runtime_->run_small(
      call, 0, [&](const OpContext& ctx) { p2p_body(ctx, what, f, ops, local, after); },
      [&] {
        return [this, what, f, ops = std::move(ops), after = std::move(after), local](const OpContext& ctx) {
          p2p_body(ctx, what, f, ops, local, after);
        };
      });
}

void ShmBackend::p2p_body(const OpContext& ctx, const char* what, Fingerprint f, const P2POps& ops,
                          const LocalCopy& local, const P2POps& after) {
  // Its fingerprint goes to the stalled-op check only, not onto the channel (begin_op): no peer
  // would compare it there, since the channel's waits compare a peer's op only at a step the
  // peer published, and the peer's next collective rewrites that slot before publishing it.
  // Ranks whose ops never meet on the steps (these messages against a collective) are found
  // out by the stalled-op check. 80-90 instructions of a receiver's ~1,200 per scatter.
  if (chan_) record_op(ctx, f);
  if (p2p_ && !(ops.empty() && after.empty()))
    p2p_->run({ops.data(), ops.size()}, {after.data(), after.size()}, what, runtime_->health().op_timeout(), local);
  else
    local.copy();
}

ShmBackend::LocalCopy ShmBackend::local_copy(const BufferView& dst, const BufferView& src) {
  return {dst.data, src.data, src.bytes()};
}

// ---------------------------------------------------------------------------- send / recv

WorkHandle ShmBackend::send(const Op& call, BufferView buffer, int peer, const SendOptions& options) {
  check_host("send", buffer);
  if (!peer_ok(peer, options.tag, rank_, size_)) check_peer(op_where("send", name_), peer, options.tag, rank_, size_);
  const P2POp one{P2POp::Kind::send, buffer, peer, options.tag};
  return post_p2p("send", call, {&one, 1});
}

WorkHandle ShmBackend::recv(const Op& call, BufferView buffer, int peer, const RecvOptions& options) {
  check_host("recv", buffer);
  if (!peer_ok(peer, options.tag, rank_, size_)) check_peer(op_where("recv", name_), peer, options.tag, rank_, size_);
  const P2POp one{P2POp::Kind::recv, buffer, peer, options.tag};
  return post_p2p("recv", call, {&one, 1});
}

WorkHandle ShmBackend::batch_send_recv(const Op& call, const std::vector<P2POp>& ops) {
  for (const P2POp& op : ops) check_host("batch_send_recv", op.buffer);
  check_p2p_batch(op_where("batch_send_recv", name_), ops, rank_, size_);
  if (ops.empty()) return std::make_shared<CompletedWork>();
  return post_p2p("batch_send_recv", call, ops);
}

// ---------------------------------------------------------------------------- reduce

WorkHandle ShmBackend::reduce(const Op& call, BufferView buffer, const ReduceOptions& options) {
  check_host("reduce", buffer);
  if (!root_ok(options.root, size_)) check_root(op_where("reduce", name_), options.root, size_);
  return run(call, op_desc("reduce", buffer).with_root(options.root).with_reduce(options.op), buffer.bytes(),
             [this, buffer, op = options.op, root = options.root] {
               if (chan_ && buffer.count > 0) reduce_chunks(buffer, op, root);
             });
}

// Every rank but the root writes chunk j into its region at step j+1; the root waits for all,
// then reduces its own chunk and the peers' copies in rank order into its buffer (the kernel
// of all_reduce, so the bits are all_reduce's). The root reads step k's regions before it
// publishes k+1, well within the channel's read lag.
void ShmBackend::reduce_chunks(const BufferView& b, ReduceOp op, int root) {
  Channel& ch = *chan_;
  const std::size_t esize = dtype_size(b.dtype);
  const std::size_t chunk = ch.region_bytes() / esize;
  std::vector<const void*> srcs(static_cast<std::size_t>(size_));
  for (std::size_t first = 0; first < b.count; first += chunk) {
    const std::size_t len = std::min(chunk, b.count - first);
    const std::uint32_t k = ch.next_step();
    if (rank_ != root) {
      ch.before_write(k);
      copy_bytes(ch.region(rank_, k), at(b, first), len * esize);
      ch.publish(k);
      continue;
    }
    ch.publish(k);
    ch.wait_all(k);
    for (int p = 0; p < size_; ++p)
      srcs[static_cast<std::size_t>(p)] = p == root ? static_cast<const void*>(at(b, first)) : ch.region(p, k);
    kernels::reduce(b.dtype, op, at(b, first), nullptr, srcs.data(), size_, len);
  }
}

// ---------------------------------------------------------------------------- gather / scatter

WorkHandle ShmBackend::gather(const Op& call, BufferView input, BufferView output, const GatherOptions& options) {
  const int root = options.root;
  check_host("gather", input);
  if (rank_ == root) check_host("gather", output);
  if (!gather_shapes_ok(input, output, root, rank_, size_))
    check_gather_shapes(op_where("gather", name_), input, output, root, rank_, size_);
  P2POps ops;
  LocalCopy local;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p)
      if (p != root) ops.push_back(recv_op(block(output, static_cast<std::size_t>(p) * input.count, input.count), p));
    local = local_copy(block(output, static_cast<std::size_t>(rank_) * input.count, input.count), input);
  } else {
    ops.push_back(send_op(input, root));
  }
  return run_p2p("gather", call, op_desc("gather", input).with_root(root), std::move(ops), local);
}

WorkHandle ShmBackend::scatter(const Op& call, BufferView input, BufferView output, const ScatterOptions& options) {
  const int root = options.root;
  check_host("scatter", output);
  if (rank_ == root) check_host("scatter", input);
  if (!scatter_shapes_ok(input, output, root, rank_, size_))
    check_scatter_shapes(op_where("scatter", name_), input, output, root, rank_, size_);
  P2POps ops;
  LocalCopy local;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p)
      if (p != root) ops.push_back(send_op(block(input, static_cast<std::size_t>(p) * output.count, output.count), p));
    local = local_copy(output, block(input, static_cast<std::size_t>(rank_) * output.count, output.count));
  } else {
    ops.push_back(recv_op(output, root));
  }
  return run_p2p("scatter", call, op_desc("scatter", output).with_root(root), std::move(ops), local);
}

// ---------------------------------------------------------------------------- all-to-all

WorkHandle ShmBackend::all_to_all(const Op& call, BufferView input, BufferView output, const AllToAllOptions&) {
  check_host("all_to_all", input);
  check_host("all_to_all", output);
  if (!all_to_all_shapes_ok(input, output, size_))
    check_all_to_all_shapes(op_where("all_to_all", name_), input, output, size_);
  const std::size_t n = input.count / static_cast<std::size_t>(size_);
  P2POps sends, recvs;  // the recvs after this rank's own block (run_p2p)
  if (n > 0)
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      recvs.push_back(recv_op(block(output, static_cast<std::size_t>(p) * n, n), p));
      sends.push_back(send_op(block(input, static_cast<std::size_t>(p) * n, n), p));
    }
  const std::size_t own = static_cast<std::size_t>(rank_) * n;
  return run_p2p("all_to_all", call, op_desc("all_to_all", input), std::move(sends),
                 local_copy(block(output, own, n), block(input, own, n)), std::move(recvs));
}

WorkHandle ShmBackend::all_to_allv(const Op& call, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                                 const std::vector<std::size_t>& recv_counts, const AllToAllOptions&) {
  check_host("all_to_allv", input);
  check_host("all_to_allv", output);
  check_all_to_allv_shapes(op_where("all_to_allv", name_), input, send_counts, output, recv_counts, rank_, size_);
  const auto me = static_cast<std::size_t>(rank_);
  // Every pair exchanges a message, empty ones too, so that counts that disagree between two
  // ranks fail with a size error instead of waiting for a message that never comes.
  P2POps sends, recvs;  // the recvs after this rank's own block (run_p2p)
  std::size_t in_at = 0, out_at = 0, own_in = 0, own_out = 0;
  for (int p = 0; p < size_; ++p) {
    const auto q = static_cast<std::size_t>(p);
    if (p == rank_) {
      own_in = in_at;
      own_out = out_at;
    } else {
      recvs.push_back(recv_op(block(output, out_at, recv_counts[q]), p));
      sends.push_back(send_op(block(input, in_at, send_counts[q]), p));
    }
    in_at += send_counts[q];
    out_at += recv_counts[q];
  }
  const std::size_t own = send_counts[me];
  return run_p2p("all_to_allv", call, op_desc("all_to_allv", input).with_count_per_rank(), std::move(sends),
                 local_copy(block(output, own_out, own), block(input, own_in, own)), std::move(recvs));
}

}  // namespace fastrun::shm
