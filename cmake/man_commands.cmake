# Writes OUT, a help2man include file with a COMMANDS section: every
# command's own --help (generated from its option table), listed by
# `tollgate help commands` from the command table. Input: TOLLGATE, OUT.
execute_process(COMMAND ${TOLLGATE} help commands OUTPUT_VARIABLE names RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tollgate help commands failed")
endif()
string(REPLACE "\n" ";" names "${names}")
set(text "[COMMANDS]\n")
foreach(name IN LISTS names)
  if(name STREQUAL "")
    continue()
  endif()
  execute_process(COMMAND ${TOLLGATE} ${name} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tollgate ${name} --help failed")
  endif()
  # roff: a backslash is written \e, a line starting with . or ' is escaped
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  string(APPEND text ".SS ${name}\n.nf\n${help}.fi\n")
endforeach()
file(WRITE ${OUT} "${text}")
