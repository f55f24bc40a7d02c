#pragma once
// The transport between the nodes of the two-level ops: a ring of TCP connections among one rank
// of each node (the leaders; with rails, chain_all_reduce.h, the local ranks q of all nodes have
// a ring each), one to the next node's (node k+1, the last to node 0) and one from the previous,
// driven by the thread that runs the op. Every message of the chain, the broadcast and the
// all-gather goes that way round, so a ring is all they need. "Leader" below is that rank.
//
// Why not the leaders' gloo group: Gloo's receives complete on its I/O thread, which wakes the
// waiting thread, and both sleep between messages. On the 2-core VM with 4 ranks a gloo message
// cost about 80 us one way, mostly wake-ups (docs/benchmarks.md, "All-reduce across hosts"), and
// the op is a chain of them. Here the op's own thread writes and reads the sockets, non-blocking,
// and while it waits it polls them, yielding the CPU between polls for kYieldFor before it sleeps
// in poll(2) (as Open MPI's TCP path does with mpi_yield_when_idle).
//
// Messages carry a header (tag, chunk, bytes, op number; in the machine's byte order: the leaders
// of a job run one build); a receive is posted before its message
// is read (expect), so a message is read straight into its place, and a message of the next op
// (the previous leader may be there already) stays in the socket until that op has begun. A message nobody expects, or
// of another size or op, is the leaders out of step: an error naming both, never a wrong result.
// Waits end with TimeoutError naming the leader that did not send, PeerFailure when its
// connection closes or the job records a failure (checked every kFailureCheckEvery of waiting),
// or when cancel() was called from another thread, and ConfigError when the mismatch check finds
// the ranks in different ops. So an op waiting here can run on the caller's thread and on the
// caller's buffers: it never blocks where a failure cannot reach it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fastrun/runtime/backend/hier/leader_ring_connect.h"
#include "fastrun/runtime/deadline.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/process_group/stalled_op_check.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::hier {

class LeaderRing {
 public:
  // How long a wait polls, yielding the CPU between polls, before it sleeps in poll(2): as long
  // as the node groups' waits (hier_backend.cpp, kNodeWaitsYieldFor).
  static constexpr std::chrono::microseconds kYieldFor{2000};
  static constexpr std::chrono::milliseconds kFailureCheckEvery{50};
  // What a wait consults besides the sockets.
  struct Watch {
    // The job's recorded failure, if any (GroupHealth::recorded_failure): every kFailureCheckEvery.
    std::function<std::optional<std::string>()> failed;
    // The mismatch check's verdict, if any (stalled_op_check.h): on StallSchedule's times from
    // the op's begin(); a verdict ends the wait with ConfigError.
    std::function<std::optional<std::string>()> stalled;
  };

  // Collective over the leaders: listens on `host` (the address gloo binds), publishes its
  // address under `store` ("ring/<index>"), connects to the next leader and accepts the
  // previous one, within `timeout`. With one leader there is nothing to connect.
  LeaderRing(Store& store, const std::string& host, RingPeers peers, Duration timeout, Watch watch);
  LeaderRing(const LeaderRing&) = delete;
  LeaderRing& operator=(const LeaderRing&) = delete;

  int index() const { return peers_.index; }
  int size() const { return peers_.count(); }

  // Starts op `seq`: its messages carry it, and a message of another op is an error.
  void begin(std::uint64_t seq, std::string what);
  // Where message (tag, chunk) from the previous leader lands: `bytes` at `into`.
  void expect(std::uint32_t tag, std::uint32_t chunk, void* into, std::size_t bytes);
  // Queues message (tag, chunk) to the next leader and writes what the socket takes now;
  // `data` must stay valid until flush() returned.
  void send(std::uint32_t tag, std::uint32_t chunk, const void* data, std::size_t bytes);
  // Moves what can move now without waiting (a caller between steps keeps the link busy).
  void progress();
  // Drives the sockets until message (tag, chunk) has arrived.
  void wait_arrived(std::uint32_t tag, std::uint32_t chunk, const Deadline& deadline);
  // Drives the sockets until every queued message is written.
  void flush(const Deadline& deadline);
  // From any thread: the wait in progress (or the next) throws PeerFailure.
  void cancel() { cancelled_.store(true, std::memory_order_release); }

 private:
  struct Header {
    std::uint32_t tag, chunk;
    std::uint64_t bytes, seq;
  };
  struct Outgoing {
    Header header;
    const std::uint8_t* data;
    std::size_t sent = 0;  // of sizeof(Header) + header.bytes
  };
  struct Expected {
    std::uint8_t* into;
    std::size_t bytes;
    bool arrived = false;
  };
  static std::uint64_t key(std::uint32_t tag, std::uint32_t chunk) { return (std::uint64_t{tag} << 32) | chunk; }

  // One pass of non-blocking writes and reads; true when a byte moved.
  bool pump();
  bool write_some();
  bool read_some();
  // A whole header of a later op is read and waits for that op's receives.
  bool next_op_waits() const { return !in_to_ && in_header_read_ == sizeof(Header) && in_header_.seq > seq_; }
  // Where an incoming header's payload goes, checked against what was expected.
  Expected& match(const Header& h);
  // Waits until `done()`: pumps, yields, sleeps in poll(2); `what()` says what it waits for
  // (called only for a message). Templates: a wait costs no std::function.
  template <typename Done, typename What>
  void drive(Done&& done, const Deadline& deadline, What&& what);
  std::string prev_name() const;
  std::string next_name() const;
  [[noreturn]] void fail_closed(const std::string& who, const std::string& why);

  RingPeers peers_;
  Watch watch_;
  StallSchedule stall_{StallSchedule::Clock::time_point{}};
  os::UniqueFd to_next_, from_prev_;
  std::atomic<bool> cancelled_{false};
  std::uint64_t seq_ = 0;
  std::string what_;  // "all_reduce #7"
  std::deque<Outgoing> out_;
  std::map<std::uint64_t, Expected> expected_;
  // The incoming message being read: its header (partly read while in_header_ < sizeof), then
  // its payload into `in_to_`.
  Header in_header_{};
  std::size_t in_header_read_ = 0;
  Expected* in_to_ = nullptr;
  std::size_t in_read_ = 0;
  bool prev_closed_ = false;  // the previous leader closed its connection (EOF read)
};

}  // namespace fastrun::hier
