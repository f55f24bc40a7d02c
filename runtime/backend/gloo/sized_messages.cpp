#include "fastrun/runtime/backend/gloo/sized_messages.h"

#include <cstring>
#include <exception>

#include <fmt/format.h>
#include <gloo/types.h>

#include "fastrun/runtime/backend/gloo/kept_until_exit.h"
#include "fastrun/runtime/process_group/pair_counts.h"
#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun::gloo_backend {

std::string describe_wrong_lengths(const std::vector<WrongLength>& wrong, std::size_t element_size,
                                   const std::vector<int>& global_ranks) {
  if (wrong.empty()) return "";
  const WrongLength& w = wrong.front();
  const std::uint64_t expected = w.expected_bytes / element_size;
  const std::string first =
      w.bytes % element_size  // not whole elements: the peer's dtype differs
          ? fmt::format("rank {} sends {} bytes to rank {}, which expects {} elements of {} bytes from it",
                        global_rank_at(w.from, global_ranks), w.bytes, global_rank_at(w.to, global_ranks), expected,
                        element_size)
          : describe_pair(w.from, w.to, w.bytes / element_size, expected, global_ranks);
  return first + more_pairs(wrong.size() - 1);
}

SizedMessages::SizedMessages(std::shared_ptr<::gloo::Context> context, std::uint8_t payload_prefix,
                             std::uint32_t tag, Duration timeout)
    : context_(std::move(context)),
      payload_slot_(::gloo::Slot::build(payload_prefix, tag)),
      length_slot_(::gloo::Slot::build(kLengthSlotPrefix, tag)),
      packed_slot_(::gloo::Slot::build(kPackedSlotPrefix, tag)),
      timeout_(timeout),
      exceptions_(std::uncaught_exceptions()) {}

SizedMessages::~SizedMessages() {
  if (std::uncaught_exceptions() > exceptions_) keep_until_exit(owned_);
}

::gloo::transport::UnboundBuffer& SizedMessages::buffer(void* data, std::size_t bytes) {
  owned_->buffers.push_back(context_->createUnboundBuffer(data, bytes));
  return *owned_->buffers.back();
}

void SizedMessages::send(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes) {
  Posted& p = posted_.emplace_back();
  p.send = true;
  p.peer = peer;
  p.length = bytes;
  post(p, buffer, offset);
}

void SizedMessages::recv(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes) {
  Posted& p = posted_.emplace_back();
  p.peer = peer;
  p.expected = p.length = bytes;
  post(p, buffer, offset);
}

void SizedMessages::post(Posted& p, ::gloo::transport::UnboundBuffer& buffer, std::size_t offset) {
  std::uint8_t* at = static_cast<std::uint8_t*>(buffer.ptr) + offset;
  if (p.length <= kPackedBytes) {
    p.packed.resize(sizeof p.length + p.length);
    if (p.send) {
      std::memcpy(p.packed.data(), &p.length, sizeof p.length);
      std::memcpy(p.packed.data() + sizeof p.length, at, p.length);
    } else {
      p.unpack_to = at;
    }
    p.control = context_->createUnboundBuffer(p.packed.data(), p.packed.size());
    if (p.send) p.control->send(p.peer, packed_slot_);
    else p.control->recv(p.peer, packed_slot_);
    return;
  }
  p.payload = &buffer;
  p.control = context_->createUnboundBuffer(&p.length, sizeof p.length);
  if (p.send) {
    buffer.send(p.peer, payload_slot_, offset, p.length);
    p.control->send(p.peer, length_slot_);
  } else {
    buffer.recv(p.peer, payload_slot_, offset, p.length);
    p.control->recv(p.peer, length_slot_);
  }
}

void SizedMessages::wait() {
  for (; waited_ < posted_.size(); ++waited_) {
    Posted& p = posted_[waited_];
    if (p.send) {
      p.control->waitSend(timeout_);
      if (p.payload) p.payload->waitSend(timeout_);
      continue;
    }
    p.control->waitRecv(timeout_);
    if (p.payload) {
      p.payload->waitRecv(timeout_);
      continue;
    }
    std::memcpy(&p.length, p.packed.data(), sizeof p.length);
    if (p.length == p.expected) std::memcpy(p.unpack_to, p.packed.data() + sizeof p.length, p.length);
  }
}

std::vector<WrongLength> SizedMessages::wrong_lengths() const {
  std::vector<WrongLength> wrong;
  for (std::size_t i = 0; i < waited_; ++i) {
    const Posted& p = posted_[i];
    if (!p.send && p.length != p.expected) wrong.push_back({p.peer, context_->rank, p.length, p.expected});
  }
  return wrong;
}

}  // namespace fastrun::gloo_backend
