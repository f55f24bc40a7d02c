#pragma once
// The nccl backend's failure-path checks (watchdog op timeout, peer failure, init deadline),
// shared like nccl_suite.h by the Catch2 test and the GPU check program. They make their own
// world-of-one groups and need FASTRUN_NCCL_ON_ERROR=raise so the process survives them.
#ifdef FASTRUN_HAVE_NCCL

#include <chrono>
#include <memory>
#include <string>

#include "fastrun/runtime/backend/nccl/testing.h"
#include "fastrun/runtime/store/job_keys.h"
#include "gpu/nccl_suite.h"

namespace fastrun::nccl_suite {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A stalled stream makes an op run past a 1 s op timeout: the watchdog publishes the failure,
// aborts the communicator, fails the op (wait rethrows TimeoutError) and every later call,
// collective or point-to-point, with the group runtime's one refusal (GroupRuntime::post).
inline Result check_op_timeout() {
  return run_check("watchdog: op timeout fails the wait, publishes the failure, poisons the group", [] {
    auto failure_store = std::make_shared<MemoryStore>();
    auto pg = make_world_of_one(std::chrono::seconds(1), failure_store, "timeout-check");
    DeviceBuffer buf = to_device({1.0}, DType::float32);
    nccl::stall_stream_for_testing(*pg, std::chrono::seconds(4));
    const auto start = std::chrono::steady_clock::now();
    WorkHandle w = pg->all_reduce(buf.view(1, DType::float32));
    try {
      w->wait(std::chrono::seconds(30));  // longer than the op timeout: the watchdog must act
      return std::string("wait() returned although the stream was stalled past the op timeout");
    } catch (const TimeoutError& e) {
      const double took = seconds_since(start);
      const std::string what = e.what();
      if (took > 8.0) return fmt::format("TimeoutError came after {:.1f} s, expected ~1 s", took);
      if (what.find("all_reduce") == std::string::npos || what.find("FASTRUN_OP_TIMEOUT") == std::string::npos)
        return "message does not name the op and FASTRUN_OP_TIMEOUT: " + what;
    }
    if (!failure_store->check({kFailureKey})) return std::string("no failure key published");
    const std::string published = to_string(failure_store->get(kFailureKey, std::chrono::seconds(1)));
    if (published.rfind("rank 0: ", 0) != 0) return "failure key does not start with 'rank 0: ': " + published;
    // The group runtime's one "unusable after a failure" error, quoting the first failure. An
    // empty batch is the point-to-point op a world of one can issue.
    for (const char* op : {"barrier", "batch_send_recv"}) {
      try {
        if (std::string(op) == "barrier") pg->barrier();
        else pg->batch_send_recv({});
        return fmt::format("{} on the failed group did not throw", op);
      } catch (const BackendError& e) {
        const std::string what = e.what();
        const std::string refusal = fmt::format("{} refused: the group is unusable after an earlier failure", op);
        if (what.find(refusal) == std::string::npos || what.find("all_reduce #1") == std::string::npos)
          return fmt::format("the refusal of {} does not name it and the first failure (all_reduce #1): {}", op, what);
      }
    }
    return std::string();
  });
}

// Another rank marks a failure under kFailureKey while an op is stuck: the wait fails with
// PeerFailure naming that rank within a few seconds.
inline Result check_peer_failure() {
  return run_check("watchdog: failure key of a peer fails a stuck wait with PeerFailure", [] {
    auto failure_store = std::make_shared<MemoryStore>();
    auto pg = make_world_of_one(std::chrono::seconds(60), failure_store, "peer-check");
    DeviceBuffer buf = to_device({1.0}, DType::float32);
    nccl::stall_stream_for_testing(*pg, std::chrono::seconds(4));
    WorkHandle w = pg->all_reduce(buf.view(1, DType::float32));
    failure_store->set(kFailureKey, to_bytes("rank 7: killed by signal 9"));
    const auto start = std::chrono::steady_clock::now();
    try {
      w->wait(std::chrono::seconds(30));
      return std::string("wait() returned although a peer failure was marked");
    } catch (const PeerFailure& e) {
      const std::string what = e.what();
      if (seconds_since(start) > 8.0) return fmt::format("PeerFailure came after {:.1f} s", seconds_since(start));
      if (what.find("rank 7") == std::string::npos) return "message does not name rank 7: " + what;
    }
    return std::string();
  });
}

// A group of two where rank 1 never comes: init is aborted at the join deadline and the
// TimeoutError names rank 1.
inline Result check_init_deadline() {
  return run_check("init: a rank that never joins aborts init at the deadline, naming it", [] {
    GroupSpec spec;
    spec.store = std::make_shared<MemoryStore>();
    spec.rank = 0;
    spec.size = 2;
    spec.global_ranks = {0, 1};
    spec.name = "init-deadline-check";
    spec.timeout = std::chrono::seconds(2);
    const auto start = std::chrono::steady_clock::now();
    try {
      auto pg = backend::find("nccl")(spec);
      return std::string("the group was made although rank 1 never joined");
    } catch (const TimeoutError& e) {
      const std::string what = e.what();
      if (seconds_since(start) > 10.0) return fmt::format("TimeoutError came after {:.1f} s", seconds_since(start));
      if (what.find("never reached NCCL init: [1]") == std::string::npos) return "message does not name rank 1: " + what;
    }
    return std::string();
  });
}

}  // namespace fastrun::nccl_suite

#endif  // FASTRUN_HAVE_NCCL
