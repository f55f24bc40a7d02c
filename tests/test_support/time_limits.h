#pragma once
// Time limits of the test harnesses, scaled to the build they run in. A harness deadline (reap
// the ranks within 30 s, an op timeout of 30 s) only bounds a hang; it must never be what fails
// a correct test on a busy 2-core CI machine. The sanitizer stages run the same cases several
// times slower (ASan+UBSan at -O0, TSan more so), so their limits are multiplied by
// FASTRUN_TEST_TIME_SCALE, which cmake/sanitizers.cmake chooses per sanitizer and
// tests/CMakeLists.txt (fastrun_test) sets on every test binary, together with the same factor
// on each case's CTest timeout. Limits that a test measures against (a failure must be seen
// within N ms) are not harness limits: they stay as written.
//   children.wait_all(test::scaled(options.timeout));
#include <chrono>

#ifndef FASTRUN_TEST_TIME_SCALE
#error "FASTRUN_TEST_TIME_SCALE is set by fastrun_test() in tests/CMakeLists.txt"
#endif

namespace fastrun::test {

inline constexpr int kTimeScale = FASTRUN_TEST_TIME_SCALE;
static_assert(kTimeScale >= 1, "FASTRUN_TEST_TIME_SCALE must be a whole factor >= 1");

// `limit` in this build: the limit a normal build needs, times the build's slowdown.
template <typename Rep, typename Period>
constexpr std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> limit) {
  return limit * kTimeScale;
}

}  // namespace fastrun::test
