// The shm collectives, each written in Channel's step protocol (channel.h). Per step a rank
// reads what peers published at the previous step, writes its own region for this step,
// publishes and waits; chunked ops overlap the chunks that way (pipelining without extra
// barriers).
#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/process_group/shape_check.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/process_group/reduce_kernels.h"

namespace fastrun::shm {
namespace {

std::byte* bytes_of(const BufferView& b) { return static_cast<std::byte*>(b.data); }

// Slice boundaries of a chunk split between n ranks: rank p reduces [begin(p), begin(p+1)).
// Every chunk of an op uses the partition of the full chunk length `basis`, clipped to its own
// `len`: a region holds one chunk's result slice next to the next chunk's copied-in slices, so
// the partitions must agree. Rounded to cache lines so ranks never write the same line.
struct Slices {
  std::size_t basis, len, n, align;
  std::size_t begin(std::size_t p) const {
    if (p >= n) return len;
    const std::size_t raw = basis * p / n;
    return std::min(len, (raw + align - 1) / align * align);
  }
};

std::size_t line_elems(std::size_t esize) { return std::max<std::size_t>(1, 64 / esize); }

RuntimeConfig shm_runtime_config(bool local) {
  RuntimeConfig c;
  c.backend = "shm";
  c.async_from_bytes = local ? RuntimeConfig::kNever : kAsyncOpBytes;
  // The channel watches peers and the failure key itself, and names the peer that failed.
  c.wait_watches_failure_key = false;
  // An op waited at once runs on the waiting thread when the comm thread has not started it
  // (the OSU pattern: no hand-off, docs/benchmarks.md "Single calls"); one issued and left to
  // run (DDP's buckets during backward) still overlaps on the thread.
  c.waiter_runs_queued_op = true;
  // The channel's deadline (which names the ranks that did not arrive) should fire first; the
  // margin covers an op that started a little after its wait() did.
  c.wait_margin = std::chrono::seconds(1);
  // A cancelled op leaves its wait within a sleep slice; this bounds the rare slow case.
  c.release_grace = std::chrono::seconds(2);
  return c;
}

}  // namespace

ShmBackend::ShmBackend(const GroupSpec& spec, std::unique_ptr<Channel> channel, std::shared_ptr<GroupHealth> health)
    : rank_(spec.rank), size_(spec.size), name_(spec.name), chan_(std::move(channel)) {
  if (chan_ && spec.store) {
    op_check_ = std::make_shared<StalledOpCheck>(*spec.store, spec.rank, spec.size, spec.global_ranks, spec.name);
    chan_->set_stall_check([check = op_check_] { return check->check(); });
  }
  GroupRuntime::Hooks hooks;
  if (Channel* ch = chan_.get()) {
    hooks.op_failed = [ch] { ch->abort(); };  // peers waiting on us fail now instead of at their timeout
    hooks.cancel = [ch] { ch->cancel(); };    // the op in flight returns within a wait slice
  }
  runtime_ = std::make_unique<GroupRuntime>(spec, shm_runtime_config(!chan_), std::move(hooks), std::move(health));
}

ShmBackend::~ShmBackend() {
  runtime_.reset();  // queued ops first (they may use the mailboxes' hooks), then the hooks go
  if (p2p_) p2p_->detach();
}

void ShmBackend::begin_op(const OpContext& ctx, Fingerprint& f) {
  if (!chan_) return;
  // The channel's messages name the op by it ("all_reduce #7"): a copy, made only when it
  // changes (ops of one kind in a row are the common case).
  if (current_op_ != ctx.name) current_op_ = ctx.name;
  record_op(ctx, f);
  chan_->begin_op(current_op_.c_str(), ctx.seq, ctx.timeout, f);
}

void ShmBackend::record_op(const OpContext& ctx, Fingerprint& f) {
  f.words[0] = static_cast<std::int64_t>(ctx.seq);  // op #seq, the same on every rank in step
  if (op_check_) op_check_->record(f);  // before any wait of the op
}

void ShmBackend::refuse_buffer(const char* op, const BufferView& b) const {
  if (b.device != DeviceKind::cpu)
    throw ConfigError(fmt::format("shm {} on group '{}': buffer is in CUDA memory; the shm backend handles host "
                                  "memory only (use nccl for device buffers)",
                                  op, name_));
  throw ConfigError(fmt::format("shm {} on group '{}': null data pointer for {} elements", op, name_, b.count));
}

// ---------------------------------------------------------------------------- all_reduce

WorkHandle ShmBackend::all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) {
  check_host("all_reduce", buffer);
  if (options.prescale != 1.0)  // `where` built only then: a small all-reduce's fixed cost
    check_prescale(Where::joined({"shm all_reduce on group '", name_, "'"}), buffer, options.prescale);
  return run(call, op_desc("all_reduce", buffer).with_reduce(options.op), buffer.bytes(),
             [this, buffer, op = options.op, prescale = options.prescale] {
               apply_prescale(buffer, prescale);  // part of the op: on the comm thread when the op runs there
               if (!chan_ || buffer.count == 0) return;
               if (buffer.bytes() <= kSmallAllReduceBytes) {
                 all_reduce_small(buffer, op);
               } else {
                 all_reduce_large(buffer, op);
               }
             });
}

