// Set-up of an shm group's mailboxes (p2p_engine.h): one straight-line function, numbered steps.
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <random>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"

namespace fastrun::shm {
namespace {

constexpr const char* kMailboxKey = "shm/mailboxes";

// The word peers read with process_vm_readv to learn whether they may (one per process).
std::uint64_t probe_word() {
  static const std::uint64_t value = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) | rd() | 1;
  }();
  return value;
}
const std::uint64_t* probe_address() {
  static std::uint64_t word = probe_word();
  return &word;
}

std::atomic<bool> g_single_copy_allowed{true};

bool can_read(pid_t pid, std::uint64_t addr, std::uint64_t expected) {
  if (!g_single_copy_allowed.load(std::memory_order_relaxed)) return false;
  std::uint64_t got = 0;
  iovec local{&got, sizeof got};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr)), sizeof got};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof got) && got == expected;
}

std::uint64_t stamp_key() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32 | rd()) | std::uint64_t{1} << 63;  // positions stay below 2^63
}

template <typename T> T& at(const Segment& seg, std::size_t offset) {
  return *reinterpret_cast<T*>(seg.data() + offset);
}

}  // namespace

void set_single_copy_allowed(bool allowed) { g_single_copy_allowed.store(allowed, std::memory_order_relaxed); }

std::shared_ptr<P2PEngine> make_p2p_engine(const GroupSpec& spec, const std::string& name, int cpus,
                                           std::shared_ptr<GroupHealth> health, P2PEngine::Hooks hooks) {
  const MailboxLayout layout = MailboxLayout::for_ranks(static_cast<std::size_t>(spec.size));
  const auto me = static_cast<std::size_t>(spec.rank);

  // 1. Rank 0 creates the segment and publishes its name; the others open it and check it.
  Segment seg;
  if (spec.rank == 0) {
    // Only the header and the pairs' control words now: each rank reserves its rings to its
    // peers before its first send to each (P2PEngine::start).
    seg = Segment::create(name, layout.total_bytes(), layout.data_offset());
    auto& h = at<MailboxHeader>(seg, 0);
    h.version = kMailboxVersion;
    h.nranks = static_cast<std::uint32_t>(spec.size);
    h.ring_bytes = layout.ring_bytes;
    h.total_bytes = layout.total_bytes();
    h.stamp_key = stamp_key();
    std::atomic_ref<std::uint64_t>(h.magic).store(kMailboxMagic, std::memory_order_release);
    spec.store->set(kMailboxKey, to_bytes(name));
  } else {
    const std::string their = to_string(spec.store->get(kMailboxKey, spec.timeout));
    seg = Segment::open(their, sizeof(MailboxHeader));
    auto& h = at<MailboxHeader>(seg, 0);
    if (std::atomic_ref<std::uint64_t>(h.magic).load(std::memory_order_acquire) != kMailboxMagic ||
        h.version != kMailboxVersion || h.nranks != static_cast<std::uint32_t>(spec.size) ||
        h.ring_bytes != layout.ring_bytes || h.total_bytes != layout.total_bytes() || seg.size() != h.total_bytes)
      throw BackendError(fmt::format("shm backend: mailbox segment '{}' of group '{}' has an unexpected header "
                                     "(version {}, {} ranks, {}-byte rings): mixed fastrun builds?",
                                     their, spec.name, h.version, h.nranks, h.ring_bytes));
  }

  // 2. Everyone records its pid and probe word and lets peers read its memory (where Yama's
  //    ptrace_scope = 1 would forbid it; EINVAL without Yama is fine), then the name goes.
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  auto& mine = at<MailboxRank>(seg, layout.rank_offset(me));
  mine.pid = static_cast<std::int32_t>(::getpid());
  mine.probe_addr = reinterpret_cast<std::uintptr_t>(probe_address());
  mine.probe_value = probe_word();
  try {
    store_barrier(*spec.store, "shm/mailboxes-mapped", spec.rank, spec.size, spec.timeout);
  } catch (...) {
    seg.unlink();
    throw;
  }
  seg.unlink();

  // 3. Probe single-copy reads from every peer (ptrace rules, seccomp, containers) and record
  //    the answer where the peer (the sender) will read it after the last barrier.
  int readable = 0;
  for (int p = 0; p < spec.size; ++p) {
    if (p == spec.rank) continue;
    const auto& theirs = at<MailboxRank>(seg, layout.rank_offset(static_cast<std::size_t>(p)));
    const bool ok = can_read(theirs.pid, theirs.probe_addr, theirs.probe_value);
    readable += ok;
    auto& pair = at<PairControl>(seg, layout.pair_offset(static_cast<std::size_t>(p), me));
    std::atomic_ref<std::uint32_t>(pair.receiver.cma_ok).store(ok ? 1 : 0, std::memory_order_release);
  }
  store_barrier(*spec.store, "shm/mailboxes-probed", spec.rank, spec.size, spec.timeout);
  log::debug("shm group '{}': rank {} mailboxes of {} KiB, single-copy reads from {} of {} peers", spec.name,
             spec.rank, layout.ring_bytes / 1024, readable, spec.size - 1);
  return std::make_shared<P2PEngine>(std::move(seg), layout, spec.rank, spec.global_ranks, spec.name, spec.op_timeout,
                                     cpus, std::move(health), std::move(hooks));
}

}  // namespace fastrun::shm
