# Install the libraries, their headers and an exported package so that a user's
#   find_package(fastrun) + target_link_libraries(app fastrun::runtime)
# works against the installed tree (tests/install builds such a consumer).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS fastrun_samplers fastrun_runtime fastrun_launcher fastrun_warnings
  EXPORT fastrunTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(layer samplers runtime launcher)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fastrun/${layer}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT fastrunTargets NAMESPACE fastrun:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fastrun)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/fastrunConfig.cmake.in
  ${CMAKE_BINARY_DIR}/fastrunConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fastrun)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/fastrunConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/fastrunConfig.cmake ${CMAKE_BINARY_DIR}/fastrunConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fastrun)
