// The NCCL model (libnccl.so.2): communicators over a shared-memory segment (segment.h), every
// operation enqueued on the caller's stream through the CUDA model and carried out there by the
// stream's worker. What it models: docs/cuda-model.md. In short:
// - init: blocking, or non-blocking (ncclInProgress until every rank has registered, polled
//   through ncclCommGetAsyncError); a rank that never comes leaves init pending for ever.
// - a collective whose peer never arrives stays pending (the stream does not advance) until
//   ncclCommAbort, which makes it return without finishing, as NCCL's abort stops its kernels.
//   So does one whose peers called a different collective (kind, count, type, op or root): a
//   real NCCL hangs there too, or completes with garbage; the model always hangs.
// - a peer that dies (or leaves) while this rank waits on it: ncclCommGetAsyncError reports
//   ncclRemoteError, ncclGetLastError names the rank; the operation stays pending until abort.
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_model.h"
#include "nccl/reduce.h"
#include "nccl/segment.h"

using namespace fastrun_nccl_model;

namespace {

std::mutex g_error_mutex;
std::string g_last_error;  // ncclGetLastError's text

ncclResult_t fail(ncclResult_t r, const std::string& text) {
  std::lock_guard lock(g_error_mutex);
  g_last_error = text;
  return r;
}

struct Op {
  enum Kind { all_reduce, broadcast, reduce, all_gather, reduce_scatter, send, recv } kind;
  const char* send_buf = nullptr;  // aliases (cuda_model.h), computed when enqueued
  char* recv_buf = nullptr;
  std::size_t count = 0;  // all_gather: per rank (send count); reduce_scatter: per rank (recv count)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root_or_peer = 0;
  std::size_t done = 0;  // p2p progress, bytes
};

struct CommState {
  std::string name;
  int fd = -1;
  char* base = nullptr;
  Layout layout{0};
  int rank = 0, nranks = 0, device = 0;
  bool blocking = true;
  std::atomic<bool> init_done{false};
  std::atomic<bool> aborted{false};
  std::atomic<bool> finalizing{false};
  std::atomic<int> async{ncclSuccess};
  std::atomic<int> queued{0};   // tasks enqueued on a stream, not yet finished
  std::atomic<int> running{0};  // tasks inside their body now
  std::uint64_t step = 0;       // only the stream worker running this comm's task touches it
  std::uint64_t collectives = 0;  // collectives with a step run so far; the same on every rank

  Header& header() const { return *reinterpret_cast<Header*>(base); }
  Rank& rank_at(int r) const { return reinterpret_cast<Rank*>(base + layout.ranks())[r]; }
  Channel& channel(int src, int dst) const {
    return reinterpret_cast<Channel*>(base + layout.channels())[src * nranks + dst];
  }
  char* slot(int r) const { return base + layout.slots() + kSlotBytes * static_cast<std::size_t>(r); }
  char* channel_data(int src, int dst) const {
    return base + layout.channel_data() + kChannelBytes * static_cast<std::size_t>(src * nranks + dst);
  }

  // True while `r` holds its lock (it is alive and still in the communicator).
  bool holds_lock(int r) const {
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = r;
    fl.l_len = 1;
    if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive
    return fl.l_type != F_UNLCK;
  }

  // Records a remote error for the first peer found gone among `peers`.
  void check_peers(const std::vector<int>& peers) {
    for (int q : peers) {
      if (q == rank) continue;
      const std::uint32_t s = rank_at(q).state.load();
      if (s == kAlive && holds_lock(q)) continue;
      const std::string what = s == kAlive ? "exited (its process ended)" : s == kLeft ? "destroyed its communicator"
                                                                                       : "aborted its communicator";
      // The error and its text change together, under the text's lock: a thread that sees the
      // async error (ncclCommGetAsyncError) and then asks ncclGetLastError reads this text, not
      // the one before it.
      std::lock_guard lock(g_error_mutex);
      int expected = ncclSuccess;
      if (async.compare_exchange_strong(expected, ncclRemoteError)) {
        char text[256];
        std::snprintf(text, sizeof text, "NCCL model: peer rank %d (pid %d) %s while rank %d waited for it", q,
                      rank_at(q).pid.load(), what.c_str(), rank);
        g_last_error = text;
      }
      return;
    }
  }

