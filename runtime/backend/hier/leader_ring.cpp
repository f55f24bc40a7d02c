#include "fastrun/runtime/backend/hier/leader_ring.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/op_timeout.h"

namespace fastrun::hier {

using Clock = std::chrono::steady_clock;

LeaderRing::LeaderRing(Store& store, const std::string& host, RingPeers peers, Duration timeout, Watch watch)
    : peers_(std::move(peers)), watch_(std::move(watch)) {
  RingSockets sockets = connect_ring(store, host, peers_, timeout);
  to_next_ = std::move(sockets.to_next);
  from_prev_ = std::move(sockets.from_prev);
}

template <typename Done, typename What>
void LeaderRing::drive(Done&& done, const Deadline& deadline, What&& what) {
  const auto start = Clock::now();
  auto idle_since = start, next_check = start + kFailureCheckEvery;
  for (;;) {
    if (cancelled_.load(std::memory_order_acquire))
      throw PeerFailure(fmt::format("{}: {} was cancelled while waiting for {} (the job failed)", peers_.label, what_,
                                    what()));
    const bool moved = pump();
    if (done()) return;
    if (prev_closed_) fail_closed(prev_name(), "its connection closed");
    const auto now = Clock::now();
    if (moved) {
      idle_since = now;
      continue;
    }
    if (now >= next_check) {
      next_check = now + kFailureCheckEvery;
      if (auto failure = watch_.failed ? watch_.failed() : std::nullopt)
        throw PeerFailure(fmt::format("{}: {}: the job recorded a failure while waiting for {} (\"{}\")", peers_.label,
                                      what_, what(), *failure));
    }
    if (watch_.stalled && stall_.due(now))
      if (auto verdict = watch_.stalled()) throw ConfigError(*verdict);
    if (deadline.passed())
      throw TimeoutError(op_timeout_message(
          {peers_.label, what_, Duration(now - start), {what()}, "the leaders' ring"}));
    if (now - idle_since < kYieldFor) {
      ::sched_yield();
      continue;
    }
    // Sleep until a byte can move: in, unless what waits there is the next op's; out, when queued.
    pollfd fds[2];
    nfds_t n = 0;
    if (!next_op_waits()) fds[n++] = {from_prev_.get(), POLLIN, 0};
    if (!out_.empty()) fds[n++] = {to_next_.get(), POLLOUT, 0};
    const auto slice = std::min<Clock::duration>(kFailureCheckEvery, std::max<Clock::duration>(deadline.left(), {}));
    ::poll(fds, n, std::max(1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(slice).count())));
  }
}

void LeaderRing::begin(std::uint64_t seq, std::string what) {
  seq_ = seq;
  what_ = std::move(what);
  expected_.clear();
  stall_ = StallSchedule(Clock::now());
}

void LeaderRing::expect(std::uint32_t tag, std::uint32_t chunk, void* into, std::size_t bytes) {
  expected_[key(tag, chunk)] = Expected{static_cast<std::uint8_t*>(into), bytes};
}

void LeaderRing::send(std::uint32_t tag, std::uint32_t chunk, const void* data, std::size_t bytes) {
  out_.push_back(Outgoing{Header{tag, chunk, bytes, seq_}, static_cast<const std::uint8_t*>(data)});
  write_some();
}

void LeaderRing::progress() { pump(); }

void LeaderRing::wait_arrived(std::uint32_t tag, std::uint32_t chunk, const Deadline& deadline) {
  const Expected& e = expected_.at(key(tag, chunk));
  drive([&e] { return e.arrived; }, deadline,
        [&] { return fmt::format("chunk {} (tag {}) from {}", chunk, tag, prev_name()); });
}

void LeaderRing::flush(const Deadline& deadline) {
  drive([this] { return out_.empty(); }, deadline,
        [&] { return fmt::format("{} to take {} more message(s)", next_name(), out_.size()); });
}

bool LeaderRing::pump() {
  const bool wrote = write_some();
  const bool read = read_some();
  return wrote || read;
}

