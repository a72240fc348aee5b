/* The arithmetic helpers clang calls on Hexagon for operations the core has
 * no instruction for (float and integer division). A DSP image gets them
 * from the Hexagon SDK's runtime; the freestanding qemu-hexagon test
 * program, linked without any library, gets these. No '/' or '%' below:
 * they would call back into these functions. */
#include <stdint.h>

static uint32_t udivmod(uint32_t n, uint32_t d, uint32_t* rem) {
    uint32_t q = 0, r = 0;
    for (int i = 31; i >= 0; --i) {
        r = (r << 1) | ((n >> i) & 1u);
        if (r >= d) {
            r -= d;
            q |= 1u << i;
        }
    }
    *rem = r;
    return q;
}

uint32_t __hexagon_udivsi3(uint32_t n, uint32_t d) {
    uint32_t r;
    return udivmod(n, d, &r);
}

uint32_t __hexagon_umodsi3(uint32_t n, uint32_t d) {
    uint32_t r;
    udivmod(n, d, &r);
    return r;
}

int32_t __hexagon_divsi3(int32_t n, int32_t d) {
    uint32_t r;
    const uint32_t q =
        udivmod(n < 0 ? -(uint32_t)n : (uint32_t)n, d < 0 ? -(uint32_t)d : (uint32_t)d, &r);
    return (n < 0) != (d < 0) ? -(int32_t)q : (int32_t)q;
}

int32_t __hexagon_modsi3(int32_t n, int32_t d) {
    uint32_t r;
    udivmod(n < 0 ? -(uint32_t)n : (uint32_t)n, d < 0 ? -(uint32_t)d : (uint32_t)d, &r);
    return n < 0 ? -(int32_t)r : (int32_t)r;
}

/* a / b: a reciprocal by Newton's iteration from an exponent-flip guess,
 * then one residual correction of the quotient. */
float __hexagon_divsf3(float a, float b) {
    union {
        float f;
        uint32_t u;
    } v = {b};
    const uint32_t sign = v.u & 0x80000000u;
    v.u &= 0x7fffffffu;
    if (v.u == 0)
        return (a == 0.0f || a != a) ? (a - a) * (a - a) + (a - a)
                                     : (sign ? -1.0f : 1.0f) * a * 1e38f * 1e38f;
    if (v.u >= 0x7f800000u)
        return v.u > 0x7f800000u ? b : (a != a || a * 0.0f != 0.0f ? a - a : 0.0f);
    const float m = v.f;
    union {
        float f;
        uint32_t u;
    } r = {0};
    r.u = 0x7ef311c7u - v.u; /* ~1/m */
    float x = r.f;
    for (int i = 0; i < 4; ++i) x = x * (2.0f - m * x);
    if (sign) x = -x;
    float q = a * x;
    q = q + (a - q * b) * x;
    return q;
}