// One step: everyone copies its buffer in, then everyone reduces all copies (in rank order, so
// every rank computes bit-identical results).
void ShmBackend::all_reduce_small(const BufferView& b, ReduceOp op) {
  Channel& ch = *chan_;
  const std::uint32_t k = ch.next_step();
  ch.before_write(k);
  copy_bytes(ch.region(rank_, k), b.data, b.bytes());
  ch.publish(k);
  ch.wait_all(k);
  const void* srcs[64];
  std::vector<const void*> many;
  const void** s = srcs;
  if (size_ > 64) {
    many.resize(static_cast<std::size_t>(size_));
    s = many.data();
  }
  for (int p = 0; p < size_; ++p) s[p] = ch.region(p, k);
  kernels::reduce(b.dtype, op, b.data, nullptr, s, size_, b.count);
}

// Reduce-scatter then all-gather through the segment, pipelined over chunks of at most a region.
// Chunk j is copied in at step j+1 (only the slices peers reduce), reduced at step j+1+L (own
// slice, from own input + peers' copies; the result goes to the output and to the own region)
// and gathered by the others at step j+1+2L, with L = kMaxReadLag = 2: reading two steps after
// the write lets a rank run one step ahead of a briefly slower peer instead of meeting it at
// every step (channel.h).
void ShmBackend::all_reduce_large(const BufferView& b, ReduceOp op) {
  Channel& ch = *chan_;
  constexpr std::uint32_t lag = kMaxReadLag;
  const std::size_t esize = dtype_size(b.dtype);
  const std::size_t align = line_elems(esize);
  // Chunks of kAllReduceChunkBytes, not whole regions, with a core per rank (shm_backend.h).
  const std::size_t chunk_bytes =
      ch.oversubscribed() ? ch.region_bytes() : std::min(ch.region_bytes(), kAllReduceChunkBytes);
  const std::size_t max_chunk = chunk_bytes / esize;  // a multiple of `align`
  const std::size_t nchunks = (b.count + max_chunk - 1) / max_chunk;
  // Equal chunks (but the last), so the last one is split as evenly as the others.
  const std::size_t chunk = ((b.count + nchunks - 1) / nchunks + align - 1) / align * align;
  const auto n = static_cast<std::size_t>(size_);
  const auto r = static_cast<std::size_t>(rank_);
  std::byte* data = bytes_of(b);
  std::vector<const void*> srcs(n);
  auto slices = [&](std::size_t j) { return Slices{chunk, std::min(chunk, b.count - j * chunk), n, align}; };
  // Copies every peer's result slice of chunk j out of the region they wrote at `step`.
  auto gather = [&](std::size_t j, std::uint32_t step) {
    const Slices sl = slices(j);
    std::byte* out = data + j * chunk * esize;
    for (std::size_t p = 0; p < n; ++p) {
      if (p == r) continue;
      const std::size_t lo = sl.begin(p), hi = sl.begin(p + 1);
      if (hi > lo) copy_bytes(out + lo * esize, ch.region(static_cast<int>(p), step) + lo * esize, (hi - lo) * esize);
    }
  };
  std::uint32_t first = 0, k = 0;
  for (std::size_t s = 1; s <= nchunks + lag; ++s) {
    k = ch.next_step();
    if (s == 1) first = k;
    ch.before_write(k);
    if (s > lag) ch.wait_all(k - lag);
    if (s > 2 * lag) gather(s - 1 - 2 * lag, k - lag);
    if (s > lag) {  // reduce own slice of chunk s-1-L
      const std::size_t j = s - 1 - lag;
      const Slices sl = slices(j);
      const std::size_t lo = sl.begin(r), hi = sl.begin(r + 1);
      if (hi > lo) {
        std::byte* own = data + (j * chunk + lo) * esize;
        for (std::size_t p = 0; p < n; ++p)
          srcs[p] = p == r ? static_cast<const void*>(own) : ch.region(static_cast<int>(p), k - lag) + lo * esize;
        // The second copy for the peers is written block by block while the block is in L1.
        kernels::reduce(b.dtype, op, own, ch.region(rank_, k) + lo * esize, srcs.data(), size_, hi - lo);
      }
    }
    if (s <= nchunks) {  // copy in the slices of chunk s-1 that peers reduce
      const std::size_t j = s - 1;
      const Slices sl = slices(j);
      const std::byte* in = data + j * chunk * esize;
      std::byte* region = ch.region(rank_, k);
      const std::size_t lo = sl.begin(r), hi = sl.begin(r + 1);
      if (lo > 0) copy_bytes(region, in, lo * esize);
      if (sl.len > hi) copy_bytes(region + hi * esize, in + hi * esize, (sl.len - hi) * esize);
    }
    ch.publish(k);
  }
  ch.wait_all(k);
  // The last L chunks were reduced in the last L steps: gather them now (chunk j at first+j+L).
  for (std::size_t j = nchunks > lag ? nchunks - lag : 0; j < nchunks; ++j)
    gather(j, first + static_cast<std::uint32_t>(j) + lag);
}

