# The skip of cmake -P test scripts, which cannot choose their exit code: fastrun_skip(reason)
# writes the reason to FASTRUN_SKIP_FILE and ends the script; cmake_script_test.sh, which runs
# the script, turns that into the exit code CTest reports as "Skipped" (SKIP_RETURN_CODE,
# tests/CMakeLists.txt). A macro, so that its return() ends the calling script.
#   include(${CMAKE_CURRENT_LIST_DIR}/../test_support/skip.cmake)
#   fastrun_skip("no CUDA toolkit (nvcc)")
macro(fastrun_skip reason)
  if(NOT FASTRUN_SKIP_FILE)
    message(FATAL_ERROR "fastrun_skip: FASTRUN_SKIP_FILE is not set "
                        "(run the script with test_support/cmake_script_test.sh)")
  endif()
  file(WRITE "${FASTRUN_SKIP_FILE}" "${reason}")
  return()
endmacro()
