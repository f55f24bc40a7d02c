# fastrun_check_torch([BUILT_WITH <version>]): call right after find_package(Torch). Stops the
# configure when the LibTorch just found would be linked with libraries of another LibTorch, or
# (BUILT_WITH, from an installed fastrun::torch) is not the LibTorch fastrun was built against.
# Used by fastrun's own build (cmake/dependencies.cmake) and installed beside the package for
# find_package(fastrun COMPONENTS torch) (fastrunConfig.cmake.in).
#
# Why the mix happens: TorchConfig.cmake looks for some of its libraries with
# find_library(c10 PATHS <its prefix>/lib), and CMake searches PATHS last: after
# CMAKE_PREFIX_PATH/lib and the system's library folders. With CMAKE_PREFIX_PATH=<wheel>/share/cmake
# (what torch.utils.cmake_prefix_path gives) there is no <prefix>/lib, so on a machine with
# Debian's libtorch-dev it takes /usr/lib/<arch>/libc10.so (1.13) beside the wheel's
# libtorch_cpu.so and libc10_cuda.so, and a program linked with both aborts inside c10. With
# CMAKE_PREFIX_PATH=<wheel> (the package folder) its lib/ is searched first.
#
# The rule: every library file of LibTorch's own (lib{torch,c10,caffe2}*) named by
# TORCH_LIBRARIES, by TORCH_LIBRARY (tests/docs links the libraries beside it) or by the imported
# targets they name (torch, torch_library, c10, c10_cuda, ..., followed through their
# INTERFACE_LINK_LIBRARIES) lives under TORCH_INSTALL_PREFIX, the folder TorchConfig computed
# from its own place.
function(fastrun_check_torch)
  cmake_parse_arguments(C "" "BUILT_WITH" "" ${ARGN})
  get_filename_component(prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
  set(found "LibTorch ${Torch_VERSION} at ${prefix} (Torch_DIR=${Torch_DIR})")

  # 1. The version fastrun::torch was compiled against: LibTorch's C++ ABI changes between
  #    minor releases, so 2.15.x goes with 2.15.y only.
  if(C_BUILT_WITH)
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" built_minor "${C_BUILT_WITH}")
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" found_minor "${Torch_VERSION}")
    if(NOT built_minor STREQUAL found_minor)
      message(FATAL_ERROR "fastrun::torch was built against LibTorch ${C_BUILT_WITH}, but this project found "
        "${found}. LibTorch's C++ interface changes between minor versions: point CMAKE_PREFIX_PATH (or "
        "Torch_DIR) at LibTorch ${built_minor}.x, or build fastrun against LibTorch ${found_minor}.")
    endif()
  endif()

  # 2. Every library file the torch targets link, followed through imported targets.
  set(pending ${TORCH_LIBRARIES} torch ${TORCH_LIBRARY})
  set(seen "")
  set(files "")
  while(pending)
    list(POP_FRONT pending item)
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item STREQUAL "" OR item IN_LIST seen OR item MATCHES "^(\\$<|-)")
      continue()  # other generator expressions and flags name targets followed anyway
    endif()
    list(APPEND seen "${item}")
    if(TARGET "${item}")
      get_target_property(imported "${item}" IMPORTED)
      if(NOT imported)
        continue()
      endif()
      get_target_property(configs "${item}" IMPORTED_CONFIGURATIONS)
      foreach(suffix "" ${configs})
        if(suffix)
          string(TOUPPER "_${suffix}" suffix)
        endif()
        get_target_property(location "${item}" IMPORTED_LOCATION${suffix})
        if(location)
          list(APPEND files "${location}")
        endif()
      endforeach()
      get_target_property(deps "${item}" INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(APPEND pending ${deps})
      endif()
    elseif(IS_ABSOLUTE "${item}")
      list(APPEND files "${item}")
    endif()
  endwhile()

  # 3. The ones of LibTorch's own outside its prefix, each with its version where it says one:
  #    a TorchConfigVersion.cmake beside it (Debian: <libdir>/cmake/Torch/), or its file name
  #    (libc10.so.1.13.0).
  set(strays "")
  set(stray_cache "")
  list(REMOVE_DUPLICATES files)
  foreach(file ${files})
    get_filename_component(name "${file}" NAME)
    if(NOT name MATCHES "^lib(torch|c10|caffe2)[_.]")
      continue()  # CUDA's, the C library's: not LibTorch's
    endif()
    get_filename_component(real "${file}" REALPATH)
    string(FIND "${real}" "${prefix}/" at)
    if(at EQUAL 0)
      continue()
    endif()
    get_filename_component(dir "${real}" DIRECTORY)
    set(version "")
    foreach(version_file ${dir}/cmake/Torch/TorchConfigVersion.cmake ${dir}/../share/cmake/Torch/TorchConfigVersion.cmake)
      if(NOT version AND EXISTS "${version_file}")
        file(STRINGS "${version_file}" line REGEX "set\\(PACKAGE_VERSION \"[^\"]+\"\\)")
        string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" version "${line}")
      endif()
    endforeach()
    if(NOT version AND real MATCHES "\\.so\\.([0-9][0-9.]*)$")
      set(version "${CMAKE_MATCH_1}")
    endif()
    if(NOT version)
      set(version "of unknown version")
    endif()
    string(APPEND strays "\n  LibTorch ${version}: ${file}")
    if(NOT real STREQUAL file)
      string(APPEND strays " (${real})")
    endif()
    # TorchConfig keeps what find_library found in the cache (c10_LIBRARY, ...): forget the
    # stray entries, so that the next configure, with the prefix fixed, looks again.
    get_cmake_property(cache_entries CACHE_VARIABLES)
    foreach(entry ${cache_entries})
      if(entry MATCHES "_LIBRARY$" AND "$CACHE{${entry}}" STREQUAL "${file}")
        unset(${entry} CACHE)
        list(APPEND stray_cache ${entry})
      endif()
    endforeach()
  endforeach()
  if(strays)
    if(stray_cache)
      list(REMOVE_DUPLICATES stray_cache)
      string(REPLACE ";" ", " stray_cache "${stray_cache}")
      set(stray_cache " The cache entries that held the other's libraries (${stray_cache}) were removed: the next configure looks for them again.")
    endif()
    message(FATAL_ERROR "this build would link two LibTorch versions: ${found}, and besides its "
      "libraries these of another LibTorch:${strays}\n"
      "A program linked with both fails at run time. Point CMAKE_PREFIX_PATH at the torch package folder "
      "itself (${prefix}, whose lib/ is then searched before the system's), not at its share/cmake "
      "(torch.utils.cmake_prefix_path), or remove the other LibTorch (Debian: apt-get remove libtorch-dev).${stray_cache}")
  endif()
endfunction()

# fastrun_torch_wheel_lib_dirs(OUT): the lib folders of the CUDA and NCCL wheels beside a
# LibTorch from PyPI (site-packages/nvidia/*/lib, beside site-packages/torch), or empty for
# another LibTorch. Call after find_package(Torch) (it reads TORCH_INSTALL_PREFIX).
function(fastrun_torch_wheel_lib_dirs out)
  file(GLOB dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()

# fastrun_torch_wheel_link(TARGET): a program linking TARGET (fastrun::torch) against a wheel's
# LibTorch finds the wheel's CUDA and NCCL libraries at link time. libtorch_cuda.so finds them at
# run time through its own RPATH ($ORIGIN/../../nvidia/...), but the linker, resolving the
# libraries libtorch_cuda.so needs, looks first in the program's -rpath, where torch's CMake
# package puts the CUDA toolkit's lib folder; a toolkit that holds another libnccl.so.2 there
# fails the link with undefined nccl* symbols (seen: the toolkit's NCCL 2.28 against the
# torch 2.15 wheel's). -rpath-link to the wheel's folders is searched before -rpath.
# BUILD_TREE: for fastrun's own target, whose export must not carry this machine's paths (the
# installed package calls this again with the consumer's LibTorch).
function(fastrun_torch_wheel_link target)
  cmake_parse_arguments(W "BUILD_TREE" "" "" ${ARGN})
  fastrun_torch_wheel_lib_dirs(dirs)
  if(dirs)
    list(JOIN dirs ":" path)
    set(option "LINKER:-rpath-link,${path}")
    if(W_BUILD_TREE)
      set(option "$<BUILD_INTERFACE:${option}>")
    endif()
    set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_OPTIONS "${option}")
  endif()
endfunction()
