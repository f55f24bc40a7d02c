# cmake -P script: the runtime is a library under the launcher, never above it. Fails, naming the
# file and line, if anything in runtime/ includes a launcher header ("fastrun/launcher/...",
# "launcher/...", "../launcher/..."). Job-level store keys both share live in
# runtime/store/job_keys.h. Input: SOURCE_DIR.
cmake_minimum_required(VERSION 3.20)
file(GLOB_RECURSE sources ${SOURCE_DIR}/runtime/*.h ${SOURCE_DIR}/runtime/*.cpp ${SOURCE_DIR}/runtime/*.cu
     ${SOURCE_DIR}/runtime/*.cuh)
set(offending "")
foreach(source ${sources})
  file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]((fastrun|\\.\\.)/)*launcher/")
  foreach(line ${lines})
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${source})
    string(STRIP "${line}" line)
    list(APPEND offending "${rel}: ${line}")
  endforeach()
endforeach()
if(offending)
  list(JOIN offending "\n  " text)
  message(FATAL_ERROR "runtime/ must not include launcher/ headers (the launcher depends on the runtime, "
                      "not the reverse; shared store keys belong in runtime/store/job_keys.h):\n  ${text}")
endif()
