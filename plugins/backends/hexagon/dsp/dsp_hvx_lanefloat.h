/* Float arithmetic on 32 HVX word lanes done with integer instructions
 * only. The DSP kernels take and give IEEE floats, but HVX float (qfloat)
 * is absent before v68's qf32 extensions on some parts and is not run by
 * qemu-hexagon, which CI verifies the kernels with; so each lane holds a
 * value m * 2^e with a signed 32-bit mantissa m (normalized: |m| in
 * [2^29, 2^30), zero has m = 0) and an exponent e in a second vector.
 * Adds align to the larger exponent, multiplies are Q31 products; both
 * keep at least 27 mantissa bits, more than a float's 24.
 *
 * Only for inclusion by dsp_kernels_hvx.c (static inline, 128-byte HVX).
 * Subnormal inputs are read as zero; results below the float range flush
 * to zero and above it become infinity. */
#ifndef DWELL_DSP_HVX_LANEFLOAT_H
#define DWELL_DSP_HVX_LANEFLOAT_H

#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>
#include <stdint.h>

typedef struct lf_vec {
    HVX_Vector m; /* signed mantissas */
    HVX_Vector e; /* exponents: value = m * 2^e */
} lf_vec;

#define LF_ZERO_EXP (-4096)

static inline HVX_Vector lf_splat(int32_t v) {
    return Q6_V_vsplat_R(v);
}

static inline HVX_Vector lf_float_bits(float f) {
    union {
        float f;
        int32_t i;
    } u = {f};
    return Q6_V_vsplat_R(u.i);
}

/* Shifts of 0..31 only: larger amounts are clamped by the callers. */
static inline HVX_Vector lf_clamp_shift(HVX_Vector s) {
    return Q6_Vw_vmax_VwVw(Q6_Vw_vmin_VwVw(s, lf_splat(31)), Q6_V_vzero());
}

/* IEEE float bits -> lane floats. */
static inline lf_vec lf_from_bits(HVX_Vector bits) {
    const HVX_Vector biased = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(bits, 23), lf_splat(0xff));
    HVX_Vector m = Q6_V_vor_VV(Q6_V_vand_VV(bits, lf_splat(0x7fffff)), lf_splat(0x800000));
    m = Q6_Vw_vasl_VwR(m, 6);
    const HVX_VectorPred is_zero = Q6_Q_vcmp_eq_VwVw(biased, Q6_V_vzero());
    const HVX_VectorPred is_neg = Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), bits);
    m = Q6_V_vmux_QVV(is_neg, Q6_Vw_vsub_VwVw(Q6_V_vzero(), m), m);
    lf_vec r;
    r.m = Q6_V_vmux_QVV(is_zero, Q6_V_vzero(), m);
    r.e = Q6_V_vmux_QVV(is_zero, lf_splat(LF_ZERO_EXP), Q6_Vw_vsub_VwVw(biased, lf_splat(156)));
    return r;
}

static inline lf_vec lf_splat_float(float f) {
    return lf_from_bits(lf_float_bits(f));
}

/* Brings |m| to [2^29, 2^30) (from anything below 2^31). */
static inline lf_vec lf_normalize(lf_vec x) {
    const HVX_Vector a = Q6_Vw_vabs_Vw(x.m);
    const HVX_Vector lz = Q6_Vuw_vcl0_Vuw(a);
    const HVX_VectorPred too_big = Q6_Q_vcmp_gt_VwVw(lf_splat(2), lz); /* top bit at 30 */
    const HVX_Vector up = lf_clamp_shift(Q6_Vw_vsub_VwVw(lz, lf_splat(2)));
    const HVX_Vector m = Q6_V_vmux_QVV(too_big, Q6_Vw_vasr_VwR(x.m, 1), Q6_Vw_vasl_VwVw(x.m, up));
    const HVX_Vector e =
        Q6_V_vmux_QVV(too_big, Q6_Vw_vadd_VwVw(x.e, lf_splat(1)), Q6_Vw_vsub_VwVw(x.e, up));
    const HVX_VectorPred is_zero = Q6_Q_vcmp_eq_VwVw(x.m, Q6_V_vzero());
    lf_vec r;
    r.m = m;
    r.e = Q6_V_vmux_QVV(is_zero, lf_splat(LF_ZERO_EXP), e);
    return r;
}

