#pragma once
// fastrun::serializer<T>: how an object travels in object collectives.
//   static void write(const T&, ByteWriter&);   static T read(ByteReader&);
// Built in: arithmetic types and enums, std::string, std::vector, std::map,
// std::unordered_map, std::pair, std::tuple, std::optional, nested to any depth.
// A user struct opts in with one declaration next to it (same namespace, after the struct):
//   struct Stats { int step; double loss; std::vector<std::string> tags; };
//   FASTRUN_SERIALIZABLE(Stats, step, loss, tags)
// (fields are written in the order listed; the struct must be default-constructible), or by
// specialising fastrun::serializer<T> directly. Wire format: little-endian, lengths as uint64,
// no padding; encode() adds one version byte in front so a mismatch fails loudly.
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fastrun/runtime/objects/byte_io.h"

namespace fastrun {

template <class T, class Enable = void>
struct serializer;  // no definition: an unsupported type fails to compile here

inline constexpr std::uint8_t kSerializationVersion = 1;

template <class T>
concept Serializable = requires(const T& v, ByteWriter& w, ByteReader& r) {
  serializer<T>::write(v, w);
  { serializer<T>::read(r) } -> std::same_as<T>;
};

template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
struct serializer<T> {
  static void write(const T& v, ByteWriter& w) { w.value(v); }
  static T read(ByteReader& r) { return r.value<T>("a number"); }
};

template <>
struct serializer<std::string> {
  static void write(const std::string& v, ByteWriter& w) {
    w.size(v.size());
    w.raw(v.data(), v.size());
  }
  static std::string read(ByteReader& r) {
    std::string s(r.size(1, "a string length"), '\0');
    r.raw(s.data(), s.size(), "string bytes");
    return s;
  }
};

template <class T, class A>
struct serializer<std::vector<T, A>> {
  static void write(const std::vector<T, A>& v, ByteWriter& w) {
    w.size(v.size());
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      w.raw(v.data(), v.size() * sizeof(T));
    } else {
      for (const auto& e : v) serializer<T>::write(e, w);
    }
  }
  static std::vector<T, A> read(ByteReader& r) {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      std::vector<T, A> v(r.size(sizeof(T), "a vector length"));
      r.raw(v.data(), v.size() * sizeof(T), "vector elements");
      return v;
    } else {
      const std::size_t n = r.size(1, "a vector length");
      std::vector<T, A> v;
      v.reserve(n);
      for (std::size_t i = 0; i < n; ++i) v.push_back(serializer<T>::read(r));
      return v;
    }
  }
};

template <class A, class B>
struct serializer<std::pair<A, B>> {
  static void write(const std::pair<A, B>& v, ByteWriter& w) {
    serializer<std::remove_const_t<A>>::write(v.first, w);
    serializer<B>::write(v.second, w);
  }
  static std::pair<A, B> read(ByteReader& r) {
    auto a = serializer<std::remove_const_t<A>>::read(r);
    auto b = serializer<B>::read(r);
    return {std::move(a), std::move(b)};
  }
};

template <class... Ts>
struct serializer<std::tuple<Ts...>> {
  static void write(const std::tuple<Ts...>& v, ByteWriter& w) {
    std::apply([&](const auto&... e) { (serializer<std::decay_t<decltype(e)>>::write(e, w), ...); }, v);
  }
  static std::tuple<Ts...> read(ByteReader& r) {
    // Braced initialisation evaluates left to right: fields come back in order.
    return std::tuple<Ts...>{serializer<Ts>::read(r)...};
  }
};

template <class T>
struct serializer<std::optional<T>> {
  static void write(const std::optional<T>& v, ByteWriter& w) {
    w.value<std::uint8_t>(v ? 1 : 0);
    if (v) serializer<T>::write(*v, w);
  }
  static std::optional<T> read(ByteReader& r) {
    const auto flag = r.value<std::uint8_t>("an optional flag");
    if (flag > 1) throw SerializationError("reading an optional: flag byte " + std::to_string(flag) + " is not 0 or 1");
    if (!flag) return std::nullopt;
    return serializer<T>::read(r);
  }
};

namespace detail {
template <class Map>
struct map_serializer {
  using K = typename Map::key_type;
  using V = typename Map::mapped_type;
  static void write(const Map& m, ByteWriter& w) {
    w.size(m.size());
    for (const auto& [k, v] : m) {
      serializer<K>::write(k, w);
      serializer<V>::write(v, w);
    }
  }
  static Map read(ByteReader& r) {
    const std::size_t n = r.size(1, "a map size");
    Map m;
    for (std::size_t i = 0; i < n; ++i) {
      auto k = serializer<K>::read(r);
      auto v = serializer<V>::read(r);
      m.emplace(std::move(k), std::move(v));
    }
    return m;
  }
};
}  // namespace detail

