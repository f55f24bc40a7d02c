#pragma once
// Gloo objects that a Gloo thread may still touch after the op that owned them ended in an
// error: kept allocated and reachable (no leak report), never destroyed, until the process
// exits. Used for a failed transport's context (its parked thread: transport_failure.h), a
// point-to-point Work's messages after that (p2p_work.h), a collective's options (below), and
// the messages of an op of fastrun's own that ended by an exception (sized_messages.h, and
// run_all_to_allv's in rooted_ops.cpp).
#include <memory>

namespace fastrun::gloo_backend {

void keep_until_exit(std::shared_ptr<const void> object);

// Runs `body`; when it throws, `owned` (what Gloo's I/O thread may still touch) is kept until
// exit before the exception goes on.
template <class Body>
void keeping_on_throw(const std::shared_ptr<const void>& owned, Body&& body) {
  try {
    body();
  } catch (...) {
    keep_until_exit(owned);
    throw;
  }
}

// Runs `collective` (::gloo::alltoallv, ::gloo::allgather, ...) on `options`, which own the op's
// unbound buffers. When it throws (a peer closed its connection mid-op), Gloo's I/O thread may
// still be signalling those buffers (tcp::UnboundBuffer::signalException) while the exception
// unwinds, and destroying them then races it (TSan, in Gloo's frames: ~AlltoallOptions against
// signalException, in 3 runs of 4 of a test whose peer exits after a mismatch). So on a throw
// the options are kept.
template <class Options>
void run_collective(std::unique_ptr<Options> options, void (*collective)(Options&)) {
  const std::shared_ptr<Options> owned(std::move(options));
  keeping_on_throw(owned, [&] { collective(*owned); });
}

}  // namespace fastrun::gloo_backend
