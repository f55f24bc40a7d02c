# Debian 12 packages: libboost-dev (headers only), libfmt-dev, catch2 (tests), libgloo-dev.
find_package(Threads REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(Gloo REQUIRED)

# CUDA and NCCL are optional: found at configure time, never required for the CPU build.
set(FASTRUN_HAVE_CUDA OFF)
set(FASTRUN_HAVE_NCCL OFF)
if(FASTRUN_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(FASTRUN_HAVE_CUDA ON)
    find_library(FASTRUN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
    find_path(FASTRUN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
    if(FASTRUN_NCCL_LIBRARY AND FASTRUN_NCCL_INCLUDE_DIR)
      set(FASTRUN_HAVE_NCCL ON)
    endif()
  endif()
endif()
message(STATUS "fastrun: CUDA ${FASTRUN_HAVE_CUDA}, NCCL ${FASTRUN_HAVE_NCCL}, sanitizer '${FASTRUN_SANITIZE}'")

# LibTorch is optional too (Debian: libtorch-dev): the fastrun::torch component (torch/) and the
# c10d interop program (tests/c10d). Without it (or with FASTRUN_WITH_TORCH=OFF) everything else
# builds and the cases that need it are skipped. fastrun's own c10d store client needs no LibTorch.
set(FASTRUN_HAVE_TORCH OFF)
if(FASTRUN_WITH_TORCH)
  find_package(Torch QUIET)
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
