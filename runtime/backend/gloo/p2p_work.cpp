#include "fastrun/runtime/backend/gloo/p2p_work.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <gloo/types.h>

#include "fastrun/runtime/backend/gloo/kept_until_exit.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun::gloo_backend {
namespace {

std::string who(const P2PNames& names, int rank) { return rank_name(rank, names.global_ranks); }

}  // namespace

std::string p2p_size_mismatch(std::string_view backend, std::string_view op, const P2PNames& names, const P2POp& recv,
                              std::uint64_t message_bytes) {
  return fmt::format("{} {} on group '{}' rank {}: recv from {} tag {} ({} bytes): the message has {} bytes, the "
                     "buffer {} (count x dtype must match the send's)",
                     backend, op, names.group, names.rank, who(names, recv.peer), recv.tag, recv.buffer.bytes(),
                     message_bytes, recv.buffer.bytes());
}

GlooP2PWork::GlooP2PWork(::gloo::Context& context, std::shared_ptr<GroupHealth> health, const std::vector<P2POp>& ops,
                         const char* what, std::uint64_t seq, const P2PNames& names,
                         TranslateError translate, std::shared_ptr<const TransportFailed> transport_failed)
    : health_(std::move(health)),
      what_(what),
      seq_(seq),
      names_(names),
      translate_(translate),
      transport_failed_(std::move(transport_failed)) {
  static char empty;  // Gloo wants an address even for an empty message
  messages_.reserve(ops.size());
  try {
    for (const P2POp& p : ops) {
      const bool send = p.kind == P2POp::Kind::send;
      Message m{p, std::make_unique<std::uint64_t>(send ? p.buffer.bytes() : kNoLength), nullptr, nullptr};
      m.length_buffer = context.createUnboundBuffer(m.length.get(), sizeof(std::uint64_t));
      m.payload = context.createUnboundBuffer(p.buffer.data ? p.buffer.data : &empty, p.buffer.bytes());
      const auto tag = static_cast<std::uint32_t>(p.tag);
      const auto length_slot = ::gloo::Slot::build(kP2PLengthSlotPrefix, tag);
      const auto slot = ::gloo::Slot::build(kP2PSlotPrefix, tag);
      // The count first: a receiver that waits finds it before the payload it describes.
      if (send) {
        m.length_buffer->send(p.peer, length_slot);
        m.payload->send(p.peer, slot);
      } else {
        m.length_buffer->recv(p.peer, length_slot);
        m.payload->recv(p.peer, slot);
      }
      messages_.push_back(std::move(m));
    }
  } catch (...) {
    std::rethrow_exception(translate_(*health_, fmt::format("{} #{}", what_, seq_), std::current_exception()));
  }
}

GlooP2PWork::~GlooP2PWork() {
  // A transport thread that failed while reading into one of these buffers is parked with a
  // reference to it on its stack (transport_failure.h: nothing unwinds it), and ~UnboundBuffer
  // waits for such references to go: forever. So after this group's transport failed the
  // buffers (and the counts they point to) are left allocated; the parked thread never touches
  // them again, so the caller's memory is free to go.
  if (!transport_failed_->own.load(std::memory_order_acquire)) return;
  keep_until_exit(std::make_shared<decltype(messages_)>(std::move(messages_)));
}

void GlooP2PWork::abort(std::exception_ptr error) {
  {
    std::lock_guard lock(abort_mutex_);
    if (!aborted_) aborted_ = std::move(error);  // the first: the root cause
  }
  for (Message& m : messages_) {
    if (m.op.kind == P2POp::Kind::send) {
      m.length_buffer->abortWaitSend();
      m.payload->abortWaitSend();
    } else {
      m.length_buffer->abortWaitRecv();
      m.payload->abortWaitRecv();
    }
  }
}

bool GlooP2PWork::wait_for(Message& m, std::chrono::steady_clock::time_point deadline) {
  const Deadline d(deadline);
  if (m.op.kind == P2POp::Kind::send) return m.length_buffer->waitSend(d.left()) && m.payload->waitSend(d.left());
  if (!m.length_buffer->waitRecv(d.left())) return false;
  m.length_known = true;
  return m.payload->waitRecv(d.left());
}

void GlooP2PWork::wait(Duration timeout) {
  std::lock_guard lock(mutex_);
  if (!done_) {
    if (timeout <= Duration::zero()) timeout = health_->op_timeout();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    try {
      bool aborted = false;
      for (std::size_t i = 0; i < messages_.size() && !aborted; ++i) aborted = !wait_for(messages_[i], deadline);
      if (aborted) {
        // Gloo's abort wins over a completion that came just before it, so a count may have
        // arrived unseen. When this group's own transport thread failed (the only writer, now
        // parked; the flag, set after it stopped, orders its writes before this read), the counts
        // it received are final: a message larger than its recv is the usual cause, and says so below.
        if (transport_failed_->own.load(std::memory_order_acquire))
          for (Message& m : messages_)
            if (m.op.kind == P2POp::Kind::recv && *m.length != kNoLength) m.length_known = true;
      }
      // A recv whose message had another size: a larger message (Gloo's transport thread failed
      // on it and aborted this Work) says so instead of the group-wide text; a smaller one was
      // received whole, so the group goes on, as on shm.
      for (const Message& m : messages_) {
        if (m.op.kind != P2POp::Kind::recv || !m.length_known || *m.length == m.op.buffer.bytes()) continue;
        const bool larger = *m.length > m.op.buffer.bytes();
        if (aborted && !larger) continue;  // the group failed for another reason: say that one
        error_ = std::make_exception_ptr(BackendError(
            larger ? p2p_size_mismatch("gloo", what_, names_, m.op, *m.length) +
                         "; Gloo's transport cannot refuse a message larger than the posted receive, so the group "
                         "is unusable"
                   : p2p_size_mismatch("gloo", what_, names_, m.op, *m.length)));
        break;
      }
      if (aborted) {
        std::lock_guard abort_lock(abort_mutex_);
        if (!error_) error_ = aborted_;
      }
    } catch (...) {
      error_ = translate_(*health_, fmt::format("{} #{}", what_, seq_), std::current_exception());
      health_->fail(error_);  // the group is unusable after a failed send/recv, as after any op
    }
    done_ = true;
    ended_.store(true, std::memory_order_release);
  }
  if (error_) std::rethrow_exception(error_);
}

bool GlooP2PWork::completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

}  // namespace fastrun::gloo_backend