/* Lane floats -> IEEE float bits, rounded to nearest. */
static inline HVX_Vector lf_to_bits(lf_vec x) {
    const HVX_VectorPred is_neg = Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), x.m);
    const HVX_Vector a = Q6_Vw_vabs_Vw(x.m);
    const HVX_Vector lz = Q6_Vuw_vcl0_Vuw(a);
    const HVX_Vector top = Q6_Vw_vasl_VwVw(a, lf_clamp_shift(lz)); /* leading 1 at bit 31 */
    const HVX_Vector mant24 = Q6_Vuw_vlsr_VuwR(top, 8);            /* leading 1 at bit 23 */
    const HVX_Vector round = Q6_V_vand_VV(Q6_Vuw_vlsr_VuwR(top, 7), lf_splat(1));
    /* biased exponent = (31 - lz) + e + 127; the leading 1 of mant24 adds
     * one to the exponent field, so the field is written one lower. */
    const HVX_Vector field = Q6_Vw_vsub_VwVw(Q6_Vw_vadd_VwVw(x.e, lf_splat(158)), lz);
    HVX_Vector bits = Q6_Vw_vadd_VwVw(Q6_Vw_vasl_VwR(Q6_Vw_vsub_VwVw(field, lf_splat(1)), 23),
                                      Q6_Vw_vadd_VwVw(mant24, round));
    bits = Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(field, lf_splat(254)), lf_splat(0x7f800000), bits);
    const HVX_VectorPred tiny = Q6_Q_vcmp_gt_VwVw(lf_splat(1), field);
    const HVX_VectorPred zero = Q6_Q_vcmp_eq_VwVw(a, Q6_V_vzero());
    bits = Q6_V_vmux_QVV(tiny, Q6_V_vzero(), bits);
    bits = Q6_V_vmux_QVV(zero, Q6_V_vzero(), bits);
    return Q6_V_vmux_QVV(is_neg, Q6_V_vor_VV(bits, lf_splat((int32_t)0x80000000u)), bits);
}

/* (a * b) >> 31, rounded: the Q31 product of two word vectors. */
static inline HVX_Vector lf_q31_mul(HVX_Vector a, HVX_Vector b) {
    return Q6_Vw_vmpyoacc_VwVwVh_s1_rnd_sat_shift(Q6_Vw_vmpye_VwVuh(a, b), a, b);
}

static inline lf_vec lf_add(lf_vec x, lf_vec y) {
    const HVX_Vector e = Q6_Vw_vmax_VwVw(x.e, y.e);
    const HVX_Vector mx = Q6_Vw_vasr_VwVw(x.m, lf_clamp_shift(Q6_Vw_vsub_VwVw(e, x.e)));
    const HVX_Vector my = Q6_Vw_vasr_VwVw(y.m, lf_clamp_shift(Q6_Vw_vsub_VwVw(e, y.e)));
    lf_vec r;
    r.m = Q6_Vw_vadd_VwVw(mx, my);
    r.e = e;
    return lf_normalize(r);
}

static inline lf_vec lf_mul(lf_vec x, lf_vec y) {
    lf_vec r;
    r.m = lf_q31_mul(x.m, y.m);
    r.e = Q6_Vw_vadd_VwVw(Q6_Vw_vadd_VwVw(x.e, y.e), lf_splat(31));
    return lf_normalize(r);
}

static inline lf_vec lf_neg(lf_vec x) {
    x.m = Q6_Vw_vsub_VwVw(Q6_V_vzero(), x.m);
    return x;
}

