#include "fastrun/runtime/backend/nccl/communicator.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/backend/nccl/nccl_check.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/poll_until.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun::nccl {
namespace {

constexpr const char* kUidKey = "nccl/uid";
constexpr auto kPollInterval = std::chrono::milliseconds(1);

std::string arrived_key(int rank) { return fmt::format("nccl/arrived/{}", rank); }

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Step 1: the unique id. Its bytes are the address of a bootstrap listener inside rank 0, so
// rank 0 must stay alive until every rank has finished init (it does: it is in init too).
ncclUniqueId exchange_unique_id(const GroupSpec& spec, const std::string& label, Clock::time_point deadline) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (spec.rank == 0) {
    FASTRUN_NCCL_CHECK(ncclGetUniqueId(&id), nullptr, label);
    if (spec.size > 1) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(&id);
      spec.store->set(kUidKey, Bytes(p, p + sizeof id));
    }
    return id;
  }
  Bytes bytes;
  try {
    bytes = spec.store->get(kUidKey, Deadline(deadline).left());
  } catch (const TimeoutError& e) {
    throw TimeoutError(fmt::format("{}: {} did not publish the NCCL unique id within the join timeout "
                                   "(FASTRUN_TIMEOUT): {}",
                                   label, rank_name(0, spec.global_ranks), e.what()));
  }
  if (bytes.size() != sizeof id) {
    throw BackendError(fmt::format("{}: the NCCL unique id in {} under '{}' has {} bytes, expected {} "
                                   "(two jobs sharing one store?)",
                                   label, spec.store->describe(), kUidKey, bytes.size(), sizeof id));
  }
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

// Which ranks never reached step 2, from their arrival keys: what a timeout message needs.
std::string missing_ranks(const GroupSpec& spec) {
  if (!spec.store || spec.size <= 1) return {};
  std::vector<int> missing, missing_global;
  try {
    for (int r = 0; r < spec.size; ++r) {
      if (!spec.store->check({arrived_key(r)})) {
        missing.push_back(r);
        missing_global.push_back(global_rank_at(r, spec.global_ranks));
      }
    }
  } catch (const Error& e) {
    return fmt::format("; could not ask the store which ranks arrived: {}", e.what());
  }
  if (missing.empty()) {
    return "; every rank reached NCCL init, so NCCL's bootstrap or transport set-up stalled "
           "(check NCCL_SOCKET_IFNAME and run with NCCL_DEBUG=INFO)";
  }
  return fmt::format("; ranks that never reached NCCL init: [{}] (global ranks [{}])", fmt::join(missing, ", "),
                     fmt::join(missing_global, ", "));
}

}  // namespace

Communicator Communicator::create(const GroupSpec& spec, const std::string& label, Clock::time_point deadline) {
  if (spec.size > 1 && !spec.store) {
    throw BackendError(fmt::format("{}: a group of {} ranks needs a store to share the NCCL unique id", label,
                                   spec.size));
  }
  const auto start = Clock::now();

  // 1. unique id through the store
  const ncclUniqueId id = exchange_unique_id(spec, label, deadline);

  // 2. non-blocking init: it returns at once (ncclInProgress) and completes in NCCL's threads
  if (spec.size > 1) spec.store->set(arrived_key(spec.rank), to_bytes("1"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t raw = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&raw, spec.size, id, spec.rank, &config);
  Communicator comm(raw);  // owns it from here: any throw below aborts it
  check(started, raw, "ncclCommInitRankConfig", label);

  // 3. poll under the join deadline (a sleep never runs past it)
  os::BackoffSleeper sleeper({kPollInterval, kPollInterval});
  for (;;) {
    const ncclResult_t state = comm.async_error();
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      const std::string message = describe(state, comm.get(), "ncclCommInitRankConfig (async)", label);
      comm.abort();
      throw BackendError(message + "; the communicator was aborted");
    }
    if (Clock::now() >= deadline) {
      comm.abort();
      throw TimeoutError(fmt::format("{}: ncclCommInitRankConfig did not complete within {:.3g} s (join timeout, "
                                     "FASTRUN_TIMEOUT); the communicator was aborted{}",
                                     label, seconds_between(start, deadline), missing_ranks(spec)));
    }
    sleeper.sleep(deadline);
  }
  log::info("{}: NCCL init COMPLETE in {:.3f} s", label, seconds_between(start, Clock::now()));
  return comm;
}

Communicator::~Communicator() { abort(); }

Communicator::Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    abort();
    comm_ = std::exchange(other.comm_, nullptr);
  }
  return *this;
}

ncclResult_t Communicator::async_error() const {
  if (!comm_) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  return r != ncclSuccess ? r : state;
}

void Communicator::abort() noexcept {
  if (!comm_) return;
  const ncclResult_t r = ncclCommAbort(std::exchange(comm_, nullptr));
  if (r != ncclSuccess) {
    try {
      log::warn("{}", describe(r, nullptr, "ncclCommAbort", "nccl"));
    } catch (...) {
    }
  }
}

bool Communicator::close(Clock::time_point deadline) noexcept {
  if (!comm_) return true;
  ncclResult_t r = ncclCommFinalize(comm_);
  if (r == ncclSuccess || r == ncclInProgress) {
    os::BackoffSleeper sleeper({kPollInterval, kPollInterval});
    for (;;) {
      r = async_error();
      if (r != ncclInProgress || Clock::now() >= deadline) break;
      sleeper.sleep(deadline);
    }
  }
  if (r != ncclSuccess) {
    abort();
    return false;
  }
  (void)ncclCommDestroy(std::exchange(comm_, nullptr));
  return true;
}

}  // namespace fastrun::nccl