bool LeaderRing::write_some() {
  bool moved = false;
  while (!out_.empty()) {
    Outgoing& o = out_.front();
    const std::size_t total = sizeof(Header) + o.header.bytes;
    iovec iov[2];
    int n = 0;
    if (o.sent < sizeof(Header))
      iov[n++] = {reinterpret_cast<std::uint8_t*>(&o.header) + o.sent, sizeof(Header) - o.sent};
    const std::size_t data_sent = o.sent > sizeof(Header) ? o.sent - sizeof(Header) : 0;
    if (o.header.bytes > data_sent)
      iov[n++] = {const_cast<std::uint8_t*>(o.data) + data_sent, o.header.bytes - data_sent};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t w = ::sendmsg(to_next_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail_closed(next_name(), std::strerror(errno));
    }
    moved = true;
    o.sent += static_cast<std::size_t>(w);
    if (o.sent < total) break;  // the socket is full
    out_.pop_front();
  }
  return moved;
}

bool LeaderRing::read_some() {
  bool moved = false;
  for (;;) {
    std::uint8_t* into;
    std::size_t want;
    if (!in_to_) {
      into = reinterpret_cast<std::uint8_t*>(&in_header_) + in_header_read_;
      want = sizeof(Header) - in_header_read_;
    } else {
      into = in_to_->into + in_read_;
      want = in_to_->bytes - in_read_;
    }
    ssize_t r = 0;
    if (!in_to_ && want == 0) {
      // A whole header waits: the previous leader may already be in its next op, whose receives
      // this leader has not posted yet; its message waits in the socket until begin() of it.
      if (next_op_waits()) return moved;
      in_to_ = &match(in_header_);
      in_read_ = 0;
    } else if (want > 0) {
      if (prev_closed_) return moved;
      r = ::recv(from_prev_.get(), into, want, MSG_DONTWAIT);
      if (r == 0) {
        // The previous leader left: an error only for a wait that still expects from it (drive),
        // not for one that just read its last message (it may end the program right after).
        prev_closed_ = true;
        return moved;
      }
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
        fail_closed(prev_name(), std::strerror(errno));
      }
      moved = true;
    }
    if (!in_to_) {
      in_header_read_ += static_cast<std::size_t>(r);
      continue;  // matched above once whole
    }
    in_read_ += static_cast<std::size_t>(r);
    if (in_read_ == in_to_->bytes) {  // the message is in (a 0-byte one as soon as its header is)
      in_to_->arrived = true;
      in_to_ = nullptr;
      in_header_read_ = 0;
    }
  }
}

LeaderRing::Expected& LeaderRing::match(const Header& h) {
  const auto out_of_step = [&](const std::string& why) {
    return ConfigError(fmt::format("{}: {}: the leaders are out of step: {} sent {}", peers_.label, what_,
                                   prev_name(), why));
  };
  if (h.seq != seq_)
    throw out_of_step(fmt::format("a message of op #{} (chunk {}, tag {}) while this leader runs op #{}", h.seq,
                                  h.chunk, h.tag, seq_));
  const auto it = expected_.find(key(h.tag, h.chunk));
  if (it == expected_.end() || it->second.arrived)
    throw out_of_step(fmt::format("chunk {} (tag {}, {} bytes), which this leader does not expect (a call of "
                                  "another size?)",
                                  h.chunk, h.tag, h.bytes));
  if (it->second.bytes != h.bytes)
    throw out_of_step(fmt::format("chunk {} (tag {}) of {} bytes where this leader expects {} (a call of another "
                                  "size or type?)",
                                  h.chunk, h.tag, h.bytes, it->second.bytes));
  return it->second;
}


std::string LeaderRing::prev_name() const { return peers_.name(peers_.prev()); }
std::string LeaderRing::next_name() const { return peers_.name(peers_.next()); }

void LeaderRing::fail_closed(const std::string& who, const std::string& why) {
  throw PeerFailure(
      fmt::format("{}: {} failed: {} is gone from the leaders' ring ({})", peers_.label, what_, who, why));
}

}  // namespace fastrun::hier
