include_guard(GLOBAL)

# A command-line program run as a user runs it (run_cli.cmake): exit status, stdout and stderr.
# fp8dsa_command_test(<test name> <target> <label> ARGS <arg>... EXPECT_RC <rc> [LIMIT] [STDOUT_MATCH <re>]
#                     [STDERR_MATCH <re>] [STDOUT_NOT_MATCH <re>] [STDOUT_EMPTY] [STDERR_EMPTY]
#                     [ENV <name=value>...])
# LIMIT runs it under an address-space cap of FP8DSA_COMMAND_LIMIT_KB (skipped under a sanitizer);
# ENV sets environment variables for the run.
set(FP8DSA_COMMAND_LIMIT_KB 8388608)
function(fp8dsa_command_test test target label)
  cmake_parse_arguments(ARG "LIMIT;STDOUT_EMPTY;STDERR_EMPTY" "EXPECT_RC;STDOUT_MATCH;STDERR_MATCH;STDOUT_NOT_MATCH"
                        "ARGS;ENV" ${ARGN})
  string(REPLACE ";" "|" args "${ARG_ARGS}")
  set(defines -DCLI=$<TARGET_FILE:${target}> "-DARGS=${args}" -DEXPECT_RC=${ARG_EXPECT_RC})
  foreach(key STDOUT_MATCH STDERR_MATCH STDOUT_NOT_MATCH)
    if(DEFINED ARG_${key})
      list(APPEND defines "-D${key}=${ARG_${key}}")
    endif()
  endforeach()
  foreach(flag STDOUT_EMPTY STDERR_EMPTY)
    if(ARG_${flag})
      list(APPEND defines -D${flag}=ON)
    endif()
  endforeach()
  if(ARG_LIMIT)
    # A sanitizer's shadow memory needs terabytes of address space: no cap is possible there.
    if(FP8DSA_SANITIZE OR "${CMAKE_CXX_FLAGS} ${CMAKE_EXE_LINKER_FLAGS}" MATCHES "-fsanitize=(address|thread|memory)")
      return()
    endif()
    list(APPEND defines -DADDRESS_LIMIT_KB=${FP8DSA_COMMAND_LIMIT_KB})
  endif()
  add_test(NAME ${test} COMMAND ${CMAKE_COMMAND} ${defines} -P ${PROJECT_SOURCE_DIR}/tests/cli/run_cli.cmake)
  set_tests_properties(${test} PROPERTIES TIMEOUT 60 LABELS ${label})
  if(ARG_ENV)
    set_tests_properties(${test} PROPERTIES ENVIRONMENT "${ARG_ENV}")
  endif()
endfunction()
