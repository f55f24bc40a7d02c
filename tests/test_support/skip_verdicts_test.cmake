# cmake -P script: CTest's verdicts on the skip helpers (test_support/skip.h, skip.sh,
# skip.cmake), under the properties every test gets (SKIP_RETURN_CODE). A skip is Skipped; a
# test that prints the skip line and then fails, or fails and then skips, is Failed; a pass is
# Passed. Runs a CTest of its own in WORK_DIR.
# Inputs: CTEST, FIXTURE (test_support/skip_fixture.cpp), WORK_DIR, SKIP_EXIT_CODE,
# SKIP_SCRIPT_RUNNER (test_support/cmake_script_test.sh).
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
get_filename_component(support ${SKIP_SCRIPT_RUNNER} DIRECTORY)

# case(NAME VERDICT COMMAND...): the test NAME runs COMMAND (each word quoted as it is); CTest
# must say VERDICT.
set(tests "")
set(testfile "")
function(case name verdict)
  set(command "")
  foreach(word IN LISTS ARGN)
    string(APPEND command " [==[${word}]==]")
  endforeach()
  set(tests ${tests} ${name} PARENT_SCOPE)
  set(verdict_${name} ${verdict} PARENT_SCOPE)
  string(APPEND testfile "add_test(${name}${command})\n"
                         "set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${SKIP_EXIT_CODE} TIMEOUT 30)\n")
  set(testfile "${testfile}" PARENT_SCOPE)
endfunction()
case(catch_passes Passed ${FIXTURE} --warn NoTests passes)
case(catch_skips Skipped ${FIXTURE} --warn NoTests skips)
case(catch_skip_text_then_fails Failed ${FIXTURE} --warn NoTests "prints the skip text then fails")
case(catch_fails_then_skips Failed ${FIXTURE} --warn NoTests "fails then skips")
case(sh_skips Skipped bash -c "source ${support}/skip.sh && fastrun_skip no tool here && exit 1")
case(sh_skip_text_then_fails Failed bash -c "echo 'FASTRUN-SKIPPED: not really' && exit 1")
file(WRITE ${WORK_DIR}/skips.cmake "include(${support}/skip.cmake)\nfastrun_skip(\"no tool here\")\n"
                                   "message(FATAL_ERROR \"ran on after the skip\")\n")
file(WRITE ${WORK_DIR}/fails.cmake "message(\"FASTRUN-SKIPPED: not really\")\nmessage(FATAL_ERROR \"failed\")\n")
case(cmake_skips Skipped ${SKIP_SCRIPT_RUNNER} ${CMAKE_COMMAND} -P ${WORK_DIR}/skips.cmake)
case(cmake_skip_text_then_fails Failed ${SKIP_SCRIPT_RUNNER} ${CMAKE_COMMAND} -P ${WORK_DIR}/fails.cmake)
file(WRITE ${WORK_DIR}/CTestTestfile.cmake "${testfile}")

execute_process(COMMAND ${CTEST} --output-on-failure WORKING_DIRECTORY ${WORK_DIR}
  OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
set(wrong "")
foreach(name IN LISTS tests)
  if(NOT out MATCHES "Test +#[0-9]+: ${name} [ .]*[*]*([A-Za-z]+)")
    string(APPEND wrong "\n  ${name}: no verdict in CTest's output")
  elseif(NOT CMAKE_MATCH_1 STREQUAL "${verdict_${name}}")
    string(APPEND wrong "\n  ${name}: ${CMAKE_MATCH_1}, expected ${verdict_${name}}")
  endif()
endforeach()
if(wrong)
  message(FATAL_ERROR "CTest's verdicts on the skip helpers are wrong:${wrong}\nCTest's output:\n${out}${err}")
endif()
message("every verdict as expected: ${tests}")
