#pragma once
// The characters a user-given name may carry into a file name, a /dev/shm segment name or a
// store key's file: A-Z a-z 0-9 . _ - (no '/', no spaces, nothing a shell or a path would read
// differently). Each caller adds its own length and first-character rules.
#include <string_view>

namespace fastrun::os {

constexpr bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

// True when every character of `name` is a name character (an empty name is, too).
constexpr bool all_name_chars(std::string_view name) {
  for (char c : name)
    if (!is_name_char(c)) return false;
  return true;
}

}  // namespace fastrun::os
