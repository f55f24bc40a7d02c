# cmake -P script: configure tests/install/vendor with fastrun vendored (HOW = add_subdirectory or
# FetchContent), build its sampler_app and run it. FetchContent also builds static libraries
# (the parent's BUILD_SHARED_LIBS=OFF), so the program then needs no libfastrun_*.so.
# Inputs: HOW, SOURCE_DIR, WORK_DIR, GENERATOR, CXX.
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(STEP_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(shared ON)
if(HOW STREQUAL "FetchContent")
  set(shared OFF)
endif()
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/vendor -B ${WORK_DIR} -G ${GENERATOR}
     -DCMAKE_CXX_COMPILER=${CXX} -DFASTRUN_HOW=${HOW} -DFASTRUN_SOURCE=${SOURCE_DIR} -DBUILD_SHARED_LIBS=${shared})
step(${CMAKE_COMMAND} --build ${WORK_DIR} --target sampler_app)
step(${WORK_DIR}/sampler_app)
if(NOT STEP_OUTPUT MATCHES "sampler_app: 5 samples")
  message(FATAL_ERROR "sampler_app printed unexpected output: ${STEP_OUTPUT}")
endif()
step(ldd ${WORK_DIR}/sampler_app)
if(shared AND NOT STEP_OUTPUT MATCHES "libfastrun_samplers")
  message(FATAL_ERROR "add_subdirectory: expected the shared libfastrun_samplers:\n${STEP_OUTPUT}")
elseif(NOT shared AND STEP_OUTPUT MATCHES "libfastrun_")
  message(FATAL_ERROR "BUILD_SHARED_LIBS=OFF: expected static fastrun libraries:\n${STEP_OUTPUT}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
