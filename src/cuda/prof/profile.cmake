# The profiling build of the Hopper forward (issue #6, docs/profiling.md): a separate static
# library with the sm90 forward compiled with -DFASTATTN_LOOP_PROBES for a few (dtype, head dim)
# pairs, each also with -DFASTATTN_PROBE_PV_SYNC, plus the host entry profile_forward(). The
# default kernels in libfastattn are not touched by any of this. Included from src/CMakeLists.txt.
option(FASTATTN_PROFILE "Build the probed forward kernels for `fastattn profile` (CUDA with sm_90a)" ON)
set(FASTATTN_PROFILE_KERNELS "fp16:128;bf16:128" CACHE STRING
    "dtype:head_dim pairs of the probed forward (each is compiled twice: pipeline and PV-sync)")
if(NOT FASTATTN_PROFILE OR NOT FASTATTN_WITH_CUDA OR NOT "90a" IN_LIST FASTATTN_CUDA_ARCHS)
  return()
endif()

set(_prof_dir ${CMAKE_CURRENT_LIST_DIR})
set(_prof_gen ${CMAKE_CURRENT_BINARY_DIR}/cuda/prof)
set(_prof_sources ${_prof_dir}/profile_forward.cu)
set(_prof_dispatch "")
foreach(pair ${FASTATTN_PROFILE_KERNELS})
  # dtype:head_dim of an sm90 row of the kernel menu (src/cuda/sources.cmake)
  string(REPLACE ":" ";" _pair "${pair}")
  list(LENGTH _pair _n)
  set(_row "")
  if(_n EQUAL 2)
    list(GET _pair 0 _dt)
    list(GET _pair 1 FA_HDIM)
    set(_row "sm90:${_dt}:${FA_HDIM}:${FA_HDIM}")
  endif()
  if(NOT _row IN_LIST FASTATTN_KERNEL_MENU)
    message(FATAL_ERROR "FASTATTN_PROFILE_KERNELS: '${pair}' is not dtype:head_dim of an sm90 row of the kernel "
                        "menu (${FASTATTN_KERNEL_MENU})")
  endif()
  fastattn_dtype_names(${_dt} FA_CTYPE _enum)
  foreach(FA_PV_SYNC false true)
    if(FA_PV_SYNC)
      set(_out ${_prof_gen}/probed_${_dt}_d${FA_HDIM}_pvsync.cu)
      set(FA_PV_SYNC_FLAG " -DFASTATTN_PROBE_PV_SYNC")
    else()
      set(_out ${_prof_gen}/probed_${_dt}_d${FA_HDIM}.cu)
      set(FA_PV_SYNC_FLAG "")
    endif()
    configure_file(${_prof_dir}/probed_inst.cu.in ${_out} @ONLY)
    if(FA_PV_SYNC)
      set_source_files_properties(${_out} PROPERTIES COMPILE_DEFINITIONS FASTATTN_PROBE_PV_SYNC=1)
    endif()
    list(APPEND _prof_sources ${_out})
  endforeach()
  string(APPEND _prof_dispatch "FASTATTN_PROBED_CASE(DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM})\n")
endforeach()
file(WRITE ${_prof_gen}/probed_dispatch.inc.tmp "${_prof_dispatch}")
configure_file(${_prof_gen}/probed_dispatch.inc.tmp ${_prof_gen}/probed_dispatch.inc COPYONLY)

add_library(fastattn_profile_kernels STATIC ${_prof_sources})
target_include_directories(fastattn_profile_kernels
  PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}
  PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
target_compile_definitions(fastattn_profile_kernels PRIVATE FASTATTN_LOOP_PROBES=1
                           INTERFACE FASTATTN_WITH_PROFILE=1)
target_compile_options(fastattn_profile_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:${_cuda_common_flags};-gencode=arch=compute_90a,code=sm_90a>)
target_link_libraries(fastattn_profile_kernels PUBLIC fastattn_static CUDA::cudart_static)
message(STATUS "fastattn: probed forward kernels (fastattn profile): ${FASTATTN_PROFILE_KERNELS} "
               "(x2: pipeline, PV-sync)")
