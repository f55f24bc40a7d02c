# Debian 12 packages: libboost-dev (headers only), libfmt-dev, catch2 (tests), libgloo-dev,
# nlohmann-json3-dev (headers only; the sampler states and the store's records, never in a public header).
# libcli11-dev (headers only: every program's flags; never part of the installed surface).
find_package(Threads REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(Gloo REQUIRED)
find_package(nlohmann_json 3 REQUIRED CONFIG)
find_package(CLI11 CONFIG REQUIRED)
# hwloc (Debian: libhwloc-dev) gives the launcher the machine's NUMA nodes and cores for --bind
# (launcher/binding/topology.cpp); it has a pkg-config file, no CMake package.
find_package(PkgConfig REQUIRED)
pkg_check_modules(FASTRUN_HWLOC REQUIRED hwloc>=2)

# LibTorch is optional too (Debian: libtorch-dev): the fastrun::torch component (torch/) and the
# c10d interop program (tests/c10d). Without it (or with FASTRUN_WITH_TORCH=OFF) everything else
# builds and the cases that need it are skipped. fastrun's own c10d store client needs no LibTorch.
# A LibTorch whose libraries come from two installations stops the configure, naming both
# (cmake/fastrun_torch_check.cmake: a wheel's share/cmake beside Debian's libtorch-dev).
include(${CMAKE_CURRENT_LIST_DIR}/fastrun_torch_check.cmake)
# TorchConfig enables CUDA and runs its CUDA checks in the caller's scope, taking the CUDA
# standard from CMAKE_CXX_STANDARD (the torch 2.x wheel: "requires the language dialect CUDA20"
# in CMake 3.25). fastrun sets no language setting globally (CMakeLists.txt); this scope hides a
# parent's or the command line's too, and keeps TorchConfig's own (CMAKE_CUDA_STANDARD) out of
# ours. The results the build uses are passed up.
function(fastrun_find_torch)
  foreach(setting CMAKE_CXX_STANDARD CMAKE_CXX_EXTENSIONS CMAKE_CXX_STANDARD_REQUIRED CMAKE_CUDA_STANDARD)
    set(${setting} "")
  endforeach()
  find_package(Torch QUIET)
  if(Torch_FOUND OR TORCH_FOUND)
    fastrun_check_torch()
  endif()
  foreach(result Torch_FOUND TORCH_FOUND Torch_VERSION TORCH_LIBRARIES TORCH_LIBRARY TORCH_INCLUDE_DIRS
                 TORCH_INSTALL_PREFIX TORCH_CXX_FLAGS)
    set(${result} "${${result}}" PARENT_SCOPE)
  endforeach()
endfunction()
set(FASTRUN_HAVE_TORCH OFF)
if(FASTRUN_WITH_TORCH)
  fastrun_find_torch()
  if(Torch_FOUND OR TORCH_FOUND)
    set(FASTRUN_HAVE_TORCH ON)
  endif()
endif()
# "LibTorch ON (1.13.0)" with the version its package file gives, or "LibTorch OFF".
if(FASTRUN_HAVE_TORCH AND Torch_VERSION)
  message(STATUS "fastrun: LibTorch ON (${Torch_VERSION})")
else()
  message(STATUS "fastrun: LibTorch ${FASTRUN_HAVE_TORCH}")
endif()

# CUDA and NCCL are optional: found at configure time, never required for the CPU build.
# Found after LibTorch: beside a LibTorch from PyPI's CUDA wheel, the nccl component uses the
# wheel's NCCL (site-packages/nvidia/nccl), the one libtorch_cuda.so loads, so that a process
# holds one NCCL, not whichever libnccl.so.2 the loader meets first (docs/torch.md).
set(FASTRUN_HAVE_CUDA OFF)
set(FASTRUN_HAVE_NCCL OFF)
if(FASTRUN_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(FASTRUN_HAVE_CUDA ON)
    set(_fastrun_wheel_nccl "")
    if(FASTRUN_HAVE_TORCH)
      get_filename_component(_fastrun_wheel_nccl "${TORCH_INSTALL_PREFIX}/../nvidia/nccl" ABSOLUTE)
    endif()
    if(_fastrun_wheel_nccl AND EXISTS "${_fastrun_wheel_nccl}/lib/libnccl.so.2" AND EXISTS "${_fastrun_wheel_nccl}/include/nccl.h")
      set(FASTRUN_NCCL_LIBRARY "${_fastrun_wheel_nccl}/lib/libnccl.so.2")  # (shadows a cached one)
      set(FASTRUN_NCCL_INCLUDE_DIR "${_fastrun_wheel_nccl}/include")
    else()
      find_library(FASTRUN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
      find_path(FASTRUN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
    endif()
    if(FASTRUN_NCCL_LIBRARY AND FASTRUN_NCCL_INCLUDE_DIR)
      set(FASTRUN_HAVE_NCCL ON)
    endif()
  endif()
endif()
if(FASTRUN_HAVE_NCCL)
  message(STATUS "fastrun: CUDA ON, NCCL ON (${FASTRUN_NCCL_LIBRARY}), sanitizer '${FASTRUN_SANITIZE}'")
else()
  message(STATUS "fastrun: CUDA ${FASTRUN_HAVE_CUDA}, NCCL OFF, sanitizer '${FASTRUN_SANITIZE}'")
endif()

