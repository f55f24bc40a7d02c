#include "fastrun/runtime/cluster/slurm_hostlist.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::cluster {
namespace {

struct Range {
  std::uint64_t low = 0, high = 0;
  std::size_t width = 0;  // digits of the low bound: zero padding
};

// One item split into literal text and bracket groups: text[0] ranges[0] text[1] ... text[n].
struct Item {
  std::vector<std::string> text;
  std::vector<std::vector<Range>> groups;
};

class Parser {
 public:
  Parser(std::string_view list, std::string_view source) : list_(list), source_(source) {}

  [[noreturn]] void fail(std::size_t pos, std::string_view what) const {
    throw ConfigError(fmt::format("{}='{}' is not a Slurm host list: {} at position {}; accepted: names and "
                                  "bracket ranges such as node[01-04,07],gpu[1-2]-ib",
                                  source_, list_, what, pos + 1));
  }

  std::vector<std::string> expand() {
    std::vector<std::string> hosts;
    std::size_t pos = 0;
    while (pos < list_.size()) {
      const std::size_t start = pos;
      Item item = parse_item(pos);
      if (pos > start) append_product(item, hosts, start);  // empty items are skipped, as Slurm does
      if (pos < list_.size()) ++pos;                        // the separator
    }
    if (hosts.empty()) fail(0, "it names no host");
    return hosts;
  }

 private:
  static bool separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }

  Item parse_item(std::size_t& pos) {
    Item item;
    item.text.emplace_back();
    while (pos < list_.size() && !separator(list_[pos])) {
      const char c = list_[pos];
      if (c == ']') fail(pos, "a ']' without its '['");
      if (c != '[') {
        item.text.back() += c;
        ++pos;
        continue;
      }
      const std::size_t close = list_.find(']', pos);
      if (close == std::string_view::npos) fail(pos, "a '[' without its ']'");
      const std::size_t nested = list_.find('[', pos + 1);
      if (nested < close) fail(nested, "a '[' inside brackets");
      item.groups.push_back(parse_ranges(pos + 1, close));
      item.text.emplace_back();
      pos = close + 1;
    }
    return item;
  }

  std::vector<Range> parse_ranges(std::size_t begin, std::size_t end) const {
    std::vector<Range> ranges;
    std::size_t pos = begin;
    while (true) {
      const std::size_t comma = std::min(list_.find(',', pos), end);
      const std::string_view spec = list_.substr(pos, comma - pos);
      const std::size_t dash = spec.find('-');
      Range r;
      r.low = number(spec.substr(0, dash), pos);
      r.width = dash == std::string_view::npos ? spec.size() : dash;
      r.high = dash == std::string_view::npos ? r.low : number(spec.substr(dash + 1), pos + dash + 1);
      if (r.high < r.low) fail(pos, fmt::format("the range '{}' runs backwards", spec));
      if (r.high - r.low >= kMaxHosts) fail(pos, fmt::format("the range '{}' has more than {} names", spec, kMaxHosts));
      ranges.push_back(r);
      if (comma == end) return ranges;
      pos = comma + 1;
    }
  }

  std::uint64_t number(std::string_view digits, std::size_t pos) const {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
      fail(pos, fmt::format("'{}' in brackets is not a number (give N or LOW-HIGH)", digits));
    return n;
  }

  // Every combination of the item's groups, the first group varying slowest.
  void append_product(const Item& item, std::vector<std::string>& hosts, std::size_t pos) const {
    std::vector<std::string> partial{item.text[0]};
    for (std::size_t g = 0; g < item.groups.size(); ++g) {
      std::vector<std::string> next;
      for (const std::string& head : partial)
        for (const Range& r : item.groups[g])
          for (std::uint64_t n = r.low; n <= r.high; ++n) {
            if (hosts.size() + next.size() >= kMaxHosts) fail(pos, fmt::format("more than {} host names", kMaxHosts));
            next.push_back(fmt::format("{}{:0{}}{}", head, n, r.width, item.text[g + 1]));
          }
      partial = std::move(next);
    }
    if (hosts.size() + partial.size() > kMaxHosts) fail(pos, fmt::format("more than {} host names", kMaxHosts));
    hosts.insert(hosts.end(), partial.begin(), partial.end());
  }

  std::string_view list_;
  std::string_view source_;
};

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view source) {
  return Parser(list, source).expand();
}

}  // namespace fastrun::cluster
