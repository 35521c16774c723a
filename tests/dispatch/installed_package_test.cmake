# Installs the build tree into a fresh prefix, configures and builds examples/hgemm_app against the installed
# package alone (find_package(rlgemm)), and runs the example: exit 0 (computed and checked on a GPU) or 3
# (no usable GPU) pass.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(app_build ${WORK_DIR}/hgemm_app)

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${step}: ok")
endfunction()

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component rlgemm)
foreach(file include/rlgemm/rlgemm.h include/rlgemm/rlgemm_c.h lib/cmake/rlgemm/rlgemmConfig.cmake)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "the installed tree lacks ${file}")
  endif()
endforeach()

# Only the installed prefix is searched for rlgemm, so the build tree cannot stand in for it.
set(configure_args -S ${SOURCE_DIR}/examples/hgemm_app -B ${app_build} -G ${GENERATOR}
                   -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
if(DEFINED CUDA_COMPILER AND NOT CUDA_COMPILER STREQUAL "")
  get_filename_component(cuda_bin ${CUDA_COMPILER} DIRECTORY)
  get_filename_component(cuda_root ${cuda_bin} DIRECTORY)
  list(APPEND configure_args -DCUDAToolkit_ROOT=${cuda_root})
endif()
run("configure the example" ${CMAKE_COMMAND} ${configure_args})
run("build the example" ${CMAKE_COMMAND} --build ${app_build})

execute_process(COMMAND ${app_build}/hgemm_app RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 240)
message(STATUS "hgemm_app exited ${rc}:\n${out}${err}")
if(rc EQUAL 3)
  if(NOT err MATCHES "no GPU")
    message(FATAL_ERROR "hgemm_app exited 3 without saying that there is no GPU")
  endif()
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "hgemm_app failed")
endif()
