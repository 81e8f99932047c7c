# Runs the fp8dsa command once and checks how it ended (ctest -P script, see CMakeLists.txt here).
#   CLI             the executable
#   ARGS            its arguments, separated by '|'
#   EXPECT_RC       the exit status it must return (a crash or abort never matches)
#   STDOUT_MATCH    regex stdout must match;   STDOUT_EMPTY: stdout must be empty
#   STDERR_MATCH    regex stderr must match;   STDERR_EMPTY: stderr must be empty
#   STDOUT_NOT_MATCH  regex stdout must not match
#   ADDRESS_LIMIT_KB  run under `ulimit -v` (so that allocating first would fail the test)
string(REPLACE "|" ";" args "${ARGS}")
if(ADDRESS_LIMIT_KB)
  set(command sh -c "ulimit -v ${ADDRESS_LIMIT_KB} && exec \"$0\" \"$@\"" "${CLI}" ${args})
else()
  set(command "${CLI}" ${args})
endif()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)

set(failures "")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  string(APPEND failures "exit status '${rc}', expected ${EXPECT_RC}\n")
endif()
if(DEFINED STDOUT_MATCH AND NOT out MATCHES "${STDOUT_MATCH}")
  string(APPEND failures "stdout does not match '${STDOUT_MATCH}'\n")
endif()
if(DEFINED STDOUT_NOT_MATCH AND out MATCHES "${STDOUT_NOT_MATCH}")
  string(APPEND failures "stdout matches '${STDOUT_NOT_MATCH}' (diagnostics belong on stderr)\n")
endif()
if(DEFINED STDERR_MATCH AND NOT err MATCHES "${STDERR_MATCH}")
  string(APPEND failures "stderr does not match '${STDERR_MATCH}'\n")
endif()
if(STDOUT_EMPTY AND NOT out STREQUAL "")
  string(APPEND failures "stdout is not empty\n")
endif()
if(STDERR_EMPTY AND NOT err STREQUAL "")
  string(APPEND failures "stderr is not empty\n")
endif()
if(failures)
  message(FATAL_ERROR "fp8dsa ${args}:\n${failures}--- stdout:\n${out}--- stderr:\n${err}")
endif()
