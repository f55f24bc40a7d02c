# cmake -P script: fastrun configured against a torch 2.x wheel's LibTorch (configure only, a few
# seconds each). cmake/fastrun_torch_check.cmake must stop a configure whose LibTorch would link
# libraries of another LibTorch, naming both, and let the wheel's package folder through:
#   a. CMAKE_PREFIX_PATH=<wheel>/share/cmake (torch.utils.cmake_prefix_path) beside another
#      LibTorch on the library path (a stand-in with 1.13.0's file names): fails, naming both;
#   b. the same with this machine's own other LibTorch, where it has one (Debian's
#      libtorch-dev in /usr/lib): fails, naming both;
#   c. CMAKE_PREFIX_PATH=<wheel> (the package folder): its lib/ is searched first, so it
#      configures with the wheel's LibTorch alone, libtorch-dev installed or not.
# Skipped without the wheel (tools/install-torch2.sh; FASTRUN_TORCH2_PYTHON or PYTHON names its
# python) or without a CUDA toolkit (the CUDA wheel's Caffe2Config needs nvcc).
# Inputs: SOURCE_DIR, WORK_DIR, GENERATOR, CXX, PYTHON (may be empty).
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/../test_support/skip.cmake)
file(REMOVE_RECURSE ${WORK_DIR})

# 1. The wheel's package folder, found without importing torch (that takes seconds).
if(NOT PYTHON)
  set(PYTHON "$ENV{FASTRUN_TORCH2_PYTHON}")
endif()
if(NOT PYTHON)
  set(PYTHON /var/cache/fastrun/torch2-venv/bin/python)
endif()
if(NOT EXISTS ${PYTHON})
  fastrun_skip("no torch 2.x venv (${PYTHON}; tools/install-torch2.sh)")
endif()
execute_process(COMMAND ${PYTHON} -c "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])"
  RESULT_VARIABLE rc OUTPUT_VARIABLE wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT EXISTS ${wheel}/share/cmake/Torch/TorchConfig.cmake)
  fastrun_skip("${PYTHON} has no torch with a LibTorch CMake package")
endif()
find_program(NVCC nvcc PATHS $ENV{CUDA_HOME}/bin /usr/local/cuda/bin NO_CACHE)
if(NOT NVCC)
  fastrun_skip("no CUDA toolkit (nvcc): the CUDA wheel's TorchConfig needs one")
endif()

function(configure name)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/${name} -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DFASTRUN_BUILD_TESTS=OFF -DFASTRUN_BUILD_TOOLS=OFF ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  set(RC "${rc}" PARENT_SCOPE)
  # CMake wraps long messages: one line, single spaces.
  string(REGEX REPLACE "[ \n]+" " " flat "${out}${err}")
  set(OUTPUT "${flat}" PARENT_SCOPE)
endfunction()
function(expect_mix name other)
  if(RC EQUAL 0 OR NOT OUTPUT MATCHES "would link two LibTorch versions: LibTorch 2\\.[0-9.]+ at ${wheel}"
     OR NOT OUTPUT MATCHES "LibTorch ${other}")
    message(FATAL_ERROR "${name}: expected the configure to stop naming LibTorch 2.x at ${wheel} and "
      "LibTorch ${other}; rc ${RC}:\n${OUTPUT}")
  endif()
endfunction()

# a. Another LibTorch on the library path: file names are all find_library looks at.
set(other ${WORK_DIR}/other-libtorch)
foreach(lib c10 torch)
  file(WRITE ${other}/lib${lib}.so.1.13.0 "")
  file(CREATE_LINK lib${lib}.so.1.13.0 ${other}/lib${lib}.so SYMBOLIC)
endforeach()
configure(share-cmake-beside-other -DCMAKE_PREFIX_PATH=${wheel}/share/cmake -DCMAKE_LIBRARY_PATH=${other})
expect_mix("share/cmake beside another LibTorch" "1\\.13\\.0: ${other}/libc10\\.so")

# b. This machine's own other LibTorch, where it has one.
file(GLOB system_c10 /usr/lib/*/libc10.so /usr/lib/libc10.so /usr/local/lib/libc10.so)
if(system_c10)
  configure(share-cmake-beside-system -DCMAKE_PREFIX_PATH=${wheel}/share/cmake)
  list(GET system_c10 0 system_c10)
  expect_mix("share/cmake beside ${system_c10}" "[0-9.]+: ${system_c10}")
endif()

# c. The package folder: the wheel's libraries alone.
configure(package-folder -DCMAKE_PREFIX_PATH=${wheel})
if(NOT RC EQUAL 0 OR NOT OUTPUT MATCHES "fastrun: LibTorch ON \\(2\\.")
  message(FATAL_ERROR "CMAKE_PREFIX_PATH=${wheel}: expected fastrun to configure with LibTorch 2.x; rc ${RC}:\n${OUTPUT}")
endif()
# ... and its nccl component takes the wheel's NCCL (the one libtorch_cuda.so loads), not the
# toolkit's: one NCCL in a process (cmake/dependencies.cmake).
get_filename_component(wheel_nccl "${wheel}/../nvidia/nccl/lib/libnccl.so.2" ABSOLUTE)
if(EXISTS "${wheel_nccl}" AND NOT OUTPUT MATCHES "NCCL ON \\(${wheel_nccl}\\)")
  message(FATAL_ERROR "CMAKE_PREFIX_PATH=${wheel}: expected the nccl component on ${wheel_nccl}; rc ${RC}:\n${OUTPUT}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