template <class K, class V, class C, class A>
struct serializer<std::map<K, V, C, A>> : detail::map_serializer<std::map<K, V, C, A>> {};
template <class K, class V, class H, class E, class A>
struct serializer<std::unordered_map<K, V, H, E, A>> : detail::map_serializer<std::unordered_map<K, V, H, E, A>> {};

// User structs declared with FASTRUN_SERIALIZABLE: found by ADL through fastrun_fields().
template <class T>
  requires requires(T& v) { fastrun_fields(v); }
struct serializer<T> {
  static void write(const T& v, ByteWriter& w) {
    std::apply([&](const auto&... f) { (serializer<std::decay_t<decltype(f)>>::write(f, w), ...); },
               fastrun_fields(const_cast<T&>(v)));
  }
  static T read(ByteReader& r) {
    T v{};
    std::apply([&](auto&... f) { ((f = serializer<std::decay_t<decltype(f)>>::read(r)), ...); }, fastrun_fields(v));
    return v;
  }
};

// The whole message: a version byte, then the object.
template <class T>
std::vector<std::uint8_t> encode(const T& value) {
  ByteWriter w;
  w.value<std::uint8_t>(kSerializationVersion);
  serializer<T>::write(value, w);
  return std::move(w.bytes());
}

template <class T>
T decode(const std::uint8_t* data, std::size_t n) {
  ByteReader r(data, n);
  const auto version = r.value<std::uint8_t>("the version byte");
  if (version != kSerializationVersion)
    throw SerializationError("version byte " + std::to_string(version) + ", expected " +
                             std::to_string(kSerializationVersion) + " (mismatched fastrun builds?)");
  T value = serializer<T>::read(r);
  if (r.remaining() != 0)
    throw SerializationError(std::to_string(r.remaining()) + " bytes left over after the object (" +
                             std::to_string(n) + " bytes): the sender serialised a different type");
  return value;
}

}  // namespace fastrun

// FASTRUN_SERIALIZABLE(Type, field, ...): up to 16 fields. Put it in Type's namespace.
#define FASTRUN_PP_EXPAND(x) x
#define FASTRUN_PP_FIELD(f) v.f
#define FASTRUN_PP_MAP1(m, a) m(a)
#define FASTRUN_PP_MAP2(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP1(m, __VA_ARGS__))
#define FASTRUN_PP_MAP3(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP2(m, __VA_ARGS__))
#define FASTRUN_PP_MAP4(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP3(m, __VA_ARGS__))
#define FASTRUN_PP_MAP5(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP4(m, __VA_ARGS__))
#define FASTRUN_PP_MAP6(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP5(m, __VA_ARGS__))
#define FASTRUN_PP_MAP7(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP6(m, __VA_ARGS__))
#define FASTRUN_PP_MAP8(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP7(m, __VA_ARGS__))
#define FASTRUN_PP_MAP9(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP8(m, __VA_ARGS__))
#define FASTRUN_PP_MAP10(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP9(m, __VA_ARGS__))
#define FASTRUN_PP_MAP11(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP10(m, __VA_ARGS__))
#define FASTRUN_PP_MAP12(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP11(m, __VA_ARGS__))
#define FASTRUN_PP_MAP13(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP12(m, __VA_ARGS__))
#define FASTRUN_PP_MAP14(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP13(m, __VA_ARGS__))
#define FASTRUN_PP_MAP15(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP14(m, __VA_ARGS__))
#define FASTRUN_PP_MAP16(m, a, ...) m(a), FASTRUN_PP_EXPAND(FASTRUN_PP_MAP15(m, __VA_ARGS__))
#define FASTRUN_PP_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, NAME, ...) NAME
#define FASTRUN_PP_MAP(m, ...)                                                                                    \
  FASTRUN_PP_EXPAND(FASTRUN_PP_PICK(__VA_ARGS__, FASTRUN_PP_MAP16, FASTRUN_PP_MAP15, FASTRUN_PP_MAP14,         \
                                    FASTRUN_PP_MAP13, FASTRUN_PP_MAP12, FASTRUN_PP_MAP11, FASTRUN_PP_MAP10,   \
                                    FASTRUN_PP_MAP9, FASTRUN_PP_MAP8, FASTRUN_PP_MAP7, FASTRUN_PP_MAP6,       \
                                    FASTRUN_PP_MAP5, FASTRUN_PP_MAP4, FASTRUN_PP_MAP3, FASTRUN_PP_MAP2,       \
                                    FASTRUN_PP_MAP1)(m, __VA_ARGS__))

#define FASTRUN_SERIALIZABLE(Type, ...) \
  [[maybe_unused]] inline auto fastrun_fields(Type& v) { return std::tie(FASTRUN_PP_MAP(FASTRUN_PP_FIELD, __VA_ARGS__)); }