// ---------------------------------------------------------------------------- broadcast

WorkHandle ShmBackend::broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) {
  check_host("broadcast", buffer);
  if (!root_ok(options.root, size_)) check_root(op_where("broadcast", name_), options.root, size_);
  // The path is chosen from the size, the same on every rank whose op agrees; ranks whose sizes
  // fall on both sides of the line meet at their first step all the same, where the check finds them.
  return run(call, op_desc("broadcast", buffer).with_root(options.root), buffer.bytes(), [this, buffer, root = options.root] {
    if (!chan_ || buffer.count == 0) return;
    if (p2p_ && buffer.bytes() >= kSingleCopyBroadcastBytes) broadcast_single_copy(buffer, root);
    else broadcast_chunks(buffer, root);
  });
}

void ShmBackend::broadcast_single_copy(const BufferView& b, int root) {
  // The step comes first, so that no data moves between ranks whose ops differ, and every rank
  // waits there for every other: each compares every op, so each fails a mismatch in its words
  // (a receiver that met only the root would pass, and learn of it as "rank 0 left the group").
  // The transfer that follows needs everyone anyway.
  Channel& ch = *chan_;
  const std::uint32_t k = ch.next_step();
  ch.publish(k);
  ch.wait_all(k);
  std::vector<P2POp> ops;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p)
      if (p != root) ops.push_back(send_op(b, p));
  } else {
    ops.push_back(recv_op(b, root));
  }
  p2p_->run(ops, {}, "broadcast", runtime_->health().op_timeout());
}

// The root writes chunk j at step j+1; the others copy it out at step j+2. The root waits for
// everyone at every step (it must not overwrite a region still being read); the others wait for
// everyone at the first step, where every rank compares every op (so each fails a mismatch in
// its own words, the receivers whose ops agree with the root's too), then for the root alone.
void ShmBackend::broadcast_chunks(const BufferView& b, int root) {
  Channel& ch = *chan_;
  const std::size_t total = b.bytes(), chunk = ch.region_bytes();
  const std::size_t nchunks = (total + chunk - 1) / chunk;
  std::byte* data = bytes_of(b);
  auto len = [&](std::size_t j) { return std::min(chunk, total - j * chunk); };
  std::uint32_t k = 0;
  for (std::size_t s = 1; s <= nchunks; ++s) {
    k = ch.next_step();
    if (rank_ == root) {
      ch.before_write(k);
      copy_bytes(ch.region(root, k), data + (s - 1) * chunk, len(s - 1));
      ch.publish(k);
      ch.wait_all(k);
    } else {
      if (s >= 2) copy_bytes(data + (s - 2) * chunk, ch.region(root, k - 1), len(s - 2));
      ch.publish(k);
      if (s == 1) ch.wait_all(k);
      else ch.wait_one(root, k);
    }
  }
  if (rank_ != root) copy_bytes(data + (nchunks - 1) * chunk, ch.region(root, k), len(nchunks - 1));
}

// ---------------------------------------------------------------------------- all_gather

WorkHandle ShmBackend::all_gather(const Op& call, BufferView input, BufferView output, const AllGatherOptions&) {
  check_host("all_gather", input);
  check_host("all_gather", output);
  if (!blocks_ok(output, input, size_))
    check_all_gather_shapes(Where::joined({"shm all_gather on group '", name_, "'"}), input, output, size_);
  return run(call, op_desc("all_gather", input), output.bytes(), [this, input, output] {
    if (input.count == 0) return;
    std::byte* own = bytes_of(output) + static_cast<std::size_t>(rank_) * input.bytes();
    if (own != input.data) std::memmove(own, input.data, input.bytes());
    if (chan_) all_gather_chunks(input, output);
  });
}

