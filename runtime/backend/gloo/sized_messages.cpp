#include "fastrun/runtime/backend/gloo/sized_messages.h"

#include <cstring>

#include <fmt/format.h>
#include <gloo/types.h>

#include "fastrun/runtime/process_group/rank_name.h"

namespace fastrun::gloo_backend {

std::string describe_wrong_lengths(const std::vector<WrongLength>& wrong, std::size_t element_size,
                                   const std::vector<int>& global_ranks) {
  if (wrong.empty()) return "";
  const WrongLength& w = wrong.front();
  const int from = global_rank_at(w.from, global_ranks), to = global_rank_at(w.to, global_ranks);
  const std::uint64_t elements = w.bytes / element_size, expected = w.expected_bytes / element_size;
  std::string text =
      w.bytes % element_size  // not whole elements: the peer's dtype differs
          ? fmt::format("rank {} sends {} bytes to rank {}, which expects {} elements of {} bytes from it", from,
                        w.bytes, to, expected, element_size)
          : fmt::format("rank {} sends {} element{} to rank {}, which expects {} from it", from, elements,
                        elements == 1 ? "" : "s", to, expected);
  if (const std::size_t more = wrong.size() - 1)
    text += fmt::format(" (and {} more pair{} disagree{})", more, more == 1 ? "" : "s", more == 1 ? "s" : "");
  return text;
}

SizedMessages::SizedMessages(std::shared_ptr<::gloo::Context> context, std::uint8_t payload_prefix,
                             std::uint32_t tag, Duration timeout)
    : context_(std::move(context)),
      payload_slot_(::gloo::Slot::build(payload_prefix, tag)),
      length_slot_(::gloo::Slot::build(kLengthSlotPrefix, tag)),
      packed_slot_(::gloo::Slot::build(kPackedSlotPrefix, tag)),
      timeout_(timeout) {}

void SizedMessages::send(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes) {
  std::uint64_t& length = lengths_.emplace_back(bytes);
  Posted& p = posted_.emplace_back(Posted{nullptr, nullptr, {}, nullptr, true, peer, 0});
  if (bytes <= kPackedBytes) {
    p.packed.resize(sizeof length + bytes);
    std::memcpy(p.packed.data(), &length, sizeof length);
    std::memcpy(p.packed.data() + sizeof length, static_cast<std::uint8_t*>(buffer.ptr) + offset, bytes);
    p.length = context_->createUnboundBuffer(p.packed.data(), p.packed.size());
    p.length->send(peer, packed_slot_);
    return;
  }
  p.payload = &buffer;
  p.length = context_->createUnboundBuffer(&length, sizeof length);
  buffer.send(peer, payload_slot_, offset, bytes);
  p.length->send(peer, length_slot_);
}

void SizedMessages::recv(::gloo::transport::UnboundBuffer& buffer, int peer, std::size_t offset, std::size_t bytes) {
  std::uint64_t& length = lengths_.emplace_back(bytes);
  Posted& p = posted_.emplace_back(Posted{nullptr, nullptr, {}, nullptr, false, peer, bytes});
  if (bytes <= kPackedBytes) {
    p.packed.resize(sizeof length + bytes);
    p.unpack_to = static_cast<std::uint8_t*>(buffer.ptr) + offset;
    p.length = context_->createUnboundBuffer(p.packed.data(), p.packed.size());
    p.length->recv(peer, packed_slot_);
    return;
  }
  p.payload = &buffer;
  p.length = context_->createUnboundBuffer(&length, sizeof length);
  buffer.recv(peer, payload_slot_, offset, bytes);
  p.length->recv(peer, length_slot_);
}

void SizedMessages::wait() {
  for (; waited_ < posted_.size(); ++waited_) {
    Posted& p = posted_[waited_];
    if (p.send) {
      p.length->waitSend(timeout_);
      if (p.payload) p.payload->waitSend(timeout_);
      continue;
    }
    p.length->waitRecv(timeout_);
    if (p.payload) {
      p.payload->waitRecv(timeout_);
      continue;
    }
    std::uint64_t& length = lengths_[waited_];
    std::memcpy(&length, p.packed.data(), sizeof length);
    if (length == p.expected) std::memcpy(p.unpack_to, p.packed.data() + sizeof length, length);
  }
}

std::vector<WrongLength> SizedMessages::wrong_lengths() const {
  std::vector<WrongLength> wrong;
  for (std::size_t i = 0; i < waited_; ++i)
    if (!posted_[i].send && lengths_[i] != posted_[i].expected)
      wrong.push_back({posted_[i].peer, context_->rank, lengths_[i], posted_[i].expected});
  return wrong;
}

}  // namespace fastrun::gloo_backend
