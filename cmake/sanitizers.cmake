# One switch for the sanitizer builds CI runs: address = ASan+UBSan, thread = TSan.
# FASTRUN_SANITIZER_SLOWDOWN: how many times a test's harness limits (and each case's CTest
# timeout) are multiplied in this build (tests/test_support/time_limits.h). Measured on the
# 2-core CI machine at -O0 (the sanitizer stages' Debug build): the 4-rank shm all-reduce case
# runs ~2x its main-build time under ASan+UBSan and more under TSan, and a loaded machine adds
# its own factor on top, which the 30 s limits were chosen to absorb in the main build.
set(FASTRUN_SANITIZER_SLOWDOWN 1)
if(FASTRUN_SANITIZE STREQUAL "address")
  set(FASTRUN_SANITIZER_SLOWDOWN 3)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(FASTRUN_SANITIZE STREQUAL "thread")
  # GCC 12 warns that atomic_thread_fence is not instrumented (Asio, our shm store use fences
  # beside atomics TSan does see); that warning must not fail the -Werror build.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  set(FASTRUN_SANITIZER_SLOWDOWN 4)
  add_link_options(-fsanitize=thread)
elseif(NOT FASTRUN_SANITIZE STREQUAL "")
  message(FATAL_ERROR "FASTRUN_SANITIZE='${FASTRUN_SANITIZE}': accepted values are '', 'address', 'thread'")
endif()
