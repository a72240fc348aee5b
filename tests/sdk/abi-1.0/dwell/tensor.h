/* dwell SDK — element types, tensor descriptors and the weight block formats.
 *
 * Shapes follow the "fastest dimension first" convention: ne[0] is the
 * number of elements in a row, ne[1] the number of rows, and so on. nb[i] is
 * the stride of dimension i in bytes; for block-quantized types nb[0] is the
 * size of one block and a row holds ne[0] / block_size blocks. The dwell row
 * formats (I4_G, I6_G, I8_C) are not made of equal blocks: a row of any
 * length is self-contained, its size comes only from dwell_row_bytes, and
 * nb[0] is 1 (byte granularity).
 *
 * Thread-safety: every function here is pure.
 * Ownership: a dwell_tensor never owns its memory; the host owns the buffer
 * it points into for as long as the graph that holds it is alive. */
#ifndef DWELL_TENSOR_H
#define DWELL_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DWELL_MAX_DIMS 4

/* Values are part of the ABI: never renumber, only append. */
typedef enum dwell_dtype {
    DWELL_F32 = 0,
    DWELL_F16 = 1,
    DWELL_BF16 = 2,
    DWELL_Q8_0 = 3, /* blocks of 32: fp16 scale d, 32 x int8; x = d * q */
    DWELL_Q4_0 = 4, /* blocks of 32: fp16 scale d, 16 bytes; x = d * (nibble - 8),
                       low nibbles hold elements 0..15, high nibbles 16..31 */
    DWELL_Q4_K = 5, /* super-blocks of 256, see dwell_block_q4_K */
    DWELL_Q6_K = 6, /* super-blocks of 256, see dwell_block_q6_K */
    DWELL_I4_G = 7, /* dwell row format: int4 codes in groups of 128, see below */
    DWELL_FP8_E4M3 = 8,
    DWELL_I32 = 9,
    DWELL_Q4_1 = 10,   /* blocks of 32: x = d * nibble + m */
    DWELL_Q5_0 = 11,   /* blocks of 32: x = d * (q5 - 16) */
    DWELL_Q5_1 = 12,   /* blocks of 32: x = d * q5 + m */
    DWELL_Q5_K = 13,   /* super-blocks of 256, see dwell_block_q5_K */
    DWELL_I6_G = 14,   /* dwell row format: int6 codes in groups of 128, see below */
    DWELL_I8_C = 15,   /* dwell row format: int8 codes, one f32 scale per row */
    DWELL_I4_G64 = 16, /* as I4_G with groups of 64 */
    DWELL_I4_G32 = 17, /* as I4_G with groups of 32 */
    DWELL_DTYPE_COUNT = 18,
    /* Pin the enum to 32 bits and make every int32 a valid value, so a
     * reader may load any value a peer wrote and then range-check it. */
    DWELL_DTYPE_MIN_ENUM_ = -0x7fffffff - 1,
    DWELL_DTYPE_MAX_ENUM_ = 0x7fffffff
} dwell_dtype;

#define DWELL_QK8_0 32
#define DWELL_QK4_0 32
#define DWELL_QK4_1 32
#define DWELL_QK5_0 32
#define DWELL_QK5_1 32
#define DWELL_QK_K 256 /* elements per K-quant super-block */
#define DWELL_K_SCALE_SIZE 12

/* The dwell row formats. Rows of any length n are self-contained (no block
 * size has to divide n, so rows of 64 or 172 values work); every multi-byte
 * field is little-endian and may sit at any address.
 *
 * I4_G, I6_G: group-wise asymmetric. The row is cut into ng = ceil(n / 128)
 * groups, the last possibly partial. Each group in turn is: fp16 scale d,
 * fp16 min m, then its codes as a little-endian bit stream of `bits` bits a
 * code (4 or 6): code k occupies stream bits bits*k .. bits*k + bits - 1, bit
 * i of byte b being stream bit 8b + i. So I4_G holds element 2j in the low
 * nibble and 2j + 1 in the high nibble of byte j, and I6_G packs four codes
 * in three bytes. A group's stream is padded with zero bits to a whole byte.
 * x = code * d + m.
 *
 * I8_C: f32 scale d, then n int8 codes; x = code * d (symmetric, one scale
 * per row, i.e. per output channel of a weight). */
