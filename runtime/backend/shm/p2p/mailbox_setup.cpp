// Set-up of an shm group's mailboxes (p2p_engine.h, MailboxSetup), in the group's set-up steps.
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

MailboxSetup MailboxSetup::create(const GroupSpec& spec, const std::string& name) {
  const MailboxLayout layout = MailboxLayout::for_ranks(static_cast<std::size_t>(spec.size));
  // Only the header and the pairs' control words now: each rank reserves its rings to its
  // peers before its first send to each (P2PEngine::start).
  Segment seg = Segment::create(name, layout.total_bytes(), layout.data_offset());
  auto& h = at<MailboxHeader>(seg, 0);
  h.version = kMailboxVersion;
  h.nranks = static_cast<std::uint32_t>(spec.size);
  h.ring_bytes = layout.ring_bytes;
  h.total_bytes = layout.total_bytes();
  h.stamp_key = stamp_key();
  std::atomic_ref<std::uint64_t>(h.magic).store(kMailboxMagic, std::memory_order_release);
  return MailboxSetup(std::move(seg), layout);
}

MailboxSetup MailboxSetup::open(const GroupSpec& spec, const std::string& name) {
  const MailboxLayout layout = MailboxLayout::for_ranks(static_cast<std::size_t>(spec.size));
  Segment seg = Segment::open(name, sizeof(MailboxHeader));
  auto& h = at<MailboxHeader>(seg, 0);
  if (std::atomic_ref<std::uint64_t>(h.magic).load(std::memory_order_acquire) != kMailboxMagic ||
      h.version != kMailboxVersion || h.nranks != static_cast<std::uint32_t>(spec.size) ||
      h.ring_bytes != layout.ring_bytes || h.total_bytes != layout.total_bytes() || seg.size() != h.total_bytes)
    throw BackendError(fmt::format("shm backend: mailbox segment '{}' of group '{}' has an unexpected header "
                                   "(version {}, {} ranks, {}-byte rings): mixed fastrun builds?",
                                   name, spec.name, h.version, h.nranks, h.ring_bytes));
  return MailboxSetup(std::move(seg), layout);
}

void MailboxSetup::record_self(int rank) {
  // Peers may read this process's memory where Yama's ptrace_scope = 1 would forbid it (EINVAL
  // without Yama is fine).
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  auto& mine = at<MailboxRank>(seg_, layout_.rank_offset(static_cast<std::size_t>(rank)));
  mine.pid = static_cast<std::int32_t>(::getpid());
  mine.probe_addr = reinterpret_cast<std::uintptr_t>(probe_address());
  mine.probe_value = probe_word();
}

std::shared_ptr<P2PEngine> MailboxSetup::finish(const GroupSpec& spec, int cpus, std::chrono::microseconds yield_for,
                                                std::shared_ptr<GroupHealth> health, P2PEngine::Hooks hooks) && {
  // Probe single-copy reads from every peer (ptrace rules, seccomp, containers) and publish the
  // answer where the peer (the sender) reads it. No barrier: a sender that finds no answer yet
  // sends through the ring, which always works, and looks again at its next send
  // (P2PEngine::it_reads_me).
  const auto me = static_cast<std::size_t>(spec.rank);
  int readable = 0;
  for (int p = 0; p < spec.size; ++p) {
    if (p == spec.rank) continue;
    const auto& theirs = at<MailboxRank>(seg_, layout_.rank_offset(static_cast<std::size_t>(p)));
    const bool ok = can_read(theirs.pid, theirs.probe_addr, theirs.probe_value);
    readable += ok;
    auto& pair = at<PairControl>(seg_, layout_.pair_offset(static_cast<std::size_t>(p), me));
    std::atomic_ref<std::uint32_t>(pair.receiver.cma_ok).store(ok ? kCmaYes : kCmaNo, std::memory_order_release);
  }
  log::debug("shm group '{}': rank {} mailboxes of {} KiB, single-copy reads from {} of {} peers", spec.name,
             spec.rank, layout_.ring_bytes / 1024, readable, spec.size - 1);
  return std::make_shared<P2PEngine>(std::move(seg_), layout_, spec.rank, spec.global_ranks, spec.name,
                                     spec.op_timeout, cpus, yield_for, std::move(health), std::move(hooks));
}

}  // namespace fastrun::shm
