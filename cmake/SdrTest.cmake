# sdr_expect_test(NAME name LABELS l... [EXIT code] [PASS regex] [ENVIRONMENT e...]
#                 [WORKING_DIRECTORY dir] [RUN_SERIAL] COMMAND program args...)
#
# A ctest test that checks a program's output with a regex AND its exit status. ctest ignores
# the exit status of a test that has PASS_REGULAR_EXPRESSION, so a program that printed the
# right line and then failed would pass. Here expect_status.sh runs the program and, when the
# status differs from EXIT (default 0), prints a marker that FAIL_REGULAR_EXPRESSION catches.
# On the expected status it adds nothing to the output, so anchored regexes still hold.
function(sdr_expect_test)
  # PARSE_ARGV keeps empty arguments (sdr_demo --pcap "").
  cmake_parse_arguments(PARSE_ARGV 0 T "RUN_SERIAL" "NAME;EXIT;PASS;WORKING_DIRECTORY" "LABELS;ENVIRONMENT;COMMAND")
  if(NOT DEFINED T_EXIT)
    set(T_EXIT 0)
  endif()
  # An empty argument would vanish in the list expansion below: expect_status.sh restores it.
  set(args)
  foreach(a IN LISTS T_COMMAND)
    if(a STREQUAL "")
      set(a "<empty>")
    endif()
    list(APPEND args "${a}")
  endforeach()
  list(POP_FRONT args program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  set(wd ${CMAKE_CURRENT_BINARY_DIR})
  if(T_WORKING_DIRECTORY)
    set(wd ${T_WORKING_DIRECTORY})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${PROJECT_SOURCE_DIR}/cmake/expect_status.sh ${T_NAME} ${T_EXIT} ${program} ${args} WORKING_DIRECTORY ${wd})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" FAIL_REGULAR_EXPRESSION "SDR_TEST_EXIT_STATUS\\[${T_NAME}\\]")
  if(DEFINED T_PASS)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS}")
  endif()
  if(T_ENVIRONMENT)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENVIRONMENT}")
  endif()
  if(T_RUN_SERIAL)
    set_tests_properties(${T_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
