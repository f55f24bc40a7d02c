#pragma once
// A rank's view of its job: who it is, its store, its default process group. One call:
//   auto ctx = fastrun::join();          // join/join.h (included here); reads the environment
//   ctx->world().all_reduce(view_of(grad.data(), grad.size()))->wait();
// Threading: a Context is used by one thread at a time (its store and groups follow the
// Backend rule: one issuing thread per group).
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/group.h"
#include "fastrun/runtime/process_group/types.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun {

class HostedStore;

struct JoinOptions;  // join/join.h

class Context : public std::enable_shared_from_this<Context> {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  int node_rank() const { return node_rank_; }
  DeviceKind device() const { return device_; }
  // "cpu", or the PCI bus id of this rank's CUDA device 0.
  const std::string& device_identity() const { return device_identity_; }
  // Which environment the layout came from: fastrun, torchrun, slurm, openmpi or none.
  const std::string& source() const { return source_; }
  const std::string& run_id() const { return run_id_; }
  Duration timeout() const { return timeout_; }
  Duration op_timeout() const { return op_timeout_; }

  // The job's store, unprefixed (kFailureKey lives here).
  Store& store() { return *store_; }
  std::shared_ptr<Store> store_ptr() { return store_; }
  Group& world() { return *world_; }
  std::shared_ptr<Group> world_ptr() { return world_; }

  // A sub-group of `ranks` (global ranks, each once, any order: group rank i is ranks[i]).
  // Collective over the WORLD: every rank calls it with the same list, in the same order of
  // new_group calls; non-members get nullptr. backend "" = the world's backend choice rule.
  std::shared_ptr<Group> new_group(const std::vector<int>& ranks, const std::string& backend = "");

  // Records "rank N: why" under kFailureKey in the job's store (the first failure recorded wins),
  // so that peers blocked in collectives fail at once with a PeerFailure naming this rank.
  // Never throws (a broken store is logged).
  void report_failure(const std::string& why) noexcept;

  // Resolves "auto" for a group of `ranks` (see docs/runtime.md, "Backends").
  std::string resolve_backend(const std::string& requested, const std::vector<int>& ranks) const;

 private:
  friend std::shared_ptr<Context> join(const JoinOptions&);
  Context() = default;
  std::shared_ptr<Group> make_group(const std::vector<int>& ranks, const std::string& backend, const std::string& name);

  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1, node_rank_ = 0;
  DeviceKind device_ = DeviceKind::cpu;
  std::string device_identity_ = "cpu";
  std::string source_, run_id_, backend_request_;
  std::string gloo_host_;  // gloo's address when join chose it ("" = FASTRUN_GLOO_HOST or its default)
  Duration timeout_{}, op_timeout_{};
  std::vector<std::string> hosts_;  // host of each global rank
  std::shared_ptr<const std::vector<PeerInfo>> peers_;  // join's exchange, for the groups (GroupSpec::peers)
  std::vector<std::string> places_;  // "host#node" of each global rank: shm only within one
  int generation_ = 0;              // joins so far in this process: keeps store keys fresh
  int groups_made_ = 0;
  std::shared_ptr<void> stall_report_;   // without a fastrun launcher: this node's board (join/stall_host.h)
  std::unique_ptr<HostedStore> hosted_;  // torchrun-style rank 0 owns the store
  std::shared_ptr<Store> store_;
  std::shared_ptr<Group> world_;
};

}  // namespace fastrun

// join() and JoinOptions, so that including this header is enough to join (as before the
// move). Included last: join/join.h includes this header for the complete Context.
#include "fastrun/runtime/join/join.h"
