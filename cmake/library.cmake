# fastrun_library(NAME <target> ALIAS <alias> SOURCES ... PUBLIC_HEADERS ...): one place for how
# a fastrun library is declared (include layout, C++20 usage requirement, warnings, alias,
# shared or static, RUNPATH, which headers are installed), so the layers stay alike.
# PUBLIC_HEADERS are paths relative to the source root ("runtime/join/context.h"): the headers a
# user's program includes. Only they are installed; tests/install checks that none of them
# includes a header outside the list.
if(FASTRUN_SHARED_LIBS)
  set(FASTRUN_LIBRARY_TYPE SHARED)
else()
  set(FASTRUN_LIBRARY_TYPE STATIC)
endif()

# fastrun_install_rpath(<target> <install dir of its file>): once installed, the target finds
# fastrun's libraries relative to itself ($ORIGIN), so a prefix works from any path, moved or
# copied, without LD_LIBRARY_PATH or ldconfig. The build tree keeps CMake's absolute RPATH.
function(fastrun_install_rpath target dir)
  file(RELATIVE_PATH rel ${CMAKE_INSTALL_PREFIX}/${dir} ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
  if(rel STREQUAL "")
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  else()
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/${rel}")
  endif()
endfunction()

function(fastrun_library)
  cmake_parse_arguments(L "" "NAME;ALIAS" "SOURCES;PUBLIC_HEADERS" ${ARGN})
  add_library(${L_NAME} ${FASTRUN_LIBRARY_TYPE} ${L_SOURCES})
  add_library(fastrun::${L_ALIAS} ALIAS ${L_NAME})
  set_target_properties(${L_NAME} PROPERTIES EXPORT_NAME ${L_ALIAS} OUTPUT_NAME fastrun_${L_ALIAS}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    FASTRUN_PUBLIC_HEADERS "${L_PUBLIC_HEADERS}")
  fastrun_install_rpath(${L_NAME} ${CMAKE_INSTALL_LIBDIR})
  # A call from the library to a function it defines itself binds at link time, not through the
  # PLT: each first call of one otherwise costs the dynamic loader a symbol search through every
  # loaded library in every process (the launcher, each rank, before and after its exec), the
  # largest user-space item of a job's start. Only functions: data keeps one instance across
  # libraries (an inline function's static, typeinfo), and nothing outside fastrun changes.
  if(FASTRUN_SHARED_LIBS AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${L_NAME} PRIVATE "LINKER:-Bsymbolic-functions")
  endif()
  # The public headers use C++20 (requires-clauses, <span>, ...): a consumer on an older default
  # standard gets -std=c++20 from the target instead of errors deep inside them.
  target_compile_features(${L_NAME} PUBLIC cxx_std_20)
  target_include_directories(${L_NAME} PUBLIC
    $<BUILD_INTERFACE:${FASTRUN_BUILD_INCLUDE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Build-only: the warning flags (and -Werror) never reach a consumer or the exported package.
  target_link_libraries(${L_NAME} PRIVATE $<BUILD_INTERFACE:fastrun_warnings>)
  fastrun_unity(${L_NAME})
endfunction()

# The libraries compile in batches of sources (FASTRUN_UNITY_BUILD): most of a source's compile
# time is the same headers (fmt, Asio, the standard library), so batches halve a cold build's CPU
# time (the main job's first build on a fresh machine). Batches of 8 keep two cores busy and an
# edit recompiles only its batch. Tests and programs compile file by file (Catch2's generated
# names are unique per file only).
function(fastrun_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${FASTRUN_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 8)
endfunction()