#define DWELL_GROUP_SIZE 128

typedef struct dwell_block_q8_0 {
    uint16_t d; /* fp16 */
    int8_t qs[DWELL_QK8_0];
} dwell_block_q8_0;

typedef struct dwell_block_q4_0 {
    uint16_t d; /* fp16 */
    uint8_t qs[DWELL_QK4_0 / 2];
} dwell_block_q4_0;

/* The layouts below are byte-for-byte those of ggml (llama.cpp), so GGUF
 * tensors of these types are used in place. In every 32-element format
 * byte j of qs holds element j in its low nibble and element j + 16 in its
 * high nibble. */

typedef struct dwell_block_q4_1 {
    uint16_t d; /* fp16 step */
    uint16_t m; /* fp16 offset (the block minimum) */
    uint8_t qs[DWELL_QK4_1 / 2];
} dwell_block_q4_1;

/* Five-bit quants: the fifth bit of element j is bit j of qh read as a
 * little-endian uint32. */
typedef struct dwell_block_q5_0 {
    uint16_t d; /* fp16 */
    uint8_t qh[4];
    uint8_t qs[DWELL_QK5_0 / 2];
} dwell_block_q5_0;

typedef struct dwell_block_q5_1 {
    uint16_t d; /* fp16 step */
    uint16_t m; /* fp16 offset */
    uint8_t qh[4];
    uint8_t qs[DWELL_QK5_1 / 2];
} dwell_block_q5_1;

/* Q4_K: 8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min mn;
 * x = d * sc * q - dmin * mn. The 16 six-bit numbers are packed in scales[12]:
 * for sub-block j < 4, sc = scales[j] & 63 and mn = scales[j + 4] & 63; for
 * j >= 4 the low 4 bits come from scales[j + 4] (sc low nibble, mn high
 * nibble) and the top 2 bits from the spare top bits of scales[j - 4] (sc)
 * and scales[j] (mn). qs[32 * p + l] holds element l of sub-block 2p in its
 * low nibble and element l of sub-block 2p + 1 in its high nibble. */
typedef struct dwell_block_q4_K {
    uint16_t d;    /* fp16 scale of the sub-block scales */
    uint16_t dmin; /* fp16 scale of the sub-block mins */
    uint8_t scales[DWELL_K_SCALE_SIZE];
    uint8_t qs[DWELL_QK_K / 2];
} dwell_block_q4_K;

/* Q5_K: Q4_K plus a fifth bit per element: bit i of qh[l] is the high bit of
 * element l of sub-block i. */
typedef struct dwell_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[DWELL_K_SCALE_SIZE];
    uint8_t qh[DWELL_QK_K / 8];
    uint8_t qs[DWELL_QK_K / 2];
} dwell_block_q5_K;

/* Q6_K: 16 sub-blocks of 16 with int8 scales; x = d * scale * (q6 - 32).
 * Each half of 128 elements uses 64 bytes of ql and 32 of qh: for l < 32,
 * element l takes the low nibble of ql[l], l + 32 the low nibble of
 * ql[l + 32], l + 64 the high nibble of ql[l], l + 96 the high nibble of
 * ql[l + 32]; their top two bits are bits 0-1, 2-3, 4-5, 6-7 of qh[l]. */
typedef struct dwell_block_q6_K {
    uint8_t ql[DWELL_QK_K / 2];
    uint8_t qh[DWELL_QK_K / 4];
    int8_t scales[DWELL_QK_K / 16];
    uint16_t d; /* fp16, last: the block is 210 bytes with 2-byte alignment */
} dwell_block_q6_K;

