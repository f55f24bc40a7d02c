# cmake -P script: every "docs/<name>.md" or "<NAME>.md" cited in a source comment names a file
# the repository has, and no comment cites the design notes that never shipped (DESIGN.md,
# STYLE.md, runtime-notes). Input: SOURCE_DIR.
cmake_minimum_required(VERSION 3.20)
file(GLOB_RECURSE sources ${SOURCE_DIR}/include/*.h ${SOURCE_DIR}/runtime/*.h ${SOURCE_DIR}/runtime/*.cpp
     ${SOURCE_DIR}/launcher/*.h ${SOURCE_DIR}/launcher/*.cpp ${SOURCE_DIR}/samplers/*.h
     ${SOURCE_DIR}/samplers/*.cpp ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/tools/*.cpp ${SOURCE_DIR}/examples/*.h
     ${SOURCE_DIR}/examples/*.cpp)
set(missing "")
foreach(source ${sources})
  file(STRINGS ${source} lines REGEX "[A-Za-z_/-]+\\.md")
  foreach(line ${lines})
    string(REGEX MATCHALL "[A-Za-z_/-]+\\.md" cited "${line}")
    foreach(name ${cited})
      if(NOT EXISTS ${SOURCE_DIR}/${name} AND NOT EXISTS ${SOURCE_DIR}/docs/${name})
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${source})
        list(APPEND missing "${rel}: ${name}")
      endif()
    endforeach()
  endforeach()
  # The design notes the code was written from ("runtime-notes §3.1") are not in the repository.
  file(STRINGS ${source} notes REGEX "runtime-notes")
  if(notes)
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${source})
    list(APPEND missing "${rel}: runtime-notes")
  endif()
endforeach()
if(missing)
  list(JOIN missing "\n  " text)
  message(FATAL_ERROR "comments cite files the repository does not have:\n  ${text}")
endif()
