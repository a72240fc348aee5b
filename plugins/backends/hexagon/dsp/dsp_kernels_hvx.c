/* HVX versions of dwell's integer DSP kernels (dsp_kernels.h): 128-byte
 * vectors, int8 x int8 dot products with vrmpy. The float arithmetic around
 * them (block scales, the row sums) is done in the same order as the
 * portable version, so both give identical results. Without HVX the
 * portable version stands in. */
#include "dsp_kernels.h"

#if defined(__HVX__) && __HVX_LENGTH__ == 128
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

/* Four blocks of 32 per vector: vrmpy sums groups of 4 byte products into
 * 32 words; block j of the vector is words 8j .. 8j + 7. */
void dsp_matmul_hvx(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows) {
    const int32_t blocks = k / 32;
    int8_t xq[128] __attribute__((aligned(128)));
    int8_t wq[128] __attribute__((aligned(128)));
    int32_t dots[32] __attribute__((aligned(128)));
    float dw[4];
    for (int32_t n = 0; n < n_rows; ++n) {
        const uint8_t* row = w + (size_t)n * row_bytes;
        float sum = 0.0f;
        for (int32_t b0 = 0; b0 < blocks; b0 += 4) {
            const int32_t nb = blocks - b0 < 4 ? blocks - b0 : 4;
            for (int32_t j = 0; j < 4; ++j) {
                for (int i = 0; i < 32; ++i) {
                    xq[32 * j + i] = j < nb ? x[b0 + j].qs[i] : 0;
                    wq[32 * j + i] = 0;
                }
                if (j < nb) dsp_weight_block_i8(row, wtype, b0 + j, wq + 32 * j, &dw[j]);
            }
            const HVX_Vector acc = Q6_Vw_vrmpy_VbVb(*(const HVX_Vector*)wq, *(const HVX_Vector*)xq);
            *(HVX_Vector*)dots = acc;
            for (int32_t j = 0; j < nb; ++j) {
                int32_t dot = 0;
                for (int i = 0; i < 8; ++i) dot += dots[8 * j + i];
                sum += (float)dot * (dw[j] * dsp_fp16_to_f32(x[b0 + j].d));
            }
        }
        out[n] = sum;
    }
}

#else

void dsp_matmul_hvx(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows) {
    dsp_matmul_ref(w, row_bytes, wtype, x, out, k, n_rows);
}

#endif
