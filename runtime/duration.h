#pragma once
// fastrun::Duration: the type of every public timeout. It takes a std::chrono duration of any
// unit and representation (5s, 500ms, 250us, std::chrono::duration<double>(0.5)), but not a
// bare number: `Duration{5}` does not compile, so no one writes 5 ms meaning 5 s.
//
// It holds whole milliseconds (it *is* a std::chrono::milliseconds, so it passes wherever one
// is taken). Conversion rounds up (after rounding to whole microseconds, so 0.2 s stays 200 ms),
// so a timeout is not shorter than asked (250us waits 1 ms) and a positive one is never zero,
// and saturates at ±kMaxMilliseconds (100 years: "forever", yet a steady_clock deadline
// now() + timeout cannot overflow, which 1e300 s or hours::max() would). NaN becomes zero.
#include <chrono>

namespace fastrun {

class Duration : public std::chrono::milliseconds {
 public:
  using Base = std::chrono::milliseconds;
  static constexpr rep kMaxMilliseconds = 100LL * 366 * 24 * 3600 * 1000;

  constexpr Duration() : Base(0) {}
  template <class Rep, class Period>
  constexpr Duration(const std::chrono::duration<Rep, Period>& d) : Base(saturating_ceil(d)) {}  // NOLINT: implicit by design

  static constexpr Duration zero() { return Duration(); }
  static constexpr Duration max() { return Duration(Base(kMaxMilliseconds)); }

 private:
  template <class Rep, class Period>
  static constexpr rep saturating_ceil(const std::chrono::duration<Rep, Period>& d) {
    const long double ms = std::chrono::duration<long double, std::milli>(d).count();
    if (ms != ms) return 0;  // NaN
    if (ms >= static_cast<long double>(kMaxMilliseconds)) return kMaxMilliseconds;
    if (ms <= -static_cast<long double>(kMaxMilliseconds)) return -kMaxMilliseconds;
    // Whole microseconds first (to nearest): a decimal like 0.2 s is not exact in binary and
    // must not become 201 ms. Then up to whole milliseconds; a positive duration never becomes
    // zero (zero means "the default" to many callers).
    const long double us = ms * 1000;
    const long long us_whole = static_cast<long long>(us < 0 ? us - 0.5L : us + 0.5L);
    rep ms_whole = us_whole / 1000;  // toward zero
    if (ms_whole * 1000 < us_whole) ++ms_whole;
    if (ms_whole == 0 && ms > 0) ms_whole = 1;
    return ms_whole;
  }
};

}  // namespace fastrun