#ifdef __cplusplus
static_assert(sizeof(dwell_block_q4_1) == 20, "q4_1 layout");
static_assert(sizeof(dwell_block_q5_0) == 22, "q5_0 layout");
static_assert(sizeof(dwell_block_q5_1) == 24, "q5_1 layout");
static_assert(sizeof(dwell_block_q4_K) == 144, "q4_K layout");
static_assert(sizeof(dwell_block_q5_K) == 176, "q5_K layout");
static_assert(sizeof(dwell_block_q6_K) == 210, "q6_K layout");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(dwell_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(dwell_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(dwell_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(dwell_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(dwell_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(dwell_block_q6_K) == 210, "q6_K layout");
#endif

/* True for the dwell row formats, whose rows are not a sequence of equal
 * blocks. */
static inline int dwell_dtype_is_row_format(dwell_dtype t) {
    return t == DWELL_I4_G || t == DWELL_I6_G || t == DWELL_I8_C || t == DWELL_I4_G64 ||
           t == DWELL_I4_G32;
}

/* Elements per block (1 for plain types and the row formats); 0 for a dtype
 * this ABI version does not describe yet. */
static inline int64_t dwell_dtype_block_elems(dwell_dtype t) {
    switch (t) {
        case DWELL_F32:
        case DWELL_F16:
        case DWELL_BF16:
        case DWELL_I32:
        case DWELL_FP8_E4M3:
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
        case DWELL_I6_G:
        case DWELL_I8_C:
            return 1;
        case DWELL_Q8_0:
            return DWELL_QK8_0;
        case DWELL_Q4_0:
            return DWELL_QK4_0;
        case DWELL_Q4_1:
            return DWELL_QK4_1;
        case DWELL_Q5_0:
            return DWELL_QK5_0;
        case DWELL_Q5_1:
            return DWELL_QK5_1;
        case DWELL_Q4_K:
        case DWELL_Q5_K:
        case DWELL_Q6_K:
            return DWELL_QK_K;
        default:
            return 0;
    }
}

/* Bytes per block; 0 when unknown. 1 for the row formats: their rows are
 * addressed in bytes, so nb[0] = 1. */
static inline size_t dwell_dtype_block_bytes(dwell_dtype t) {
    switch (t) {
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
        case DWELL_I6_G:
        case DWELL_I8_C:
            return 1;
        case DWELL_F32:
        case DWELL_I32:
            return 4;
        case DWELL_F16:
        case DWELL_BF16:
            return 2;
        case DWELL_FP8_E4M3:
            return 1;
        case DWELL_Q8_0:
            return sizeof(dwell_block_q8_0);
        case DWELL_Q4_0:
            return sizeof(dwell_block_q4_0);
        case DWELL_Q4_1:
            return sizeof(dwell_block_q4_1);
        case DWELL_Q5_0:
            return sizeof(dwell_block_q5_0);
        case DWELL_Q5_1:
            return sizeof(dwell_block_q5_1);
        case DWELL_Q4_K:
            return sizeof(dwell_block_q4_K);
        case DWELL_Q5_K:
            return sizeof(dwell_block_q5_K);
        case DWELL_Q6_K:
            return sizeof(dwell_block_q6_K);
        default:
            return 0;
    }
}

static inline const char* dwell_dtype_name(dwell_dtype t) {
    switch (t) {
        case DWELL_F32:
            return "f32";
        case DWELL_F16:
            return "f16";
        case DWELL_BF16:
            return "bf16";
        case DWELL_Q8_0:
            return "q8_0";
        case DWELL_Q4_0:
            return "q4_0";
        case DWELL_Q4_1:
            return "q4_1";
        case DWELL_Q5_0:
            return "q5_0";
        case DWELL_Q5_1:
            return "q5_1";
        case DWELL_Q4_K:
            return "q4_k";
        case DWELL_Q5_K:
            return "q5_k";
        case DWELL_Q6_K:
            return "q6_k";
        case DWELL_I4_G:
            return "i4g128";
        case DWELL_I4_G64:
            return "i4g64";
        case DWELL_I4_G32:
            return "i4g32";
        case DWELL_I6_G:
            return "i6g128";
        case DWELL_I8_C:
            return "i8c";
        case DWELL_FP8_E4M3:
            return "fp8_e4m3";
        case DWELL_I32:
            return "i32";
        default:
            return "unknown";
    }
}

/* Elements per group of a group format (I4_G, I4_G64, I4_G32, I6_G); 0 otherwise. */
static inline int64_t dwell_group_size(dwell_dtype t) {
    return t == DWELL_I4_G || t == DWELL_I6_G ? DWELL_GROUP_SIZE
           : t == DWELL_I4_G64                ? 64
           : t == DWELL_I4_G32                ? 32
                                              : 0;
}

/* Bytes of the code stream of one group of len codes. */
static inline size_t dwell_group_code_bytes(int bits, int64_t len) {
    return (size_t)((len * bits + 7) / 8);
}

/* Bytes taken by one row of n elements, or 0 if n is not a whole number of
 * blocks or the dtype is unknown. */
static inline size_t dwell_row_bytes(dwell_dtype t, int64_t n) {
    if (dwell_dtype_is_row_format(t)) {
        if (n <= 0) return 0;
        if (t == DWELL_I8_C) return 4 + (size_t)n;
        const int bits = t == DWELL_I6_G ? 6 : 4;
        const int64_t group = dwell_group_size(t);
        const int64_t full = n / group, rest = n % group;
        size_t bytes = (size_t)full * (4 + dwell_group_code_bytes(bits, group));
        if (rest) bytes += 4 + dwell_group_code_bytes(bits, rest);
        return bytes;
    }
    int64_t be = dwell_dtype_block_elems(t);
    if (be <= 0 || n < 0 || n % be != 0) return 0;
    return (size_t)(n / be) * dwell_dtype_block_bytes(t);
}

/* IEEE half <-> float, exact for every finite half and round-to-nearest-even
 * for float -> half, so every plugin converts identically. */
static inline float dwell_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                man <<= 1;
                ++e;
            } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t dwell_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) { /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) { /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < half of smallest subnormal */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (112 - e) + ... places the value in 10 bits */
        uint32_t half_m = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half_m & 1u))) ++half_m;
        return (uint16_t)(sign | half_m);
    }
    uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u); /* round to nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float dwell_bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A tensor as the graph and the backends see it. `data` is a host-visible
 * address when the tensor lives in host memory (always so in ABI 1.0);
 * `buffer`/`offset` name device memory for backends whose buffers are not
 * host-visible. */
typedef struct dwell_tensor {
    dwell_dtype dtype;
    int32_t n_dims;
    int64_t ne[DWELL_MAX_DIMS]; /* unused trailing dims are 1 */
    uint64_t nb[DWELL_MAX_DIMS];
    void* data;
    void* buffer;
    uint64_t offset;
    const char* name; /* may be NULL for intermediate results */
} dwell_tensor;

static inline int64_t dwell_tensor_nelements(const dwell_tensor* t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static inline int64_t dwell_tensor_nrows(const dwell_tensor* t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* True when rows are packed back to back with no padding. */
static inline int dwell_tensor_is_contiguous(const dwell_tensor* t) {
    size_t row = dwell_row_bytes(t->dtype, t->ne[0]);
    return row != 0 && t->nb[0] == dwell_dtype_block_bytes(t->dtype) && t->nb[1] == row &&
           t->nb[2] == row * (uint64_t)t->ne[1] && t->nb[3] == t->nb[2] * (uint64_t)t->ne[2];
}

#ifdef __cplusplus
}
#endif
#endif /* DWELL_TENSOR_H */
