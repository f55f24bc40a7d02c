#pragma once
// The name of an op ("all_reduce", "send", ...) as the op path carries it: a view of text that
// lives as long as the process, so an Op, its flight record and its checks copy a pointer and a
// length per op, never a string. It is made from a literal (checked at compile time: the
// constructor is consteval) or, for text known only at run time (a peer's fingerprint, a name a
// caller built), interned once with OpName::intern, which keeps one copy of each text for good.
#include <string_view>

namespace fastrun {

class OpName {
 public:
  constexpr OpName() = default;  // ""
  // A literal: OpName("all_reduce"). Compile-time only, so no view of a temporary gets in.
  consteval OpName(const char* literal) : text_(literal) {}
  // Any text: the interned copy (a lock and a lookup; for names made at run time, not per op).
  static OpName intern(std::string_view text);

  constexpr std::string_view view() const { return text_; }
  constexpr operator std::string_view() const { return text_; }
  constexpr bool empty() const { return text_.empty(); }
  friend constexpr bool operator==(OpName a, std::string_view b) { return a.text_ == b; }

 private:
  std::string_view text_ = "";  // never a null pointer: a copy of an empty name stays a valid memcpy
};

}  // namespace fastrun
