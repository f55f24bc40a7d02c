#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine_state.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/copy_bytes.h"

// Rendezvous: a large message's header carries the sender's buffer address; the receiver copies
// the payload straight out of the sender's memory with process_vm_readv (one copy, "CMA") and
// answers with an ack, or a nack when the copy failed. The send completes on the answer.

namespace fastrun::shm {
namespace p2p {

Counters g_counts;

namespace {

int cma_direct(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes, bool write) {
  for (std::size_t done = 0; done < bytes;) {
    iovec l{local + done, bytes - done};
    iovec r{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote + done)), bytes - done};
    const ssize_t n = write ? ::process_vm_writev(pid, &l, 1, &r, 1, 0) : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// A copy whose phase makes the kernel's string copy slow (process_group/copy_bytes.h) goes
// through this thread's bounce buffer, placed in phase with the other process's memory, in
// pieces that stay in the cache between the kernel's copy and copy_bytes. The kernel's copy of
// 256 KiB between two processes, destination 16 bytes past the source modulo 64: 110 us, in
// phase 25; a 2-rank ping-pong of 256 KiB heap buffers at that phase 76 -> 40 us
// (docs/backend-shm.md).
constexpr std::size_t kBounceBytes = 64 * 1024;

}  // namespace

int cma_copy(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes, bool write) {
  const auto here = reinterpret_cast<std::uintptr_t>(local);
  if (bytes < kStringCopyBytes || !(write ? slow_copy_phase(remote, here) : slow_copy_phase(here, remote)))
    return cma_direct(pid, local, remote, bytes, write);
  thread_local const std::unique_ptr<std::byte[]> storage(new std::byte[kBounceBytes + 128]);
  const auto base = (reinterpret_cast<std::uintptr_t>(storage.get()) + 63) & ~std::uintptr_t{63};
  auto* bounce = reinterpret_cast<std::byte*>(base + (remote & 63));  // in phase with `remote`
  for (std::size_t off = 0; off < bytes; off += kBounceBytes) {
    const std::size_t n = std::min(kBounceBytes, bytes - off);
    if (write) {
      copy_bytes(bounce, local + off, n);
      if (const int e = cma_direct(pid, bounce, remote + off, n, true)) return e;
    } else {
      if (const int e = cma_direct(pid, bounce, remote + off, n, false)) return e;
      copy_bytes(local + off, bounce, n);
    }
  }
  return 0;
}

}  // namespace p2p

using p2p::cma_copy;
using p2p::count;
using p2p::g_counts;
using p2p::kAck;
using p2p::kNack;

std::exception_ptr P2PEngine::cma_error(const Op& op, int e) const {
  const std::string text = fmt::format("{}: {}: reading the sender's memory failed: {} (errno {})",
                                       where(op.batch->what), describe(op), std::strerror(e), e);
  return e == ESRCH ? std::make_exception_ptr(PeerFailure(text + ": the sender died"))
                    : std::make_exception_ptr(BackendError(text));
}

// Single copy out of the sender's memory, then an ack (or a nack when the copy failed) that
// completes the recv once it is in the ring. Shared with the sender when it can write here.
void P2PEngine::read_rendezvous(const Header& h, const std::shared_ptr<Op>& op) {
  Peer& peer = peers_[static_cast<std::size_t>(op->peer)];
  const bool fits = size_matches(h, op);
  if (fits && coop_suits(*op)) {
    start_coop(h, op);
    return;
  }
  Out ack{};
  ack.h.kind = kAck;
  ack.h.id = h.id;
  ack.completes = op;
  if (fits) {
    count(g_counts.single_copy);
    if (const int e = cma_copy(rank_block(op->peer).pid, op->data, h.addr, op->bytes, false)) {
      ack.h.kind = kNack;
      ack.completes_error = cma_error(*op, e);
    }
  }
  peer.out.push_back(std::move(ack));
}

CopyCounts copy_counts() {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  return {get(g_counts.single_copy), get(g_counts.cooperative), get(g_counts.chunks_received),
          get(g_counts.chunks_sent), get(g_counts.chunks_handed_back)};
}

}  // namespace fastrun::shm
