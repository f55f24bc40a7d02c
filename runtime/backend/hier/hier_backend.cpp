#include "fastrun/runtime/backend/hier/hier_backend.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/backend/gloo/gloo_host.h"
#include "fastrun/runtime/backend/hier/chain_all_reduce.h"
#include "fastrun/runtime/backend/hier/leader_ring.h"
#include "fastrun/runtime/backend/hier/node_layout.h"
#include "fastrun/runtime/backend/hier/two_level_all_gather.h"
#include "fastrun/runtime/backend/hier/two_level_broadcast.h"
#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/peer_info.h"
#include "fastrun/runtime/process_group/shape_check.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/store/prefix_store.h"

namespace fastrun::hier {
namespace {

// Node identity of each group member, from what join() gathered (or the job's store): its host
// and launcher node, as Context::resolve_backend tells nodes apart (two launchers on one host are
// two nodes), numbered in order of appearance; -1 when a member's record is missing.
std::vector<int> nodes_of(const GroupSpec& spec) {
  std::vector<PeerInfo> read;
  const std::vector<PeerInfo>* peers = spec.peers.get();
  if (!peers && spec.failure_store) {
    for (PeerInfo& p : read_peer_infos(*spec.failure_store, spec.global_ranks)) {
      if (read.size() <= static_cast<std::size_t>(p.rank)) read.resize(static_cast<std::size_t>(p.rank) + 1);
      read[static_cast<std::size_t>(p.rank)] = std::move(p);
    }
    peers = &read;
  }
  std::map<std::string, int> ids;
  std::vector<int> node(static_cast<std::size_t>(spec.size), -1);
  for (int r = 0; r < spec.size; ++r) {
    const int global = spec.global_ranks.empty() ? r : spec.global_ranks[static_cast<std::size_t>(r)];
    if (!peers || static_cast<std::size_t>(global) >= peers->size()) continue;
    const PeerInfo& p = (*peers)[static_cast<std::size_t>(global)];
    if (p.rank != global || p.host.empty()) continue;
    const int id = static_cast<int>(ids.size());
    node[static_cast<std::size_t>(r)] = ids.emplace(p.place(), id).first->second;
  }
  return node;
}

// A sub-group of `spec`'s ranks [first, first + count), under its own store
// prefix and name, so its keys and shm segment never meet the flat group's.
GroupSpec sub_spec(const GroupSpec& spec, const std::string& part, const std::vector<int>& members, int rank) {
  GroupSpec s = spec;
  s.store = std::make_shared<PrefixStore>(part, spec.store->clone());
  s.name = fmt::format("{}-{}", spec.name, part);
  s.rank = rank;
  s.size = static_cast<int>(members.size());
  s.global_ranks.clear();
  for (int m : members)
    s.global_ranks.push_back(spec.global_ranks.empty() ? m : spec.global_ranks[static_cast<std::size_t>(m)]);
  return s;
}

// How long a node group's waits poll before they sleep: a non-leader waits for its leader's
// broadcast a round trip between the nodes after the gather. Measured on 2 namespace hosts x 2
// ranks (8 KiB all-reduce, 2,000 back to back): 80 us per op with shm's default waits, where the
// non-leader slept and its wake-up delayed the next op's gather by 30-50 us; 26 us yielding.
// The point-to-point engine's waits too (the node's gather and broadcast are its messages): they
// spun 50 us with `pause` and slept, 13 % of the CPU time of a 1 MiB all-reduce (perf); yielding,
// 1 MiB went from 1.18-1.57 to 0.95-1.01 ms and 4 MiB from 5.2-6.2 to 3.9-4.1 ms.
constexpr std::chrono::microseconds kNodeWaitsYieldFor{2000};

bool takes_chain(DType dtype) { return dtype != DType::float16 && dtype != DType::bfloat16; }

// As shm's (shm_backend.cpp): ops below kAsyncOpBytes run on the caller's thread, larger ones on
// the comm thread (DDP's buckets overlap the backward pass), and an op waited at once runs on the
// waiting thread. Every op works on the caller's buffers: each wait in a two-level body (the
// node's shm channel, the leaders' ring) watches the peers and the job's failure key, and the
// ring's can be cancelled, so a failure ends the op within a wait slice. Until 2026-12-06 the
// leaders talked gloo, whose waits cannot be sliced: every op ran on the comm thread on op-owned
// copies, a thread hand-off each way and two copies per op.
RuntimeConfig hier_runtime_config() {
  RuntimeConfig c;
  c.backend = "hier";
  c.async_from_bytes = shm::kAsyncOpBytes;
  c.waiter_runs_queued_op = true;
  // The inner waits' deadlines (which name who did not arrive) fire first.
  c.wait_margin = std::chrono::seconds(1);
  // A cancelled op leaves its wait within a slice (the ring's poll, the channel's sleep).
  c.release_grace = std::chrono::seconds(2);
  return c;
}

class HierBackend final : public Backend {
 public:
  HierBackend(const GroupSpec& spec, backend::Factory gloo);

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  std::string backend_name() const override { return "hier"; }

