// The constants of the SIMD levels' expf, shared so that every level runs
// the same operation sequence and rounds identically:
//
//   x is clamped to [kExpMin, kExpMax] (beyond them the result is 0 or inf
//   anyway; NaN passes through), k = round(x / ln2), r = x - k * ln2 in two
//   fused steps (Cody-Waite: k * kLn2Hi is exact for |k| <= 2^8, so the
//   first subtraction is exact too), then
//     e^r = 1 + (r + r^2 * (1/2 + r/6 + ... + r^5/5040))   (|r| <= ln2/2)
//   and exp(x) = e^r * 2^(k/2 rounded down) * 2^(the rest of k): two
//   power-of-two factors, each a normal float, so the first product is exact
//   and results down to the subnormals are rounded once.
//
// Error: the degree-7 Taylor truncation is < r^8/8! < 6e-9 relative (0.05
// ulp); r carries at most half an ulp of itself (< 2^-26 absolute, 0.25 ulp
// of the result); the polynomial's inner sum is < 0.42 so its rounding
// costs < 0.25 ulp, and the final 1 + s rounds by 0.5 ulp. So the bound is
// about 1.05 ulp for normal results, and vec_math_test.cpp measures 0.98
// ulp at most over [-104, 89] against exp in double; it checks the looser
// documented bound of 2 ulp. (Subnormal results: within one subnormal ulp.)
// For comparison, glibc's expf is within 0.502 ulp.
//
// Thread-safety: constants only.
#pragma once

namespace dwell::cpu::vexp {

constexpr float kExpMin = -104.0f;  // exp(-104) < 2^-150: rounds to 0
constexpr float kExpMax = 89.0f;    // exp(89) > FLT_MAX: inf
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;  // 16 significant bits
constexpr float kLn2Lo = 1.42860682030941723212e-6f;
constexpr float kC2 = 1.0f / 2.0f;
constexpr float kC3 = 1.0f / 6.0f;
constexpr float kC4 = 1.0f / 24.0f;
constexpr float kC5 = 1.0f / 120.0f;
constexpr float kC6 = 1.0f / 720.0f;
constexpr float kC7 = 1.0f / 5040.0f;

}  // namespace dwell::cpu::vexp
