#pragma once
// Point-to-point messages on gloo (send, recv, batch_send_recv; docs/collectives.md).
//
// Each message is two Gloo unbound-buffer messages posted at once on the issuing thread: its
// byte count (8 bytes, slot kP2PLengthSlotPrefix) and its payload (slot kP2PSlotPrefix), both
// with the user's tag. Gloo's transport reports neither size nor a short message: a recv larger
// than the message it matches would complete silently with only the message's bytes written.
// The count lets wait() fail such a recv with the error shm gives (same wording, see
// p2p_size_mismatch), the group staying usable as on shm. Both halves are posted at once, so
// Gloo's transport threads move the payload without this rank calling in (no deferred posting:
// that would need a progress thread to keep MPI's "post, then do anything" deadlock-free).
// A message LARGER than the recv cannot be refused: Gloo's transport thread throws
// EnforceNotMet on it (transport_failure.h), so the group fails; the recv's error still says
// which message and both sizes.
//
// wait() waits for each message in turn, in one Gloo call per buffer with the time left: a Gloo
// wait that times out closes the context's pairs, so it cannot be sliced. Hence completed() is
// true only once a wait() returned.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "fastrun/runtime/process_group/group_health.h"
#include "fastrun/runtime/process_group/in_flight.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::gloo_backend {

// Slot prefixes of user messages: none that a Gloo collective uses (gloo/types.h: 0x01-0x08).
constexpr std::uint8_t kP2PSlotPrefix = 0x70;
constexpr std::uint8_t kP2PLengthSlotPrefix = 0x71;

// Turns what a Gloo call threw into fastrun's error (gloo_backend.cpp's translate).
using TranslateError = std::exception_ptr (*)(GroupHealth&, const std::string& what, std::exception_ptr);

// Who this rank is, for messages: "gloo recv on group 'world' rank 1: recv from rank 0 tag 3 (48 bytes)".
struct P2PNames {
  std::string group;
  int rank = 0;
  std::vector<int> global_ranks;
};

// What a failure of a Gloo transport thread (transport_failure.h) tells a group's Works: set by
// gloo_backend.cpp's on_transport_failure before it fails the group's ops in flight.
struct TransportFailed {
  std::atomic<bool> any{false};  // a transport thread of this process failed: the Works may be aborted
  std::atomic<bool> own{false};  // it was this group's: the only writer of their buffers, parked for good
};

// In its group runtime's registry of ops in flight (in_flight.h). Failed from outside only once
// a Gloo transport thread failed: a failure without one (a stalled-op check) leaves the Work to
// end at Gloo's own timeout, which closes the pairs first; woken earlier, its wait would let the
// caller free a buffer that a late message may still be written into.
class GlooP2PWork final : public Work, public InFlightOp {
 public:
  static constexpr std::uint64_t kNoLength = ~std::uint64_t{0};
  GlooP2PWork(::gloo::Context& context, std::shared_ptr<GroupHealth> health, const std::vector<P2POp>& ops,
              const char* what, std::uint64_t seq, const P2PNames& names, TranslateError translate,
              std::shared_ptr<const TransportFailed> transport_failed);
  ~GlooP2PWork() override;
  GlooP2PWork(const GlooP2PWork&) = delete;
  GlooP2PWork& operator=(const GlooP2PWork&) = delete;

  // Wakes a wait() in progress, which then reports `error` (or, for a recv whose message is
  // larger than its buffer when this group's transport failed, says so). The first error stands.
  void abort(std::exception_ptr error);
  void fail_from_outside(std::exception_ptr error) override {
    if (transport_failed_->any.load(std::memory_order_acquire)) abort(std::move(error));
  }
  bool ended() override { return ended_.load(std::memory_order_acquire); }

  void wait(Duration timeout) override;
  bool completed() override;

 private:
  struct Message {
    P2POp op;
    // Sent, or where the received count lands (kNoLength until then).
    std::unique_ptr<std::uint64_t> length;
    std::unique_ptr<::gloo::transport::UnboundBuffer> length_buffer;
    std::unique_ptr<::gloo::transport::UnboundBuffer> payload;
    bool length_known = false;  // a recv's count arrived (*length is the message's)
  };
  // False when aborted; throws what Gloo threw (a timeout, a closed connection).
  bool wait_for(Message& m, std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<GroupHealth> health_;
  std::vector<Message> messages_;
  std::string what_;   // "recv": where a wrong-sized message was found
  std::uint64_t seq_;  // op #seq (group_runtime.h): Gloo's errors name it "recv #3"
  P2PNames names_;
  TranslateError translate_;
  std::mutex mutex_;
  bool done_ = false;
  std::atomic<bool> ended_{false};  // done_, readable while a wait() holds mutex_
  std::exception_ptr error_;
  std::mutex abort_mutex_;
  std::exception_ptr aborted_;
  std::shared_ptr<const TransportFailed> transport_failed_;
};

// "<backend> <op> on group 'G' rank R: recv from rank P tag T (B bytes): the message has M bytes,
// the buffer B (count x dtype must match the send's)": the wording of shm's P2PEngine, so
// that both backends report a wrong-sized recv the same way.
std::string p2p_size_mismatch(std::string_view backend, std::string_view op, const P2PNames& names, const P2POp& recv,
                              std::uint64_t message_bytes);

}  // namespace fastrun::gloo_backend