  // Waits until ready() (true) or an abort (false). Backs off to 1 ms sleeps; checks every
  // ~100 ms that the peers it waits for are still there.
  template <typename Ready>
  bool wait(Ready ready, const std::vector<int>& peers) {
    auto pause = std::chrono::microseconds(0);
    auto next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (!ready()) {
      if (aborted.load()) return false;
      if (pause.count() == 0) {
        std::this_thread::yield();
        pause = std::chrono::microseconds(10);
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
      if (std::chrono::steady_clock::now() >= next_check) {
        check_peers(peers);
        next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      }
    }
    return true;
  }

  std::vector<int> everyone() const {
    std::vector<int> v(static_cast<std::size_t>(nranks));
    for (int r = 0; r < nranks; ++r) v[static_cast<std::size_t>(r)] = r;
    return v;
  }

  // One lock step: every rank raises its step; returns once all have (false on abort). At a
  // collective's first step, `signature` (at its slot) must also be every rank's: ranks that
  // called different collectives wait here until an abort.
  struct Expect {
    int slot;
    std::uint64_t signature;
  };
  bool sync(const Expect* same = nullptr) {
    ++step;
    if (same) rank_at(rank).signature[same->slot].store(same->signature, std::memory_order_relaxed);
    rank_at(rank).step.store(step, std::memory_order_release);  // publishes the signature too
    return wait([&] {
      for (int r = 0; r < nranks; ++r) {
        if (rank_at(r).step.load(std::memory_order_acquire) < step) return false;
        if (same && rank_at(r).signature[same->slot].load(std::memory_order_relaxed) != same->signature) return false;
      }
      return true;
    }, everyone());
  }

  bool run_collective(const Op& op);
  bool run_p2p(std::vector<Op*>& ops);

  ~CommState() {
    if (base != nullptr) ::munmap(base, layout.size());
    if (fd >= 0) ::close(fd);  // drops the liveness lock
  }
};

// What a collective is, as ranks must agree on it (never 0: a fresh segment's slots read 0).
std::uint64_t signature_of(const Op& op) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (const std::uint64_t v : {static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.count),
                                static_cast<std::uint64_t>(op.type), static_cast<std::uint64_t>(op.op),
                                static_cast<std::uint64_t>(op.root_or_peer)}) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h | 1;
}

bool CommState::run_collective(const Op& op) {
  const std::size_t es = type_size(op.type);
  const std::size_t chunk = kSlotBytes / es;
  // An empty collective takes no step (NCCL returns at once): it is not numbered either.
  Expect first{static_cast<int>(collectives % 2), signature_of(op)};
  const Expect* check = &first;
  if (op.count > 0) ++collectives;
  std::vector<const char*> slots(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) slots[static_cast<std::size_t>(r)] = slot(r);
  const int destinations = op.kind == Op::reduce_scatter ? nranks : 1;
  for (int d = 0; d < destinations; ++d) {
    for (std::size_t off = 0; off < op.count; off += chunk) {
      const std::size_t n = std::min(chunk, op.count - off), bytes = n * es;
      // 1. publish this rank's chunk
      switch (op.kind) {
        case Op::broadcast:
          if (rank == op.root_or_peer) std::memcpy(slot(rank), op.send_buf + off * es, bytes);
          break;
        case Op::reduce_scatter:
          std::memcpy(slot(rank), op.send_buf + (static_cast<std::size_t>(d) * op.count + off) * es, bytes);
          break;
        default:
          std::memcpy(slot(rank), op.send_buf + off * es, bytes);
      }
      if (!sync(std::exchange(check, nullptr))) return false;
      // 2. read everyone's
      switch (op.kind) {
        case Op::all_reduce: reduce(slots.data(), nranks, op.recv_buf + off * es, n, op.type, op.op); break;
        case Op::reduce:
          if (rank == op.root_or_peer) reduce(slots.data(), nranks, op.recv_buf + off * es, n, op.type, op.op);
          break;
        case Op::broadcast: std::memmove(op.recv_buf + off * es, slot(op.root_or_peer), bytes); break;
        case Op::all_gather:
          for (int r = 0; r < nranks; ++r)
            std::memcpy(op.recv_buf + (static_cast<std::size_t>(r) * op.count + off) * es, slot(r), bytes);
          break;
        case Op::reduce_scatter:
          if (rank == d) reduce(slots.data(), nranks, op.recv_buf + off * es, n, op.type, op.op);
          break;
        default: break;
      }
      if (!sync()) return false;
    }
  }
  return true;
}

