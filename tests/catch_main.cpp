// The one Catch2 main shared by every test binary, and the skip of test_support/skip.h, which
// needs to know whether an assertion failed before it (a listener counts them).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "test_support/skip.h"

namespace {

std::atomic<unsigned long> failed_assertions{0};

struct FailureCounter : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) ++failed_assertions;
    return true;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureCounter)

namespace fastrun::test {

void skip_case(const std::string& reason) {
  const unsigned long failed = failed_assertions.load();
  std::cout.flush();
  std::cerr.flush();
  if (failed > 0) {
    std::printf("%s %s\nbut %lu assertion(s) failed before the skip: that is a failure, not a skip\n", kSkipMarker,
                reason.c_str(), failed);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  std::printf("%s %s\n", kSkipMarker, reason.c_str());
  std::fflush(nullptr);
  // _Exit: no static destructors or atexit handlers of a process stopped in the middle of a case.
  std::_Exit(kSkipExitCode);
}

}  // namespace fastrun::test
