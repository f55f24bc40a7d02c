# fastrun_library(NAME <target> ALIAS <alias> SOURCES ...): one place for how a fastrun
# library is declared (include layout, warnings, alias), so the three layers stay alike.
function(fastrun_library)
  cmake_parse_arguments(L "" "NAME;ALIAS" "SOURCES" ${ARGN})
  add_library(${L_NAME} SHARED ${L_SOURCES})
  add_library(fastrun::${L_ALIAS} ALIAS ${L_NAME})
  set_target_properties(${L_NAME} PROPERTIES EXPORT_NAME ${L_ALIAS} OUTPUT_NAME fastrun_${L_ALIAS})
  target_include_directories(${L_NAME} PUBLIC
    $<BUILD_INTERFACE:${FASTRUN_BUILD_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${L_NAME} PRIVATE fastrun_warnings)
endfunction()
