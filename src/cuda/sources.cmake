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
# Without 90a, the shared kernels (append, combine, ...) carry compute_80 PTX as the sm80 family does, so
# an "80" build runs whole on a Hopper GPU too (the forced sm80 path; it had no append image there).
if(NOT "90a" IN_LIST FASTATTN_CUDA_ARCHS AND "80" IN_LIST FASTATTN_CUDA_ARCHS)
  list(APPEND _all_gencode "-gencode=arch=compute_80,code=compute_80")
endif()
set(_cuda_common_flags --expt-relaxed-constexpr -lineinfo -Xptxas=--warn-on-spills
    -Xcompiler=-Wall,-Wno-unused-parameter)

foreach(src ${FASTATTN_CUDA_SOURCES})
  if(NOT src MATCHES "\\.cu$")
    continue()  # host-only .cpp files here are compiled by the C++ compiler
  endif()
  set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${_cuda_common_flags};${_all_gencode}")
endforeach()
# The kernel menu: every forward instantiation these sources can build, one row per
# arch:dtype:d_qk:d_v. The rows that FASTATTN_CUDA_ARCHS, FASTATTN_DTYPES and FASTATTN_HEAD_DIMS
# select generate the instantiation units, the dispatch table (fwd_dispatch.inc: backend.cu's
# dispatch by arch, dtype and head dims, its build_info and the "built:" list of its messages).
# The head-dim set is written here only. sm_80 rows: the Ampere forward (sm80/fwd/, d 64 and 128 so
# far; no split, block-sparse or backward twins), selected by "80" in FASTATTN_CUDA_ARCHS.
set(FASTATTN_KERNEL_MENU "")
foreach(dt fp16 bf16)
  foreach(d 64 96 128 192 256)
    list(APPEND FASTATTN_KERNEL_MENU "sm90:${dt}:${d}:${d}")
  endforeach()
  list(APPEND FASTATTN_KERNEL_MENU "sm90:${dt}:192:128")  # d_v < d: DeepSeek's shape (VHeadDim)
  foreach(d 64 128)
    list(APPEND FASTATTN_KERNEL_MENU "sm80:${dt}:${d}:${d}")
  endforeach()
endforeach()

# A menu dtype's C type and DType enumerator.
function(fastattn_dtype_names dt out_ctype out_enum)
  if(dt STREQUAL "bf16")
    set(${out_ctype} __nv_bfloat16 PARENT_SCOPE)
    set(${out_enum} BF16 PARENT_SCOPE)
  else()
    set(${out_ctype} __half PARENT_SCOPE)
    set(${out_enum} F16 PARENT_SCOPE)
  endif()
endfunction()

set(_menu_dims "")
set(_menu_dtypes "")
foreach(row ${FASTATTN_KERNEL_MENU})
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 1 _dt)
  list(GET _f 2 _dqk)
  list(APPEND _menu_dims ${_dqk})
  list(APPEND _menu_dtypes ${_dt})
endforeach()
list(REMOVE_DUPLICATES _menu_dims)
list(REMOVE_DUPLICATES _menu_dtypes)
set(_menu_dims_built ${_menu_dims})
if(FASTATTN_HEAD_DIMS)
  set(_menu_dims_built ${FASTATTN_HEAD_DIMS})
endif()
foreach(d ${FASTATTN_HEAD_DIMS})
  if(NOT d IN_LIST _menu_dims AND NOT d STREQUAL "splitd")
    message(FATAL_ERROR "FASTATTN_HEAD_DIMS: ${d} is not a head dim of the kernel menu (${_menu_dims}) nor splitd")
  endif()
endforeach()
foreach(dt ${FASTATTN_DTYPES})
  if(NOT dt IN_LIST _menu_dtypes)
    message(FATAL_ERROR "FASTATTN_DTYPES: unknown dtype '${dt}' (use ${_menu_dtypes})")
  endif()
endforeach()

