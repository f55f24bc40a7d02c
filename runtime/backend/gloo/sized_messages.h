#pragma once
// Gloo messages that carry their length, for the collectives fastrun runs on Gloo's unbound
// buffers itself (rooted_ops.h). Gloo's tcp transport completes a receive with a SHORTER
// message as if it were whole, so ranks whose counts disagree in an op where data flows one way
// (gather, scatter, broadcast, reduce, or an all_to_allv pair) all completed, the receiver's
// output partly unwritten. Here each payload goes with its length, and the receiver compares:
//   - up to kPackedBytes, in the same message: an 8-byte length, then the payload, through a
//     copy (a second Gloo message cost a small gather 75 % more: 101 -> 178 us on 2 ranks);
//   - above, as a second 8-byte message on the length slot, posted right after the payload (the
//     same round, no extra wait; still measured at +25 % on a 1 MiB broadcast of 2 ranks).
// The two forms use different slots, so ranks whose sizes fall on both sides of kPackedBytes
// (their counts disagree) never mistake one for the other: they stall, and the stalled-op
// check names the mismatch from the ops' counts (stalled_op_check.h). A LONGER message than the
// receive fails Gloo's transport thread on the receiver (transport_failure.h): not silent either.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "fastrun/runtime/duration.h"

namespace fastrun::gloo_backend {

// The length slots' prefix: none that a Gloo collective (gloo/types.h: 0x01-0x08) or fastrun's
// point-to-point messages (p2p_work.h: 0x70, 0x71) use. Each op has its own tag.
constexpr std::uint8_t kLengthSlotPrefix = 0x72;
constexpr std::uint8_t kPackedSlotPrefix = 0x73;  // a length and its payload in one message
constexpr std::size_t kPackedBytes = 64 * 1024;

// A message received with another length than the receive expected.
struct WrongLength {
  int from = 0, to = 0;  // group ranks
  std::uint64_t bytes = 0, expected_bytes = 0;
};

// "rank 0 sends 9 elements to rank 1, which expects 10 from it" (and how many more disagree),
// in bytes where a message is not whole elements; `global_ranks` name the ranks (empty: group
// ranks are global). "" when `wrong` is empty.
std::string describe_wrong_lengths(const std::vector<WrongLength>& wrong, std::size_t element_size,
                                   const std::vector<int>& global_ranks);

// The messages of one op on one rank: post them, wait() for them all, then read wrong_lengths().
class SizedMessages {
 public:
  SizedMessages(std::shared_ptr<::gloo::Context> context, std::uint8_t payload_prefix, std::uint32_t tag,
                Duration timeout);
  // When the op ends by an exception (a peer closed its connection mid-op, or a wrong length), a
  // receive may still be posted, and Gloo's I/O thread may still write into it or signal it
  // (tcp::UnboundBuffer::signalException; TSan saw it race a buffer's destruction in 1 run of 6
  // of a test whose peer exits after a mismatch): then every buffer and message is kept until
  // exit (kept_until_exit.h) instead of destroyed.
  ~SizedMessages();
  SizedMessages(const SizedMessages&) = delete;
  SizedMessages& operator=(const SizedMessages&) = delete;
  // An unbound buffer over the op's `bytes` at `data`, owned (and kept) with the messages.
  ::gloo::transport::UnboundBuffer& buffer(void* data, std::size_t bytes);
  // `bytes` of `buffer` from `offset` to `peer`, with its length.
  void send(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes);
  // A receive of `bytes` into `buffer` at `offset` from `peer`, and of its length.
  void recv(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes);
  // Waits for every message posted since the last wait() (Gloo's timeout applies to each).
  void wait();
  // The receives waited for so far whose message had another length.
  std::vector<WrongLength> wrong_lengths() const;

 private:
  struct Posted {
    bool send = false;
    int peer = 0;
    std::uint64_t expected = 0;  // a receive's posted bytes
    std::uint64_t length = 0;    // the message's: sent, or received once waited for
    ::gloo::transport::UnboundBuffer* payload = nullptr;  // the caller's; null when packed
    std::unique_ptr<::gloo::transport::UnboundBuffer> control;  // over `length`, or `packed`
    std::vector<std::uint8_t> packed;  // the length, then the payload
    std::uint8_t* unpack_to = nullptr;  // a packed receive's payload goes here once it came
  };
  // Posts `p` (its fields above the buffers set) on `buffer`: packed or with a length message.
  void post(Posted& p, ::gloo::transport::UnboundBuffer& buffer, std::size_t offset);

  std::shared_ptr<::gloo::Context> context_;
  std::uint64_t payload_slot_, length_slot_, packed_slot_;
  Duration timeout_;
  struct Owned {
    std::deque<Posted> posted;  // a deque: the length buffers point into its elements
    std::deque<std::unique_ptr<::gloo::transport::UnboundBuffer>> buffers;
  };
  std::shared_ptr<Owned> owned_ = std::make_shared<Owned>();
  std::deque<Posted>& posted_ = owned_->posted;
  std::size_t waited_ = 0;
  int exceptions_;  // std::uncaught_exceptions() when the op began
};

}  // namespace fastrun::gloo_backend
