#pragma once
// Object collectives over fastrun::serializer<T> (serializer.h). Blocking calls, collective
// over `group` (every member calls, same order). Every call takes its group last, as a pointer,
// in torch's order (broadcast_object_list(objects, src, group)): without one it acts on the
// current context's world (join/context.h), and without a context on a world of one. They run on
// the group's CPU companion
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

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
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

// The group a call acts on: `group`, else the current context's world (kept alive by `ctx`
// for the call), else none: a world of one, where this process is rank 0 of 1.
struct CallGroup {
  std::shared_ptr<Context> ctx;
  Group* group = nullptr;
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
  // No data moves: a world of one, or FASTRUN_NO_SYNC=2.
  bool local_only() const { return size() == 1 || no_sync_level() >= 2; }
};
CallGroup call_group(Group* group);
// ConfigError unless `root` is a rank of the call's group, worded as every rooted op's
// ("gather_object: root 3 is not a rank of the group (0..2)"): also in a world of one and at
// FASTRUN_NO_SYNC=2, where no data moves, so that a bad root fails the same on any world size.
void check_root(const char* op, int root, const CallGroup& g);
// The group of a point-to-point call, which needs a peer: ConfigError without a group or
// context, and for a peer or tag the group's send/recv would refuse, named as the call
// ("send_object: peer 7 is not a rank of the group (0..2)"), before anything is sent.
Group& p2p_group(CallGroup& g, const char* op, int peer, int tag);

}  // namespace objects_detail

// A call written the old way round (the group first) names the rule instead of a template error.
#define FASTRUN_GROUP_COMES_LAST(T, call)                                                       \
  static_assert(!std::is_base_of_v<Group, std::remove_pointer_t<std::decay_t<T>>>,             \
                call ": the group comes last, as a pointer (docs/runtime.md, \"Object collectives\")")

// Every member gets `root`'s value (root: rank within the group).
template <class T>
T broadcast_object(T value, int root = 0, Group* group = nullptr) {
  FASTRUN_GROUP_COMES_LAST(T, "broadcast_object(value, root, &group)");
  objects_detail::CallGroup g = objects_detail::call_group(group);
  objects_detail::check_root("broadcast_object", root, g);
  if (g.local_only()) return value;
  std::vector<std::uint8_t> bytes;
  if (g.rank() == root) bytes = encode(value);
  bytes = objects_detail::broadcast_bytes(*g.group, std::move(bytes), root);
  if (g.rank() == root) return value;
  return objects_detail::decode_from<T>(*g.group, "broadcast_object", root, bytes);
}

// Every member's value, in group rank order, on every member.
template <class T>
std::vector<T> all_gather_object(const T& value, Group* group = nullptr) {
  FASTRUN_GROUP_COMES_LAST(T, "all_gather_object(value, &group)");
  objects_detail::CallGroup g = objects_detail::call_group(group);
  if (g.local_only()) return {value};
  const auto all = objects_detail::all_gather_bytes(*g.group, encode(value));
  std::vector<T> out;
  out.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == g.rank()) out.push_back(value);
    else out.push_back(objects_detail::decode_from<T>(*g.group, "all_gather_object", static_cast<int>(r), all[r]));
  }
  return out;
}

// Every member's value on `root`; nullopt elsewhere.
template <class T>
std::optional<std::vector<T>> gather_object(const T& value, int root = 0, Group* group = nullptr) {
  FASTRUN_GROUP_COMES_LAST(T, "gather_object(value, root, &group)");
  objects_detail::CallGroup g = objects_detail::call_group(group);
  objects_detail::check_root("gather_object", root, g);
  if (g.local_only()) {
    if (g.rank() != root) return std::nullopt;
    return std::vector<T>{value};
  }
  const auto all = objects_detail::all_gather_bytes(*g.group, encode(value));
  if (g.rank() != root) return std::nullopt;
  std::vector<T> out;
  out.reserve(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == g.rank()) out.push_back(value);
    else out.push_back(objects_detail::decode_from<T>(*g.group, "gather_object", static_cast<int>(r), all[r]));
  }
  return out;
}

// Member r gets values[r] of the root's `values` (which must have one entry per member; other
// ranks' `values` are not read and may be empty). torch's scatter_object_list.
template <class T>
T scatter_object(const std::vector<T>& values, int root = 0, Group* group = nullptr) {
  FASTRUN_GROUP_COMES_LAST(T, "scatter_object(values, root, &group)");
  objects_detail::CallGroup g = objects_detail::call_group(group);
  objects_detail::check_root("scatter_object", root, g);
  if (g.rank() == root && values.size() != static_cast<std::size_t>(g.size()))
    throw ConfigError("scatter_object: the root has " + std::to_string(values.size()) + " values for a group of " +
                      std::to_string(g.size()) + " ranks; it needs one per rank");
  if (g.local_only()) {
    if (g.rank() != root) objects_detail::throw_no_local_result("scatter_object");
    return values[static_cast<std::size_t>(root)];
  }
  std::vector<std::vector<std::uint8_t>> encoded;
  if (g.rank() == root)
    for (const T& v : values) encoded.push_back(encode(v));
  const auto bytes = objects_detail::scatter_bytes(*g.group, encoded, root);
  if (g.rank() == root) return values[static_cast<std::size_t>(root)];
  return objects_detail::decode_from<T>(*g.group, "scatter_object", root, bytes);
}

// Point-to-point objects: `peer` is a rank of the group other than this one; a recv_object
// takes the send_objects of that peer with the same tag in order. Blocking: on gloo (and nccl
// jobs) a send_object returns only once the peer has received it, so two ranks must not both
// send to each other first (shm buffers small messages, but do not rely on it). Without a group
// or a current context there is no peer: ConfigError.
template <class T>
void send_object(const T& value, int peer, int tag = 0, Group* group = nullptr) {
  FASTRUN_GROUP_COMES_LAST(T, "send_object(value, peer, tag, &group)");
  if (no_sync_level() >= 2) return;
  objects_detail::CallGroup g = objects_detail::call_group(group);
  objects_detail::send_bytes(objects_detail::p2p_group(g, "send_object", peer, tag), encode(value), peer, tag);
}

template <class T>
T recv_object(int peer, int tag = 0, Group* group = nullptr) {
  if (no_sync_level() >= 2) objects_detail::throw_no_local_result("recv_object");
  objects_detail::CallGroup g = objects_detail::call_group(group);
  Group& on = objects_detail::p2p_group(g, "recv_object", peer, tag);
  return objects_detail::decode_from<T>(on, "recv_object", peer, objects_detail::recv_bytes(on, peer, tag));
}

#undef FASTRUN_GROUP_COMES_LAST

}  // namespace fastrun