# Every sm90 row's PV needs the RS wgmma wrapper of N = d_v (scripts/gen/wgmma_ops.py writes them).
file(READ ${_cuda_dir}/sm90/prim/wgmma_ops.inc _wgmma_ops)
foreach(row ${FASTATTN_KERNEL_MENU})
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 0 _arch)
  list(GET _f 3 _dv)
  if(_arch STREQUAL "sm90")
    foreach(_ct __half __nv_bfloat16)
      string(FIND "${_wgmma_ops}" "struct WgmmaRS<${_ct}, ${_dv}>" _at)
      if(_at EQUAL -1)
        message(FATAL_ERROR "kernel menu row ${row}: sm90/prim/wgmma_ops.inc has no WgmmaRS<${_ct}, ${_dv}> "
                            "(add ${_dv} to RS_N in scripts/gen/wgmma_ops.py and regenerate)")
      endif()
    endforeach()
  endif()
endforeach()

# A generated unit's head-dim part: d<d>, or d<d>_v<d_v> where they differ.
function(fastattn_unit_dims d dv out)
  if(dv EQUAL d)
    set(${out} d${d} PARENT_SCOPE)
  else()
    set(${out} d${d}_v${dv} PARENT_SCOPE)
  endif()
endfunction()

# Whether a menu row of dtype `dt` and head dim `d` is selected by FASTATTN_DTYPES and
# FASTATTN_HEAD_DIMS (empty: every menu head dim); the forward's and the backward's rows alike.
function(fastattn_row_selected dt d out)
  if(NOT dt IN_LIST FASTATTN_DTYPES OR (FASTATTN_HEAD_DIMS AND NOT d IN_LIST FASTATTN_HEAD_DIMS))
    set(${out} FALSE PARENT_SCOPE)
  else()
    set(${out} TRUE PARENT_SCOPE)
  endif()
endfunction()

set(_dispatch "")
set(_bsp_dispatch "")
set(_bits_dispatch "")
set(FASTATTN_KERNEL_COUNT 0)
set(FASTATTN_BSP_KERNEL_COUNT 0)
foreach(row ${FASTATTN_KERNEL_MENU})
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 0 _arch)
  list(GET _f 1 dt)
  list(GET _f 2 FA_HDIM)
  list(GET _f 3 FA_HDIM_V)
  fastattn_row_selected(${dt} ${FA_HDIM} _selected)
  if(NOT _selected)
    continue()
  endif()
  if(_arch STREQUAL "sm90")
    if(NOT "90a" IN_LIST FASTATTN_CUDA_ARCHS)
      continue()
    endif()
    set(_major 9)
  elseif(_arch STREQUAL "sm80")
    if(NOT "80" IN_LIST FASTATTN_CUDA_ARCHS)
      continue()
    endif()
    set(_major 8)
  else()
    message(FATAL_ERROR "kernel menu row ${row}: unknown arch '${_arch}'")
  endif()
  fastattn_dtype_names(${dt} FA_CTYPE _enum)
  fastattn_unit_dims(${FA_HDIM} ${FA_HDIM_V} _dims)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/${_arch}/fwd_${dt}_${_dims}.cu)
  configure_file(${_cuda_dir}/${_arch}/fwd/inst.cu.in ${_out} @ONLY)
  list(APPEND _${_arch}_sources ${_out})
  string(APPEND _dispatch "FASTATTN_FWD_CASE(${_arch}, ${_major}, DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM}, ${FA_HDIM_V})\n")
  math(EXPR FASTATTN_KERNEL_COUNT "${FASTATTN_KERNEL_COUNT} + 1")
  if(_arch STREQUAL "sm80")
    continue()  # the Ampere forward has no split-KV or block-sparse twin yet
  endif()
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/${_arch}/fwd_split_${dt}_${_dims}.cu)  # its split-KV twin
  configure_file(${_cuda_dir}/${_arch}/fwd/inst_split.cu.in ${_out} @ONLY)
  list(APPEND _${_arch}_sources ${_out})
  # Its mask-list twins (d <= 128, d_v = d), block-sparse (sm90/fwd/launch_block_sparse.cuh) and
  # element-bitmask (launch_bitmask.cuh), in one unit, each a row of its own dispatch.
  if(FA_HDIM EQUAL FA_HDIM_V AND FA_HDIM LESS_EQUAL 128)
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/${_arch}/fwd_masked_${dt}_${_dims}.cu)
    configure_file(${_cuda_dir}/${_arch}/fwd/inst_masked.cu.in ${_out} @ONLY)
    list(APPEND _${_arch}_sources ${_out})
    string(APPEND _bsp_dispatch
           "FASTATTN_FWD_BSP_CASE(${_arch}, ${_major}, DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM}, ${FA_HDIM_V})\n")
    string(APPEND _bits_dispatch
           "FASTATTN_FWD_BITS_CASE(${_arch}, ${_major}, DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM}, ${FA_HDIM_V})\n")
    math(EXPR FASTATTN_BSP_KERNEL_COUNT "${FASTATTN_BSP_KERNEL_COUNT} + 1")
  endif()
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_dispatch.inc.tmp "${_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_dispatch.inc COPYONLY)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_block_sparse_dispatch.inc.tmp "${_bsp_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_block_sparse_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_block_sparse_dispatch.inc COPYONLY)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_bitmask_dispatch.inc.tmp "${_bits_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_bitmask_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_bitmask_dispatch.inc COPYONLY)

