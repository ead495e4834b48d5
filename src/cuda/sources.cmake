# CUDA sources and their targets. Files under sm90/ are built for sm_90a only, under sm80/ for
# sm_80 only, the rest for every arch in FASTATTN_CUDA_ARCHS.
set(_cuda_dir ${CMAKE_CURRENT_LIST_DIR})
file(GLOB FASTATTN_CUDA_SOURCES CONFIGURE_DEPENDS ${_cuda_dir}/*.cu ${_cuda_dir}/*.cpp)
file(GLOB _sm90_sources CONFIGURE_DEPENDS ${_cuda_dir}/sm90/*.cu)
file(GLOB _sm80_sources CONFIGURE_DEPENDS ${_cuda_dir}/sm80/*.cu)

set(_all_gencode "")
foreach(arch ${FASTATTN_CUDA_ARCHS})
  list(APPEND _all_gencode "-gencode=arch=compute_${arch},code=sm_${arch}")
endforeach()
set(_cuda_common_flags --expt-relaxed-constexpr -lineinfo -Xptxas=--warn-on-spills
    -Xcompiler=-Wall,-Wno-unused-parameter)

foreach(src ${FASTATTN_CUDA_SOURCES})
  set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${_cuda_common_flags};${_all_gencode}")
endforeach()
if("90a" IN_LIST FASTATTN_CUDA_ARCHS)
  foreach(src ${_sm90_sources})
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
      "${_cuda_common_flags};-gencode=arch=compute_90a,code=sm_90a")
  endforeach()
  list(APPEND FASTATTN_CUDA_SOURCES ${_sm90_sources})
endif()
if("80" IN_LIST FASTATTN_CUDA_ARCHS)
  foreach(src ${_sm80_sources})
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
      "${_cuda_common_flags};-gencode=arch=compute_80,code=sm_80")
  endforeach()
  list(APPEND FASTATTN_CUDA_SOURCES ${_sm80_sources})
endif()