// Chunk j of every rank's input: written at step j+1, gathered by the others at step j+2.
void ShmBackend::all_gather_chunks(const BufferView& in, const BufferView& out) {
  Channel& ch = *chan_;
  const std::size_t total = in.bytes(), chunk = ch.region_bytes();
  const std::size_t nchunks = (total + chunk - 1) / chunk;
  const std::byte* src = bytes_of(in);
  std::byte* dst = bytes_of(out);
  auto len = [&](std::size_t j) { return std::min(chunk, total - j * chunk); };
  auto gather = [&](std::size_t j, std::uint32_t from_step) {
    for (int p = 0; p < size_; ++p)
      if (p != rank_)
        copy_bytes(dst + static_cast<std::size_t>(p) * total + j * chunk, ch.region(p, from_step), len(j));
  };
  std::uint32_t k = 0;
  for (std::size_t s = 1; s <= nchunks; ++s) {
    k = ch.next_step();
    ch.before_write(k);
    if (s >= 2) gather(s - 2, k - 1);
    copy_bytes(ch.region(rank_, k), src + (s - 1) * chunk, len(s - 1));
    ch.publish(k);
    ch.wait_all(k);
  }
  gather(nchunks - 1, k);
}

// ---------------------------------------------------------------------------- reduce_scatter

WorkHandle ShmBackend::reduce_scatter(const Op& call, BufferView input, BufferView output, const ReduceScatterOptions& options) {
  check_host("reduce_scatter", input);
  check_host("reduce_scatter", output);
  if (!blocks_ok(input, output, size_))
    check_reduce_scatter_shapes(Where::joined({"shm reduce_scatter on group '", name_, "'"}), input, output,
                                size_);
  return run(call, op_desc("reduce_scatter", input).with_reduce(options.op), input.bytes(),
             [this, input, output, op = options.op] {
               if (output.count == 0) return;
               if (!chan_) {  // one rank: every op of a single value is the value itself
                 if (output.data != input.data) std::memmove(output.data, input.data, output.bytes());
                 return;
               }
               reduce_scatter_chunks(input, output, op);
             });
}

// Every rank copies in its share of the other ranks' blocks (chunk j at step j+1), and reduces
// its own block's chunk j at step j+2 from its input and the peers' copies.
void ShmBackend::reduce_scatter_chunks(const BufferView& in, const BufferView& out, ReduceOp op) {
  Channel& ch = *chan_;
  const std::size_t esize = dtype_size(in.dtype);
  const auto n = static_cast<std::size_t>(size_);
  const auto r = static_cast<std::size_t>(rank_);
  const std::size_t count = out.count;  // elements per block
  const std::size_t align = line_elems(esize);
  const std::size_t chunk = std::max<std::size_t>(align, ch.region_bytes() / (n * esize) / align * align);
  const std::size_t nchunks = (count + chunk - 1) / chunk;
  const std::byte* src = bytes_of(in);
  std::byte* dst = bytes_of(out);
  std::vector<const void*> srcs(n);
  auto len = [&](std::size_t j) { return std::min(chunk, count - j * chunk); };
  auto reduce_chunk = [&](std::size_t j, std::uint32_t from_step) {
    for (std::size_t p = 0; p < n; ++p)
      srcs[p] = p == r ? static_cast<const void*>(src + (r * count + j * chunk) * esize)
                       : ch.region(static_cast<int>(p), from_step) + r * chunk * esize;
    kernels::reduce(in.dtype, op, dst + j * chunk * esize, nullptr, srcs.data(), size_, len(j));
  };
  std::uint32_t k = 0;
  for (std::size_t s = 1; s <= nchunks; ++s) {
    k = ch.next_step();
    ch.before_write(k);
    if (s >= 2) reduce_chunk(s - 2, k - 1);
    std::byte* region = ch.region(rank_, k);
    const std::size_t j = s - 1;
    for (std::size_t p = 0; p < n; ++p)
      if (p != r) copy_bytes(region + p * chunk * esize, src + (p * count + j * chunk) * esize, len(j) * esize);
    ch.publish(k);
    ch.wait_all(k);
  }
  reduce_chunk(nchunks - 1, k);
}

// ---------------------------------------------------------------------------- barrier

WorkHandle ShmBackend::barrier(const Op& call, const BarrierOptions&) {
  return run(call, op_desc("barrier"), 0, [this] {
    if (!chan_) return;
    const std::uint32_t k = chan_->next_step();
    chan_->publish(k);
    chan_->wait_all(k);
  });
}

}  // namespace fastrun::shm
