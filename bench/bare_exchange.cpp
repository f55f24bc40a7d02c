// The bare exchange of `fastrun-bench p2p` (bare_exchange.h).
#include "bare_exchange.h"

#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <system_error>

#include <fmt/format.h>

#include "fastrun/launcher/binding/topology.h"
#include "fastrun/runtime/backend/shm/common/wait_policy.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/page.h"

namespace fastrun::bench {
namespace {

constexpr std::size_t kLine = 64;
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

BareExchange::BareExchange(int nproc, std::size_t max_block) : nproc_(nproc) {
  const auto pairs = static_cast<std::size_t>(nproc) * static_cast<std::size_t>(nproc);
  const std::size_t counters = os::round_up_to_page(static_cast<std::size_t>(nproc) * sizeof(Counters));
  region_bytes_ = std::min(kMaxBytes, pairs * round_up(std::max<std::size_t>(max_block, 1), kLine));
  bytes_ = counters + region_bytes_;
  // Shared with the ranks forked after this; NORESERVE: only the pairs a row uses get pages.
  map_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw std::system_error(errno, std::generic_category(), fmt::format("bare exchange: mmap of {} bytes", bytes_));
  }
  counters_ = static_cast<Counters*>(map_);
  for (int r = 0; r < nproc; ++r) new (&counters_[r]) Counters;
  regions_ = static_cast<std::byte*>(map_) + counters;
  yield_ = launcher::own_affinity().size() < static_cast<std::size_t>(nproc);  // the ranks inherit the bench's mask
}

BareExchange::~BareExchange() {
  if (map_) ::munmap(map_, bytes_);
}

bool BareExchange::fits(std::size_t block) const {
  return static_cast<std::size_t>(nproc_) * static_cast<std::size_t>(nproc_) * round_up(block, kLine) <= region_bytes_;
}

std::byte* BareExchange::region(int from, int to, std::size_t block) const {
  return regions_ + (static_cast<std::size_t>(from) * static_cast<std::size_t>(nproc_) + static_cast<std::size_t>(to)) *
                        round_up(block, kLine);
}

void BareExchange::reset(int rank) {
  Counters& mine = counters_[rank];
  mine.posted.store(0);
  mine.taken.store(0);
  op_ = 0;
}

// Spins (yields with more ranks than CPUs, as fastrun's own waits do) until `counter` reaches
// `value`; the clock is read once per 4096 tries.
void BareExchange::await(const std::atomic<std::uint64_t>& counter, std::uint64_t value, int peer,
                         const char* what) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (unsigned tries = 1; counter.load(std::memory_order_acquire) < value; ++tries) {
    if (yield_) ::sched_yield();
    else shm::cpu_relax();
    if (tries % 4096 == 0 && std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(fmt::format("bare exchange: rank {} did not {} op {} within 60 s", peer, what, value));
  }
}

void BareExchange::run(int rank, std::span<const Block> sends, std::span<const Block> recvs, Local local,
                       std::size_t block, bool recv_first) {
  const std::uint64_t k = op_++;
  Counters& mine = counters_[rank];
  auto do_sends = [&] {
    for (const Block& s : sends) {
      await(counters_[s.peer].taken, k, s.peer, "take");  // its region is free once the peer took op k-1's
      std::memcpy(region(rank, s.peer, block), s.data, s.bytes);
    }
    mine.posted.store(k + 1, std::memory_order_release);
  };
  auto do_recvs = [&] {
    for (const Block& r : recvs) {
      await(counters_[r.peer].posted, k + 1, r.peer, "post");
      std::memcpy(r.data, region(r.peer, rank, block), r.bytes);
    }
    mine.taken.store(k + 1, std::memory_order_release);
  };
  if (recv_first) do_recvs();
  else do_sends();
  if (local.bytes > 0 && local.dst != local.src) std::memcpy(local.dst, local.src, local.bytes);
  if (recv_first) do_sends();
  else do_recvs();
}

}  // namespace fastrun::bench