# The split-D forward (d_qk, d_v 320..1024 in steps of 64; sm90/fwd_splitd/, cuda/splitd_rule.h):
# the head dims are run-time counts there, so its menu rows are per dtype only. Selected with its
# dtype when FASTATTN_HEAD_DIMS is empty or names `splitd`. Generates fwd_splitd_<dtype>.cu (one kernel,
# sm90/fwd_splitd/kernel.cuh) and fwd_splitd_dispatch.inc (backend.cu's dispatch and its table of built kernels).
set(FASTATTN_SPLITD_MENU "")
foreach(dt fp16 bf16)
  list(APPEND FASTATTN_SPLITD_MENU "sm90:${dt}")
endforeach()
set(_splitd_dispatch "")
set(FASTATTN_SPLITD_KERNEL_COUNT 0)
foreach(row ${FASTATTN_SPLITD_MENU})
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 0 _arch)
  list(GET _f 1 dt)
  if(NOT dt IN_LIST FASTATTN_DTYPES OR (FASTATTN_HEAD_DIMS AND NOT "splitd" IN_LIST FASTATTN_HEAD_DIMS)
     OR NOT "90a" IN_LIST FASTATTN_CUDA_ARCHS)
    continue()
  endif()
  fastattn_dtype_names(${dt} FA_CTYPE _enum)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/${_arch}/fwd_splitd_${dt}.cu)
  configure_file(${_cuda_dir}/${_arch}/fwd_splitd/inst.cu.in ${_out} @ONLY)
  list(APPEND _${_arch}_sources ${_out})
  string(APPEND _splitd_dispatch "FASTATTN_FWD_SPLITD_CASE(${_arch}, 9, DType::${_enum}, ${FA_CTYPE})\n")
  math(EXPR FASTATTN_SPLITD_KERNEL_COUNT "${FASTATTN_SPLITD_KERNEL_COUNT} + 1")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_splitd_dispatch.inc.tmp "${_splitd_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_splitd_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/fwd_splitd_dispatch.inc COPYONLY)
message(STATUS "fastattn: forward kernels from the menu: ${FASTATTN_KERNEL_COUNT} "
               "(${FASTATTN_DTYPES} x head dims ${_menu_dims_built}), block-sparse ${FASTATTN_BSP_KERNEL_COUNT}, "
               "split-D ${FASTATTN_SPLITD_KERNEL_COUNT}")

# The backward's menu: the forward's sm90 rows (arch:dtype:d_qk:d_v), under the same selection
# (FASTATTN_DTYPES, _HEAD_DIMS by d_qk, _CUDA_ARCHS). Taken from the forward's, so that every backward
# has its forward: check_backward (bwd_backend.cu) runs check_forward's other checks (alignment, out,
# mask, varlen bounds) only past a (d, d_v) the forward has built. d <= 128 in 128-key CTAs, 192 / 256
# in 64- or 80-key CTAs, 192 / 128 on d 192's tiles with V / dO on d_v (BwdConfig, BwdConfigKeys80;
# docs/notes/bwd-sm90.md). Generates bwd_<dtype>_d<d>[_v<d_v>].cu and bwd_dispatch.inc
# (bwd_backend.cu's dispatch by dtype, d_qk and d_v; backend.cu's table of built kernels).
set(FASTATTN_BWD_MENU "")
foreach(row ${FASTATTN_KERNEL_MENU})
  if(row MATCHES "^sm90:")
    list(APPEND FASTATTN_BWD_MENU ${row})
  endif()