// Moves the bytes of every send and recv of a group until all are done: interleaved, so two
// ranks that send to each other with full rings still progress.
bool CommState::run_p2p(std::vector<Op*>& ops) {
  std::vector<int> peers;
  for (Op* op : ops) peers.push_back(op->root_or_peer);
  auto progress = [&] {
    bool all_done = true;
    for (Op* op : ops) {
      const std::size_t total = op->count * type_size(op->type);
      if (op->done >= total) continue;
      const bool is_send = op->kind == Op::send;
      Channel& ch = is_send ? channel(rank, op->root_or_peer) : channel(op->root_or_peer, rank);
      char* data = is_send ? channel_data(rank, op->root_or_peer) : channel_data(op->root_or_peer, rank);
      for (;;) {
        const std::uint64_t w = ch.written.load(std::memory_order_acquire);
        const std::uint64_t r = ch.read.load(std::memory_order_acquire);
        const std::size_t at = (is_send ? w : r) % kChannelBytes;
        const std::size_t room = is_send ? kChannelBytes - (w - r) : w - r;
        const std::size_t n = std::min({room, kChannelBytes - at, total - op->done});
        if (n == 0) break;
        if (is_send) {
          std::memcpy(data + at, op->send_buf + op->done, n);
          ch.written.store(w + n, std::memory_order_release);
        } else {
          std::memcpy(op->recv_buf + op->done, data + at, n);
          ch.read.store(r + n, std::memory_order_release);
        }
        op->done += n;
      }
      all_done = all_done && op->done >= total;
    }
    return all_done;
  };
  return wait(progress, peers);
}

struct Task {
  std::shared_ptr<CommState> comm;
  std::vector<Op> ops;
};

void run_task(void* arg) {
  std::unique_ptr<Task> task(static_cast<Task*>(arg));
  CommState& c = *task->comm;
  ++c.running;
  if (!c.aborted.load()) {
    std::vector<Op*> p2p;
    bool ok = true;
    for (Op& op : task->ops) {
      if (op.kind == Op::send || op.kind == Op::recv) p2p.push_back(&op);
      else if (ok) ok = c.run_collective(op);
    }
    if (ok && !p2p.empty()) c.run_p2p(p2p);
  }
  --c.running;
  --c.queued;
}

}  // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
};