  WorkHandle all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) override;
  WorkHandle broadcast(const Op& call, BufferView b, const BroadcastOptions& o) override;
  WorkHandle all_gather(const Op& call, BufferView in, BufferView out, const AllGatherOptions& o) override;
  WorkHandle reduce_scatter(const Op& call, BufferView in, BufferView out, const ReduceScatterOptions& o) override {
    return flat_->reduce_scatter(call, in, out, o);
  }
  WorkHandle barrier(const Op& call, const BarrierOptions& o) override { return flat_->barrier(call, o); }
  WorkHandle send(const Op& call, BufferView b, int peer, const SendOptions& o) override {
    return flat_->send(call, b, peer, o);
  }
  WorkHandle recv(const Op& call, BufferView b, int peer, const RecvOptions& o) override {
    return flat_->recv(call, b, peer, o);
  }
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>& ops) override {
    return flat_->batch_send_recv(call, ops);
  }
  WorkHandle reduce(const Op& call, BufferView b, const ReduceOptions& o) override { return flat_->reduce(call, b, o); }
  WorkHandle gather(const Op& call, BufferView in, BufferView out, const GatherOptions& o) override {
    return flat_->gather(call, in, out, o);
  }
  WorkHandle scatter(const Op& call, BufferView in, BufferView out, const ScatterOptions& o) override {
    return flat_->scatter(call, in, out, o);
  }
  WorkHandle all_to_all(const Op& call, BufferView in, BufferView out, const AllToAllOptions& o) override {
    return flat_->all_to_all(call, in, out, o);
  }
  WorkHandle all_to_allv(const Op& call, BufferView in, const std::vector<std::size_t>& sc, BufferView out,
                         const std::vector<std::size_t>& rc, const AllToAllOptions& o) override {
    return flat_->all_to_allv(call, in, sc, out, rc, o);
  }

 private:
  // A two-level op's body, given this backend's parts.
  using TwoLevelBody = std::function<void(const ChainParts&, const OpContext&)>;
  // Runs a two-level op on this backend's runtime and records it for the mismatch check.
  WorkHandle run(const Op& call, OpDesc desc, std::size_t bytes, std::vector<OpBuffer> buffers, TwoLevelBody body);
  // Refuses device buffers, naming the op and the backend that takes them.
  void require_host(const char* what, std::initializer_list<BufferView> buffers) const;

  std::string name_;
  std::shared_ptr<const NodeLayout> layout_;
  // Held by the queued ops too: the comm thread may outlive the backend on a dead peer.
  std::shared_ptr<Backend> flat_, node_;
  std::shared_ptr<LeaderRing> ring_;  // this rank's ring (the leaders'; with rails every rank's)
  bool rails_ = false;                // chain_all_reduce.h
  // The default mismatch check (stalled_op_check.h) over the two-level ops. It publishes under
  // the flat gloo group's key ("flat/op_check/<rank>"), where the flat group's own check does
  // for the ops handed to it, and every op carries the group's number: a rank stalled in a
  // two-level all_reduce and a rank stalled in a flat broadcast of the same number read each
  // other's rings and both name the mismatch. Each ring holds only its own ops; a number missing
  // from a ring is not compared.
  std::shared_ptr<StalledOpCheck> op_check_;
  std::unique_ptr<GroupRuntime> runtime_;
};

// How long an op whose inner group found its ranks out of step waits for the hier check's verdict
// (the ranks stalled with it publish their rings within moments).
constexpr Duration kInnerMismatchVerdictWait = std::chrono::seconds(2);

