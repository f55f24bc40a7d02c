# Warnings on, and kept at zero: -Werror only where the developer or CI asks for it
# (FASTRUN_WERROR=ON), so a newer compiler on a user's machine never breaks their build.
option(FASTRUN_WERROR "Treat warnings as errors" OFF)
add_library(fastrun_warnings INTERFACE)
target_compile_options(fastrun_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FASTRUN_WERROR}>>:-Werror>)
