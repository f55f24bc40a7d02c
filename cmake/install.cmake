# Install the libraries, their public headers, the CMake package and the pkg-config files, so
# that find_package(fastrun) or `pkg-config fastrun` works against the installed tree, from
# wherever the prefix is moved (tests/install checks each way, and that nothing but the public
# headers is installed).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_fastrun_libraries fastrun_samplers fastrun_runtime fastrun_launcher)
if(TARGET fastrun_nccl)
  list(APPEND _fastrun_libraries fastrun_nccl)
endif()
set(_fastrun_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/fastrun)

install(TARGETS ${_fastrun_libraries} fastrun_all
  EXPORT fastrunTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# fastrun::torch has an export file of its own, which find_package(fastrun) reads only when the
# torch component is asked for (after finding Torch): a CPU consumer never looks for Torch.
if(TARGET fastrun_torch)
  install(TARGETS fastrun_torch
    EXPORT fastrunTorchTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT fastrunTorchTargets NAMESPACE fastrun:: DESTINATION ${_fastrun_cmake_dir})
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/fastrun_torch_check.cmake DESTINATION ${_fastrun_cmake_dir})
endif()
install(TARGETS fastrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET fastrun_gloo)  # loaded by the runtime from its own directory, never linked
  install(TARGETS fastrun_gloo LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# Public headers only, at their place under fastrun/ (the list is each library's PUBLIC_HEADERS).
install(FILES ${PROJECT_SOURCE_DIR}/include/fastrun/fastrun.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fastrun)
set(_fastrun_header_libraries ${_fastrun_libraries})
if(TARGET fastrun_torch)
  list(APPEND _fastrun_header_libraries fastrun_torch)
endif()
foreach(lib ${_fastrun_header_libraries})
  get_target_property(headers ${lib} FASTRUN_PUBLIC_HEADERS)
  foreach(header ${headers})
    # A component with its own include/ folder (torch/include/fastrun/torch/ddp.h) installs
    # what is under include/fastrun/ (fastrun/torch/ddp.h).
    string(REGEX REPLACE "^[^/]+/include/fastrun/" "" installed ${header})
    get_filename_component(dir ${installed} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fastrun/${dir})
  endforeach()
endforeach()

install(EXPORT fastrunTargets NAMESPACE fastrun:: DESTINATION ${_fastrun_cmake_dir})
set(FASTRUN_TORCH_VERSION "${Torch_VERSION}")  # what find_package(fastrun COMPONENTS torch) requires
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fastrunConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fastrunConfig.cmake INSTALL_DESTINATION ${_fastrun_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fastrunConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fastrunConfig.cmake ${PROJECT_BINARY_DIR}/fastrunConfigVersion.cmake
  DESTINATION ${_fastrun_cmake_dir})
if(TARGET fastrun_nccl)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/fastrun_nccl_link.cpp DESTINATION ${_fastrun_cmake_dir})
endif()

# pkg-config: prefix= is found from the .pc file's own place, so a moved prefix still works.
set(_fastrun_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# fmt is a private dependency (no public header includes it): a shared build's consumer needs
# only its runtime library, which libfastrun_runtime names itself; a static build's links it.
set(FASTRUN_PC_REQUIRES_PRIVATE "")
if(NOT FASTRUN_SHARED_LIBS)
  set(FASTRUN_PC_REQUIRES_PRIVATE "Requires.private: fmt")
endif()
file(RELATIVE_PATH FASTRUN_PC_PREFIX ${CMAKE_INSTALL_PREFIX}/${_fastrun_pc_dir} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" FASTRUN_PC_PREFIX "\${pcfiledir}/${FASTRUN_PC_PREFIX}")
set(_fastrun_pc_files fastrun)
if(TARGET fastrun_nccl)
  list(APPEND _fastrun_pc_files fastrun-nccl)
endif()
foreach(pc ${_fastrun_pc_files})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${_fastrun_pc_dir})
endforeach()