// A hier op's wait that stalls runs the check (as gloo's AsyncWork does for its own ops), and so
// does an op that failed on a dead peer: a rank that found the ranks out of step leaves, and its
// node's ranks, waiting on it in an inner shm op, would otherwise report "rank N died" while its
// message names both ops (as gloo_hooks does for a closed connection). An inner group's own check
// can find the parts of two different hier ops out of step first (node 1's shm group: a two-level
// all_reduce's gather against a two-level broadcast's broadcast): its message names the parts, so
// the op waits for this check's verdict, which names the ops the user called.
// A wait that gives up cancels the leaders' ring, so that a body waiting on it leaves.
GroupRuntime::Hooks hier_hooks(std::shared_ptr<StalledOpCheck> check, std::shared_ptr<LeaderRing> ring) {
  GroupRuntime::Hooks h;
  h.stalled = stalled_op_hook(check);
  if (ring) h.cancel = [ring] { ring->cancel(); };
  h.translate = [check](GroupHealth&, const std::string&, std::exception_ptr thrown) {
    try {
      std::rethrow_exception(thrown);
    } catch (const PeerFailure&) {
      if (auto text = check->check()) return std::make_exception_ptr(ConfigError(*text));
    } catch (const ConfigError&) {
      const Deadline deadline(kInnerMismatchVerdictWait);
      do {
        if (auto text = check->check()) return std::make_exception_ptr(ConfigError(*text));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } while (!deadline.passed());
    } catch (...) {
    }
    return thrown;  // the runtime names the op where this is no fastrun error
  };
  return h;
}

// This rank's ring: the one of its local rank across the nodes (rail 0: the leaders'), under its
// own store prefix, on the address this rank's gloo binds; its waits read the job's failure
// record through the hier group's health and run the hier group's mismatch check when they stall.
std::shared_ptr<LeaderRing> make_ring(const GroupSpec& spec, const NodeLayout& layout,
                                      const std::shared_ptr<GroupHealth>& health,
                                      const std::shared_ptr<StalledOpCheck>& check) {
  const std::string host = resolve_group_gloo_host(spec.gloo_host);
  const int rail = layout.local_rank();
  RingPeers peers{layout.my_node, {}, health->label(), rail};
  for (int first : layout.first) {
    const int member = first + rail;
    peers.global_rank.push_back(spec.global_ranks.empty() ? member
                                                          : spec.global_ranks[static_cast<std::size_t>(member)]);
  }
  PrefixStore store(fmt::format("ring{}", rail), spec.store->clone());
  return std::make_shared<LeaderRing>(
      store, host, std::move(peers), spec.timeout,
      LeaderRing::Watch{[health] { return health->recorded_failure(); }, [check] { return check->check(); }});
}

// Rails (chain_all_reduce.h): every node holds the same number of ranks, 2 or more.
bool takes_rails(const NodeLayout& l) {
  return std::all_of(l.count.begin(), l.count.end(), [&](int c) { return c == l.count.front(); }) &&
         l.count.front() >= 2;
}

