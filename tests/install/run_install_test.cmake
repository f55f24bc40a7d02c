# cmake -P script: install the build tree, move the prefix elsewhere (nothing may depend on where
# it was installed), then use it as a user would: run the installed `fastrun`, build the
# consumer project with find_package (default C++ standard, the umbrella header, a program that
# links only fastrun::launcher), check what a CPU program loads, and compile a program with
# `pkg-config --cflags --libs fastrun`. Any failing step fails the test with that step's output.
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, CXX, HAVE_NCCL, HAVE_TORCH, LIBDIR.
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
# The loader must find fastrun's libraries through RUNPATH alone.
unset(ENV{LD_LIBRARY_PATH})
set(ENV{FASTRUN_LOG_LEVEL} error)

function(step)
  cmake_parse_arguments(S "MAY_FAIL" "TIMEOUT" "" ${ARGN})
  if(NOT S_TIMEOUT)
    set(S_TIMEOUT 120)
  endif()
  execute_process(COMMAND ${S_UNPARSED_ARGUMENTS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT ${S_TIMEOUT})
  if(NOT rc EQUAL 0 AND NOT S_MAY_FAIL)
    message(FATAL_ERROR "step failed (${rc}): ${S_UNPARSED_ARGUMENTS}\n${out}\n${err}")
  endif()
  set(STEP_RC "${rc}" PARENT_SCOPE)
  set(STEP_OUTPUT "${out}${err}" PARENT_SCOPE)
endfunction()
function(expect what pattern)
  if(NOT STEP_OUTPUT MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: expected output matching '${pattern}', got:\n${STEP_OUTPUT}")
  endif()
endfunction()

# 1. Install, then move the prefix: RUNPATHs and the package files must be relative.
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/installed-here)
file(RENAME ${WORK_DIR}/installed-here ${WORK_DIR}/prefix)
set(prefix ${WORK_DIR}/prefix)

# 2. Only the public surface is installed, and it is closed: every fastrun header an installed
#    header includes is installed too.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/*.h)
foreach(internal fastrun/runtime/backend/shm/channel/channel.h fastrun/runtime/store/tcp/wire.h
                 fastrun/launcher/output_relay.h fastrun/runtime/log/log.h)
  if(EXISTS ${prefix}/include/${internal})
    message(FATAL_ERROR "internal header installed: ${internal}")
  endif()
endforeach()
foreach(header ${headers})
  file(STRINGS ${prefix}/include/${header} includes REGEX "^#include [\"<]fastrun/")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include [\"<]([^\">]+)[\">].*" "\\1" included "${line}")
    if(NOT EXISTS ${prefix}/include/${included})
      message(FATAL_ERROR "installed ${header} includes ${included}, which is not installed")
    endif()
  endforeach()
endforeach()
if(NOT "fastrun/fastrun.h" IN_LIST headers)
  message(FATAL_ERROR "the umbrella header fastrun/fastrun.h is not installed")
endif()
# ... and nothing more: every installed header is what users include (an entry point: the
# umbrella header, a component's own headers) or is included by another installed header. A
# header installed only because a stale #include once pulled it in fails here.
set(included_somewhere "")
foreach(header ${headers})
  file(STRINGS ${prefix}/include/${header} includes REGEX "^#include [\"<]fastrun/")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include [\"<]([^\">]+)[\">].*" "\\1" included "${line}")
    list(APPEND included_somewhere ${included})
  endforeach()
endforeach()
foreach(header ${headers})
  if(header STREQUAL "fastrun/fastrun.h" OR header MATCHES "^fastrun/torch/[^/]+\\.h$"
     OR header MATCHES "^fastrun/runtime/cuda/[^/]+\\.h$")
    continue()  # entry points: the umbrella header, fastrun::torch's and fastrun::nccl's own
  endif()
  if(NOT header IN_LIST included_somewhere)
    message(FATAL_ERROR "${header} is installed, but no installed header includes it and it is not an entry "
                        "point: drop it from its library's PUBLIC_HEADERS, or include it where users need it")
  endif()
endforeach()

# 2b. No installed header includes fmt (a private dependency: a consumer whose include path holds
#     another fmt, as a torch 2.x wheel's does, must still link). Textually, for every installed
#     file (with step 2, which keeps fastrun's includes inside the installed set, that is
#     transitive); and compiled: every installed header but LibTorch's component (whose
#     LibTorch headers include fmt themselves) in one file, where <fmt/*.h> is an #error.
file(GLOB_RECURSE installed_files RELATIVE ${prefix}/include ${prefix}/include/*)
foreach(header ${installed_files})
  file(STRINGS ${prefix}/include/${header} fmt_includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]fmt/")
  if(fmt_includes)
    message(FATAL_ERROR "installed ${header} includes fmt: ${fmt_includes}")
  endif()
endforeach()
foreach(fmt_header args base chrono color compile core format format-inl os ostream printf ranges std xchar)
  file(WRITE ${WORK_DIR}/fmt-poison/fmt/${fmt_header}.h "#error an installed fastrun header includes <fmt/${fmt_header}.h>\n")
endforeach()
set(all_headers "")
foreach(header ${headers})
  if(NOT header MATCHES "^fastrun/torch/")
    string(APPEND all_headers "#include <${header}>\n")
  endif()
endforeach()
file(WRITE ${WORK_DIR}/all_headers.cpp "${all_headers}")
step(${CXX} -std=c++20 -fsyntax-only -I${WORK_DIR}/fmt-poison -I${prefix}/include ${WORK_DIR}/all_headers.cpp)

# 3. The installed command starts and runs a job.
step(${prefix}/bin/fastrun --nproc 2 /bin/echo launched)
expect("installed fastrun" "launched\n.*launched|launched")

# 4. A CMake consumer: find_package alone, the compiler's default standard.
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
# Compiling the consumers (LibTorch's headers among them) took 60-90 s on 2 cores beside another
# test, and was cut at 120 s twice on a loaded machine: give it most of the test's 300 s.
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build TIMEOUT 240)
step(${WORK_DIR}/build/consumer)
expect("consumer" "consumer: rank 0 of 1, 2 samples, backend gloo")
step(${WORK_DIR}/build/self_spawn)
expect("self_spawn (links only fastrun::launcher)" "self_spawn: rank 0")
if(HAVE_TORCH)
  step(${WORK_DIR}/build/torch_consumer)
  expect("torch_consumer (fastrun::torch)" "torch_consumer: 2 parameters, step open 0, grad sum 6.0")
endif()

# 5. A CPU program loads no CUDA or NCCL, nor gloo and its libibverbs until it makes a gloo
#    group (the consumer above did, through the module beside the moved runtime), and asking
#    it for nccl says what to link.
step(ldd ${WORK_DIR}/build/consumer)
if(STEP_OUTPUT MATCHES "libcudart|libnccl|libcuda\\.|libfastrun_nccl|libibverbs|libgloo|libtorch|libfastrun_torch")
  message(FATAL_ERROR "a CPU program loads the CUDA/NCCL layer or gloo's dependencies:\n${STEP_OUTPUT}")
endif()
set(ENV{FASTRUN_BACKEND} nccl)
step(${WORK_DIR}/build/consumer MAY_FAIL)
expect("consumer with FASTRUN_BACKEND=nccl" "backend 'nccl' is not available.*link fastrun::nccl")
if(HAVE_NCCL)
  # The same program linking fastrun::nccl has the backend (the CPU machine then lacks a GPU).
  step(ldd ${WORK_DIR}/build/nccl_consumer)
  expect("nccl_consumer's libraries" "libfastrun_nccl")
  step(${WORK_DIR}/build/nccl_consumer MAY_FAIL)
  if(STEP_OUTPUT MATCHES "not available")
    message(FATAL_ERROR "nccl_consumer links fastrun::nccl but has no nccl backend:\n${STEP_OUTPUT}")
  endif()
endif()
unset(ENV{FASTRUN_BACKEND})

# 6. pkg-config, as a Makefile would use it.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
step(pkg-config --cflags --libs fastrun)
separate_arguments(pc_flags UNIX_COMMAND "${STEP_OUTPUT}")
step(${CXX} ${SOURCE_DIR}/tests/install/consumer/main.cpp ${pc_flags} -o ${WORK_DIR}/pc_consumer)
step(${WORK_DIR}/pc_consumer)
expect("pkg-config consumer" "consumer: rank 0 of 1, 2 samples")
if(HAVE_NCCL)
  # fastrun-nccl.pc keeps the component linked although the program names none of its symbols.
  step(pkg-config --cflags --libs fastrun-nccl)
  separate_arguments(pc_flags UNIX_COMMAND "${STEP_OUTPUT}")
  step(${CXX} ${SOURCE_DIR}/tests/install/consumer/main.cpp ${pc_flags} -o ${WORK_DIR}/pc_nccl_consumer)
  set(ENV{FASTRUN_BACKEND} nccl)
  step(${WORK_DIR}/pc_nccl_consumer MAY_FAIL)
  if(STEP_OUTPUT MATCHES "not available")
    message(FATAL_ERROR "pkg-config fastrun-nccl: the program has no nccl backend:\n${STEP_OUTPUT}")
  endif()
  unset(ENV{FASTRUN_BACKEND})
endif()

file(REMOVE_RECURSE ${WORK_DIR})
