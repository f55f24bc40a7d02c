#pragma once
// Object collectives over fastrun::serializer<T> (serializer.h). Blocking calls, collective
// over `group` (every member calls, same order), run on the group's CPU companion
// (Group::cpu_group(): the group itself on gloo/shm, a gloo group over the same ranks in NCCL
// jobs), so objects never touch a device.
// Protocol: sizes first, then payloads (torch's *_object* protocol; docs/runtime.md, "Object collectives"):
//   broadcast_object:   broadcast the int64 size, then the bytes;
//   all_gather_object:  all-gather the int64 sizes, pad to the largest, all-gather the bytes;
//   gather_object:      as all_gather_object, but only `root` decodes (the others get nullopt);
//   scatter_object:     broadcast the largest payload's int64 word count, scatter the int64
//                       sizes, scatter the padded payloads;
//   send_object / recv_object: a send/recv of the int64 size, then one of the bytes, both with
//                       the caller's tag (messages between two ranks with one tag keep their order).
// Objects of different sizes on different ranks work; a decode error names the sending rank.
// FASTRUN_NO_SYNC=2 (no_sync.h): nothing is sent; broadcast_object returns `value` unchanged on
// every rank, all_gather_object returns {value}, gather_object returns {value} on the root only,
// scatter_object returns the root's own entry on the root (and throws ConfigError elsewhere:
// there is nothing local to return), send_object sends nothing and recv_object throws
// ConfigError for the same reason.
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fastrun/runtime/context.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/objects/serializer.h"
#include "fastrun/runtime/process_group/group.h"
#include "fastrun/runtime/process_group/no_sync.h"

namespace fastrun {
namespace objects_detail {

// Byte-level steps (object_collectives.cpp). They run on group.cpu_group().
std::vector<std::uint8_t> broadcast_bytes(Group& group, std::vector<std::uint8_t> bytes, int root);
// Every rank's bytes, in group rank order.
std::vector<std::vector<std::uint8_t>> all_gather_bytes(Group& group, const std::vector<std::uint8_t>& bytes);
// `root`'s per-rank payloads (one per member, read on the root only): each member gets its own.
std::vector<std::uint8_t> scatter_bytes(Group& group, const std::vector<std::vector<std::uint8_t>>& per_rank,
                                        int root);
void send_bytes(Group& group, const std::vector<std::uint8_t>& bytes, int peer, int tag);
std::vector<std::uint8_t> recv_bytes(Group& group, int peer, int tag);
// ConfigError: `op` has no local result under FASTRUN_NO_SYNC=2.
[[noreturn]] void throw_no_local_result(const char* op);
// Rethrows a SerializationError as one naming the operation and the sending rank.
[[noreturn]] void throw_decode_error(Group& group, const char* op, int sender, std::size_t bytes,
                                     const std::exception& e);

template <class T>
T decode_from(Group& group, const char* op, int sender, const std::vector<std::uint8_t>& bytes) {
  try {
    return decode<T>(bytes.data(), bytes.size());
  } catch (const SerializationError& e) {
    throw_decode_error(group, op, sender, bytes.size(), e);
  }
}

}  // namespace objects_detail

// Every member gets `root`'s value (root: rank within the group). The one broadcast_object, in
// torch's argument order (obj, src, group): without a group it acts on the current context's
// world (context.h), and without a context it is a world of one that returns `value`.
template <class T>
T broadcast_object(T value, int root = 0, Group* group = nullptr) {
  static_assert(!std::is_base_of_v<Group, std::decay_t<T>>, "broadcast_object(value, root, &group): the group comes last");
  std::shared_ptr<Context> ctx;  // keeps the default world alive for the call
  if (group == nullptr) {
    ctx = current_context();
    if (!ctx) return value;
    group = &ctx->world();
  }
  if (no_sync_level() >= 2 || group->size() == 1) return value;
  std::vector<std::uint8_t> bytes;
  if (group->rank() == root) bytes = encode(value);
  bytes = objects_detail::broadcast_bytes(*group, std::move(bytes), root);
  if (group->rank() == root) return value;
  return objects_detail::decode_from<T>(*group, "broadcast_object", root, bytes);
}

// Every member's value, in group rank order, on every member.
template <class T>
std::vector<T> all_gather_object(Group& group, const T& value) {
  if (no_sync_level() >= 2 || group.size() == 1) return {value};
  const auto all = objects_detail::all_gather_bytes(group, encode(value));
  std::vector<T> out;
  out.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == group.rank()) out.push_back(value);
    else out.push_back(objects_detail::decode_from<T>(group, "all_gather_object", static_cast<int>(r), all[r]));
  }
  return out;
}

// Every member's value on `root`; nullopt elsewhere.
template <class T>
std::optional<std::vector<T>> gather_object(Group& group, const T& value, int root = 0) {
  if (no_sync_level() >= 2 || group.size() == 1) {
    if (group.rank() != root) return std::nullopt;
    return std::vector<T>{value};
  }
  const auto all = objects_detail::all_gather_bytes(group, encode(value));
  if (group.rank() != root) return std::nullopt;
  std::vector<T> out;
  out.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == group.rank()) out.push_back(value);
    else out.push_back(objects_detail::decode_from<T>(group, "gather_object", static_cast<int>(r), all[r]));
  }
  return out;
}

// Member r gets values[r] of the root's `values` (which must have one entry per member; other
// ranks' `values` are not read and may be empty). torch's scatter_object_list.
template <class T>
T scatter_object(Group& group, const std::vector<T>& values, int root = 0) {
  if (group.rank() == root && values.size() != static_cast<std::size_t>(group.size()))
    throw ConfigError("scatter_object: the root has " + std::to_string(values.size()) + " values for a group of " +
                      std::to_string(group.size()) + " ranks; it needs one per rank");
  if (no_sync_level() >= 2 || group.size() == 1) {
    if (group.rank() != root) objects_detail::throw_no_local_result("scatter_object");
    return values[static_cast<std::size_t>(root)];
  }
  std::vector<std::vector<std::uint8_t>> encoded;
  if (group.rank() == root)
    for (const T& v : values) encoded.push_back(encode(v));
  const auto bytes = objects_detail::scatter_bytes(group, encoded, root);
  if (group.rank() == root) return values[static_cast<std::size_t>(root)];
  return objects_detail::decode_from<T>(group, "scatter_object", root, bytes);
}

// Point-to-point objects: `peer` is a rank of the group other than this one; a recv_object
// takes the send_objects of that peer with the same tag in order. Blocking: on gloo (and nccl
// jobs) a send_object returns only once the peer has received it, so two ranks must not both
// send to each other first (shm buffers small messages, but do not rely on it).
template <class T>
void send_object(Group& group, const T& value, int peer, int tag = 0) {
  if (no_sync_level() >= 2) return;
  objects_detail::send_bytes(group, encode(value), peer, tag);
}

template <class T>
T recv_object(Group& group, int peer, int tag = 0) {
  if (no_sync_level() >= 2) objects_detail::throw_no_local_result("recv_object");
  return objects_detail::decode_from<T>(group, "recv_object", peer, objects_detail::recv_bytes(group, peer, tag));
}

}  // namespace fastrun
