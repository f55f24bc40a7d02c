# One switch for the sanitizer builds CI runs: address = ASan+UBSan, thread = TSan.
if(FASTRUN_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(FASTRUN_SANITIZE STREQUAL "thread")
  # GCC 12 warns that atomic_thread_fence is not instrumented (Asio, our shm store use fences
  # beside atomics TSan does see); that warning must not fail the -Werror build.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  add_link_options(-fsanitize=thread)
elseif(NOT FASTRUN_SANITIZE STREQUAL "")
  message(FATAL_ERROR "FASTRUN_SANITIZE='${FASTRUN_SANITIZE}': accepted values are '', 'address', 'thread'")
endif()
