# Parses the portable + Adreno kernel sets as one OpenCL C 2.0 program with
# clang (SPIR target: cl_khr_fp16 is on, so the fp16 path is checked), once
# more with the Qualcomm sub-group attribute enabled (clang does not know
# it, so only its syntax is checked), and the portable set alone as OpenCL
# C 1.2. Fails on any error or warning.
file(READ ${DIR}/kernels_portable.cl portable)
file(READ ${DIR}/kernels_adreno.cl adreno)
file(WRITE ${OUT} "${portable}\n${adreno}")
foreach(args
    "-cl-std=CL2.0;${OUT}"
    "-cl-std=CL2.0;-Dcl_qcom_reqd_sub_group_size=1;-Wno-unknown-attributes;-Wno-ignored-pragmas;${OUT}"
    "-cl-std=CL1.2;${DIR}/kernels_portable.cl")
  execute_process(
    COMMAND ${CLANG} -x cl -target spir-unknown-unknown -Xclang -finclude-default-header
            -fsyntax-only -Werror ${args}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "clang rejects the OpenCL kernels (${args}):\n${err}")
  endif()
endforeach()
message(STATUS "the OpenCL kernel sets parse")
