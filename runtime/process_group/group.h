#pragma once
// fastrun::Group: what user code holds (c10d's ProcessGroup). It decorates a Backend (the
// backend's group: shm, gloo, nccl) with the job-level policies, and is a Backend itself, so
// anything written against Backend (DDP, the torch layer, a user's own code) takes a Group as it is:
//   - the FASTRUN_NO_SYNC levels (no_sync.h) in front of every collective;
//   - the global ranks of its members (for messages and the driver surface);
//   - a CPU companion group for object collectives: the group itself when its backend works on
//     host memory (gloo, shm), else a gloo group over the same ranks, made on first use (every
//     member reaches that first use in the same collective order, so creation is collective);
//   - op numbering, the one authority: each op is made here once, as a value (op.h), and
//     handed down to the backend, which shows the same number,
//     and a flight record of the last ops (flight_recorder.h): an op that times out
//     fails with an explanation of which ranks did not reach it and what each was doing, which is
//     also recorded as the job's failure (docs/errors.md, "How to read a hang");
//   - FASTRUN_DEBUG=sequence (read when the group is made): the members compare each op before
//     issuing it, and a mismatch fails on every rank with a ConfigError (sequence_check.h).
// Every forwarded op goes through one private helper (forward()), so adding an op is one line.
// Collectives have the Backend contracts (backend.h): the same order on every rank,
// handles waited with wait(timeout) that rethrow the operation's error.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/backend.h"

namespace fastrun {

class FlightRecorder;
struct OpDesc;

// The job-level settings of a group (Context::make_group fills them; all optional).
struct GroupPolicy {
  std::string name = "group";         // in messages: "op #12 on group 'world'"
  std::shared_ptr<Store> job_store;   // unprefixed job store: failure record, flight-record dumps
};

class Group : public Backend {
 public:
  using CpuFactory = std::function<std::shared_ptr<Group>()>;

  // `global_ranks[i]` is the global rank of group rank i. `make_cpu_group` is called at most
  // once, when cpu_group() is first needed and the backend is not a host-memory one.
  Group(std::shared_ptr<Backend> backend, std::vector<int> global_ranks, CpuFactory make_cpu_group = {},
        GroupPolicy policy = {});
  ~Group() override;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const override { return backend_->rank(); }
  int size() const override { return backend_->size(); }
  std::string backend_name() const override { return backend_->backend_name(); }
  const std::string& name() const { return name_; }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  int global_rank(int group_rank) const { return global_ranks_.at(static_cast<std::size_t>(group_rank)); }

  // The backend's group under this one (no policies: no NO_SYNC, no numbering, no checks).
  Backend& backend() { return *backend_; }
  const std::shared_ptr<Backend>& backend_ptr() const { return backend_; }

  WorkHandle all_reduce(BufferView buffer, const AllReduceOptions& options = {});
  WorkHandle broadcast(BufferView buffer, const BroadcastOptions& options = {});
  WorkHandle all_gather(BufferView input, BufferView output, const AllGatherOptions& options = {});
  WorkHandle reduce_scatter(BufferView input, BufferView output, const ReduceScatterOptions& options = {});
  WorkHandle barrier(const BarrierOptions& options = {});

  // The Backend ops (backend.h). Under FASTRUN_NO_SYNC=2 they are local and complete
  // at once: send/recv/batch_send_recv move nothing (a recv buffer keeps its contents); reduce
  // leaves the buffer as it is (this rank's own contribution); gather (at the root), scatter (at
  // the root), all_to_all and all_to_allv copy only this rank's own block; elsewhere the output
  // is untouched. Arguments are checked as on the backends first.
  WorkHandle send(BufferView buffer, int peer, const SendOptions& options = {});
  WorkHandle recv(BufferView buffer, int peer, const RecvOptions& options = {});
  WorkHandle batch_send_recv(const std::vector<P2POp>& ops);
  WorkHandle reduce(BufferView buffer, const ReduceOptions& options = {});
  WorkHandle gather(BufferView input, BufferView output, const GatherOptions& options = {});
  WorkHandle scatter(BufferView input, BufferView output, const ScatterOptions& options = {});
  WorkHandle all_to_all(BufferView input, BufferView output, const AllToAllOptions& options = {});
  WorkHandle all_to_allv(BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options = {});