namespace {

struct Pending {
  ncclComm_t comm;
  cudaStream_t stream;
  Op op;
};

struct GroupState {
  int depth = 0;
  std::vector<Pending> ops;
  ncclResult_t error = ncclSuccess;
};

GroupState& group() {
  thread_local GroupState g;
  return g;
}

ncclResult_t launch(ncclComm_t comm, cudaStream_t stream, std::vector<Op> ops) {
  auto* task = new Task{comm->state, std::move(ops)};
  ++comm->state->queued;
  if (fastrun_cuda_model_enqueue(stream, &run_task, task) != cudaSuccess) {
    --comm->state->queued;
    delete task;
    return fail(ncclUnhandledCudaError, "NCCL model: could not enqueue on the stream (invalid stream?)");
  }
  return ncclSuccess;
}

ncclResult_t flush_group() {
  GroupState& g = group();
  std::vector<Pending> ops;
  ops.swap(g.ops);
  const ncclResult_t error = std::exchange(g.error, ncclSuccess);
  if (error != ncclSuccess) return error;
  // One task per (communicator, stream), in the order of first use.
  while (!ops.empty()) {
    const ncclComm_t comm = ops.front().comm;
    const cudaStream_t stream = ops.front().stream;
    std::vector<Op> batch;
    std::vector<Pending> rest;
    for (auto& p : ops) {
      if (p.comm == comm && p.stream == stream) batch.push_back(p.op);
      else rest.push_back(p);
    }
    ops.swap(rest);
    if (const ncclResult_t r = launch(comm, stream, std::move(batch)); r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

// Checks an operation's arguments as NCCL does and enqueues it (or adds it to the open group).
ncclResult_t submit(const char* name, ncclComm_t comm, cudaStream_t stream, Op op, const void* send, void* recv,
                    std::size_t send_count, std::size_t recv_count) {
  char text[256];
  if (comm == nullptr) return fail(ncclInvalidArgument, std::string(name) + ": comm is NULL");
  CommState& c = *comm->state;
  if (!c.init_done.load()) return fail(ncclInvalidUsage, std::string(name) + ": the communicator is still initialising");
  if (c.aborted.load()) return fail(ncclInvalidUsage, std::string(name) + ": the communicator was aborted");
  const std::size_t es = type_size(op.type);
  if (es == 0) return fail(ncclInvalidArgument, std::string(name) + ": datatype not supported by the NCCL model");
  if (op.op < ncclSum || op.op > ncclAvg) return fail(ncclInvalidArgument, std::string(name) + ": invalid reduction op");
  if ((op.kind == Op::broadcast || op.kind == Op::reduce || op.kind == Op::send || op.kind == Op::recv) &&
      (op.root_or_peer < 0 || op.root_or_peer >= c.nranks)) {
    std::snprintf(text, sizeof text, "%s: root/peer %d is not in 0..%d", name, op.root_or_peer, c.nranks - 1);
    return fail(ncclInvalidArgument, text);
  }
  const bool needs_send = op.kind != Op::recv && !(op.kind == Op::broadcast && c.rank != op.root_or_peer);
  const bool needs_recv = op.kind != Op::send && !(op.kind == Op::reduce && c.rank != op.root_or_peer);
  int device = -1;
  if (needs_send && send_count > 0) {
    op.send_buf = static_cast<const char*>(fastrun_cuda_model_alias(send, send_count * es, &device));
    if (op.send_buf == nullptr || device != c.device) {
      std::snprintf(text, sizeof text, "%s : sendbuff %p is not a valid pointer on the communicator's device %d",
                    name, send, c.device);
      return fail(ncclInvalidArgument, text);
    }
  }
  if (needs_recv && recv_count > 0) {
    op.recv_buf = static_cast<char*>(fastrun_cuda_model_alias(recv, recv_count * es, &device));
    if (op.recv_buf == nullptr || device != c.device) {
      std::snprintf(text, sizeof text, "%s : recvbuff %p is not a valid pointer on the communicator's device %d",
                    name, recv, c.device);
      return fail(ncclInvalidArgument, text);
    }
  }
  if (fastrun_cuda_model_stream_device(stream) != c.device)
    return fail(ncclInvalidUsage, std::string(name) + ": the stream is not on the communicator's device");
  GroupState& g = group();
  if (g.depth > 0) {
    g.ops.push_back(Pending{comm, stream, op});
    return ncclSuccess;
  }
  return launch(comm, stream, {op});
}

Op make(Op::Kind kind, std::size_t count, ncclDataType_t type, ncclRedOp_t redop, int root_or_peer) {
  Op op{};
  op.kind = kind;
  op.count = count;
  op.type = type;
  op.op = redop;
  op.root_or_peer = root_or_peer;
  return op;
}

// Registers this rank in the segment; init is complete once every rank has.
ncclResult_t attach(CommState& c) {
  c.fd = ::shm_open(c.name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (c.fd < 0) return fail(ncclSystemError, "NCCL model: shm_open " + c.name + ": " + std::strerror(errno));
  if (::ftruncate(c.fd, static_cast<off_t>(c.layout.size())) != 0)
    return fail(ncclSystemError, "NCCL model: ftruncate: " + std::string(std::strerror(errno)));
  void* p = ::mmap(nullptr, c.layout.size(), PROT_READ | PROT_WRITE, MAP_SHARED, c.fd, 0);
  if (p == MAP_FAILED) return fail(ncclSystemError, "NCCL model: mmap: " + std::string(std::strerror(errno)));
  c.base = static_cast<char*>(p);
  std::int32_t expected = 0;
  if (!c.header().nranks.compare_exchange_strong(expected, c.nranks) && expected != c.nranks) {
    return fail(ncclInvalidUsage, "NCCL model: ranks disagree on nranks (" + std::to_string(expected) + " vs " +
                                      std::to_string(c.nranks) + ")");
  }
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = c.rank;
  fl.l_len = 1;
  if (::fcntl(c.fd, F_OFD_SETLK, &fl) != 0 || c.rank_at(c.rank).state.load() != kAbsent) {
    return fail(ncclInvalidUsage, "NCCL model: rank " + std::to_string(c.rank) + " joined the communicator twice");
  }
  c.rank_at(c.rank).pid.store(::getpid());
  c.rank_at(c.rank).state.store(kAlive);
  c.header().arrived.fetch_add(1);
  return ncclSuccess;
}

// Init is complete when every rank registered; the first to see it unlinks the name.
bool poll_init(CommState& c) {
  if (c.init_done.load()) return true;
  if (c.header().arrived.load() < c.nranks) return false;
  ::shm_unlink(c.name.c_str());
  c.init_done.store(true);
  return true;
}

void leave(CommState& c, RankState how) {
  if (c.base != nullptr) c.rank_at(c.rank).state.store(how);
  if (!c.init_done.load()) ::shm_unlink(c.name.c_str());  // nobody else may come to unlink it
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  std::lock_guard lock(g_error_mutex);
  copy = g_last_error;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  std::snprintf(id->internal + sizeof kMagic, sizeof id->internal - sizeof kMagic, "/fastrun-nccl-model-%d-%u-%08x",
                static_cast<int>(::getpid()), counter.fetch_add(1), random());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "ncclCommInitRankConfig: rank " + std::to_string(rank) + " / nranks " +
                                         std::to_string(nranks) + " is invalid");
  }
  if (std::memcmp(id.internal, kMagic, sizeof kMagic) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRankConfig: not a unique id from this NCCL model");
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError, "ncclCommInitRankConfig: cudaGetDevice failed (no CUDA device)");
  }
  auto state = std::make_shared<CommState>();
  state->name.assign(id.internal + sizeof kMagic, strnlen(id.internal + sizeof kMagic, sizeof id.internal - sizeof kMagic));
  state->rank = rank;
  state->nranks = nranks;
  state->device = device;
  state->layout = Layout{nranks};
  state->blocking = config == nullptr || config->blocking != 0;
  if (const ncclResult_t r = attach(*state); r != ncclSuccess) {
    leave(*state, kAborted);
    return r;
  }
  *comm = new ncclComm{state};
  if (state->blocking) {
    // No bootstrap timeout in the model: a missing rank leaves a blocking init pending.
    while (!poll_init(*state)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return ncclSuccess;
  }
  return poll_init(*state) ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  CommState& c = *comm->state;
  if (const int e = c.async.load(); e != ncclSuccess) {
    *async_error = static_cast<ncclResult_t>(e);
  } else if (!poll_init(c)) {
    *async_error = ncclInProgress;
  } else if (c.finalizing.load() && c.queued.load() > 0) {
    *async_error = ncclInProgress;
  } else {
    *async_error = ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  CommState& c = *comm->state;
  c.finalizing.store(true);
  if (c.blocking) {
    while (c.queued.load() > 0 && !c.aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return ncclSuccess;
  }
  return c.queued.load() > 0 ? ncclInProgress : ncclSuccess;
}

// Finalizes if that was not done (waits for this rank's queued operations), then frees.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  CommState& c = *comm->state;
  while (c.queued.load() > 0 && !c.aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  leave(c, kLeft);
  delete comm;
  return ncclSuccess;
}

// Stops the operation in progress (it returns without finishing, its stream moves on) and
// every queued one (they do nothing), then frees.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  CommState& c = *comm->state;
  c.aborted.store(true);
  while (c.running.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  leave(c, kAborted);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group().depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  GroupState& g = group();
  if (g.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group call");
  if (--g.depth > 0) return ncclSuccess;
  return flush_group();
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return submit("AllReduce", comm, stream, make(Op::all_reduce, count, type, op, 0), send, recv, count, count);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit("Broadcast", comm, stream, make(Op::broadcast, count, type, ncclSum, root), send, recv, count, count);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return submit("Reduce", comm, stream, make(Op::reduce, count, type, op, root), send, recv, count, count);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  const std::size_t n = comm ? static_cast<std::size_t>(comm->state->nranks) : 1;
  return submit("AllGather", comm, stream, make(Op::all_gather, send_count, type, ncclSum, 0), send, recv, send_count,
                send_count * n);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  const std::size_t n = comm ? static_cast<std::size_t>(comm->state->nranks) : 1;
  return submit("ReduceScatter", comm, stream, make(Op::reduce_scatter, recv_count, type, op, 0), send, recv,
                recv_count * n, recv_count);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return submit("Send", comm, stream, make(Op::send, count, type, ncclSum, peer), send, nullptr, count, 0);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return submit("Recv", comm, stream, make(Op::recv, count, type, ncclSum, peer), nullptr, recv, 0, count);
}

}  // extern "C"
