#pragma once
// Splitting a list flag or variable ("2,4,8", "40:1:0") into its fields, the one way every
// reader does it: n separators make n + 1 fields, empty ones included, so that "1,,2", "1," and
// "" reach the field's own parser, which refuses the empty field in its own words.
#include <string_view>
#include <vector>

namespace fastrun::text {

// The fields of `text` between the `sep` characters, in order; views into `text`, which must
// outlive them. split("", ',') is {""}, split("a,", ',') is {"a", ""}.
inline std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> fields;
  for (std::size_t begin = 0;;) {
    const std::size_t end = text.find(sep, begin);
    fields.push_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return fields;
    begin = end + 1;
  }
}

}  // namespace fastrun::text
