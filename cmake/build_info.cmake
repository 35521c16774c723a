# Writes OUTPUT with the commit the binary was built from; rewrites it only when it changed.
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
execute_process(COMMAND git -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT dirty STREQUAL "")
  set(commit "${commit}-dirty")
endif()
set(text "namespace rlgemm {\nextern const char kBuildCommit[];\nextern const char kVersion[];\nconst char kBuildCommit[] = \"${commit}\";\nconst char kVersion[] = \"${VERSION}\";\n}\n")
include(${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake)
rlgemm_write_if_changed(${OUTPUT} "${text}")
