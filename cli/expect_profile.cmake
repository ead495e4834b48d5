# Runs `fastattn profile ARGS` and passes when it exits OK_RC with output matching OK_REGEX (the
# machine can profile), or NO_RC with output matching NO_REGEX (it cannot: no GPU, no probed
# kernels; the message must say why). Either pair may be left out.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${CLI} profile ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("exit ${rc}\n${out}${err}")
if(DEFINED OK_RC AND rc STREQUAL "${OK_RC}" AND "${out}${err}" MATCHES "${OK_REGEX}")
  return()
endif()
if(DEFINED NO_RC AND rc STREQUAL "${NO_RC}" AND "${out}${err}" MATCHES "${NO_REGEX}")
  return()
endif()
message(FATAL_ERROR "unexpected exit ${rc} or output (allowed: ${OK_RC} /${OK_REGEX}/, ${NO_RC} /${NO_REGEX}/)")