/* The sum of the 32 lanes, as a float. */
static inline float lf_sum_lanes(lf_vec x) {
    for (int bytes = 64; bytes >= 4; bytes /= 2) {
        lf_vec y;
        y.m = Q6_V_vror_VR(x.m, bytes);
        y.e = Q6_V_vror_VR(x.e, bytes);
        x = lf_add(x, y);
    }
    float out[32] __attribute__((aligned(128)));
    *(HVX_Vector*)out = lf_to_bits(x);
    return out[0];
}

/* 2^x for lanes with |x| <= 125 (larger magnitudes are clamped: beyond
 * that the float result is out of range anyway). x -> Q23 fixed point,
 * integer part n and fraction f, 2^f by its Taylor series in Q30 (10
 * terms, error < 1e-8). */
static inline lf_vec lf_exp2(lf_vec x) {
    /* q = m * 2^(e + 23); |x| >= 128 when e > -23 (|m| >= 2^29) */
    const HVX_Vector right = lf_clamp_shift(Q6_Vw_vsub_VwVw(lf_splat(-23), x.e));
    HVX_Vector q = Q6_Vw_vasr_VwVw(x.m, right);
    const HVX_VectorPred big = Q6_Q_vcmp_gt_VwVw(x.e, lf_splat(-23));
    const HVX_VectorPred neg = Q6_Q_vcmp_gt_VwVw(Q6_V_vzero(), x.m);
    const HVX_Vector limit = lf_splat(125 << 23);
    const HVX_Vector minus_limit = Q6_Vw_vsub_VwVw(Q6_V_vzero(), limit);
    q = Q6_Vw_vmin_VwVw(Q6_Vw_vmax_VwVw(q, minus_limit), limit);
    q = Q6_V_vmux_QVV(big, Q6_V_vmux_QVV(neg, minus_limit, limit), q);
    const HVX_Vector n = Q6_Vw_vasr_VwR(q, 23);
    const HVX_Vector f31 = Q6_Vw_vasl_VwR(Q6_V_vand_VV(q, lf_splat(0x7fffff)), 8);
    /* ln2^j / j! in Q30, j = 9 .. 0 (Horner) */
    static const int32_t coef[10] = {109,      1419,     16377,     165394,    1431680,
                                     10327387, 59597083, 257941248, 744261118, 1073741824};
    HVX_Vector p = lf_splat(coef[0]);
    for (int j = 1; j < 10; ++j) p = Q6_Vw_vadd_VwVw(lf_q31_mul(p, f31), lf_splat(coef[j]));
    lf_vec r;
    r.m = p; /* in [2^30, 2^31): 2^f in Q30 */
    r.e = Q6_Vw_vsub_VwVw(n, lf_splat(30));
    return lf_normalize(r);
}

/* 1 / x for positive normalized lanes: the mantissa r in [0.5, 1) (Q30),
 * a linear first guess 48/17 - 32/17 r, three Newton steps in Q29. */
static inline lf_vec lf_recip_positive(lf_vec x) {
    const HVX_Vector c0 = lf_splat(1515870810);              /* 48/17 in Q29 */
    const HVX_Vector c1 = lf_splat(2021161080);              /* 32/17 in Q30 */
    HVX_Vector y = Q6_Vw_vsub_VwVw(c0, lf_q31_mul(x.m, c1)); /* Q30 x Q30 -> Q29 */
    for (int i = 0; i < 3; ++i) {
        const HVX_Vector t = lf_q31_mul(x.m, y);                    /* r * y in Q28 */
        const HVX_Vector u = Q6_Vw_vsub_VwVw(lf_splat(2 << 28), t); /* 2 - r y, Q28 */
        y = Q6_Vw_vasl_VwR(lf_q31_mul(y, u), 3);                    /* Q26 -> Q29 */
    }
    lf_vec r;
    r.m = y;
    r.e = Q6_Vw_vsub_VwVw(lf_splat(-59), x.e);
    return lf_normalize(r);
}

#endif /* DWELL_DSP_HVX_LANEFLOAT_H */