endforeach()
set(_bwd_dispatch "")
set(FASTATTN_BWD_KERNEL_COUNT 0)
foreach(row ${FASTATTN_BWD_MENU})
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 0 _arch)
  list(GET _f 1 dt)
  list(GET _f 2 FA_HDIM)
  list(GET _f 3 FA_HDIM_V)
  fastattn_row_selected(${dt} ${FA_HDIM} _selected)
  if(NOT _selected OR NOT "90a" IN_LIST FASTATTN_CUDA_ARCHS)
    continue()
  endif()
  fastattn_dtype_names(${dt} FA_CTYPE _enum)
  fastattn_unit_dims(${FA_HDIM} ${FA_HDIM_V} _dims)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/${_arch}/bwd_${dt}_${_dims}.cu)
  configure_file(${_cuda_dir}/${_arch}/bwd/inst.cu.in ${_out} @ONLY)
  list(APPEND _${_arch}_sources ${_out})
  string(APPEND _bwd_dispatch "FASTATTN_BWD_CASE(DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM}, ${FA_HDIM_V})\n")
  math(EXPR FASTATTN_BWD_KERNEL_COUNT "${FASTATTN_BWD_KERNEL_COUNT} + 1")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/sm90/bwd_dispatch.inc.tmp "${_bwd_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/sm90/bwd_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/sm90/bwd_dispatch.inc COPYONLY)
message(STATUS "fastattn: backward kernel sets from the menu: ${FASTATTN_BWD_KERNEL_COUNT} "
               "(preprocess, main, postprocess each)")
# The Ampere backward's menu: the forward's sm80 rows (d 64 / 128), selected by "80" in
# FASTATTN_CUDA_ARCHS like them. Generates sm80/bwd_<dtype>_d<d>.cu (preprocess, main kernel and
# postprocess: sm80/bwd/launch.cuh) and sm80/bwd_dispatch.inc (bwd_backend.cu's dispatch on a
# major-8 device; backend.cu's table of built kernels), written also when empty.
set(_bwd80_dispatch "")
set(FASTATTN_BWD80_KERNEL_COUNT 0)
foreach(row ${FASTATTN_KERNEL_MENU})
  if(NOT row MATCHES "^sm80:")
    continue()
  endif()
  string(REPLACE ":" ";" _f "${row}")
  list(GET _f 1 dt)
  list(GET _f 2 FA_HDIM)
  fastattn_row_selected(${dt} ${FA_HDIM} _selected)
  if(NOT _selected OR NOT "80" IN_LIST FASTATTN_CUDA_ARCHS)
    continue()
  endif()
  fastattn_dtype_names(${dt} FA_CTYPE _enum)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/cuda/sm80/bwd_${dt}_d${FA_HDIM}.cu)
  configure_file(${_cuda_dir}/sm80/bwd/inst.cu.in ${_out} @ONLY)
  list(APPEND _sm80_sources ${_out})
  string(APPEND _bwd80_dispatch "FASTATTN_BWD80_CASE(DType::${_enum}, ${FA_CTYPE}, ${FA_HDIM})\n")
  math(EXPR FASTATTN_BWD80_KERNEL_COUNT "${FASTATTN_BWD80_KERNEL_COUNT} + 1")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cuda/sm80/bwd_dispatch.inc.tmp "${_bwd80_dispatch}")
configure_file(${CMAKE_CURRENT_BINARY_DIR}/cuda/sm80/bwd_dispatch.inc.tmp
               ${CMAKE_CURRENT_BINARY_DIR}/cuda/sm80/bwd_dispatch.inc COPYONLY)
message(STATUS "fastattn: sm80 backward kernel sets: ${FASTATTN_BWD80_KERNEL_COUNT} (preprocess, main, postprocess each)")

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
      "${_cuda_common_flags};-gencode=arch=compute_80,code=[sm_80,compute_80]")  # + PTX: sm_86/89, and a forced run on sm_90
  endforeach()
  list(APPEND FASTATTN_CUDA_SOURCES ${_sm80_sources})
endif()