HierBackend::HierBackend(const GroupSpec& spec, backend::Factory gloo) : name_(spec.name) {
  const auto start = std::chrono::steady_clock::now();
  // 1. the layout, from the job's node identities; 2. the flat gloo group every rank is in;
  // 3. when two levels pay: this node's shm group and the leaders' ring; 4. the runtime that
  // numbers and runs the two-level ops.
  layout_ = std::make_shared<const NodeLayout>(plan_node_layout(nodes_of(spec), spec.rank));
  const NodeLayout& l = *layout_;
  GroupSpec flat = spec;
  flat.store = std::make_shared<PrefixStore>("flat", spec.store->clone());
  flat_ = gloo(flat);
  if (l.usable) {
    const auto k = static_cast<std::size_t>(l.my_node);
    if (l.count[k] > 1) {
      std::vector<int> members;
      for (int r = 0; r < l.count[k]; ++r) members.push_back(l.first[k] + r);
      node_ = shm::make_shm_backend_yielding(sub_spec(spec, fmt::format("node{}", k), members, l.local_rank()),
                                             kNodeWaitsYieldFor);
    }
    auto health = std::make_shared<GroupHealth>(spec, "hier", /*watch_peers=*/false);
    op_check_ = std::make_shared<StalledOpCheck>(*flat.store, spec.rank, spec.size, spec.global_ranks, spec.name);
    rails_ = takes_rails(l);
    if (l.leader() || rails_) ring_ = make_ring(spec, l, health, op_check_);
    runtime_ = std::make_unique<GroupRuntime>(spec, hier_runtime_config(), hier_hooks(op_check_, ring_),
                                              std::move(health));
  }
  log::debug("group '{}' (hier): {}, {:.1f} ms", spec.name,
             l.usable ? fmt::format("{} nodes, node {} of {} ranks", l.nodes(), l.my_node,
                                    l.count[static_cast<std::size_t>(l.my_node)])
                      : "flat gloo: " + l.why_flat,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

WorkHandle HierBackend::all_reduce(const Op& call, BufferView buffer, const AllReduceOptions& options) {
  if (!runtime_ || !takes_chain(buffer.dtype) || buffer.count == 0) return flat_->all_reduce(call, buffer, options);
  require_host("all_reduce", {buffer});
  check_prescale(op_where("all_reduce", name_), buffer, options.prescale);
  return run(call, op_desc("all_reduce", buffer).with_reduce(options.op), buffer.bytes(),
             {{buffer, OpBuffer::read_write}},
             [op = options.op, prescale = options.prescale](const ChainParts& parts, const OpContext& o) {
               apply_prescale(o.buffer(0), prescale);  // part of the op, on the comm thread
               chain_all_reduce(parts, o.buffer(0), op, o.timeout);
             });
}

WorkHandle HierBackend::broadcast(const Op& call, BufferView buffer, const BroadcastOptions& options) {
  // A bad root and an empty buffer are the flat group's to refuse or finish, in its words.
  if (!runtime_ || buffer.count == 0 || !root_ok(options.root, size()))
    return flat_->broadcast(call, buffer, options);
  require_host("broadcast", {buffer});
  const auto access = options.root == rank() ? OpBuffer::read : OpBuffer::write;
  return run(call, op_desc("broadcast", buffer).with_root(options.root), buffer.bytes(), {{buffer, access}},
             [root = options.root](const ChainParts& parts, const OpContext& o) {
               two_level_broadcast(parts, o.buffer(0), root, o.timeout);
             });
}

WorkHandle HierBackend::all_gather(const Op& call, BufferView in, BufferView out, const AllGatherOptions& options) {
  // Shapes that do not fit and empty inputs are the flat group's to refuse or finish, in its words.
  if (!runtime_ || in.count == 0 || in.dtype != out.dtype || out.count != in.count * static_cast<std::size_t>(size()))
    return flat_->all_gather(call, in, out, options);
  require_host("all_gather", {in, out});
  return run(call, op_desc("all_gather", in), out.bytes(), {{in, OpBuffer::read}, {out, OpBuffer::write}},
             [](const ChainParts& parts, const OpContext& o) {
               two_level_all_gather(parts, o.buffer(0), o.buffer(1), o.timeout);
             });
}

void HierBackend::require_host(const char* what, std::initializer_list<BufferView> buffers) const {
  for (const BufferView& b : buffers)
    if (b.device != DeviceKind::cpu)
      throw ConfigError(fmt::format("{} on group '{}': the hier backend takes host memory only, got a CUDA buffer "
                                    "(use the nccl backend for GPU buffers: FASTRUN_BACKEND=nccl or auto)",
                                    what, name_));
}

WorkHandle HierBackend::run(const Op& call, OpDesc desc, std::size_t bytes, std::vector<OpBuffer> buffers,
                            TwoLevelBody body) {
  // The body holds the parts by shared_ptr: the comm thread may outlive the backend.
  WorkHandle work = runtime_->run(call, bytes, std::move(buffers),
                                  [layout = layout_, node = node_, ring = ring_, size = size(), rails = rails_,
                                   body = std::move(body)](const OpContext& o) {
                                    if (ring) ring->begin(o.seq, o.what());
                                    body(ChainParts{node.get(), ring.get(), layout.get(), size, rails}, o);
                                  });
  desc.seq = static_cast<std::int64_t>(runtime_->last_seq());
  op_check_->record(desc);
  return work;
}

}  // namespace

std::unique_ptr<Backend> make_hier_backend(const GroupSpec& spec, backend::Factory gloo) {
  return std::make_unique<HierBackend>(spec, gloo);
}

}  // namespace fastrun::hier
