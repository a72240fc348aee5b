// dwell's Adreno-tuned OpenCL kernels, built after the portable set (whose
// helpers they use) when CL_DEVICE_NAME names an Adreno GPU, or when the
// manifest asks with `kernels = "adreno"`.
//
// - Q4_0 weights are rearranged once at load (prepare_q4_0 in node_runner.cpp): the
//   16-byte quant blocks transposed so that block b of rows n, n+1, ... lie
//   next to each other (row n's block b is texel b * N + n), read through an
//   image1d_buffer (Adreno's texture path caches them), and the fp16 scales
//   split into their own array in the same order.
// - Dequantization runs in fp16 where the device has cl_khr_fp16; products
//   with the f32 activations and the sums stay in f32.
// - Work-groups are pinned to Adreno's half-wave sub-groups where the
//   compiler knows qcom_reqd_sub_group_size.
//
// Without cl_khr_fp16 (PoCL in CI) the same code runs in f32, so the layout
// and the image path are tested there; CI also parses this file with
// clang's OpenCL front end with fp16 on.

#ifdef cl_khr_fp16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half dq_t;
#else
typedef float dq_t;
#endif

#ifdef cl_qcom_reqd_sub_group_size
#pragma OPENCL EXTENSION cl_qcom_reqd_sub_group_size : enable
#define DWELL_HALF_WAVE __attribute__((qcom_reqd_sub_group_size("half")))
#else
#define DWELL_HALF_WAVE
#endif

// out [N, M] = W x, W Q4_0 in the transposed split layout. Global (N, M).
DWELL_HALF_WAVE
__kernel void matmul_q4_0_t(__read_only image1d_buffer_t quants, __global const half* scales,
                            __global const float* x, __global float* out, int k, int n_out) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    __global const float* xr = x + (long)m * k;
    float sum = 0.0f;
    for (int b = 0; b < k / 32; ++b) {
        const uint4 q = read_imageui(quants, b * n_out + n);
        const dq_t d = (dq_t)vload_half(b * n_out + n, scales);
        const uint w[4] = {q.x, q.y, q.z, q.w};
        __global const float* xb = xr + b * 32;
        float s = 0.0f;
        for (int j = 0; j < 16; ++j) {
            const uint byte = (w[j / 4] >> (8 * (j % 4))) & 0xffu;
            const dq_t lo = (dq_t)((int)(byte & 15u) - 8) * d;
            const dq_t hi = (dq_t)((int)(byte >> 4) - 8) * d;
            s += (float)lo * xb[j] + (float)hi * xb[j + 16];
        }
        sum += s;
    }
    out[(long)m * n_out + n] = sum;
}

// The same for F16 weights: fp16 loads, f32 sums. Global (N, M).
DWELL_HALF_WAVE
__kernel void matmul_f16_h(__global const half* w, __global const float* x, __global float* out,
                           int k, int n_out) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    __global const half* wr = w + (long)n * k;
    __global const float* xr = x + (long)m * k;
    float sum = 0.0f;
    for (int i = 0; i < k; i += 4) {
        const float4 wv = vload_half4(i / 4, wr);
        const float4 xv = vload4(i / 4, xr);
        sum += dot(wv, xv);
    }
    out[(long)m * n_out + n] = sum;
}
