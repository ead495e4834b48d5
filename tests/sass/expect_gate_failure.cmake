# Runs `fastattn-sass gate` on a planted violation and passes only when the gate fails (exit 1)
# and its report matches every '|'-separated regex in EXPECT.
execute_process(COMMAND ${TOOL} gate --rules ${RULES} ${INPUT}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected the gate to fail with exit 1 on ${INPUT}, got '${rc}'")
endif()
string(REPLACE "|" ";" patterns "${EXPECT}")
foreach(p IN LISTS patterns)
  if(NOT out MATCHES "${p}")
    message(FATAL_ERROR "gate report lacks /${p}/")
  endif()
endforeach()
