#pragma once
// Catch2 v2 has no skip: a case that returns early would count as "Passed" and CI could not tell
// it ran nothing. A case that cannot run here calls skip_case(reason): it prints the reason
// after kSkipMarker (tools/test.sh lists skipped cases by it) and ends the whole test process at
// once with kSkipExitCode, CTest's SKIP_RETURN_CODE (tests/CMakeLists.txt), so the case shows as
// "Skipped". The exit code decides, not the text: a case that prints the marker and then fails
// fails. catch_discover_tests runs each case as its own process, so ending the process ends
// just that case; a binary run by hand with many cases stops at the first skip.
// A skip after a failed assertion of the same process (a skip in a later SECTION, say) is not a
// skip: the process exits 1, so the failure shows (test_support/skip_verdicts_test.cmake proves
// both).
// Call it from the test's own thread, before any thread or child of the case is started.
#include <string>

namespace fastrun::test {

inline constexpr const char* kSkipMarker = "FASTRUN-SKIPPED:";
inline constexpr int kSkipExitCode = 77;  // the automake convention; CTest's SKIP_RETURN_CODE

// Defined beside Catch's main (tests/catch_main.cpp), which counts the failed assertions.
[[noreturn]] void skip_case(const std::string& reason);

}  // namespace fastrun::test