  // A Group is where ops are born: an op handed to it as a Backend (DDP's calls, a
  // user's code written against Backend) is numbered here like one called above.
  WorkHandle all_reduce(const Op&, BufferView buffer, const AllReduceOptions& options) override {
    return all_reduce(buffer, options);
  }
  WorkHandle broadcast(const Op&, BufferView buffer, const BroadcastOptions& options) override {
    return broadcast(buffer, options);
  }
  WorkHandle all_gather(const Op&, BufferView input, BufferView output, const AllGatherOptions& options) override {
    return all_gather(input, output, options);
  }
  WorkHandle reduce_scatter(const Op&, BufferView input, BufferView output,
                            const ReduceScatterOptions& options) override {
    return reduce_scatter(input, output, options);
  }
  WorkHandle barrier(const Op&, const BarrierOptions& options) override { return barrier(options); }
  WorkHandle send(const Op&, BufferView buffer, int peer, const SendOptions& options) override {
    return send(buffer, peer, options);
  }
  WorkHandle recv(const Op&, BufferView buffer, int peer, const RecvOptions& options) override {
    return recv(buffer, peer, options);
  }
  WorkHandle batch_send_recv(const Op&, const std::vector<P2POp>& ops) override { return batch_send_recv(ops); }
  WorkHandle reduce(const Op&, BufferView buffer, const ReduceOptions& options) override {
    return reduce(buffer, options);
  }
  WorkHandle gather(const Op&, BufferView input, BufferView output, const GatherOptions& options) override {
    return gather(input, output, options);
  }
  WorkHandle scatter(const Op&, BufferView input, BufferView output, const ScatterOptions& options) override {
    return scatter(input, output, options);
  }
  WorkHandle all_to_all(const Op&, BufferView input, BufferView output, const AllToAllOptions& options) override {
    return all_to_all(input, output, options);
  }
  WorkHandle all_to_allv(const Op&, BufferView input, const std::vector<std::size_t>& send_counts, BufferView output,
                         const std::vector<std::size_t>& recv_counts, const AllToAllOptions& options) override {
    return all_to_allv(input, send_counts, output, recv_counts, options);
  }

  // True for backends whose collectives take host memory (gloo, shm).
  bool works_on_host_memory() const;

  // The group object collectives run on (see above).
  Group& cpu_group();

  // FASTRUN_DEBUG=sequence was on when the group was made.
  bool checks_sequence() const { return check_sequence_; }
  // This rank's record of the group's last ops (flight_recorder.h).
  const FlightRecorder& flight_record() const { return *flight_; }

 private:
  // A non-owning reference to the lambda that issues one op on the backend (no allocation,
  // unlike std::function: this is on every collective's path). Valid for one forward() call.
  class Issue {
   public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Issue>>>
    Issue(F&& f)  // NOLINT: implicit, so that ops pass their lambda directly
        : fn_(static_cast<const void*>(&f)),
          call_([](const void* fn, Backend& pg, const Op& op) {
            return (*static_cast<const std::decay_t<F>*>(fn))(pg, op);
          }) {}
    WorkHandle operator()(Backend& pg, const Op& op) const { return call_(fn_, pg, op); }

   private:
    const void* fn_;
    WorkHandle (*call_)(const void*, Backend&, const Op&);
  };
  // Numbers `op` and makes it the value handed down (op.h), checks it across ranks in debug
  // mode, records it, issues it on the backend and wraps its handle so that a timeout is
  // explained (flight_recorder.h).
  WorkHandle forward(OpDesc op, Issue issue);
  Backend& sequence_group();  // where fingerprints are exchanged: host memory
  // How the local (NO_SYNC=2) checks name an op: "gather (group of global ranks 0,2)".
  std::string where(std::string_view op) const;

  std::shared_ptr<Backend> backend_;
  std::vector<int> global_ranks_;
  CpuFactory make_cpu_group_;
  std::string name_;
  bool check_sequence_ = false;
  std::shared_ptr<FlightRecorder> flight_;  // shared with the handles of ops in flight
  std::atomic<std::int64_t> seq_{0};      // collectives: equal on every member
  std::atomic<std::int64_t> p2p_seq_{0};  // send/recv: this rank's own count
  std::once_flag cpu_once_;
  std::shared_ptr<Group> cpu_group_;
};

}  // namespace fastrun
